"""A training process: where its time goes, and input iterators that outlive `fit`."""

from __future__ import annotations

import subprocess
import sys
import time

from components.core import epoch_records, learning_rate, training


def test_process_age_of_a_fresh_process_is_within_its_wall_time():
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(0.5); "
            "from components.core.training import seconds_since_process_start as age; "
            "print(age())",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    wall = time.monotonic() - started
    age = float(done.stdout)
    # It slept 0.5 s before asking; /proc ticks are 10 ms.
    assert 0.45 <= age <= wall + 0.02, (age, wall)


def test_phases_line_names_every_phase_and_unknowns():
    line = training.format_phases(
        {"startup": None, "setup": 1.25, "fit": 30.0, "epochs": 28.0, "export": 0.5, "evaluate": 2}
    )
    assert line == (
        "time: start-up ?, set-up 1.2s, fit 30.0s (28.0s in epochs), export 0.5s, evaluation 2.0s"
    )


def test_input_iterator_outlives_fit_and_still_serves_batches():
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(2)])
    model.compile(
        optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    kept = training.keep_input_iterators(model)
    features = np.arange(64, dtype=np.float32).reshape(16, 4)
    labels = np.arange(16) % 2
    data = tf.data.Dataset.from_tensor_slices((features, labels)).batch(4).repeat()
    model.fit(data, epochs=2, steps_per_epoch=3, verbose=0)
    # One iterator for the whole fit (it is not recreated per epoch), still alive.
    assert len(kept) == 1
    batch_features, _ = next(kept[0])
    assert batch_features.shape == (4, 4)


def test_tensorboard_logs_go_under_the_output_or_where_vertex_ai_says(monkeypatch):
    monkeypatch.delenv(epoch_records.TENSORBOARD_ENV, raising=False)
    assert epoch_records.tensorboard_log_dir("/runs/a") == "/runs/a/tensorboard"
    # Vertex AI gives a gs:// folder; TensorFlow writes it through the job's gcsfuse mount.
    monkeypatch.setenv(epoch_records.TENSORBOARD_ENV, "gs://bucket/logs/run-1")
    assert epoch_records.tensorboard_log_dir("/runs/a") == "/gcs/bucket/logs/run-1"


def _schedule_ops(step_device: str) -> list:
    """The ops the warm-up schedule adds to a graph, for a step counter on `step_device`."""
    import tensorflow as tf

    from components.core.config import RunConfig, TrainingConfig

    schedule = learning_rate.make_learning_rate(
        RunConfig(training=TrainingConfig(warmup_epochs=1)), 32, 10
    )
    with tf.Graph().as_default() as graph:
        with tf.device(step_device):
            step = tf.Variable(0, dtype=tf.int64, name="iterations")
        before = set(graph.get_operations())
        rate = schedule(step)
    return [op for op in graph.get_operations() if op not in before], rate


def test_warm_up_is_computed_where_a_parameter_server_keeps_the_step():
    """Under parameter_server the rate is computed on the PS task: no transfer per step.

    tf-keras assigns the schedule's value to a variable on the PS every step; computed on
    the worker it would cost a read and an assign across tasks (docs/benchmarks.md).
    """
    ops, rate = _schedule_ops("/job:ps/replica:0/task:0/device:CPU:0")
    # The counter's read is colocated with the counter by TensorFlow itself; the arithmetic
    # on it is what would otherwise run on the worker.
    ops = [op for op in ops if op.type != "ReadVariableOp"]
    assert ops and all(op.device.startswith("/job:ps/replica:0/task:0") for op in ops), [
        (op.type, op.device) for op in ops
    ]
    assert rate.device.startswith("/job:ps/")
    # Anywhere else (one machine, mirrored replicas) the schedule is left unplaced.
    local_ops, _ = _schedule_ops("/device:CPU:0")
    assert not any("/job:" in op.device for op in local_ops)
