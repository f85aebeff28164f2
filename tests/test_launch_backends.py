"""The train step's backends: bad cloud settings are refused before anything is sent."""

from __future__ import annotations

import json

import pytest

from components.core import launch
from components.core.config import ConfigError, RunConfig

COMMON = dict(
    shards_dir="/gcs/bucket/pipeline/shards",
    run_config=RunConfig().to_pipeline_parameter(),
    cluster={"strategy": "multi_worker_mirrored", "workers": 2},
)


def test_vertex_paths_map_back_to_cloud_storage():
    settings = {"project": "p", "region": "us-central1", "image": "r/i:1"}
    _, cloud = launch._cloud_run(RunConfig(), "vertex", settings)
    assert cloud.target == "vertex"
    config = RunConfig.from_dict(
        {
            **RunConfig().to_dict(),
            "data": {**RunConfig().to_dict()["data"], "shards_dir": "/gcs/b/s"},
        }
    )
    _, cloud = launch._cloud_run(config, "vertex", settings)
    assert cloud.shards_dir == "gs://b/s"


def test_unknown_cloud_setting_is_refused():
    with pytest.raises(ConfigError, match="not a CloudConfig"):
        launch._cloud_run(RunConfig(), "vertex", {"zone": "mars-1"})


@pytest.mark.parametrize(
    ("backend", "cloud", "message"),
    [
        ("slurm", {}, "unknown backend"),
        ("vertex", {"region": "us-central1", "image": "r/i:1"}, "project"),
        ("vertex", {"project": "p", "region": "us-central1"}, "image"),
    ],
)
def test_bad_backend_settings_fail_before_submission(tmp_path, backend, cloud, message):
    with pytest.raises(ConfigError, match=message):
        launch.train_to_artifacts(
            **COMMON,
            model_dir=str(tmp_path / "model"),
            metrics_path=str(tmp_path / "metrics.json"),
            backend=backend,
            cloud_config={"base_output_dir": "gs://bucket/out", **cloud},
        )
    assert not (tmp_path / "model").exists()
    assert not (tmp_path / "metrics.json").exists()


@pytest.mark.parametrize(
    ("run_config", "cluster", "message"),
    [
        ({"training": {"epochs": 0}}, {"strategy": "mirrored"}, "--epochs must be at least 1"),
        ({"trainig": {}}, {"strategy": "mirrored"}, "unknown config key 'trainig'"),
        ({}, {"strategy": "mirrored", "workers": 3}, "runs on one machine"),
        ({}, {"strategy": "auto"}, "unknown strategy 'auto'"),
    ],
)
def test_a_run_config_the_trainer_would_refuse_fails_the_step_first(
    tmp_path, run_config, cluster, message
):
    with pytest.raises(ConfigError, match=message):
        launch.train_to_artifacts(
            run_config=run_config,
            cluster=cluster,
            shards_dir=str(tmp_path / "shards"),
            model_dir=str(tmp_path / "model"),
            metrics_path=str(tmp_path / "metrics.json"),
        )
    assert not (tmp_path / "metrics.json").exists()


def test_a_local_task_gets_every_cloud_trainer_variable(monkeypatch):
    """Local and cloud training processes share one environment source (TRAINER_ENV)."""
    import io

    from components.core.launch import local
    from components.core.launch.cloud import TRAINER_ENV
    from components.core.trainer import RESTARTS_ENV

    monkeypatch.setenv("TF_CONFIG", '{"stale": true}')
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    tf_config = json.dumps({"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker"}})
    env = local.task_environment(tf_config, restarts=2)
    assert {k: env[k] for k in TRAINER_ENV} == TRAINER_ENV
    assert env["TF_USE_LEGACY_KERAS"] == "1"
    assert env["TF_CONFIG"] == tf_config and env[RESTARTS_ENV] == "2"
    assert "TF_CONFIG" not in local.task_environment(None)  # one process: no cluster

    started = []

    class Process:
        def __init__(self, command, env, **kwargs):
            started.append(env)
            self.stdout = io.StringIO("")

    monkeypatch.setattr(local.subprocess, "Popen", Process)
    cluster = local.LocalCluster(RunConfig(), log=lambda line: None)
    cluster.cluster_restarts = 1
    task = local.Task("worker", 0, tf_config)
    cluster._start(task)
    task.reader.join(timeout=5)
    assert started == [local.task_environment(tf_config, 1)]
