"""`--checkpoint-every` and the preemption notice: parsing, the cloud settings, real TensorFlow.

The real-cluster runs (SIGTERM to a `multi_worker_mirrored` worker, the
`parameter_server` coordinator killed mid-epoch) are at the end, marked `cluster`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from components.core import preemption
from components.core.checkpoint_interval import CheckpointInterval, work_lost_seconds
from components.core.config import ConfigError, DataConfig, RunConfig, TrainingConfig
from components.core.launch import kubeflow, vertex
from components.core.launch.local import LocalCluster, RestartPolicy
from tests.test_cloud_config import make_cloud, make_run
from tests.test_faults import (
    EPOCHS,
    SHAPES,
    Events,
    assert_complete,
    report,
    run_with_faults,
)

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


def test_the_dry_runs_show_the_spot_settings(capsys):
    import yaml

    from pipelines.cli.cloud_train import run_cloud_training
    from tests.test_cloud_config import IMAGE, VERTEX_FLAGS, cli

    args, run = cli([*VERTEX_FLAGS, "--strategy", "multi_worker_mirrored", "--spot", "--dry-run"])
    assert run_cloud_training(args, run) == 0
    scheduling = json.loads(capsys.readouterr().out)["jobSpec"]["scheduling"]
    assert scheduling == {"restartJobOnWorkerRestart": True, "strategy": "SPOT"}
    args, run = cli(
        ["--target", "kubeflow", "--image", IMAGE, "--output", "gs://bucket/runs/k",
         "--shards-dir", "gs://bucket/shards/digits", "--strategy", "multi_worker_mirrored",
         "--spot", "--dry-run"]
    )  # fmt: skip
    assert run_cloud_training(args, run) == 0
    job = yaml.safe_load(capsys.readouterr().out)
    for spec in job["spec"]["tfReplicaSpecs"].values():
        assert spec["restartPolicy"] == "ExitCode"
        assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 120
    assert job["spec"]["runPolicy"]["backoffLimit"] == 3


def test_a_rehearsal_restarts_a_preempted_replica_as_its_platform_would():
    from pipelines.cli.cloud_train import VERTEX_SPOT_RESTARTS, preempted_restarts

    assert preempted_restarts(make_cloud(spot=True)) == VERTEX_SPOT_RESTARTS
    assert preempted_restarts(make_cloud()) == 0  # on demand: not preempted
    kube = make_cloud(target="kubeflow", backoff_limit=5)
    assert preempted_restarts(kube) == 5
    assert preempted_restarts(make_cloud(target="kubeflow", restart_policy="Never")) == 0


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


# -- real localhost clusters ------------------------------------------------------------


def _cluster(shards, out, strategy: str, events, restart: RestartPolicy) -> LocalCluster:
    """4 epochs of 89 steps (global batch 16 of digits' 1,437 examples), every 20 steps."""
    config = RunConfig(
        data=DataConfig(shards_dir=shards),
        cluster=SHAPES[strategy],
        training=TrainingConfig(epochs=EPOCHS, per_replica_batch_size=8, checkpoint_every="20"),
        output_dir=str(out),
    )
    return LocalCluster(config, restart=restart, log=events.log)


def _after_step(out: Path, step: int, timeout: float = 240) -> int:
    """Waits until the chief has noted (`progress.json`, each second) a step past `step`."""
    progress = out / "backup" / preemption.PROGRESS_NAME
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reached = json.loads(progress.read_text())["step"]
        except (OSError, ValueError, KeyError):
            reached = 0
        if reached > step:
            return reached
        time.sleep(0.05)
    raise AssertionError(f"the chief never noted a step past {step}")


@pytest.mark.cluster
@pytest.mark.heavy  # `make test-heavy`: the Vertex AI Spot rehearsal below SIGTERMs the same
# multi-worker worker in epoch 2 and checks the same save and resume at that step
def test_sigterm_to_a_multi_worker_mirrored_worker_saves_and_resumes_at_that_step(
    digits_shards, tmp_path
):
    events = Events()
    # No restart after a failure: the preempted one is the platform's (a rehearsal's policy).
    restart = RestartPolicy(cluster_restarts=0, preempted_restarts=1)
    cluster = _cluster(digits_shards, tmp_path, "multi_worker_mirrored", events, restart)
    seen: dict = {}

    def script():
        seen["signalled_after_step"] = _after_step(tmp_path, 89 + 10)  # early in epoch 2
        cluster.kill("worker-0", signal.SIGTERM)
        noticed = time.monotonic()
        events.wait_for(r"^\[worker-0\] preemption notice: checkpoint saved at step", noticed)
        events.wait_for(r"^\[chief-0\] preemption notice: checkpoint saved at step", noticed)
        resumed = events.wait_for(r"^\[chief-0\] resuming at step", after=noticed)
        seen["notice_to_resumed_s"] = resumed - noticed

    metrics = run_with_faults(cluster, events, script)
    assert_complete(metrics, tmp_path)
    steps_per_epoch = metrics["steps_per_epoch"]
    assert steps_per_epoch == 89
    (resume,) = metrics["resumes"]
    step = resume["resumed_at_step"]
    # Saved at the step the notice reached, in epoch 2 (not at its start, step 89).
    assert seen["signalled_after_step"] <= step < 2 * steps_per_epoch, (resume, seen)
    assert resume["how"] == "preempted" and resume["reached_step"] == step
    assert metrics["steps_trained_twice"] == 0
    # Every step trained exactly once: the optimizer's count is the run's steps.
    assert metrics["optimizer_steps"] == EPOCHS * steps_per_epoch
    assert {(f["returncode"], f["action"]) for f in metrics["failures"]} == {
        (143, "preempted restart")
    }
    assert metrics["restarts"] == 1 and metrics["checkpoint_steps"] == 20
    assert metrics["epoch_attempts"] == [0, 1, 1, 1]
    report(
        f"multi_worker_mirrored worker SIGTERM, saved and resumed at step {step}",
        notice_to_resumed_s=seen["notice_to_resumed_s"],
    )


@pytest.mark.cluster
def test_a_parameter_server_coordinator_killed_mid_epoch_resumes_from_its_step_checkpoint(
    digits_shards, tmp_path
):
    events = Events()
    restart = RestartPolicy(cluster_restarts=1)
    cluster = _cluster(digits_shards, tmp_path, "parameter_server", events, restart)
    seen: dict = {}

    def script():
        # An epoch is 178 steps here (one worker's batch of 8 a step): mid-epoch 2.
        seen["killed_after_step"] = _after_step(tmp_path, 178 + 40)
        cluster.kill("chief-0")  # SIGKILL: no notice, the last step checkpoint counts
        killed = time.monotonic()
        resumed = events.wait_for(r"^\[chief-0\] resuming at step", after=killed)
        seen["kill_to_resumed_s"] = resumed - killed

    metrics = run_with_faults(cluster, events, script)
    assert_complete(metrics, tmp_path)
    steps_per_epoch = metrics["steps_per_epoch"]
    assert steps_per_epoch == 178
    (resume,) = metrics["resumes"]
    step = resume["resumed_at_step"]
    # A checkpoint step (every 20, or an epoch's end) after epoch 1: not the run's start.
    assert step >= steps_per_epoch and (step % 20 == 0 or step % steps_per_epoch == 0), resume
    assert resume["how"] == "failed" and resume["steps_trained_twice"] < 20
    assert metrics["optimizer_steps"] == EPOCHS * steps_per_epoch
    # Resumed with the variables it had: the resumed epoch's loss is well below the first
    # epoch's, which a model starting over would repeat; they are on the parameter server.
    resumed_epoch = step // steps_per_epoch
    losses = metrics["history"]["loss"]
    assert losses[resumed_epoch] < 0.8 * losses[0], losses
    assert metrics["epoch_attempts"][resumed_epoch] == 1
    assert all("/job:ps/" in device for device in metrics["variable_placement"])
    report(
        f"parameter_server coordinator SIGKILL after step {seen['killed_after_step']}, "
        f"resumed at step {step}",
        kill_to_resumed_s=seen["kill_to_resumed_s"],
    )


@pytest.mark.cluster
def test_a_rehearsed_vertex_spot_job_saves_on_sigterm_and_restarts_as_vertex_would(
    tmp_path, monkeypatch, capsys
):
    """The exact Vertex AI Spot request's replicas on 127.0.0.1; no --restarts: the restart
    after the preempted save is the platform's."""
    import threading

    from components.core.launch.rehearsal import GCS_ROOT_ENV
    from pipelines import cli
    from tests.conftest import trainer_pids
    from tests.test_faults import environ_of
    from tests.test_rehearsal import BUCKET, cloud_argv

    monkeypatch.setenv(GCS_ROOT_ENV, str(tmp_path / "gcs"))
    output = f"{BUCKET}/runs/spot"
    local = tmp_path / "gcs" / "rehearsal-bucket" / "runs" / "spot"
    signalled: list[int] = []

    def preempt_a_worker() -> None:
        reached = _after_step(local, 89 + 10, timeout=600)  # early in epoch 2
        for pid in trainer_pids(str(local)) + trainer_pids("/gcs/rehearsal-bucket/runs/spot"):
            task = json.loads(environ_of(pid).get("TF_CONFIG", "{}")).get("task", {})
            if task.get("type") == "worker":
                os.kill(pid, signal.SIGTERM)
                signalled.append(reached)
                return

    thread = threading.Thread(target=preempt_a_worker, daemon=True)
    thread.start()
    argv = cloud_argv(
        "vertex", "--strategy", "multi_worker_mirrored", "--workers", "2", "--spot",
        "--epochs", str(EPOCHS), "--batch-size", "8", "--checkpoint-every", "20",
        output=output,
    )  # fmt: skip
    code = cli.main([*argv, "--rehearse"])
    out, err = capsys.readouterr()
    thread.join(timeout=10)
    assert code == 0, f"{out[-3000:]}\n{err[-3000:]}"
    assert signalled, "no worker was signalled"
    metrics = json.loads((local / "metrics.json").read_text())
    (resume,) = metrics["resumes"]
    assert resume["how"] == "preempted" and metrics["steps_trained_twice"] == 0
    assert signalled[0] <= resume["resumed_at_step"] < 2 * 89
    assert metrics["optimizer_steps"] == EPOCHS * 89
    assert [f["action"] for f in metrics["failures"]] == ["preempted restart"]
    assert metrics["eval_accuracy"] >= 0.85
    assert metrics["hardware"]["platform"] == "rehearsal of vertex"
    assert "saved on the preemption notice (exit 143)" in out
