"""`--checkpoint-every` and the preemption notice: parsing, the cloud settings, real TensorFlow.

The real-cluster runs (SIGTERM to a `multi_worker_mirrored` worker, the
`parameter_server` coordinator killed mid-epoch) are at the end, marked `cluster`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from components.core import preemption
from components.core.checkpoint_interval import CheckpointInterval, work_lost_seconds
from components.core.config import ConfigError
from components.core.launch import kubeflow, vertex
from tests.test_cloud_config import make_cloud, make_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("text", "steps", "seconds"),
    [("epoch", None, None), ("", None, None), ("20", 20, None), ("90s", None, 90.0),
     ("10m", None, 600.0), ("1.5h", None, 5400.0), (" 7 ", 7, None)],
)  # fmt: skip
def test_checkpoint_every_takes_steps_durations_or_epoch(text, steps, seconds):
    interval = CheckpointInterval.parse(text)
    assert (interval.steps, interval.seconds) == (steps, seconds)


@pytest.mark.parametrize("text", ["0", "-3", "1e3", "10x", "0.5s", "200h", "m", "epochs"])
def test_checkpoint_every_refuses_anything_else(text):
    with pytest.raises(ConfigError, match="--checkpoint-every"):
        CheckpointInterval.parse(text)


def test_a_duration_becomes_steps_from_the_step_time():
    assert CheckpointInterval.parse("10m").steps_for(0.25) == 2400
    assert CheckpointInterval.parse("1s").steps_for(5.0) == 1  # a checkpoint at most a step
    assert CheckpointInterval.parse("20").steps_for(99.0) == 20


def test_work_lost_is_half_an_interval_at_most_an_epoch():
    assert work_lost_seconds(CheckpointInterval.parse("epoch"), 600.0, 0.5) == 300.0
    assert work_lost_seconds(CheckpointInterval.parse("20"), 600.0, 0.5) == 5.0
    assert work_lost_seconds(CheckpointInterval.parse("2h"), 600.0, 0.5) == 300.0


def test_a_spot_vertex_job_restarts_whole_when_synchronous():
    spot = make_cloud(spot=True)
    job = vertex.build_custom_job(make_run("multi_worker_mirrored"), spot)
    assert job.job_spec.scheduling.restart_job_on_worker_restart
    # parameter_server tolerates a lost worker: it restarts alone.
    ps_job = vertex.build_custom_job(make_run("parameter_server"), spot)
    assert not ps_job.job_spec.scheduling.restart_job_on_worker_restart
    on_demand = vertex.build_custom_job(make_run("multi_worker_mirrored"), make_cloud())
    assert not on_demand.job_spec.scheduling.restart_job_on_worker_restart


def test_tfjob_pods_restart_on_the_preempted_exit_code_with_time_to_save():
    cloud = make_cloud(target="kubeflow", spot=True, namespace="ml")
    job = kubeflow.build_tfjob(make_run("multi_worker_mirrored"), cloud)
    for spec in job["spec"]["tfReplicaSpecs"].values():
        assert spec["restartPolicy"] == "ExitCode"
        pod = spec["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] == preemption.TERMINATION_GRACE_S > 30
    # The training operator's ExitCode policy restarts 130, 137, 138 and 143 only.
    assert preemption.PREEMPTED_EXIT_CODE == 143


# A real tf-keras fit in one process under MirroredStrategy, with the run's callback.
_FIT = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {root!r})
    import numpy as np, tensorflow as tf, tf_keras as keras
    from components.core import preemption
    from components.core.checkpoint_interval import CheckpointInterval
    backup, every, kill_at, sig = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    x = np.random.RandomState(0).rand(640, 8).astype("float32")
    y = (x.sum(1) > 4).astype("int32")
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(16, activation="relu", input_shape=(8,)),
                                  keras.layers.Dense(2)])
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(640, seed=1).repeat().batch(32)
    backup_cb = preemption.backup_callback(
        backup, CheckpointInterval.parse(every), steps_per_epoch=20, strategy=strategy,
        is_chief=True, attempt=int(os.environ.get("ATTEMPT", "0")), verbose=True)
    trained = []
    class Steps(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            trained.append(int(self.model._train_counter.numpy()))
            if len(trained) == kill_at:
                os.kill(os.getpid(), sig)
    model.fit(data, epochs=3, steps_per_epoch=20, callbacks=[Steps(), backup_cb], verbose=0)
    print("TRAINED", trained[0], trained[-1], len(trained), backup_cb.checkpoint_steps, flush=True)
    """
)


def _fit(tmp_path: Path, every: str, kill_at: int = 0, sig: int = 15, attempt: int = 0):
    script = tmp_path / "fit.py"
    script.write_text(_FIT.format(root=str(ROOT)))
    env = {**os.environ, "ATTEMPT": str(attempt), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "backup"), every, str(kill_at), str(sig)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip


def _trained(done: subprocess.CompletedProcess) -> list[int]:
    line = next(x for x in done.stdout.splitlines() if x.startswith("TRAINED"))
    return [int(v) if v != "None" else None for v in line.split()[1:]]


def test_sigterm_saves_at_the_step_and_the_restart_resumes_there(tmp_path):
    stopped = _fit(tmp_path, "epoch", kill_at=33)  # step 33 of 60, epoch 2 of 3
    assert stopped.returncode == preemption.PREEMPTED_EXIT_CODE, stopped.stderr[-2000:]
    assert "checkpoint saved at step 33" in stopped.stdout
    # Resumed with a duration (the interval is not part of the checkpoint): measured into steps.
    resumed = _fit(tmp_path, "2s", attempt=1)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    first, last, count, every = _trained(resumed)
    assert f"checkpoint every {every} steps (2 s at" in resumed.stdout
    assert every > 20  # a step of this model takes milliseconds: 2 s is hundreds of steps
    # Keras's step counter after the first resumed step, the last, and steps run:
    # the run resumed at step 33 (not at the epoch's start, 20) and ran to 60 exactly.
    assert (first, last, count) == (34, 60, 27)
    resumes = json.loads((tmp_path / "backup" / preemption.RESUMES_NAME).read_text())
    assert resumes == [
        {"attempt": 1, "how": "preempted", "reached_step": 33, "resumed_at_step": 33,
         "steps_trained_twice": 0}
    ]  # fmt: skip


def test_a_kill_without_notice_resumes_from_the_last_step_checkpoint(tmp_path):
    killed = _fit(tmp_path, "7", kill_at=47, sig=9)
    assert killed.returncode == -9
    resumed = _fit(tmp_path, "7", attempt=1)
    first, last, count, every = _trained(resumed)
    # Checkpoints at steps 7, 14, 20 (epoch end), 21, 28, 35, 40, 42: resumed at 42, within 7.
    assert (first, last, count, every) == (43, 60, 18, 7)
    (resume,) = json.loads((tmp_path / "backup" / preemption.RESUMES_NAME).read_text())
    assert resume["resumed_at_step"] == 42 and resume["how"] == "failed"
    assert 0 <= resume["steps_trained_twice"] <= 47 - 42
