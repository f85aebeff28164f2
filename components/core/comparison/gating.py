"""The CI gate: a report compared with a committed baseline, strategy by strategy.

Quality is gated on one test metric in its own direction: eval accuracy by
default (an absolute drop, in points), or any other evaluated metric with
`metric` (a regression's `mae`, `rmse`, `mse`, `loss`, a compiled metric), by
default the metric the baseline comparison judged quality on
(`target_metric`). For a metric other than accuracy the allowed change is
relative: losses and errors may rise, the rest fall, by at most
`max_metric_change` of the baseline's value (`evaluation.lower_is_better`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.core.comparison.analysis import ACCURACY, eval_quality
from components.core.comparison.errors import ReportError
from components.core.comparison.values import is_number, pct
from components.core.evaluation import lower_is_better


@dataclass(frozen=True)
class StrategyCheck:
    """One strategy of the baseline compared with the report.

    Attributes:
        name: the strategy (`name` of the result, which is the strategy name
            unless a strategy ran in several shapes).
        baseline_examples_per_second: throughput in the baseline.
        examples_per_second: throughput in the report; None when missing.
        baseline_quality: the gated metric's test value in the baseline.
        quality: its test value in the report; None when missing.
        metric: the gated metric (`accuracy`, `mae`, ...).
    """

    name: str
    baseline_examples_per_second: float
    examples_per_second: float | None
    baseline_quality: float
    quality: float | None
    metric: str = ACCURACY

    @property
    def missing(self) -> bool:
        """Whether the strategy is missing from the report."""
        return self.examples_per_second is None

    @property
    def throughput_drop(self) -> float | None:
        """Relative drop in examples/s (0.1 = 10% slower; negative = faster)."""
        if self.examples_per_second is None:
            return None
        return 1.0 - self.examples_per_second / self.baseline_examples_per_second

    @property
    def quality_drop(self) -> float | None:
        """How much worse the gated metric got; negative when it got better.

        Accuracy: the absolute drop (0.02 = 2 percentage points lower). Any
        other metric: the change in its worse direction relative to the
        baseline (0.1 = a loss or error 10 % higher, another metric 10 % lower).
        """
        if self.quality is None:
            return None
        worse = self.baseline_quality - self.quality
        if lower_is_better(self.metric):
            worse = -worse
        if self.metric == ACCURACY:
            return worse
        return worse / abs(self.baseline_quality) if self.baseline_quality else worse

    def describe_quality(self) -> str:
        """`eval accuracy 95.0% -> 94.0% (-1.00 pp)`, `test mae 0.5 -> 0.45 (10.0% better)`."""
        if self.metric == ACCURACY:
            return (
                f"eval accuracy {pct(self.baseline_quality)} -> {pct(self.quality)} "
                f"({0.0 - 100 * self.quality_drop:+.2f} pp)"
            )
        change = f"{abs(100 * self.quality_drop):.1f}%"
        verdict = (
            f"{change} better" if self.quality_drop < 0
            else f"{change} worse" if self.quality_drop > 0
            else "unchanged"
        )  # fmt: skip
        return f"test {self.metric} {self.baseline_quality:.4g} -> {self.quality:.4g} ({verdict})"


@dataclass(frozen=True)
class Regression:
    """One thing that got worse than the thresholds allow.

    Attributes:
        name: the strategy.
        metric: `examples_per_second`, `eval_accuracy`, `test_<metric>` of
            another gated metric, or `missing`.
        baseline: the baseline value (None for `missing`).
        current: the report's value (None for `missing`).
        drop: relative drop for throughput, absolute for accuracy, relative
            worsening for another metric (`StrategyCheck.quality_drop`).
        limit: the threshold it exceeded.
    """

    name: str
    metric: str
    baseline: float | None = None
    current: float | None = None
    drop: float | None = None
    limit: float | None = None

    def describe(self) -> str:
        """One line saying what regressed by how much."""
        if self.metric == "missing":
            return f"{self.name}: missing from the report (it is in the baseline)"
        if self.metric == "examples_per_second":
            return (
                f"{self.name}: throughput fell {100 * self.drop:.1f}% "
                f"({self.baseline:,.1f} -> {self.current:,.1f} examples/s; "
                f"allowed {100 * self.limit:.1f}%)"
            )
        if self.metric == "eval_accuracy":
            return (
                f"{self.name}: eval accuracy fell {100 * self.drop:.2f} pp "
                f"({pct(self.baseline)} -> {pct(self.current)}; allowed {100 * self.limit:.2f} pp)"
            )
        name = self.metric.removeprefix("test_")
        moved = "rose" if lower_is_better(name) else "fell"
        better = "lower" if lower_is_better(name) else "higher"
        return (
            f"{self.name}: test {name} {moved} {100 * self.drop:.1f}% "
            f"({self.baseline:.4g} -> {self.current:.4g}; {better} is better; "
            f"allowed {100 * self.limit:.1f}%)"
        )


@dataclass(frozen=True)
class GateResult:
    """The outcome of `gate`.

    Attributes:
        regressions: what got worse than allowed; empty when the gate passes.
        checks: every baseline strategy compared.
        new: strategies in the report but not in the baseline (fine).
        max_throughput_drop: the relative throughput threshold used.
        max_accuracy_drop: the absolute accuracy threshold used.
        metric: the gated quality metric.
        max_metric_change: the relative threshold of a metric other than accuracy.
    """

    regressions: tuple[Regression, ...]
    checks: tuple[StrategyCheck, ...]
    new: tuple[str, ...]
    max_throughput_drop: float
    max_accuracy_drop: float
    metric: str = ACCURACY
    max_metric_change: float = 0.05

    @property
    def passed(self) -> bool:
        """Whether nothing regressed."""
        return not self.regressions

    def summary(self) -> str:
        """Lines for a CI log: the verdict, each regression, then every check."""
        if self.metric == ACCURACY:
            quality = f"eval accuracy -{100 * self.max_accuracy_drop:.2f} pp"
        else:
            sign = "+" if lower_is_better(self.metric) else "-"
            quality = f"test {self.metric} {sign}{100 * self.max_metric_change:.1f}%"
        limits = f"allowed: throughput -{100 * self.max_throughput_drop:.1f}%, {quality}"
        if self.passed:
            lines = [f"PASS: no regression in {len(self.checks)} strategies ({limits})"]
        else:
            lines = [f"FAIL: {len(self.regressions)} regression(s) ({limits})"]
            lines += [f"  {r.describe()}" for r in self.regressions]
        lines.append("Per strategy (baseline -> report):")
        for c in self.checks:
            if c.missing:
                lines.append(f"  {c.name}: missing")
                continue
            lines.append(
                f"  {c.name}: {c.baseline_examples_per_second:,.1f} -> "
                f"{c.examples_per_second:,.1f} examples/s ({0.0 - 100 * c.throughput_drop:+.1f}%), "
                + c.describe_quality()
            )
        if self.new:
            lines.append(f"New (not in the baseline, not gated): {', '.join(self.new)}")
        return "\n".join(lines)


def gated_metric(baseline: Any, metric: str | None = None) -> str:
    """The quality metric to gate on: `metric` (a `test_` prefix dropped) when given,
    else the metric the baseline comparison judged quality on, else accuracy."""
    if metric:
        return metric.removeprefix("test_")
    target = baseline.get("target_metric") if isinstance(baseline, Mapping) else None
    return target if isinstance(target, str) and target else ACCURACY


def _quality(r: Mapping[str, Any], name: str, role: str, metric: str) -> float:
    """A result's test value of the gated metric.

    Raises:
        ReportError: the result has none (with the metrics it has and the flag to pass).
    """
    if metric == ACCURACY:
        value = r.get("eval_accuracy")
        if value is None and (r.get("eval_metrics") or is_number(r.get("eval_loss"))):
            raise ReportError(
                f"{role}: result {name} has no eval accuracy (a {r.get('task') or 'regression'} "
                f"run): gate it on one of its test metrics with --metric ({_metric_names(r)})"
            )
        if not is_number(value):
            raise ReportError(
                f"{role}: result {name}: 'eval_accuracy' must be a number, got {value!r}"
            )
        if not 0 <= value <= 1:
            raise ReportError(
                f"{role}: result {name}: 'eval_accuracy' {value} is not between 0 "
                "and 1; pass a comparison.json Strategist wrote"
            )
        return float(value)
    value = eval_quality(r, metric)
    if value is None:
        raise ReportError(
            f"{role}: result {name} has no test {metric!r}: pass --metric with one of its "
            f"test metrics ({_metric_names(r)})"
        )
    return value


def _metric_names(r: Mapping[str, Any]) -> str:
    """`loss, mae, mse, rmse`: the metrics a result was evaluated on, for a message."""
    names = set(r.get("eval_metrics") or {})
    names |= {"accuracy"} if is_number(r.get("eval_accuracy")) else set()
    names |= {"loss"} if is_number(r.get("eval_loss")) else set()
    return ", ".join(sorted(names)) or "none recorded"


def _gate_results(report: Any, role: str, metric: str) -> dict[str, tuple[float, float]]:
    """The results of a report by name, each checked for usable numbers.

    Returns:
        name -> (examples/s, the gated metric's test value).

    Raises:
        ReportError: naming the `role` (`report`, `baseline`) and what is wrong.
    """
    if not isinstance(report, Mapping) or not isinstance(report.get("results"), list):
        raise ReportError(f"{role}: expected a comparison.json object with a 'results' list")
    by_name: dict[str, tuple[float, float]] = {}
    for index, r in enumerate(report["results"]):
        if not isinstance(r, Mapping):
            raise ReportError(f"{role}: result {index} is not an object")
        name = r.get("name") or r.get("strategy")
        if not isinstance(name, str) or not name:
            raise ReportError(f"{role}: result {index} has no 'strategy'")
        if not is_number(r.get("examples_per_second")):
            raise ReportError(
                f"{role}: result {name}: 'examples_per_second' must be a number, "
                f"got {r.get('examples_per_second')!r}"
            )
        if r["examples_per_second"] < 0:
            raise ReportError(f"{role}: result {name}: 'examples_per_second' is negative")
        if name in by_name:
            raise ReportError(f"{role}: strategy {name} appears twice")
        by_name[name] = (float(r["examples_per_second"]), _quality(r, name, role, metric))
    return by_name


def validate_thresholds(
    max_throughput_drop: float, max_accuracy_drop: float, max_metric_change: float = 0.05
) -> None:
    """Refuses negative or non-numeric gate thresholds.

    Raises:
        ReportError: naming the flag to fix.
    """
    for flag, value in (
        ("--max-throughput-drop", max_throughput_drop),
        ("--max-accuracy-drop", max_accuracy_drop),
        ("--max-metric-change", max_metric_change),
    ):
        if not is_number(value) or value < 0:
            raise ReportError(f"{flag} must be a number of 0 or more (0.1 = 10%), got {value!r}")


def gate(
    report: dict,
    baseline: dict,
    max_throughput_drop: float = 0.10,
    max_accuracy_drop: float = 0.02,
    metric: str | None = None,
    max_metric_change: float = 0.05,
) -> GateResult:
    """Compares a report with a baseline report, strategy by strategy.

    A strategy regresses when its examples/s fell by more than
    `max_throughput_drop` of the baseline's (relative), when its quality got
    worse than allowed (eval accuracy: by more than `max_accuracy_drop`,
    absolute; another metric: by more than `max_metric_change` of the
    baseline's value, in the metric's own direction), or when it is in the
    baseline but missing from the report. Strategies new in the report are
    listed but not gated.

    Args:
        report: `comparison.json` content of the run under test.
        baseline: `comparison.json` content to compare against.
        max_throughput_drop: allowed relative throughput drop (0.10 = 10%).
        max_accuracy_drop: allowed absolute accuracy drop (0.02 = 2 pp).
        metric: the quality metric (`gated_metric`): default the baseline's
            `target_metric`, else accuracy.
        max_metric_change: allowed relative worsening of a metric other than
            accuracy (0.05 = a loss 5 % higher).

    Returns:
        The result; `passed` is False when anything regressed.

    Raises:
        ReportError: on a negative or non-numeric threshold, a report or
            baseline without usable `results`, or a result without the metric.
    """
    validate_thresholds(max_throughput_drop, max_accuracy_drop, max_metric_change)
    metric = gated_metric(baseline, metric)
    current = _gate_results(report, "report", metric)
    reference = _gate_results(baseline, "baseline", metric)
    if not reference:
        raise ReportError(
            "baseline: no results, so nothing would be gated; pass a comparison.json with "
            "the strategies to hold the report to"
        )
    for name, (examples_per_second, _) in reference.items():
        if examples_per_second <= 0:
            raise ReportError(f"baseline: result {name}: 'examples_per_second' must be positive")

    checks = tuple(
        _compare(name, base, current.get(name), metric) for name, base in reference.items()
    )
    quality_limit = max_accuracy_drop if metric == ACCURACY else max_metric_change
    regressions = tuple(
        regression
        for check in checks
        for regression in _regressions(check, max_throughput_drop, quality_limit)
    )
    new = tuple(name for name in current if name not in reference)
    return GateResult(
        regressions,
        checks,
        new,
        float(max_throughput_drop),
        float(max_accuracy_drop),
        metric,
        float(max_metric_change),
    )


def _compare(
    name: str, base: tuple[float, float], now: tuple[float, float] | None, metric: str
) -> StrategyCheck:
    """One strategy's baseline and report numbers side by side (`now` None: missing)."""
    return StrategyCheck(
        name=name,
        baseline_examples_per_second=base[0],
        examples_per_second=None if now is None else now[0],
        baseline_quality=base[1],
        quality=None if now is None else now[1],
        metric=metric,
    )


def _regressions(
    check: StrategyCheck, max_throughput_drop: float, max_quality_drop: float
) -> list[Regression]:
    """What regressed in one strategy: missing, or throughput or quality beyond its limit."""
    if check.missing:
        return [Regression(check.name, "missing")]
    found = []
    if check.throughput_drop > max_throughput_drop + 1e-9:
        found.append(
            Regression(
                check.name,
                "examples_per_second",
                check.baseline_examples_per_second,
                check.examples_per_second,
                check.throughput_drop,
                max_throughput_drop,
            )
        )
    if check.quality_drop > max_quality_drop + 1e-9:
        found.append(
            Regression(
                check.name,
                "eval_accuracy" if check.metric == ACCURACY else f"test_{check.metric}",
                check.baseline_quality,
                check.quality,
                check.quality_drop,
                max_quality_drop,
            )
        )
    return found
