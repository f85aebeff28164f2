"""A run that diverges fails (`components/core/divergence.py`): the real `strategist train`
on the real digits shards, under each strategy, with a learning rate that blows the weights
up, and with a model module whose loss is NaN from its first step; and user data holding
non-finite values is refused before anything starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import trainer_pids

STRATEGIST = str(Path(sys.executable).parent / "strategist")


def train(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [STRATEGIST, "train", "--local", *argv], capture_output=True, text=True, timeout=timeout
    )


def assert_failed_as_diverged(done, out: Path, *, says: str) -> str:
    """Exit 1, the first error line naming the divergence, status failed, nothing exported."""
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    first = errors[0]
    # The chief (worker 0 of multi_worker_mirrored, which has no chief task) names it first.
    assert re.match(
        r"strategist train: error: (chief|worker)-0 exited 3: training diverged: ", first
    ), first
    assert says in first, first
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "failed" and "training diverged" in status["error"]
    assert status["restarts"] == 0  # a diverged task is not restarted (--restarts 2 given)
    assert not (out / "metrics.json").exists() and not (out / "model").exists()
    records = out / "backup" / "epochs.json"
    if records.exists():  # every epoch record written is finite, strict JSON
        json.loads(records.read_text(), parse_constant=lambda name: pytest.fail(name))
    assert trainer_pids(str(out)) == []
    return first


@pytest.mark.parametrize(
    "strategy", [pytest.param("one_device", marks=pytest.mark.heavy), "mirrored"]
)
def test_a_learning_rate_that_blows_up_fails_the_run_at_once(tmp_path, digits_shards, strategy):
    out = tmp_path / "run"
    done = train(
        "--shards-dir", digits_shards, "--strategy", strategy, "--learning-rate", "1e30",
        "--epochs", "30", "--restarts", "2", "--output", str(out),
    )  # fmt: skip
    first = assert_failed_as_diverged(done, out, says="likely cause: the learning rate")
    # Finite steps came first (the initial weights are fine), then NaN, in epoch 1.
    assert "loss is nan at epoch 1, step " in first and ", step 1;" not in first
    assert "epoch 2/30" not in done.stdout + done.stderr


@pytest.mark.cluster
@pytest.mark.parametrize(
    "shape",
    [
        ("--strategy", "parameter_server", "--workers", "2", "--ps", "1"),
        ("--strategy", "multi_worker_mirrored", "--workers", "2"),
    ],
    ids=["parameter_server", "multi_worker_mirrored"],
)
def test_a_diverged_cluster_fails_under_the_multi_process_strategies(
    tmp_path, digits_shards, shape
):
    out = tmp_path / "run"
    done = train(
        "--shards-dir", digits_shards, *shape, "--learning-rate", "1e30", "--epochs", "30",
        "--restarts", "2", "--output", str(out),
    )  # fmt: skip
    assert_failed_as_diverged(done, out, says="loss is nan at epoch 1, step ")
    assert "epoch 3/30" not in done.stdout + done.stderr


NAN_MODEL = textwrap.dedent(
    """
    import tf_keras as keras

    def build_model(spec):
        inputs = keras.Input(shape=spec.single_feature.shape)
        x = keras.layers.Flatten()(inputs)
        x = keras.layers.Dense(spec.label.num_classes)(x)
        # A user's layer whose arithmetic is NaN from the first step.
        outputs = keras.layers.Lambda(lambda t: t * float("nan"))(x)
        return keras.Model(inputs, outputs)
    """
)


def test_a_model_whose_loss_is_nan_from_the_first_step_names_data_or_model(tmp_path, digits_shards):
    module = tmp_path / "nan_model.py"
    module.write_text(NAN_MODEL)
    out = tmp_path / "run"
    done = train(
        "--shards-dir", digits_shards, "--strategy", "one_device", "--model-module", str(module),
        "--epochs", "3", "--output", str(out),
    )  # fmt: skip
    first = assert_failed_as_diverged(done, out, says="loss is nan at epoch 1, step 1;")
    assert "likely cause: the data or the model" in first


@pytest.mark.parametrize(
    ("kind", "content", "says"),
    [
        ("csv", "a,b,y\n1,2,0\ninf,3,1\n4,5,0\n6,7,1\n", "column 'a' holds NaN or infinity"),
        ("csv", "a,b,y\n1,2,0\n1e400,3,1\n4,5,0\n6,7,1\n", "first row 3"),
        ("csv", "a,b,y\n1,2,0\n1e39,3,1\n4,5,0\n6,7,1\n", "beyond float32"),
        ("csv", "a,b,y\n1,2,0.5\n1,3,nan\n4,5,0.1\n6,7,1.5\n", "label 'y' holds NaN"),
        ("npz-x", None, "array 'x' holds NaN or infinity"),
        ("npz-y", None, "label 'y' holds NaN or infinity"),
        ("npz-empty", None, "has no rows"),
        ("npz-scalar", None, "hold a single value"),
    ],
)
def test_non_finite_or_shapeless_user_data_is_refused_before_launch(tmp_path, kind, content, says):
    if kind == "csv":
        data = tmp_path / "d.csv"
        data.write_text(content)
        extra = ["--label", "y"]
    else:
        data = tmp_path / "d.npz"
        x, y = np.random.rand(8, 4).astype("float32"), np.arange(8, dtype="float32") / 8
        arrays = {
            "npz-x": {"x": np.full_like(x, np.nan), "y": y},
            "npz-y": {"x": x, "y": np.full_like(y, np.nan)},
            "npz-empty": {"x": x[:0], "y": y[:0]},
            "npz-scalar": {"x": np.float32(1.0), "y": np.float32(2.0)},
        }[kind]
        np.savez(data, **arrays)
        extra = []
    out = tmp_path / "run"
    done = train("--data", str(data), *extra, "--output", str(out), timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert not (out / "status.json").exists()  # nothing started


# A user's model whose arithmetic is NaN under one strategy only: built in a MirroredStrategy's
# scope, its output is multiplied by NaN; under one_device it trains as a plain linear model.
NAN_UNDER_MIRRORED = textwrap.dedent(
    """
    import tensorflow as tf
    import tf_keras as keras

    def build_model(spec):
        inputs = keras.Input(shape=spec.single_feature.shape)
        x = keras.layers.Flatten()(inputs)
        outputs = keras.layers.Dense(spec.label.num_classes)(x)
        if isinstance(tf.distribute.get_strategy(), tf.distribute.MirroredStrategy):
            outputs = keras.layers.Lambda(lambda t: t * float("nan"))(outputs)
        return keras.Model(inputs, outputs)
    """
)


@pytest.mark.cluster
def test_compare_reports_a_diverged_strategy_and_compares_the_others(tmp_path, digits_shards):
    module = tmp_path / "nan_under_mirrored.py"
    module.write_text(NAN_UNDER_MIRRORED)
    out = tmp_path / "cmp"
    done = subprocess.run(
        [
            STRATEGIST, "compare", "--strategies", "mirrored,one_device", "--epochs", "1",
            "--warmup-epochs", "0", "--learning-rate", "0.01", "--model-module", str(module),
            "--shards-dir", digits_shards, "--output", str(out),
        ],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    # The diverged strategy ran first; the other still trained, and the report was written.
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith(
        "strategist compare: error: 1 of 2 strategies did not finish: mirrored diverged "
        "(chief-0 exited 3: training diverged: loss is nan at epoch 1, step 1;"
    ), errors[0]
    strict = {"parse_constant": lambda name: pytest.fail(f"{name} in comparison.json")}
    report = json.loads((out / "comparison.json").read_text(), **strict)
    assert [r["strategy"] for r in report["results"]] == ["one_device"]
    assert report["results"][0]["eval_accuracy"] > 0.5  # it trained (10 classes)
    [failed] = report["failed"]
    assert (failed["strategy"], failed["outcome"]) == ("mirrored", "diverged")
    assert "training diverged" in failed["error"]
    assert report["winner"] != "mirrored"
    assert re.search(r"^mirrored\s+diverged(\s+–)+$", done.stdout, re.M), done.stdout
    assert re.search(r"^\[\d+/\d+\] train mirrored \.\.\. diverged after ", done.stdout, re.M)
    assert "| mirrored | diverged |" in (out / "summary.md").read_text()
    assert 'data-name="mirrored"' in (out / "report.html").read_text()
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "failed" and "mirrored diverged" in status["error"]
    assert "Fail to serialize" not in (out / "pipeline.log").read_text()
    assert trainer_pids(str(out)) == []


def test_a_strategy_with_a_failed_run_is_listed_apart_and_never_wins():
    """Without a cluster: `build_report` on records as the train steps write them. A strategy
    any of whose repeats diverged is out of the results and the verdict; a crashed one too."""
    from components.core import comparison
    from components.core.failed_run import FailedRun
    from tests.test_comparison import record

    def failed(strategy: str, outcome: str, workers: int = 1, gpus: int = 1) -> dict:
        return FailedRun(strategy, workers, 0, gpus, outcome, f"chief-0 {outcome}").to_dict()

    runs = [
        record("one_device", 1000.0),
        record("mirrored", 9000.0, replicas=2),  # fastest, but its repeat diverged
        record("one_device", 1010.0),
        failed("mirrored", "diverged", gpus=2),
        failed("multi_worker_mirrored", "failed", workers=2),
    ]
    report = comparison.build_report(runs)
    assert [r["name"] for r in report["results"]] == ["one_device"]
    assert report["winner"] == "one_device"
    assert [(f["name"], f["outcome"], f["runs_failed"], f["runs"]) for f in report["failed"]] == [
        ("mirrored", "diverged", 1, 2),
        ("multi_worker_mirrored", "failed", 1, 1),
    ]
    files = comparison.render_files(report)
    json.loads(files["comparison.json"], parse_constant=lambda name: pytest.fail(name))
    table = comparison.summary_table(report)
    assert re.search(r"^mirrored\s+diverged(\s+–)+$", table, re.M), table
    assert "mirrored diverged (1 of 2 runs): chief-0 diverged; it is not compared" in table
    assert "| multi_worker_mirrored | failed |" in files["summary.md"].decode()
    assert 'class="did-not-finish" data-name="mirrored"' in files["report.html"].decode()
