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
    settings = {"project": "my-project", "region": "us-central1", "image": "r/i:1"}
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
        ("vertex", {"project": "my-project", "region": "us-central1"}, "image"),
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


def test_a_local_task_never_inherits_the_launchers_tf_config(monkeypatch):
    """A stale TF_CONFIG in the launcher's environment is replaced, or dropped when none is
    given (a rehearsal's replicas take theirs from the job). What real tasks get (TRAINER_ENV,
    their TF_CONFIG, the restarts so far) is read from /proc in tests/test_faults.py
    (test_a_multi_worker_mirrored_worker_killed_later_resumes_from_the_backup)."""
    from components.core.launch import local_tasks

    monkeypatch.setenv("TF_CONFIG", '{"stale": true}')
    tf_config = json.dumps({"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker"}})
    assert local_tasks.task_environment(tf_config)["TF_CONFIG"] == tf_config
    assert "TF_CONFIG" not in local_tasks.task_environment(None)  # one process: no cluster
