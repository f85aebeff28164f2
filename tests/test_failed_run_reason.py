"""A failed local run says why in `strategist status` and status.json: the failing task's
own error line, where it said only "chief-0 exited 1; its last log lines:"."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

# Passes the launcher's pre-flight (no TF_CONFIG there), fails in every task of the cluster.
FAILS_IN_THE_CLUSTER = textwrap.dedent("""
    import os

    import tf_keras as keras

    def build_model(spec):
        if "TF_CONFIG" in os.environ:
            raise ValueError("the lookup table is missing on this replica")
        return keras.Sequential([
            keras.layers.Input(spec.single_feature.shape),
            keras.layers.Flatten(),
            keras.layers.Dense(spec.label.num_classes),
        ])
""")


def test_the_error_line_is_the_tasks_own():
    from components.core.launch.cluster_failure import ClusterFailed

    tail = [
        "Traceback (most recent call last):",
        '  File "trainer.py", line 98, in <module>',
        "tensorflow.python.framework.errors_impl.UnavailableError: Collective ops is aborted",
        "Additional GRPC error information from remote target /job:worker/replica:0/task:0",
        "The error could be from a previous operation. Restart your program to reset.",
    ]
    first_line = str(ClusterFailed("chief-0", 1, tail)).splitlines()[0]
    assert first_line == (
        "chief-0 exited 1: tensorflow.python.framework.errors_impl.UnavailableError: "
        "Collective ops is aborted; its last log lines:"
    )
    killed = str(ClusterFailed("worker-1", -9, ["epoch 1/2: loss 2.1"])).splitlines()[0]
    assert killed == "worker-1 was killed by signal 9; its last log lines:"


@pytest.mark.cluster
def test_a_failed_run_says_its_tasks_error_in_status(digits_shards, tmp_path, capsys):
    from pipelines import cli

    module = tmp_path / "fails_in_the_cluster.py"
    module.write_text(FAILS_IN_THE_CLUSTER)
    out = tmp_path / "run"
    argv = [
        "train", "--local", "--strategy", "multi_worker_mirrored", "--workers", "2",
        "--model-module", str(module), "--shards-dir", digits_shards, "--epochs", "1",
        "--output", str(out),
    ]  # fmt: skip
    assert cli.main(argv) == 1
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "failed"
    assert re.match(r"(chief|worker)-\d exited 2: build_model of ", status["error"]), status
    assert "its last log lines" not in status["error"]
    assert "ValueError: the lookup table is missing on this replica" in status["error"]
    capsys.readouterr()
    cli.main(["status", str(out)])
    assert "the lookup table is missing on this replica" in capsys.readouterr().out
