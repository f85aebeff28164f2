"""The verdict: which strategy wins, only when the measurements can tell, and why.

Rules, in order:

1. Equal quality. A run competes when its test value of the target metric
   is within the confidence margin of the best run's: for accuracy, the
   95 % interval of a difference of two proportions on the test set
   (`z * sqrt(p1 (1 - p1) / n + p2 (1 - p2) / n)`, never less than one test
   example); for MAE, MSE or RMSE, the 95 % interval of the difference of
   two means, from the standard error of each run's per-example errors
   (`eval_points`); for another metric without a standard error, within 1 %
   of the best. Quality alone never decides.
2. Steady-state throughput decides: `examples_per_second`, the median of the
   epochs after the first (which holds tracing and warm-up), or of a
   pilot's steps after its warm-up. With repeated runs the fastest wins when
   its slowest run beats the runner-up's fastest; with one run per strategy
   it must be faster by the larger of `ONE_RUN_MARGIN` and the per-epoch
   spread of either run, and the verdict says what it needed.
3. Time to target decides only when throughput did not and each strategy
   ran more than once: the first to target wins when its slowest run
   reached it before the runner-up's fastest.
   A pilot (runs of `max_steps` steps) is judged on throughput alone: its
   few steps train no model whose quality or time to target could compare,
   so rule 1 lets every run compete and rule 3 does not apply.
4. Otherwise there is no clear winner. Cost never decides: a local CPU
   rehearsal's cost is what the same run would cost on cloud machines, and
   on real hardware the cost follows from the same time.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from components.core.comparison.repeats import runs_per_result, value_range
from components.core.comparison.values import is_number, pct
from components.core.evaluation import lower_is_better

ACCURACY = "accuracy"
# The confidence of the equal-quality margin, and its two-sided normal quantile.
CONFIDENCE = 0.95
_Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
# A metric with no standard error: runs within this fraction of the best are equal quality.
RELATIVE_QUALITY = 0.01
# With one run per strategy, the least throughput ratio that calls a winner: the per-epoch
# spread of one run understates the run-to-run drift of a shared machine (three make runs
# on a shared 2-core machine measured mirrored at 16,531, 6,967 and 7,343 examples/s, with
# per-epoch spreads of 17 %, 67 % and 123 %).
ONE_RUN_MARGIN = 0.20
# Metrics whose standard error the per-example errors of `eval_points` give.
_ERROR_METRICS = ("mae", "mse", "rmse")


def eval_quality(record: Mapping[str, Any], metric: str) -> float | None:
    """The run's test-split value of `metric` (None when it was not evaluated)."""
    value = (record.get("eval_metrics") or {}).get(metric)
    if value is None:
        value = {ACCURACY: record.get("eval_accuracy"), "loss": record.get("eval_loss")}.get(metric)
    return float(value) if is_number(value) else None


def test_examples(record: Mapping[str, Any]) -> int | None:
    """The test examples a run was evaluated on: `eval_examples`, else its confusion matrix."""
    if is_number(record.get("eval_examples")) and record["eval_examples"] > 0:
        return int(record["eval_examples"])
    if record.get("confusion_matrix"):
        return int(sum(sum(row) for row in record["confusion_matrix"]))
    return None


def standard_error(record: Mapping[str, Any], metric: str) -> float | None:
    """The standard error of a run's test value of `metric`; None when it cannot be known.

    Accuracy: `sqrt(p (1 - p) / n)`, a proportion over `n` test examples.
    MAE, MSE, RMSE: the standard deviation of the per-example absolute or
    squared errors of `eval_points` (a sample of the test split) over
    `sqrt(n)`; RMSE by the delta method, `SE(MSE) / (2 RMSE)`.
    """
    value, n = eval_quality(record, metric), test_examples(record)
    if value is None or not n:
        return None
    if metric == ACCURACY:
        return math.sqrt(max(value * (1 - value), 0.0) / n)
    name = metric.lower().removeprefix("test_")
    points = [p for p in record.get("eval_points") or [] if len(p) == 2 and all(map(is_number, p))]
    if name not in _ERROR_METRICS or len(points) < 2:
        return None
    errors = [p[1] - p[0] for p in points]
    per_example = [abs(e) for e in errors] if name == "mae" else [e * e for e in errors]
    se = statistics.stdev(per_example) / math.sqrt(n)
    return se / (2 * value) if name == "rmse" and value > 0 else se


