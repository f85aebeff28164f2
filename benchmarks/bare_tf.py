"""The bare, hand-written `tf.distribute` training script Strategist is measured against.

    TF_CONFIG=... python -m benchmarks.bare_tf --shards DIR --strategy NAME --output FILE

This is the canonical pattern from the TensorFlow distributed-training guides,
written out by hand and deliberately importing nothing from Strategist: build
the strategy (MirroredStrategy over two logical CPU devices;
MultiWorkerMirroredStrategy from `TF_CONFIG`; ParameterServerStrategy with a
chief coordinator while workers and parameter servers run
`tf.distribute.Server`), build and compile the model in `scope()`, and call
tf-keras `fit` on a `tf.data` pipeline (a `DatasetCreator` for
ParameterServerStrategy, which requires one). It reads the same TFRecord shards
(listed in their `manifest.json`) and trains the same `cnn` or `mlp` as the
trainer, with the same batch and the same examples per epoch.

The chief (worker 0 when the cluster has no chief task) writes `--output`:
`epoch_seconds`, `epoch_examples_per_second`, `examples_per_second` (median
after the first epoch), `parameters`, `steps_per_epoch`, `examples_per_epoch`,
`fit_seconds` (the whole `fit` call: epochs plus input set-up and teardown).
Epochs are timed exactly as Strategist's `EpochRecorder` times them: from
`on_epoch_begin` to `on_epoch_end` of a Keras callback.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "parameter_server")
# --all-reduce: MultiWorkerMirroredStrategy's CommunicationImplementation, or
# MirroredStrategy's CrossDeviceOps (TensorFlow's default when absent).
MWMS_ALL_REDUCE = {"ring": "RING", "nccl": "NCCL"}
MIRRORED_ALL_REDUCE = {
    "nccl": "NcclAllReduce",
    "hierarchical_copy": "HierarchicalCopyAllReduce",
    "reduction_to_one_device": "ReductionToOneDevice",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bare_tf",
        description=(
            "Bare tf.distribute + tf-keras training on Strategist's TFRecord shards, for "
            "comparison; the role comes from TF_CONFIG."
        ),
    )
    parser.add_argument("--shards", required=True, help="shards folder holding manifest.json")
    parser.add_argument("--strategy", required=True, choices=STRATEGIES)
    parser.add_argument("--model", default="cnn", choices=("cnn", "mlp"))
    parser.add_argument("--epochs", type=int, default=3, help="epochs (default: 3)")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="per-replica batch (default: 32)"
    )
    parser.add_argument("--replicas", type=int, default=2, help="devices or workers (default: 2)")
    parser.add_argument("--learning-rate", type=float, default=0.002)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", help="JSON file the chief writes its timings to")
    parser.add_argument(
        "--input",
        choices=("dataset", "creator"),
        default="dataset",
        help=(
            "how fit gets its data under mirrored strategies: a tf.data.Dataset (canonical; "
            "default) or a DatasetCreator (Strategist's path); parameter_server always uses "
            "a DatasetCreator"
        ),
    )
    parser.add_argument(
        "--precision",
        default="float32",
        choices=("float32", "mixed_float16", "mixed_bfloat16"),
        help="tf-keras mixed-precision policy (default: float32)",
    )
    parser.add_argument("--jit-compile", action="store_true", help="compile with XLA")
    parser.add_argument("--steps-per-execution", type=int, default=1)
    parser.add_argument(
        "--all-reduce",
        choices=sorted({*MWMS_ALL_REDUCE, *MIRRORED_ALL_REDUCE}),
        help="all-reduce of the mirrored strategies (default: TensorFlow's)",
    )
    parser.add_argument(
        "--all-reduce-pack-mb",
        type=float,
        default=0.0,
        help=(
            "multi_worker_mirrored: all-reduce the gradients in packs of this many MiB "
            "(CommunicationOptions(bytes_per_pack)); 0, TensorFlow's default, is one pack"
        ),
    )
    parser.add_argument(
        "--backup-dir",
        help="diagnostic: add tf-keras BackupAndRestore(DIR), as Strategist's trainer does",
    )
    return parser.parse_args(argv)


def build_model(keras, model: str, input_shape, num_classes: int):
    """The registry's `cnn`/`mlp`, written out by hand (same layers, same parameters).

    Under a mixed-precision policy the logits go through a float32 linear
    activation, as the tf-keras mixed-precision guide does.
    """
    if model == "mlp":
        layers = [
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
        ]
    else:
        layers = [
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(64, activation="relu"),
        ]
    if keras.mixed_precision.global_policy().compute_dtype != "float32":
        layers += [
            keras.layers.Dense(num_classes),
            keras.layers.Activation("linear", dtype="float32"),
        ]
    else:
        layers.append(keras.layers.Dense(num_classes))
    return keras.Sequential([keras.layers.Input(shape=input_shape), *layers])


def compile_model(keras, model, args: argparse.Namespace) -> None:
    """Compiles `model` as the TensorFlow guides do: Adam, cross-entropy from logits, accuracy.

    `args` gives the learning rate and the options (steps per execution, XLA).
    Without GPUs, TensorFlow's XLA compiles no collectives ("not yet
    implemented for CPU devices"), so a strategy that all-reduces compiles the
    model's forward (and with it backward) pass only.
    """
    import tensorflow as tf

    xla_model_only = (
        args.jit_compile
        and args.strategy in ("mirrored", "multi_worker_mirrored")
        and not tf.config.list_physical_devices("GPU")
    )
    if xla_model_only:
        model.call = tf.function(model.call, jit_compile=True)
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        steps_per_execution=args.steps_per_execution,
        jit_compile=args.jit_compile and not xla_model_only,
    )


def main(argv: list[str] | None = None) -> int:
    """Runs this process's part of the cluster; returns the exit code."""
    args = parse_args(argv)
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task", {})
    task_type, task_index = task.get("type"), int(task.get("index", 0))

    import tensorflow as tf
    import tf_keras as keras

    if args.strategy == "parameter_server" and task_type in ("worker", "ps"):
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=task_type,
            task_index=task_index,
            protocol="grpc",
            start=True,
        )
        server.join()
        return 0

    if args.strategy == "one_device":
        # One device needs no distribution: the default strategy, what a script
        # without tf.distribute runs under.
        strategy = tf.distribute.get_strategy()
    elif args.strategy == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.replicas
        )
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        ops = MIRRORED_ALL_REDUCE.get(args.all_reduce or "")
        strategy = tf.distribute.MirroredStrategy(
            devices=devices, cross_device_ops=getattr(tf.distribute, ops)() if ops else None
        )
    elif args.strategy == "multi_worker_mirrored":
        implementation = MWMS_ALL_REDUCE.get(args.all_reduce or "", "AUTO")
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                bytes_per_pack=int(args.all_reduce_pack_mb * 2**20),
                implementation=getattr(
                    tf.distribute.experimental.CommunicationImplementation, implementation
                ),
            )
        )
    else:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        num_ps = len(tf_config["cluster"]["ps"])
        strategy = tf.distribute.experimental.ParameterServerStrategy(
            resolver,
            variable_partitioner=tf.distribute.experimental.partitioners.MinSizePartitioner(
                min_shard_bytes=256 << 10, max_shards=num_ps
            ),
        )
    keras.utils.set_random_seed(args.seed)
    keras.mixed_precision.set_global_policy(args.precision)

    with open(os.path.join(args.shards, "manifest.json")) as handle:
        manifest = json.load(handle)
    shape = manifest["features"]["image"]["shape"]
    num_classes = manifest["label"]["num_classes"]
    train = manifest["splits"]["train"]
    files = [os.path.join(args.shards, f["path"]) for f in train["files"]]
    global_batch = args.batch_size * args.replicas
    examples_per_epoch = train["num_examples"] // global_batch * global_batch
    # One fit step: the global batch, or one worker's batch under parameter_server.
    batch_per_step = args.batch_size * strategy.num_replicas_in_sync
    steps_per_epoch = examples_per_epoch // batch_per_step

    def parse(record):
        example = tf.io.parse_single_example(
            record,
            {
                "image": tf.io.FixedLenFeature([], tf.string),
                "label": tf.io.FixedLenFeature([], tf.int64),
            },
        )
        image = tf.reshape(tf.io.decode_raw(example["image"], tf.uint8), shape)
        return tf.cast(image, tf.float32) / 255.0, example["label"]

    def pipeline(paths, batch):
        ds = tf.data.Dataset.from_tensor_slices(paths)
        ds = ds.interleave(
            tf.data.TFRecordDataset,
            cycle_length=4,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=False,
        )
        ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).cache()
        ds = ds.shuffle(min(train["num_examples"], 10_000), seed=args.seed).repeat()
        return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    if args.strategy == "parameter_server" or args.input == "creator":

        def dataset_fn(context: tf.distribute.InputContext):
            paths = files[context.input_pipeline_id :: context.num_input_pipelines]
            return pipeline(paths, context.get_per_replica_batch_size(batch_per_step))

        data = keras.utils.experimental.DatasetCreator(dataset_fn)
    else:
        # Keras distributes it: files are auto-sharded across workers, batches split.
        data = pipeline(files, batch_per_step)

    with strategy.scope():
        model = build_model(keras, args.model, shape, num_classes)
        compile_model(keras, model, args)

    seconds: list[float] = []

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.started)

    callbacks: list = [EpochTimer()]
    checkpoint_seconds: list[float] = []
    if args.backup_dir:

        class StepsDone(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                self.at = time.perf_counter()

        class CheckpointDone(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                checkpoint_seconds.append(time.perf_counter() - steps_done.at)

        steps_done = StepsDone()
        # Strategist's order: the checkpoint is written inside the timed epoch.
        backup = keras.callbacks.BackupAndRestore(args.backup_dir)
        callbacks = [steps_done, backup, CheckpointDone(), *callbacks]
    fit_started = time.perf_counter()
    model.fit(
        data,
        epochs=args.epochs,
        steps_per_epoch=steps_per_epoch,
        callbacks=callbacks,
        verbose=0,
    )
    fit_seconds = time.perf_counter() - fit_started
    has_chief = "chief" in tf_config.get("cluster", {})
    is_chief = task_type in (None, "chief") or (
        task_type == "worker" and task_index == 0 and not has_chief
    )
    if is_chief and args.output:
        eps = [examples_per_epoch / s for s in seconds]
        result = {
            "strategy": args.strategy,
            "model": args.model,
            "parameters": int(model.count_params()),
            "global_batch_size": global_batch,
            "steps_per_epoch": steps_per_epoch,
            "examples_per_epoch": examples_per_epoch,
            "epoch_seconds": seconds,
            "epoch_examples_per_second": eps,
            "examples_per_second": statistics.median(eps[1:] or eps),
            "checkpoint_seconds": checkpoint_seconds,
            "fit_seconds": fit_seconds,
        }
        with open(args.output, "w") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
