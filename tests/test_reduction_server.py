"""Reduction Server jobs: every trainer is told, and refuses an image without the plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.core import reduction_server
from components.core.config import ConfigError, RunConfig
from components.core.launch import vertex
from tests.test_cloud_config import make_cloud, make_run

ROOT = Path(__file__).resolve().parents[1]


def fake_dpkg_query(tmp_path: Path, status: str) -> dict[str, str]:
    """An environment whose PATH has a dpkg-query reporting the plugin's `status`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "dpkg-query"
    script.write_text(f"#!/bin/sh\nprintf '%s' '{status}'\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_every_gpu_worker_of_a_reduction_server_job_is_told():
    job = vertex.build_custom_job(make_run(workers=2), make_cloud(reduction_server=True))
    chief, workers, reducers = job.job_spec.worker_pool_specs
    for pool in (chief, workers):
        env = {e.name: e.value for e in pool.container_spec.env}
        assert env[reduction_server.JOB_ENV] == "1"
    plain = vertex.build_custom_job(make_run(workers=2), make_cloud())
    env = {e.name: e.value for e in plain.job_spec.worker_pool_specs[0].container_spec.env}
    assert reduction_server.JOB_ENV not in env


def test_the_plugin_is_read_from_the_package_database(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_dpkg_query(tmp_path, "install ok installed")["PATH"])
    assert reduction_server.plugin_installed()
    reduction_server.check_this_process({reduction_server.JOB_ENV: "1"})
    monkeypatch.setenv("PATH", fake_dpkg_query(tmp_path, "deinstall ok config-files")["PATH"])
    assert not reduction_server.plugin_installed()
    with pytest.raises(ConfigError, match="google-reduction-server"):
        reduction_server.check_this_process({reduction_server.JOB_ENV: "1"})
    reduction_server.check_this_process({})  # not a Reduction Server job: nothing needed


def test_a_trainer_in_a_reduction_server_job_without_the_plugin_exits_2(tmp_path):
    """The exact arguments a worker receives, on an image without the plugin."""
    job = vertex.build_custom_job(make_run(workers=2), make_cloud(reduction_server=True))
    worker = job.job_spec.worker_pool_specs[1].container_spec
    env = fake_dpkg_query(tmp_path, "unknown ok not-installed")
    env.update({e.name: e.value for e in worker.env})
    env["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
            "task": {"type": "worker", "index": 0},
        }
    )
    done = subprocess.run(
        [sys.executable, *list(worker.command)[1:], *worker.args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "google-reduction-server" in done.stderr and "Traceback" not in done.stderr
    assert RunConfig.from_json(worker.args[1]).cluster.workers == 2