class Quality:
    """Equal quality on the target metric's test value, in its direction, at `CONFIDENCE`."""

    def __init__(self, results: list[Mapping[str, Any]], metric: str):
        self.metric = metric
        self.lower = lower_is_better(metric)
        scored = [r for r in results if eval_quality(r, metric) is not None]
        pick = min if self.lower else max
        self.best_run = pick(scored, key=lambda r: eval_quality(r, metric)) if scored else None
        self.best = eval_quality(self.best_run, metric) if self.best_run else None
        self.name = "eval accuracy" if metric == ACCURACY else f"test {metric}"

    def show(self, value: float) -> str:
        return pct(value) if self.metric == ACCURACY else f"{value:.4g}"

    def margin(self, run: Mapping[str, Any]) -> tuple[float, str]:
        """How far `run` may be from the best and still be equal quality, and the method."""
        best = self.best_run
        n = test_examples(run) or test_examples(best)
        se_run, se_best = standard_error(run, self.metric), standard_error(best, self.metric)
        if se_run is not None and se_best is not None:
            margin = _Z * math.sqrt(se_run**2 + se_best**2)
            if self.metric == ACCURACY:
                return max(margin, 1.0 / n), "proportions"  # never less than one example
            return margin, "means"
        return RELATIVE_QUALITY * abs(self.best or 0.0), "relative"

    def slack(self, run: Mapping[str, Any]) -> str:
        """The margin in words: `2.3 pp (8.3 of 359 test examples)`, `0.031`, `1 %`."""
        margin, method = self.margin(run)
        if method == "relative":
            return f"{100 * RELATIVE_QUALITY:g} %"
        if method == "proportions":
            n = test_examples(run) or test_examples(self.best_run)
            return f"{100 * margin:.2g} pp ({margin * n:.3g} of {n} test examples)"
        return f"{margin:.3g}"

    def method(self) -> str:
        """How the margin is set, in words, for the rule."""
        if self.best_run is None:
            return "no test value to compare"
        kind = self.margin(self.best_run)[1]
        if kind == "proportions":
            return (
                f"the {CONFIDENCE:.0%} confidence margin of a difference of two proportions on "
                f"the {test_examples(self.best_run)} test examples"
            )
        if kind == "means":
            return (
                f"the {CONFIDENCE:.0%} confidence margin of a difference of two means, from "
                f"each run's standard error of its {self.metric}"
            )
        return f"{100 * RELATIVE_QUALITY:g} % (no standard error of {self.metric} is known)"

    def equal(self, run: Mapping[str, Any]) -> bool:
        value = eval_quality(run, self.metric)
        if self.best is None or value is None:
            return self.best is None
        gap = value - self.best if self.lower else self.best - value
        return gap <= self.margin(run)[0] + 1e-12

    def describe(self, run: Mapping[str, Any]) -> str:
        """The winner's test value in words, against the best of all runs."""
        value = eval_quality(run, self.metric)
        if value is None or self.best is None:
            return f"no {self.name} to compare"
        if run is self.best_run or value == self.best:
            return f"with the best {self.name}, {self.show(self.best)}"
        return (
            f"with {self.name} {self.show(value)}, within {self.slack(run)} of the best "
            f"({self.show(self.best)}), which counts as equal quality"
        )

    def dropped(self, left_out: list[Mapping[str, Any]]) -> str:
        """A sentence naming the runs too far from the best to compete; empty when none."""
        return "".join(
            f" {r['name']} ({self.show(eval_quality(r, self.metric))}) is more than "
            f"{self.slack(r)} from the best and did not compete."
            for r in left_out
        )


def steady_spread(record: Mapping[str, Any]) -> float:
    """The relative spread (max - min over median) of a run's steady epochs' throughput."""
    steady = [v for v in (record.get("epoch_examples_per_second") or [])[1:] if is_number(v)]
    if len(steady) < 2 or statistics.median(steady) <= 0:
        return 0.0
    return (max(steady) - min(steady)) / statistics.median(steady)


