"""The verdict: steady-state throughput decides, quality margins from the test set, no flips."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from components.core.comparison import build_report, summary_markdown, summary_table
from components.core.comparison.verdict import ONE_RUN_MARGIN, Quality, standard_error
from tests.test_comparison import PRICES, by_name, interleave, record, repeated

# metrics.json of three `strategist compare` runs (the default comparison, one after another on
# a shared 2-core machine), as the train tasks wrote them: run<N>/<strategy>.json.
RECORDED = Path(__file__).parent / "data" / "comparison_runs"


def steady(strategy: str, first: float, rest: float, *, eval_accuracy=0.95, n=359, **kw) -> dict:
    """A run whose first epoch runs at `first` examples/s and the other three at `rest`."""
    examples = 1797.0
    seconds = (examples / first, *(examples / rest,) * 3)
    run = record(strategy, rest, epoch_seconds=seconds, eval_accuracy=eval_accuracy, **kw)
    run["epoch_examples_per_second"] = [first, rest, rest, rest]
    run["eval_examples"] = n
    return run


def test_steady_state_throughput_decides_not_a_faster_first_epoch():
    """make run's flip: parameter_server reached the target first on a faster first epoch while
    mirrored ran its steady epochs 4.7x faster."""
    runs = [
        steady("mirrored", 300.0, 19034.0, replicas=2),
        steady("parameter_server", 900.0, 4004.0, replicas=2, workers=2, ps=1, processes=4),
    ]
    report = build_report(runs, prices=PRICES)
    times = {r["name"]: r["time_to_target_s"] for r in report["results"]}
    assert times["parameter_server"] < times["mirrored"]  # first to target...
    assert report["winner"] == "mirrored"  # ...but not the faster strategy
    assert report["decided_by"] == "throughput"
    assert report["speedup_over_runner_up"] == pytest.approx(19034 / 4004, rel=1e-3)
    reason = report["winner_reason"]
    assert "4.75× parameter_server" in reason and "19,034 against" in reason
    assert "Time to target (beside, not deciding): parameter_server" in reason


def test_the_quality_margin_comes_from_the_test_set_size():
    """1.4 points apart on 359 test examples is noise (95 % margin about 3.2 pp); on 20,000
    it is not."""

    def pair(n: int) -> list[dict]:
        return [
            steady("one_device", 300.0, 1000.0, eval_accuracy=0.96, n=n),
            steady("mirrored", 300.0, 3000.0, eval_accuracy=0.946, n=n, replicas=2),
        ]

    small = build_report(pair(359), prices=PRICES)
    assert small["winner"] == "mirrored"
    margin = 1.96 * math.sqrt((0.96 * 0.04 + 0.946 * 0.054) / 359)
    assert (
        f"within {100 * margin:.2g} pp ({margin * 359:.3g} of 359 test examples)"
        in (small["winner_reason"])
    )
    assert "95% confidence margin of a difference of two proportions" in small["winner_rule"]
    large = build_report(pair(20000), prices=PRICES)
    assert large["winner"] == "one_device"
    margin = 1.96 * math.sqrt((0.96 * 0.04 + 0.946 * 0.054) / 20000)
    assert f"mirrored (94.6%) is more than {100 * margin:.2g} pp" in large["winner_reason"]


def test_an_accuracy_margin_is_never_less_than_one_test_example():
    runs = [
        steady("one_device", 300.0, 1000.0, eval_accuracy=1.0, n=50),
        steady("mirrored", 300.0, 3000.0, eval_accuracy=0.98, n=50, replicas=2),
    ]
    # Both proportions at the edge: the normal margin is about 3.9 pp here, 1 of 50 is 2 pp.
    assert build_report(runs, prices=PRICES)["winner"] == "mirrored"
    best = steady("one_device", 300.0, 1000.0, eval_accuracy=1.0, n=50)
    assert Quality([best], "accuracy").margin(best)[0] == pytest.approx(1 / 50)


def test_with_one_run_a_small_lead_is_no_clear_winner_that_says_what_it_needed():
    close = [
        steady("mirrored", 300.0, 1100.0, replicas=2),
        steady("multi_worker_mirrored", 300.0, 1000.0, replicas=2, workers=2, processes=2),
    ]
    report = build_report(close, prices=PRICES)
    assert report["winner"] is None
    assert report["needed_speedup"] == pytest.approx(1 + ONE_RUN_MARGIN)
    assert report["winner_line"] == (
        "No clear winner: mirrored leads 1.10× multi_worker_mirrored, needed 1.20×."
    )
    assert "--repeats 3 measures the run-to-run spread" in report["winner_reason"]
    clear = [steady("mirrored", 300.0, 1300.0, replicas=2), close[1]]
    assert build_report(clear, prices=PRICES)["winner"] == "mirrored"
    # A run whose steady epochs spread by 500 of their median 1,300 needs 1.38x, not 1.2x.
    noisy = steady("mirrored", 300.0, 1300.0, replicas=2)
    noisy["epoch_examples_per_second"] = [300.0, 1000.0, 1300.0, 1500.0]
    report = build_report([noisy, close[1]], prices=PRICES)
    assert report["winner"] is None
    assert report["needed_speedup"] == pytest.approx(1 + 500 / 1300, rel=1e-3)


def test_a_rehearsal_cost_never_decides():
    """Nobody reached the target: the old rule let the cheapest local process count win."""
    runs = [
        steady("mirrored", 300.0, 1050.0, replicas=2),
        steady("multi_worker_mirrored", 300.0, 1000.0, replicas=2, workers=2, processes=2),
    ]
    report = build_report(runs, target_value=0.99, prices=PRICES)
    costs = {r["name"]: r["estimated_cost_usd"] for r in report["results"]}
    assert costs["mirrored"] < costs["multi_worker_mirrored"]  # cheaper, yet
    assert report["winner"] is None and "cheapest" not in report["winner_reason"]
    assert "Cost never decides" in report["winner_rule"]
    assert "Cost*" in summary_table(report)
    assert "A local CPU rehearsal's cost is what the same processes would cost" in (
        summary_markdown(report)
    )


def test_over_repeats_throughput_wins_only_when_the_ranges_do_not_overlap():
    clear = interleave(
        repeated("one_device", (1.0, 1.1, 0.95)),
        repeated("mirrored", (0.5, 0.6, 0.55), replicas=2),
    )
    report = build_report(clear, prices=PRICES)
    assert report["winner"] == "mirrored" and report["needed_speedup"] is None
    assert "median 1,818 (1,667 to 2,000 over 3 runs)" in report["winner_reason"]
    overlap = interleave(
        repeated("one_device", (0.7, 0.58, 0.75)),
        repeated("mirrored", (0.5, 0.6, 0.52), replicas=2),
    )
    report = build_report(overlap, prices=PRICES)
    assert report["winner"] is None
    assert report["winner_reason"].startswith("No clear winner: mirrored leads in steady state")
    assert "the ranges overlap" in report["winner_reason"]
    assert report["winner_line"].endswith("within the run-to-run spread.")


def test_time_to_target_decides_only_beyond_the_run_to_run_spread():
    """Equal throughput; one strategy learns in fewer epochs every time: it wins on time."""
    fast = repeated("one_device", (1.0, 1.05, 0.98))
    slow = repeated("mirrored", (1.0, 0.97, 1.02), replicas=2)
    for run in fast:
        run["history"]["accuracy"] = [0.92, 0.93, 0.94, 0.95]  # 90 % after epoch 1
    report = build_report(interleave(fast, slow), prices=PRICES)
    assert report["winner"] == "one_device" and report["decided_by"] == "time_to_target"
    assert "beyond the run-to-run spread" in report["winner_reason"]
    # One run each: the same difference in time decides nothing.
    single = build_report([fast[0], slow[0]], prices=PRICES)
    assert single["winner"] is None


def test_a_regression_margin_comes_from_the_errors_standard_error():
    def run(strategy: str, eps: float, errors: list[float], **kw) -> dict:
        r = steady(strategy, 300.0, eps, **kw)
        mae = sum(map(abs, errors)) / len(errors)
        r.update(task="regression", eval_accuracy=None, eval_metrics={"mae": mae})
        r["history"] = {"loss": [4.0, 2.0, 1.0, 0.5], "mae": [1.6, 1.1, 0.7, 0.5]}
        r["eval_points"] = [[0.0, e] for e in errors]
        r["eval_examples"] = len(errors)
        return r

    wide = [(-1) ** i * (0.2 + (i % 7) * 0.1) for i in range(200)]  # MAE 0.5, spread 0.2
    worse = [e * 1.04 for e in wide]  # MAE 0.52: 4 % worse, within noise of 200 examples
    runs = [run("one_device", 1000.0, wide), run("mirrored", 3000.0, worse, replicas=2)]
    se = standard_error(runs[0], "mae")
    assert se == pytest.approx(0.2 / math.sqrt(200), rel=0.2)
    report = build_report(runs, target_value=0.8, target_metric="mae", prices=PRICES)
    assert report["winner"] == "mirrored"
    assert "confidence margin of a difference of two means" in report["winner_rule"]


def recorded_runs(run: int) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((RECORDED / f"run{run}").glob("*.json"))]


def test_recorded_repeated_runs_never_name_two_different_winners():
    """Three real `strategist compare` runs of the same settings: each alone names the same
    winner or none, and together (as --repeats 3) too; the old rule named two."""
    verdicts = [build_report(recorded_runs(n)) for n in (1, 2, 3)]
    winners = {v["winner"] for v in verdicts} - {None}
    assert len(winners) <= 1, [v["winner_line"] for v in verdicts]
    for v in verdicts:
        if v["winner"] is None:
            assert "needed" in v["winner_line"]  # says what it would have taken
    together = build_report([r for n in (1, 2, 3) for r in recorded_runs(n)])
    assert together["repeats"] == 3
    assert together["winner"] in winners | {None}
    # The records' own first-to-target differs between runs: that is what used to decide.
    first = {
        min(v["results"], key=lambda r: r["time_to_target_s"] or math.inf)["name"] for v in verdicts
    }
    assert len(first) > 1
    assert by_name(together)  # every strategy is one result
