"""The evaluator task: a sidecar evaluating each epoch checkpoint, in both TF_CONFIG shapes."""

from __future__ import annotations

import json

import pytest

from components.core.config import ClusterConfig, DataConfig, RunConfig, TrainingConfig
from components.core.launch.local import LocalCluster
from components.core.launch.local_tasks import plan_tasks
from components.core.strategies import Role
from tests.conftest import trainer_pids

EPOCHS = 4


def tf_configs(cluster: ClusterConfig, evaluator_in_cluster: bool) -> dict[str, dict]:
    return {t.name: json.loads(t.tf_config) for t in plan_tasks(cluster, evaluator_in_cluster)}


def test_vertex_shape_leaves_the_evaluator_out_of_the_cluster():
    configs = tf_configs(ClusterConfig("multi_worker_mirrored", 2, evaluator=True), False)
    evaluator = configs["evaluator-0"]
    assert evaluator["task"] == {"type": "evaluator", "index": 0}
    assert set(evaluator["cluster"]) == {"chief", "worker"}  # as Vertex AI's pool 3
    assert all(c["cluster"] == evaluator["cluster"] for c in configs.values())
    role = Role.from_tf_config(evaluator)
    assert not role.is_chief and role.task_type == "evaluator"


def test_training_operator_shape_puts_the_evaluator_in_the_cluster():
    configs = tf_configs(ClusterConfig("parameter_server", 2, 1, evaluator=True), True)
    assert set(configs["evaluator-0"]["cluster"]) == {"chief", "worker", "ps", "evaluator"}
    assert not Role.from_tf_config(configs["evaluator-0"]).is_chief


def _run(shards, out, cluster, evaluator_in_cluster):
    config = RunConfig(
        data=DataConfig(shards_dir=shards),
        cluster=cluster,
        training=TrainingConfig(epochs=EPOCHS),
        output_dir=str(out),
    )
    lines = []
    metrics = LocalCluster(
        config, log=lines.append, evaluator_in_cluster=evaluator_in_cluster
    ).run()
    return metrics, lines


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("cluster", "evaluator_in_cluster"),
    [
        (ClusterConfig("multi_worker_mirrored", 2, evaluator=True), False),  # Vertex AI
        (ClusterConfig("parameter_server", 2, 1, evaluator=True), True),  # training operator
    ],
    ids=["mwms-vertex-shape", "ps-operator-shape"],
)
def test_the_evaluator_evaluates_checkpoints_and_never_trains(
    digits_shards, tmp_path, cluster, evaluator_in_cluster
):
    metrics, lines = _run(digits_shards, tmp_path, cluster, evaluator_in_cluster)
    assert metrics.eval_accuracy >= 0.85  # the chief trained and learned
    evaluations = metrics.sidecar_evaluations
    assert evaluations, "the evaluator reported nothing"
    assert evaluations[-1]["epoch"] == EPOCHS  # it waited for the last epoch
    assert evaluations[-1]["accuracy"] >= 0.85
    assert [e["epoch"] for e in evaluations] == sorted({e["epoch"] for e in evaluations})
    # The last checkpoint is the trained model: the sidecar's accuracy matches the chief's.
    assert evaluations[-1]["accuracy"] == pytest.approx(metrics.eval_accuracy, abs=0.02)
    # It never trained and wrote nothing of the chief's.
    assert not any(line.startswith("[evaluator-0] epoch") for line in lines)
    assert any(line.startswith("[evaluator-0] evaluator: epoch") for line in lines)
    tasks = {p.stem for p in (tmp_path / "tasks").iterdir()}
    assert "evaluator-0" not in tasks
    assert json.loads((tmp_path / "evaluator" / "evaluations.json").read_text()) == evaluations
    assert not trainer_pids(str(tmp_path))


@pytest.mark.cluster
def test_a_restarted_evaluator_evaluates_the_checkpoints_it_missed(digits_shards, tmp_path):
    """The evaluator is frozen after its first result while the chief trains on, then killed;
    the launcher restarts it alone, and the new one evaluates every epoch it missed."""
    import os
    import re
    import signal

    from tests.test_faults import Events, run_with_faults

    epochs = 8
    config = RunConfig(
        data=DataConfig(shards_dir=digits_shards),
        cluster=ClusterConfig("one_device", evaluator=True),
        training=TrainingConfig(epochs=epochs),
        output_dir=str(tmp_path),
    )
    events = Events()
    cluster = LocalCluster(config, log=events.log)

    def pid(name: str) -> int:
        return next(t.process.pid for t in cluster.tasks if t.name == name)

    def script() -> None:
        # The chief waits at epoch 2 until the evaluator has a result, so some are left to miss.
        events.wait_for(r"^\[chief-0\] epoch 2/")
        os.kill(pid("chief-0"), signal.SIGSTOP)
        events.wait_for(r"^\[evaluator-0\] evaluator: epoch \d/")
        os.kill(pid("evaluator-0"), signal.SIGSTOP)
        os.kill(pid("chief-0"), signal.SIGCONT)
        events.wait_for(r"^\[chief-0\] epoch 6/")
        os.kill(pid("evaluator-0"), signal.SIGKILL)

    metrics = run_with_faults(cluster, events, script)
    text = events.text()
    # Every epoch has its evaluation, the missed ones evaluated first after the restart.
    assert [e["epoch"] for e in metrics["sidecar_evaluations"]] == list(range(1, epochs + 1))
    missed = re.search(
        r"evaluator: restarted; first evaluating the epoch\(s\) it missed: (.*)", text
    )
    assert missed and len(missed.group(1).split(", ")) >= 3, text[-3000:]
    assert "[launcher] evaluator-0 exited -9; restarting it (1/3), it first evaluates the " in text
    assert "retried on the other workers" not in text
    assert [f["action"] for f in metrics["failures"]] == ["evaluator restart"]
    assert metrics["worker_restarts"] == 0 and metrics["restarts"] == 0
    assert not trainer_pids(str(tmp_path))