def needed_speedup(win: Mapping[str, Any], second: Mapping[str, Any]) -> float:
    """With one run each, how much faster the leader must be to win (a ratio, e.g. 1.2)."""
    return 1.0 + max(ONE_RUN_MARGIN, steady_spread(win), steady_spread(second))


def _speed(r: Mapping[str, Any]) -> str:
    return f"{r['examples_per_second']:,.0f} examples/s"


def _time(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f} s"


def _spread(result: Mapping[str, Any], key: str, show) -> str:
    """`median 10.2 s (9.8 s to 10.9 s over 3 runs)`, or the one value of a single run."""
    spread = (result.get("spread") or {}).get(key)
    value = result.get(key)
    if not spread or spread["n"] < 2:
        return show(value)
    low, high = (show(spread[k]) for k in ("min", "max"))
    return f"median {show(value)} ({low} to {high} over {spread['n']} runs)"


def _separated(win: Mapping[str, Any], second: Mapping[str, Any], key: str, lower: bool) -> bool:
    """Whether the winner's range of `key` over its runs is wholly better than the runner-up's."""
    win_low, win_high = value_range(win, key)
    second_low, second_high = value_range(second, key)
    return win_high < second_low if lower else win_low > second_high


def decide(results: list[Mapping[str, Any]], target: str, metric: str = ACCURACY) -> dict[str, Any]:
    """The verdict on a report's results.

    Args:
        results: one per strategy and shape, as `build_report` makes them
            (medians and `spread` when a strategy ran more than once), each
            with `time_to_target_s`.
        target: the target in words (`training accuracy of 90.0%`).
        metric: the target metric, whose test value judges quality.

    Returns:
        `winner` (None when no winner is clear), `decided_by`
        (`throughput`, `time_to_target` or None), `runner_up`,
        `speedup_over_runner_up` (the leader's steady throughput over the
        runner-up's), `needed_speedup` (with one run per strategy),
        `reason` (sentences with numbers) and `line` (one line for a console).
    """
    verdict: dict[str, Any] = {
        "winner": None,
        "decided_by": None,
        "runner_up": None,
        "speedup_over_runner_up": None,
        "needed_speedup": None,
    }
    if not results:
        return {**verdict, "reason": "No runs to compare.", "line": "No runs to compare."}
    quality = Quality(results, metric)
    pilot = is_pilot(results)
    equal = results if pilot else [r for r in results if quality.equal(r)]
    dropped = quality.dropped([r for r in results if r not in equal])
    if pilot:
        dropped += (
            f" A pilot of {pilot} steps per strategy judges speed alone: its test values and "
            "times to target compare no training."
        )
    ordered = sorted(equal, key=lambda r: -r["examples_per_second"])
    lead = ordered[0]
    second = ordered[1] if len(ordered) > 1 else None
    if second is None:
        only = "strategy compared" if len(results) == 1 else "run of equal quality"
        reason = f"{lead['name']} is the only {only}, {quality.describe(lead)}."
        return {
            **verdict,
            "winner": lead["name"],
            "decided_by": "quality",
            "reason": reason + dropped,
            "line": f"Winner: {lead['name']}, the only {only}.",
        }
    ratio = lead["examples_per_second"] / max(second["examples_per_second"], 1e-12)
    repeated = min(runs_per_result([lead, second])) > 1
    verdict.update(runner_up=second["name"], speedup_over_runner_up=round(ratio, 4))
    speeds = (
        f"{_spread(lead, 'examples_per_second', lambda v: f'{v:,.0f}')} against "
        f"{second['name']}'s {_spread(second, 'examples_per_second', lambda v: f'{v:,.0f}')} "
        f"examples/s in steady state"
    )
    if repeated:
        clear = _separated(lead, second, "examples_per_second", lower=False)
        needs = "its slowest run to beat the runner-up's fastest"
    else:
        need = needed_speedup(lead, second)
        verdict["needed_speedup"] = round(need, 4)
        clear = ratio >= need
        needs = f"{need:.2f}× with one run per strategy"
    if clear:
        verdict.update(winner=lead["name"], decided_by="throughput")
        reason = (
            f"{lead['name']} is the fastest in steady state, {ratio:.2f}× {second['name']} "
            f"({speeds}; a win needs {needs}), {quality.describe(lead)}."
        )
        beyond = "beyond the run-to-run spread" if repeated else f"needed {needs.split()[0]}"
        line = (
            f"Winner: {lead['name']}, {ratio:.2f}× {second['name']}'s steady examples/s ({beyond})."
        )
        return {**verdict, "reason": reason + _time_beside(equal) + dropped, "line": line}
    by_time = _by_time_to_target(equal, target) if repeated and not pilot else None
    if by_time is not None:
        first, runner, because = by_time
        verdict.update(winner=first["name"], decided_by="time_to_target")
        reason = (
            f"Steady-state throughput is within the run-to-run spread ({speeds}); "
            f"{because}, {quality.describe(first)}."
        )
        line = f"Winner: {first['name']}, first to the target beyond the run-to-run spread."
        return {**verdict, "reason": reason + dropped, "line": line}
    if repeated:
        why = "the ranges overlap, so the difference is within the run-to-run spread"
        line = (
            f"No clear winner: {lead['name']} leads {ratio:.2f}× {second['name']}, "
            "within the run-to-run spread."
        )
    else:
        why = (
            f"with one run per strategy a winner needs {needs.split(' with')[0]} "
            f"(the larger of {1 + ONE_RUN_MARGIN:.2f}× and either run's per-epoch spread); "
            "--repeats 3 measures the run-to-run spread"
        )
        line = (
            f"No clear winner: {lead['name']} leads {ratio:.2f}× {second['name']}, "
            f"needed {needs.split(' with')[0]}."
        )
    reason = (
        f"No clear winner: {lead['name']} leads in steady state, {ratio:.2f}× {second['name']} "
        f"({speeds}), but {why}."
    )
    return {**verdict, "reason": reason + _time_beside(equal) + dropped, "line": line}


