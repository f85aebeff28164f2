"""The regression gate: `comparison.gate` and `strategist gate` exit codes."""

from __future__ import annotations

import json
import re

import pytest

from components.core.comparison import ReportError, gate
from pipelines.cli import main


def report(**runs: tuple[float, float]) -> dict:
    """A comparison.json with strategy -> (examples/s, eval accuracy)."""
    return {
        "winner": next(iter(runs), None),
        "results": [
            {"strategy": name, "name": name, "examples_per_second": eps, "eval_accuracy": acc}
            for name, (eps, acc) in runs.items()
        ],
    }


BASELINE = report(mirrored=(1000.0, 0.95), multi_worker_mirrored=(800.0, 0.94))


# --------------------------------------------------------------------------- gate()


def test_an_improvement_passes():
    result = gate(report(mirrored=(1200.0, 0.96), multi_worker_mirrored=(800.0, 0.94)), BASELINE)
    assert result.passed and result.regressions == ()
    assert [c.name for c in result.checks] == ["mirrored", "multi_worker_mirrored"]
    assert result.checks[0].throughput_drop == pytest.approx(-0.2)
    assert "PASS" in result.summary() and "+20.0%" in result.summary()
    assert "800.0 -> 800.0 examples/s (+0.0%), eval accuracy 94.0% -> 94.0% (+0.00 pp)" in (
        result.summary()
    )


def test_a_throughput_drop_beyond_the_limit_regresses_with_its_size():
    result = gate(report(mirrored=(850.0, 0.95), multi_worker_mirrored=(800.0, 0.94)), BASELINE)
    assert not result.passed
    (regression,) = result.regressions
    assert regression.name == "mirrored" and regression.metric == "examples_per_second"
    assert regression.drop == pytest.approx(0.15)
    assert "mirrored: throughput fell 15.0% (1,000.0 -> 850.0 examples/s" in result.summary()


def test_a_drop_at_the_limit_passes_and_just_beyond_fails():
    at_limit = report(mirrored=(900.0, 0.93), multi_worker_mirrored=(800.0, 0.94))
    assert gate(at_limit, BASELINE).passed  # exactly 10% slower and 2 pp less accurate
    beyond = report(mirrored=(899.0, 0.95), multi_worker_mirrored=(800.0, 0.94))
    assert not gate(beyond, BASELINE).passed
    beyond = report(mirrored=(1000.0, 0.929), multi_worker_mirrored=(800.0, 0.94))
    assert not gate(beyond, BASELINE).passed


def test_an_accuracy_drop_beyond_the_limit_regresses():
    result = gate(report(mirrored=(1000.0, 0.92), multi_worker_mirrored=(800.0, 0.94)), BASELINE)
    (regression,) = result.regressions
    assert regression.metric == "eval_accuracy" and regression.drop == pytest.approx(0.03)
    assert "eval accuracy fell 3.00 pp (95.0% -> 92.0%" in regression.describe()


def test_thresholds_are_parameters():
    slower = report(mirrored=(850.0, 0.92), multi_worker_mirrored=(800.0, 0.94))
    assert not gate(slower, BASELINE).passed
    assert gate(slower, BASELINE, max_throughput_drop=0.2, max_accuracy_drop=0.05).passed


def test_a_missing_strategy_regresses_and_a_new_one_is_fine():
    result = gate(report(mirrored=(1000.0, 0.95), parameter_server=(500.0, 0.9)), BASELINE)
    missing = [("multi_worker_mirrored", "missing")]
    assert [(r.name, r.metric) for r in result.regressions] == missing
    assert result.new == ("parameter_server",)
    text = result.summary()
    assert "multi_worker_mirrored: missing from the report" in text
    assert "New (not in the baseline, not gated): parameter_server" in text


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"results": "none"}, "'results' list"),
        ({"results": [{"strategy": "mirrored", "eval_accuracy": 0.9}]}, "examples_per_second"),
        ({"results": [{"examples_per_second": 1.0, "eval_accuracy": 0.9}]}, "no 'strategy'"),
    ],
)
def test_invalid_reports_are_refused(bad, message):
    with pytest.raises(ReportError, match=message):
        gate(bad, BASELINE)


