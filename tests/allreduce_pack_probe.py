"""One worker of a 2-worker cluster: Strategist's multi_worker_mirrored, one Keras step.

Run by tests/test_step_time.py on a localhost cluster (benchmarks.common.run_cluster,
`TF_CONFIG` from Strategist's launcher). TensorFlow logs, at INFO, how the gradients
of the step were packed for the all-reduce
(tensorflow/python/distribute/cross_device_ops.py: "Collective all_reduce tensors:
N all_reduces, ... num_packs = P"); the test reads that line from the log to show
that the strategy Strategist builds sends every gradient in one pack, after
back-propagation, which is what `select` costs (`step_time.predict_allreduce`),
and that `--all-reduce-pack-mb` (`ClusterConfig.all_reduce_pack_mb`) splits it.
It also counts the all-reduces of the traced train step: the packs, plus the
scalars Keras all-reduces every step for the loss and the metric
(`step_time.step_scalar_seconds`), fed as the trainer feeds it.

Usage: TF_CONFIG=... python tests/allreduce_pack_probe.py [PACK_MB]
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    import tensorflow as tf
    import tf_keras

    from components.core.config import ClusterConfig, ModelConfig, RunConfig
    from components.core.models import build_model
    from components.core.strategies import Role, make_strategy

    tf.get_logger().setLevel("INFO")
    pack_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    cluster = ClusterConfig("multi_worker_mirrored", workers=2, all_reduce_pack_mb=pack_mb)
    config = RunConfig(model=ModelConfig("mlp"), cluster=cluster)
    strategy = make_strategy(config, Role.from_tf_config(os.environ["TF_CONFIG"]), gpus=0)
    with strategy.scope():
        model = build_model("mlp", (8, 8, 1), 10)
        # the loss and one metric, as Strategist's trainer compiles a built-in model
        model.compile(
            "sgd",
            tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    print(f"trainable tensors: {len(model.trainable_variables)}", flush=True)
    x = np.random.rand(128, 8, 8, 1).astype("float32")
    y = np.random.randint(0, 10, 128)

    def repeated(context):
        # the trainer's input: a DatasetCreator over a repeated dataset (a finite one
        # would add a partial-batch check to every step)
        batch = context.get_per_replica_batch_size(64)
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch)

    creator = tf_keras.utils.experimental.DatasetCreator(repeated)
    model.fit(creator, epochs=1, steps_per_epoch=2, verbose=0)
    print(f"all-reduces in the train step: {train_step_all_reduces(model)}", flush=True)


def train_step_all_reduces(model) -> int:
    """The `CollectiveReduceV2` ops of the traced train function, nested functions included
    (the same in each of its traces: full and last, partial batches)."""
    counts = set()
    for traced in model.train_function._list_all_concrete_functions():
        graph = traced.graph.as_graph_def()
        nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
        counts.add(sum(n.op == "CollectiveReduceV2" for n in nodes))
    (count,) = counts
    return count


if __name__ == "__main__":
    main()
