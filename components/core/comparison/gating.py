"""The CI gate: a report compared with a committed baseline, strategy by strategy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.core.comparison.errors import ReportError
from components.core.comparison.values import is_number, pct


@dataclass(frozen=True)
class StrategyCheck:
    """One strategy of the baseline compared with the report.

    Attributes:
        name: the strategy (`name` of the result, which is the strategy name
            unless a strategy ran in several shapes).
        baseline_examples_per_second: throughput in the baseline.
        examples_per_second: throughput in the report; None when missing.
        baseline_eval_accuracy: eval accuracy in the baseline.
        eval_accuracy: eval accuracy in the report; None when missing.
    """

    name: str
    baseline_examples_per_second: float
    examples_per_second: float | None
    baseline_eval_accuracy: float
    eval_accuracy: float | None

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
    def accuracy_drop(self) -> float | None:
        """Absolute drop in eval accuracy (0.02 = 2 percentage points lower)."""
        if self.eval_accuracy is None:
            return None
        return self.baseline_eval_accuracy - self.eval_accuracy


@dataclass(frozen=True)
class Regression:
    """One thing that got worse than the thresholds allow.

    Attributes:
        name: the strategy.
        metric: `examples_per_second`, `eval_accuracy` or `missing`.
        baseline: the baseline value (None for `missing`).
        current: the report's value (None for `missing`).
        drop: relative drop for throughput, absolute for accuracy.
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
        return (
            f"{self.name}: eval accuracy fell {100 * self.drop:.2f} pp "
            f"({pct(self.baseline)} -> {pct(self.current)}; allowed {100 * self.limit:.2f} pp)"
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
    """

    regressions: tuple[Regression, ...]
    checks: tuple[StrategyCheck, ...]
    new: tuple[str, ...]
    max_throughput_drop: float
    max_accuracy_drop: float

    @property
    def passed(self) -> bool:
        """Whether nothing regressed."""
        return not self.regressions

    def summary(self) -> str:
        """Lines for a CI log: the verdict, each regression, then every check."""
        limits = (
            f"allowed: throughput -{100 * self.max_throughput_drop:.1f}%, "
            f"eval accuracy -{100 * self.max_accuracy_drop:.2f} pp"
        )
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
                f"eval accuracy {pct(c.baseline_eval_accuracy)} -> {pct(c.eval_accuracy)} "
                f"({0.0 - 100 * c.accuracy_drop:+.2f} pp)"
            )
        if self.new:
            lines.append(f"New (not in the baseline, not gated): {', '.join(self.new)}")
        return "\n".join(lines)


def _gate_results(report: Any, role: str) -> dict[str, Mapping[str, Any]]:
    """The results of a report by name, each checked for usable numbers.

    Raises:
        ReportError: naming the `role` (`report`, `baseline`) and what is wrong.
    """
    if not isinstance(report, Mapping) or not isinstance(report.get("results"), list):
        raise ReportError(f"{role}: expected a comparison.json object with a 'results' list")
    by_name: dict[str, Mapping[str, Any]] = {}
    for index, r in enumerate(report["results"]):
        if not isinstance(r, Mapping):
            raise ReportError(f"{role}: result {index} is not an object")
        name = r.get("name") or r.get("strategy")
        if not isinstance(name, str) or not name:
            raise ReportError(f"{role}: result {index} has no 'strategy'")
        for key in ("examples_per_second", "eval_accuracy"):
            if not is_number(r.get(key)):
                raise ReportError(
                    f"{role}: result {name}: {key!r} must be a number, got {r.get(key)!r}"
                )
        if r["examples_per_second"] < 0:
            raise ReportError(f"{role}: result {name}: 'examples_per_second' is negative")
        if not 0 <= r["eval_accuracy"] <= 1:
            raise ReportError(
                f"{role}: result {name}: 'eval_accuracy' {r['eval_accuracy']} is not between 0 "
                "and 1; pass a comparison.json Strategist wrote"
            )
        if name in by_name:
            raise ReportError(f"{role}: strategy {name} appears twice")
        by_name[name] = r
    return by_name


def validate_thresholds(max_throughput_drop: float, max_accuracy_drop: float) -> None:
    """Refuses negative or non-numeric gate thresholds.

    Raises:
        ReportError: naming the flag to fix.
    """
    for flag, value in (
        ("--max-throughput-drop", max_throughput_drop),
        ("--max-accuracy-drop", max_accuracy_drop),
    ):
        if not is_number(value) or value < 0:
            raise ReportError(f"{flag} must be a number of 0 or more (0.1 = 10%), got {value!r}")


def gate(
    report: dict,
    baseline: dict,
    max_throughput_drop: float = 0.10,
    max_accuracy_drop: float = 0.02,
) -> GateResult:
    """Compares a report with a baseline report, strategy by strategy.

    A strategy regresses when its examples/s fell by more than
    `max_throughput_drop` of the baseline's (relative), when its eval accuracy
    fell by more than `max_accuracy_drop` (absolute), or when it is in the
    baseline but missing from the report. Strategies new in the report are
    listed but not gated.

    Args:
        report: `comparison.json` content of the run under test.
        baseline: `comparison.json` content to compare against.
        max_throughput_drop: allowed relative throughput drop (0.10 = 10%).
        max_accuracy_drop: allowed absolute accuracy drop (0.02 = 2 pp).

    Returns:
        The result; `passed` is False when anything regressed.

    Raises:
        ReportError: on a negative or non-numeric threshold, or a report or
            baseline without usable `results`.
    """
    validate_thresholds(max_throughput_drop, max_accuracy_drop)
    current = _gate_results(report, "report")
    reference = _gate_results(baseline, "baseline")
    if not reference:
        raise ReportError(
            "baseline: no results, so nothing would be gated; pass a comparison.json with "
            "the strategies to hold the report to"
        )
    for name, r in reference.items():
        if r["examples_per_second"] <= 0:
            raise ReportError(f"baseline: result {name}: 'examples_per_second' must be positive")

    checks = tuple(_compare(name, base, current.get(name)) for name, base in reference.items())
    regressions = tuple(
        regression
        for check in checks
        for regression in _regressions(check, max_throughput_drop, max_accuracy_drop)
    )
    new = tuple(name for name in current if name not in reference)
    return GateResult(
        regressions, checks, new, float(max_throughput_drop), float(max_accuracy_drop)
    )


def _compare(name: str, base: Mapping[str, Any], now: Mapping[str, Any] | None) -> StrategyCheck:
    """One strategy's baseline and report numbers side by side (`now` None: missing)."""
    return StrategyCheck(
        name=name,
        baseline_examples_per_second=float(base["examples_per_second"]),
        examples_per_second=None if now is None else float(now["examples_per_second"]),
        baseline_eval_accuracy=float(base["eval_accuracy"]),
        eval_accuracy=None if now is None else float(now["eval_accuracy"]),
    )


def _regressions(
    check: StrategyCheck, max_throughput_drop: float, max_accuracy_drop: float
) -> list[Regression]:
    """What regressed in one strategy: missing, or throughput or accuracy beyond its limit."""
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
    if check.accuracy_drop > max_accuracy_drop + 1e-9:
        found.append(
            Regression(
                check.name,
                "eval_accuracy",
                check.baseline_eval_accuracy,
                check.eval_accuracy,
                check.accuracy_drop,
                max_accuracy_drop,
            )
        )
    return found
