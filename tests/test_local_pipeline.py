"""The comparison pipeline run for real through kfp.local on real localhost clusters."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from components.core.config import ClusterConfig, RunConfig, TrainingConfig
from pipelines import cli
from tests.conftest import trainer_pids

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def comparison_run(tmp_path_factory):
    tfds_dir = tmp_path_factory.mktemp("tfds-pipeline")
    out = tmp_path_factory.mktemp("compare")
    console = io.StringIO()
    with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
        code = cli.main(
            [
                "compare", "--local", "--strategies", "mirrored,parameter_server",
                "--epochs", "4", "--workers", "2", "--ps", "1", "--num-shards", "2",
                "--seed", "7", "--warmup-epochs", "0", "--learning-rate", "0.002",
                "--data-dir", str(tfds_dir), "--output", str(out), "--repeats", "2",
            ]
        )  # fmt: skip
    print(console.getvalue())  # shown by pytest when a test fails
    return code, out, console.getvalue()


def test_compare_writes_the_report_files(comparison_run):
    code, out, _ = comparison_run
    assert code == 0
    for name in ("comparison.json", "report.html", "summary.md", "throughput.png", "timings.json"):
        assert (out / name).stat().st_size > 0, name
    report = json.loads((out / "comparison.json").read_text())
    assert [r["strategy"] for r in report["results"]] == ["mirrored", "parameter_server"]
    assert report["repeats"] == 2  # --repeats 2: each strategy is one result of two runs
    for result in report["results"]:
        assert result["eval_accuracy"] >= 0.85
        assert len(result["epoch_seconds"]) == 4
        assert "scaling_efficiency" in result and "estimated_cost_usd" in result
        assert result["repeats"] == 2
        spread = result["spread"]["seconds_per_epoch"]
        assert spread["n"] == 2 and spread["min"] <= result["seconds_per_epoch"] <= spread["max"]
        assert spread["min"] < spread["max"]  # two real runs never take the same time
    if report["winner"] is None:
        assert report["winner_reason"].startswith("No clear winner")
    else:
        assert report["winner"] in ("mirrored", "parameter_server")
    assert "Spread over repeated runs" in (out / "summary.md").read_text()
    assert report["recommendation"]["strategy"]  # what `select` would have chosen


def test_status_reads_a_comparison_folder(comparison_run, capsys):
    _, out, _ = comparison_run
    capsys.readouterr()
    assert cli.main(["status", str(out)]) == 0
    status = json.loads(capsys.readouterr().out)
    report = json.loads((out / "comparison.json").read_text())
    assert status == {"state": "succeeded", "winner": report["winner"]}


def test_every_train_step_ran_the_run_config_it_was_given(comparison_run):
    """`compare` flags reach the trainer: each record holds the config the trainer ran."""
    _, out, _ = comparison_run
    report = json.loads((out / "comparison.json").read_text())
    for result in report["results"]:
        ran = RunConfig.from_dict(result["run_config"])
        assert ran.training == TrainingConfig(
            epochs=4, seed=7, warmup_epochs=0, base_learning_rate=0.002, learning_rate_given=True
        )
        assert ran.data.num_shards == 2 and ran.cluster.strategy == result["strategy"]
    shapes = {
        r["strategy"]: RunConfig.from_dict(r["run_config"]).cluster for r in report["results"]
    }
    assert shapes == {
        "mirrored": ClusterConfig("mirrored", 1, 0, 2),
        "parameter_server": ClusterConfig("parameter_server", 2, 1, 1),
    }


def test_records_state_the_hardware_that_ran(comparison_run):
    _, out, _ = comparison_run
    report = json.loads((out / "comparison.json").read_text())
    with open("/proc/cpuinfo") as handle:
        cpuinfo = handle.read()
    for result in report["results"]:
        hardware = result["hardware"]
        assert hardware["platform"] == "local" and hardware["detected"] is True
        assert hardware["cpu_model"] in cpuinfo and hardware["gpu"] is None
        assert "local rehearsal" in result["priced_as"]


def test_each_task_wrote_its_artifacts(comparison_run):
    _, out, _ = comparison_run
    root = out / "pipeline_root"
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}

    def has(task, name):
        return any(f"/{task}/" in f"/{f}" and name in f for f in files)

    assert has("shard-dataset", "manifest.json")
    assert has("select-strategy", "reasons")
    assert has("train", "saved_model.pb")
    assert has("train", "metrics_json")
    # A local train step made no cloud job: GCPC's record with no resources.
    records = [root / f for f in files if "/train/" in f"/{f}" and f.endswith("gcp_resources")]
    assert records and all(json.loads(r.read_text()) == {"resources": []} for r in records)
    assert has("compare-strategies", "report")
    manifest = next(root.rglob("manifest.json"))
    assert json.loads(manifest.read_text())["dataset"] == "digits"


def test_every_train_step_keeps_its_tensorboard_logs_as_an_artifact(comparison_run):
    """`tensorboard --logdir OUTPUT/pipeline_root` shows each run of the comparison."""
    from tests.test_cli_train import scalars

    _, out, _ = comparison_run
    log_dirs = sorted({p.parent for p in (out / "pipeline_root").rglob("events.out.tfevents.*")})
    assert len(log_dirs) == 4, log_dirs  # 2 strategies x --repeats 2
    strategies = []
    for log_dir in log_dirs:
        assert "tensorboard_logs" in log_dir.parts, log_dir
        # The run's folder names its strategy: <artifact>/<strategy>/train.
        strategies.append(log_dir.relative_to(log_dir.parents[1]).parts[0])
        epochs = scalars(log_dir)
        assert [step for step, _ in epochs["epoch_loss"]] == [0, 1, 2, 3], log_dir
        assert all(value > 0 for _, value in epochs["epoch_examples_per_second"])
    assert sorted(strategies) == ["mirrored"] * 2 + ["parameter_server"] * 2


def test_task_timings_are_recorded(comparison_run):
    _, out, _ = comparison_run
    timings = json.loads((out / "timings.json").read_text())
    names = [t["name"] for t in timings["tasks"]]
    assert names.count("train") == 4 and names.count("evaluate") == 4
    assert {"shard-dataset", "select-strategy", "plan-runs", "compare-strategies"} <= set(names)
    assert all(t["status"] == "SUCCESS" for t in timings["tasks"])
    assert timings["pipeline_wall_seconds"] >= sum(
        t["seconds"] for t in timings["tasks"] if t["name"] == "train"
    )


def test_the_console_shows_tasks_epochs_and_the_table_and_the_log_holds_the_rest(comparison_run):
    _, out, console = comparison_run
    lines = console.splitlines()
    # The default comparison's 60 lines, plus the second round's 2 x (train, evaluate
    # and 4 epoch lines) and the spread table.
    assert len(lines) <= 60 + 2 * 6 + 5, console
    tasks = [line for line in lines if re.match(r"^\[\d+/12\] ", line)]
    # Off a terminal each task has a start line and an end line.
    assert [line for line in tasks if line.endswith(" ... started")] == [
        re.sub(r" \.\.\. [\d.]+ s$", " ... started", line)
        for line in tasks
        if not line.endswith(" ... started")
    ]
    tasks = [line for line in tasks if not line.endswith(" ... started")]
    assert len(tasks) == 12  # shard, select, plan, compare + train and evaluate per run
    trains = [line for line in tasks if " train " in line]
    # --repeats 2 runs the strategies interleaved, so drift hits both alike.
    assert [line.split()[2] for line in trains] == ["mirrored", "parameter_server"] * 2
    assert all(re.search(r" \.\.\. \d+\.\d s$", line) for line in tasks)
    assert sum("parameter_server epoch " in line for line in lines) == 8
    assert "Strategy" in console and "Eval acc." in console  # the closing table
    log_path = out / "pipeline.log"
    assert f"full log: {log_path}" in console
    for noise in ("executor_input", "INFO", "non-Python base image", "have no effect", "E0000"):
        assert noise not in console, noise
    log = log_path.read_text()
    assert log.count("Got executor_input:") == 12  # every task's full executor output
    assert log.count("[chief-0] epoch ") == 16 and "Wrote executor output file" in log
    timings = json.loads((out / "timings.json").read_text())
    assert "train parameter_server" in [t["label"] for t in timings["tasks"]]


def test_no_training_process_is_left(comparison_run):
    _, out, _ = comparison_run
    assert not trainer_pids(str(out))