def is_pilot(results: list[Mapping[str, Any]]) -> int:
    """The steps of a pilot when every run is one (`max_steps` > 0, their largest); else 0."""
    steps = [r.get("max_steps") or 0 for r in results]
    return max(steps) if steps and min(steps) > 0 else 0


def _time_beside(equal: list[Mapping[str, Any]]) -> str:
    """Time to target shown beside a throughput verdict (it decided nothing)."""
    shown = [
        f"{r['name']} {_spread(r, 'time_to_target_s', _time)}"
        for r in sorted(equal, key=lambda r: _order(r.get("time_to_target_s")))
    ]
    return f" Time to target (beside, not deciding): {'; '.join(shown)}."


def _order(value: float | None) -> float:
    return math.inf if value is None else value


def _by_time_to_target(
    equal: list[Mapping[str, Any]], target: str
) -> tuple[Mapping[str, Any], Mapping[str, Any], str] | None:
    """The first to target when it is ahead beyond the run-to-run spread; else None."""
    ordered = sorted(equal, key=lambda r: _order(r.get("time_to_target_s")))
    first, runner = ordered[0], ordered[1]
    if first.get("time_to_target_s") is None:
        return None
    if not _separated(first, runner, "time_to_target_s", lower=True):
        return None
    because = (
        f"{first['name']} reached the target {target} first, "
        f"{_spread(first, 'time_to_target_s', _time)} against {runner['name']}'s "
        f"{_spread(runner, 'time_to_target_s', _time)}, beyond the run-to-run spread"
    )
    return first, runner, because


def winner_rule(results: list[Mapping[str, Any]], metric: str) -> str:
    """How the winner is decided, in words, for the report's notes."""
    runs = runs_per_result(results)
    counted = (
        f"each strategy's median over {runs[0]} interleaved runs"
        if runs and min(runs) == max(runs) and runs[0] > 1
        else "one run per strategy"
        if runs and max(runs) == 1
        else "each strategy's median"
    )
    quality = Quality(results, metric)
    return (
        f"How the winner is decided ({counted}): runs whose {quality.name} is within "
        f"{quality.method()} of the best count as equal quality; of those, the highest "
        "steady-state throughput (examples/s after the first epoch or the warm-up steps) wins "
        "when it is clear: over repeated runs its slowest beats the runner-up's fastest; with "
        f"one run each it is at least {1 + ONE_RUN_MARGIN:.2f}× the runner-up, or more when "
        "either run's epochs spread more. Time to target decides only when throughput does "
        "not and it is clear over repeated runs. Cost never decides."
    )