def test_negative_thresholds_are_refused():
    with pytest.raises(ReportError, match="--max-throughput-drop"):
        gate(BASELINE, BASELINE, max_throughput_drop=-0.1)
    with pytest.raises(ReportError, match="--max-accuracy-drop"):
        gate(BASELINE, BASELINE, max_accuracy_drop=-1)


# --------------------------------------------------------------------------- strategist gate


@pytest.fixture()
def files(tmp_path):
    def write(name: str, content) -> str:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return str(path)

    return write


def test_cli_exits_0_on_an_improvement(files, capsys):
    better = files("new.json", report(mirrored=(1100.0, 0.95), multi_worker_mirrored=(900, 0.95)))
    code = main(["gate", better, "--baseline", files("base.json", BASELINE)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("PASS: no regression in 2 strategies")


def test_cli_exits_1_and_says_what_regressed(files, capsys):
    worse = files("new.json", report(mirrored=(700.0, 0.95), multi_worker_mirrored=(800, 0.90)))
    code = main(["gate", worse, "--baseline", files("base.json", BASELINE)])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("FAIL: 2 regression(s)")
    assert "mirrored: throughput fell 30.0%" in out
    assert "multi_worker_mirrored: eval accuracy fell 4.00 pp" in out


def test_cli_thresholds_and_folder_arguments(files, tmp_path, capsys):
    (tmp_path / "run").mkdir()
    files("run/comparison.json", report(mirrored=(850.0, 0.95), multi_worker_mirrored=(800, 0.94)))
    base = files("base.json", BASELINE)
    assert main(["gate", str(tmp_path / "run"), "--baseline", base]) == 1
    args = ["gate", str(tmp_path / "run"), "--baseline", base, "--max-throughput-drop", "0.2"]
    assert main(args) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("report_text", "extra", "message"),
    [
        (None, [], "report .*missing.json: file not found"),
        ("{not json", [], "not valid JSON"),
        ('{"results": [{"strategy": "mirrored"}]}', [], "'examples_per_second' must be a number"),
        ("[]", [], "expected a JSON object"),
        (json.dumps(BASELINE), ["--max-throughput-drop", "-0.1"], "--max-throughput-drop must be"),
        (json.dumps(BASELINE), ["--max-accuracy-drop", "-0.01"], "--max-accuracy-drop must be"),
    ],
)
def test_cli_exits_2_on_unusable_input(files, tmp_path, capsys, report_text, extra, message):
    path = str(tmp_path / "missing.json") if report_text is None else files("r.json", report_text)
    code = main(["gate", path, "--baseline", files("base.json", BASELINE), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("strategist gate: error: ")
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


def test_cli_exits_2_on_a_missing_baseline(files, tmp_path, capsys):
    code = main(["gate", files("r.json", BASELINE), "--baseline", str(tmp_path / "nope.json")])
    assert code == 2
    assert "baseline" in capsys.readouterr().err


def test_cli_usage_errors_exit_2(files, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["gate", files("r.json", BASELINE)])  # --baseline is required
    assert exit_info.value.code == 2
    assert "--baseline" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["gate", "r.json", "--baseline", "b.json", "--max-accuracy-drop", "lots"])
    assert exit_info.value.code == 2


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["gate", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--max-throughput-drop" in out and "exit 1" in out


# --------------------------------------------------------------------------- regression reports


def regression_report(target_metric: str | None = None, **runs: dict[str, float]) -> dict:
    """A comparison.json of regression runs: strategy -> test metrics (no accuracy)."""
    results = [
        {"strategy": name, "name": name, "examples_per_second": 1000.0, "task": "regression",
         "eval_accuracy": None, "eval_loss": metrics["loss"], "eval_metrics": metrics}
        for name, metrics in runs.items()
    ]  # fmt: skip
    return {"results": results, **({"target_metric": target_metric} if target_metric else {})}


def errors(mae: float, mse: float) -> dict[str, float]:
    return {"loss": mse, "mae": mae, "mse": mse, "rmse": mse**0.5}


REGRESSION_BASELINE = regression_report(mirrored=errors(0.50, 0.40), one_device=errors(0.5, 0.4))


@pytest.mark.parametrize("metric", ["loss", "mae", "rmse", "mse"])
def test_a_lower_is_better_metric_regresses_when_it_rises_and_passes_when_it_falls(metric):
    worse = regression_report(mirrored=errors(0.60, 0.60), one_device=errors(0.5, 0.4))
    result = gate(worse, REGRESSION_BASELINE, metric=metric)
    (regression,) = result.regressions
    assert regression.name == "mirrored" and regression.metric == f"test_{metric}"
    assert regression.drop > 0.05
    assert f"mirrored: test {metric} rose" in result.summary()
    assert "lower is better; allowed 5.0%" in result.summary()
    better = regression_report(mirrored=errors(0.30, 0.20), one_device=errors(0.5, 0.4))
    passed = gate(better, REGRESSION_BASELINE, metric=f"test_{metric}")  # the prefix is fine
    assert passed.passed, passed.summary()
    assert f"test {metric} +5.0%" in passed.summary() and "% better)" in passed.summary()


def test_the_relative_limit_of_a_metric_other_than_accuracy():
    """MAE 0.50 -> 0.525 is 5 % worse: at the default limit it passes, beyond it fails."""
    at_limit = regression_report(mirrored=errors(0.525, 0.4), one_device=errors(0.5, 0.4))
    assert gate(at_limit, REGRESSION_BASELINE, metric="mae").passed
    assert not gate(at_limit, REGRESSION_BASELINE, metric="mae", max_metric_change=0.04).passed
    text = gate(at_limit, REGRESSION_BASELINE, metric="mae").summary()
    line = "mirrored: 1,000.0 -> 1,000.0 examples/s (+0.0%), test mae 0.5 -> 0.525 (5.0% worse)"
    assert line in text


def test_a_higher_is_better_metric_regresses_when_it_falls():
    base = regression_report(mirrored={"loss": 1.0, "auc": 0.90})
    result = gate(regression_report(mirrored={"loss": 1.0, "auc": 0.80}), base, metric="auc")
    (regression,) = result.regressions
    assert "test auc fell 11.1% (0.9 -> 0.8; higher is better" in regression.describe()
    assert gate(regression_report(mirrored={"loss": 1.0, "auc": 0.95}), base, metric="auc").passed


def test_the_default_metric_is_the_one_the_baseline_was_compared_on():
    base = regression_report("rmse", mirrored=errors(0.5, 0.40))
    worse = regression_report("rmse", mirrored=errors(0.5, 0.64))  # rmse 0.632 -> 0.8
    result = gate(worse, base)
    assert result.metric == "rmse"
    assert [r.metric for r in result.regressions] == ["test_rmse"]


def test_a_regression_report_gated_on_accuracy_says_which_metric_to_pass():
    with pytest.raises(ReportError, match=r"has no eval accuracy \(a regression run\): gate it on"):
        gate(REGRESSION_BASELINE, REGRESSION_BASELINE)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], r"result mirrored has no eval accuracy \(a regression run\): gate it on one of its "
             r"test metrics with --metric \(loss, mae, mse, rmse\)"),
        (["--metric", "r2"], r"has no test 'r2': pass --metric with one of its test metrics "
                             r"\(loss, mae, mse, rmse\)"),
        (["--metric", "mae", "--max-metric-change", "-1"], "--max-metric-change must be"),
    ],
)  # fmt: skip
def test_cli_exits_2_on_a_regression_report_without_the_gated_metric(files, capsys, argv, message):
    path = files("r.json", REGRESSION_BASELINE)
    code = main(["gate", path, "--baseline", files("base.json", REGRESSION_BASELINE), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("strategist gate: error: ")
    assert re.search(message, err), err


def test_cli_gates_a_regression_report_on_its_metric(files, capsys):
    base = files("base.json", REGRESSION_BASELINE)
    worse = regression_report(mirrored=errors(0.6, 0.4), one_device=errors(0.5, 0.4))
    worse = files("w.json", worse)
    assert main(["gate", worse, "--baseline", base, "--metric", "mae"]) == 1
    out = capsys.readouterr().out
    assert "mirrored: test mae rose 20.0% (0.5 -> 0.6" in out
    assert "examples/s (+0.0%), test mae 0.5 -> 0.5 (unchanged)" in out  # one_device
    assert main(["gate", worse, "--baseline", base, "--metric", "mse"]) == 0
    args = ["--metric", "mae", "--max-metric-change", "0.25"]
    assert main(["gate", worse, "--baseline", base, *args]) == 0
    assert capsys.readouterr().out.startswith("PASS: no regression in 2 strategies")
