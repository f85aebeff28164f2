"""The report: derived numbers per run, the baseline, the winner and why.

`build_report` turns the `metrics.json` records of several training runs into
the content of `comparison.json`: each record gains its speed-up and scaling
efficiency against a baseline run, the wall-clock time it took to reach a
target accuracy and an estimated cost; a winner is chosen with a reason in
plain words.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from typing import Any

from components.core.comparison.errors import ReportError
from components.core.comparison.measured_on import measured_on, rehearsal_note
from components.core.comparison.pricing import PriceTable, estimate_cost, load_prices
from components.core.comparison.repeats import (
    combine,
    group_runs,
    run_key,
    runs_per_result,
    value_range,
)
from components.core.comparison.values import finite, is_number, pct, round_or_none, usd
from components.core.config import STRATEGIES, ConfigError
from components.core.evaluation import lower_is_better
from components.core.run_metrics import RunMetrics
from components.core.strategy_spec import spec_for

# Runs whose eval accuracy is within this of the best count as equal quality (for
# another target metric: within this fraction of the best value).
EQUAL_QUALITY = 0.01
ACCURACY = "accuracy"


def time_to_target(
    record: Mapping[str, Any], target: float, metric: str = ACCURACY
) -> float | None:
    """Seconds from fit start to the end of the first epoch that reached the target.

    Uses the training history of `metric` and `elapsed_at_epoch_end` (or the
    running sum of `epoch_seconds` when that is absent), so it is measured at
    epoch granularity. A loss or error reaches the target at or below it,
    any other metric at or above (`evaluation.lower_is_better`).

    Returns:
        The time, or None when the target was never reached.
    """
    lower = lower_is_better(metric)
    elapsed = epoch_end_times(record)
    for value, seconds in zip(metric_history(record, metric), elapsed, strict=False):
        if is_number(value) and (value <= target if lower else value >= target):
            return float(seconds)
    return None


def metric_history(record: Mapping[str, Any], metric: str) -> list[float]:
    """Training values of `metric` per epoch (`accuracy` also finds another `*accuracy`)."""
    if metric == ACCURACY:
        return accuracy_history(record)
    return list((record.get("history") or {}).get(metric) or [])


def eval_quality(record: Mapping[str, Any], metric: str) -> float | None:
    """The run's test-split value of `metric` (None when it was not evaluated)."""
    value = (record.get("eval_metrics") or {}).get(metric)
    if value is None:
        value = {ACCURACY: record.get("eval_accuracy"), "loss": record.get("eval_loss")}.get(metric)
    return float(value) if is_number(value) else None


def target_words(metric: str, target: float) -> str:
    """`training accuracy of 90.0 %`, `training mae of 0.5`."""
    return f"training {metric} of {pct(target) if metric == ACCURACY else f'{target:g}'}"


def accuracy_history(record: Mapping[str, Any]) -> list[float]:
    """Training accuracy per epoch: `history.accuracy` or another non-validation `*accuracy`."""
    history = record.get("history") or {}
    if "accuracy" in history:
        return list(history["accuracy"])
    for key, values in history.items():
        if key.endswith("accuracy") and not key.startswith("val_"):
            return list(values)
    return []


def epoch_end_times(record: Mapping[str, Any]) -> list[float]:
    """Seconds from fit start to each epoch end.

    `elapsed_at_epoch_end` when recorded, otherwise the running sum of
    `epoch_seconds`.
    """
    elapsed = record.get("elapsed_at_epoch_end")
    if isinstance(elapsed, list) and elapsed:
        return [float(s) for s in elapsed]
    total, out = 0.0, []
    for seconds in record.get("epoch_seconds") or []:
        total += float(seconds)
        out.append(total)
    return out


def _parse_record(record: Any, index: int) -> dict[str, Any]:
    """A record parsed as a `RunMetrics` (any known version), back as its dict.

    Raises:
        ReportError: naming the result and the missing or invalid field.
    """
    if not isinstance(record, Mapping):
        raise ReportError(
            f"result {index}: expected a metrics.json object, got {type(record).__name__}"
        )
    source = "result" if isinstance(record.get("strategy"), str) else f"result #{index}"
    try:
        return RunMetrics.from_dict(record, source).to_dict()
    except ConfigError as err:
        raise ReportError(str(err)) from None


def _names(records: list[Mapping[str, Any]]) -> list[str]:
    """Strategy names, with the cluster shape added where a strategy ran in two shapes.

    Records of the same strategy and shape are repeats of one run and share its name.
    """
    shapes: dict[str, set] = {}
    for r in records:
        shapes.setdefault(r["strategy"], set()).add(run_key(r))
    names = []
    for r in records:
        name = r["strategy"]
        if len(shapes[name]) > 1:
            name += (
                f" (workers={r.get('workers', 1)}, ps={r.get('ps', 0)}, "
                f"replicas={r['num_replicas']})"
            )
        names.append(name)
    return names


def choose_baseline(results: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The run speed-ups and scaling efficiencies are measured against.

    The `one_device` run when it ran. Without one there is no baseline (`kind`
    `none`): measuring against another multi-replica run gave "efficiencies"
    above 100 % that said nothing about scaling.

    Args:
        results: records carrying `name`, `strategy`, `num_replicas` and
            `examples_per_second`.

    Returns:
        `name`, `strategy`, `kind` (`one_device` or `none`),
        `examples_per_second`, `num_replicas`, `per_replica_examples_per_second`
        (None without a baseline) and a `description` in words.
    """
    single = [r for r in results if spec_for(r["strategy"]).single_device]
    if single:
        base, kind = single[0], "one_device"
        description = (
            f"Speed-up and scaling efficiency are measured against the single-device run "
            f"({base['name']}, {base['examples_per_second']:,.0f} examples/s)."
        )
    else:
        return {
            "name": None,
            "strategy": None,
            "kind": "none",
            "examples_per_second": None,
            "num_replicas": None,
            "per_replica_examples_per_second": None,
            "description": (
                "No one_device run in this comparison, so speed-up and scaling efficiency are "
                "n/a: both are measured against a single device, and no run here shows what "
                "one device does. Add one_device to --strategies to measure them."
            ),
        }
    return {
        "name": base["name"],
        "strategy": base["strategy"],
        "kind": kind,
        "examples_per_second": base["examples_per_second"],
        "num_replicas": base["num_replicas"],
        "per_replica_examples_per_second": base["examples_per_second"] / base["num_replicas"],
        "description": description,
    }


def choose_winner(
    results: list[Mapping[str, Any]], target_accuracy: float, metric: str = ACCURACY
) -> tuple[str | None, str]:
    """Picks the best run and says why, with numbers; or says there is no clear winner.

    Rules, in order: only runs within 1 pp of the best eval accuracy (and at
    least one test example; for another target metric: within 1 % of its best
    test value) compete (equal quality), so quality alone never decides; of
    those, the first to reach the target wins; when none reached it, the
    cheapest wins; when no cost is known, the highest throughput wins. The
    winner is called only when its range on the deciding measure (min to max
    over its repeated runs; one value for one run) does not overlap the
    runner-up's; otherwise there is no clear winner.

    Args:
        results: records enriched by `build_report` (medians and `spread`
            when a strategy ran more than once).
        target_accuracy: the training value of `metric` that counts as done.
        metric: the target metric.

    Returns:
        The winner's name (None without results or without a clear winner)
        and the reason in a sentence.
    """
    if not results:
        return None, "No runs to compare."
    quality = _Quality(results, metric)
    equal = [r for r in results if quality.equal(r)]
    left_out = [r for r in results if r not in equal]
    words = target_words(metric, target_accuracy)
    win, second, because, measure = (
        _first_to_target(equal, words) or _cheapest(equal, words) or _fastest(equal, words)
    )
    dropped = quality.dropped(left_out)
    if second is not None and not _separated(win, second, measure):
        return None, (
            f"No clear winner: {win['name']} leads on {measure.label} (target {words}) with "
            f"{measure.spread(win)}, but {second['name']} has {measure.spread(second)}; "
            f"the ranges overlap, so the difference is within the run-to-run spread."
            f"{dropped}{_one_run_note(results)}"
        )
    clear = ""
    if second is not None and min(runs_per_result([win, second])) > 1:
        clear = (
            f" Clear over the run-to-run spread: {measure.spread(win)} against "
            f"{second['name']}'s {measure.spread(second)}."
        )
    return win["name"], (
        f"{because}, {quality.describe(win)}.{clear}{dropped}{_one_run_note(results)}"
    )


def winner_rule(report_results: list[Mapping[str, Any]], metric: str) -> str:
    """How the winner is decided, in words, for the report's notes."""
    quality = _Quality(report_results, metric)
    runs = runs_per_result(report_results)
    counted = (
        f"each strategy's median over {runs[0]} interleaved runs"
        if runs and min(runs) == max(runs) and runs[0] > 1
        else "one run per strategy"
        if runs and max(runs) == 1
        else "each strategy's median"
    )
    return (
        f"How the winner is decided ({counted}): runs whose {quality.name} is within "
        f"{quality.slack()} of the best count as equal quality, so quality alone never decides; "
        "of those, the first to reach the target wins, else the cheapest, else the fastest. "
        "The winner is called only when its range on that measure (min–max over its runs) "
        "does not overlap the runner-up's; otherwise the report says there is no clear winner."
    )


def _one_run_note(results: list[Mapping[str, Any]]) -> str:
    """A sentence saying the spread was not measured, when any strategy ran once."""
    if min(runs_per_result(results)) > 1:
        return ""
    return (
        " One run per strategy, so the run-to-run spread was not measured: --repeats 3 measures it."
    )


class _Measure:
    """The measure a rule decided on: its record key, direction and display."""

    def __init__(self, key: str, label: str, lower_is_better: bool, show):
        self.key, self.label, self.lower, self.show = key, label, lower_is_better, show

    def spread(self, result: Mapping[str, Any]) -> str:
        """`10.2 s (9.8–10.9 s over 3 runs)`, or the one value of a single run."""
        value = result.get(self.key)
        shown = "not reached" if value is None else self.show(value)
        spread = (result.get("spread") or {}).get(self.key)
        if not spread or spread["n"] < 2:
            return f"{shown} (1 run)"
        low, high = (
            "not reached" if spread[k] is None else self.show(spread[k]) for k in ("min", "max")
        )
        return f"median {shown} ({low} to {high} over {spread['n']} runs)"


_TIME = _Measure("time_to_target_accuracy_s", "time to target", True, lambda v: f"{v:.1f} s")
_COST = _Measure("estimated_cost_usd", "estimated cost", True, usd)
_SPEED = _Measure("examples_per_second", "throughput", False, lambda v: f"{v:,.0f} examples/s")


def _separated(win: Mapping[str, Any], second: Mapping[str, Any], measure: _Measure) -> bool:
    """Whether the winner's range on `measure` is wholly better than the runner-up's."""
    win_low, win_high = value_range(win, measure.key)
    second_low, second_high = value_range(second, measure.key)
    if measure.lower:
        return win_high < second_low
    return win_low > second_high  # higher is better: the winner's worst beats their best


class _Quality:
    """Equal quality on the target metric's test value, in its direction."""

    def __init__(self, results: list[Mapping[str, Any]], metric: str):
        self.metric = metric
        self.lower = lower_is_better(metric)
        values = [v for v in (eval_quality(r, metric) for r in results) if v is not None]
        self.best = (min if self.lower else max)(values) if values else None
        self.examples = _test_examples(results)
        self.name = "eval accuracy" if metric == ACCURACY else f"test {metric}"

    def _show(self, value: float) -> str:
        return pct(value) if self.metric == ACCURACY else f"{value:.4g}"

    def _tolerance(self) -> float:
        if self.metric != ACCURACY:
            return EQUAL_QUALITY * abs(self.best or 0.0)
        # Never less than one test example: 1 of 359 is a tie, not a better model.
        return max(EQUAL_QUALITY, 1.0 / self.examples) if self.examples else EQUAL_QUALITY

    def slack(self) -> str:
        """The tolerance in words: `1 pp (3.6 of 359 test examples)`, `1 %`."""
        if self.metric != ACCURACY:
            return "1 %"
        words = f"{100 * self._tolerance():.3g} pp"
        if self.examples:
            words += f" ({self._tolerance() * self.examples:.3g} of {self.examples} test examples)"
        return words

    def equal(self, run: Mapping[str, Any]) -> bool:
        value = eval_quality(run, self.metric)
        if self.best is None or value is None:
            return self.best is None
        gap = value - self.best if self.lower else self.best - value
        return gap <= self._tolerance() + 1e-9

    def describe(self, run: Mapping[str, Any]) -> str:
        """The winner's test value in words, against the best of all runs."""
        value = eval_quality(run, self.metric)
        if value is None or self.best is None:
            return f"no {self.name} to compare"
        if value == self.best:
            return f"with the best {self.name}, {self._show(self.best)}"
        return (
            f"with {self.name} {self._show(value)}, within {self.slack()} of the best "
            f"({self._show(self.best)}), which counts as equal quality"
        )

    def dropped(self, left_out: list[Mapping[str, Any]]) -> str:
        """A sentence naming the runs too far from the best to compete; empty when none."""
        if not left_out:
            return ""
        return (
            " "
            + ", ".join(
                f"{r['name']} ({self._show(eval_quality(r, self.metric))})" for r in left_out
            )
            + f" fell more than {self.slack()} short and did not compete."
        )


def _test_examples(results: list[Mapping[str, Any]]) -> int | None:
    """The test examples each run was evaluated on (its confusion matrix's total), if known."""
    totals = [
        sum(sum(row) for row in r["confusion_matrix"]) for r in results if r.get("confusion_matrix")
    ]
    return min(totals) if totals else None


_Decision = tuple[Mapping[str, Any], Mapping[str, Any] | None, str, _Measure]


def _first_to_target(equal: list[Mapping[str, Any]], target: str) -> _Decision | None:
    """The run that reached the target first, ahead of the runner-up by how much.

    Args:
        equal: the runs of equal quality.
        target: the target in words (`target_words`).

    Returns:
        The winner, the runner-up (None alone), the reason without its quality
        and the measure; None when no run reached the target.
    """
    ordered = sorted(
        equal,
        key=lambda r: (
            math.inf if r[_TIME.key] is None else r[_TIME.key],
            -r["examples_per_second"],
        ),
    )
    if ordered[0][_TIME.key] is None:
        return None
    win = ordered[0]
    second = ordered[1] if len(ordered) > 1 else None
    reason = (
        f"{win['name']} reached the target {target} "
        f"first, after {win['time_to_target_accuracy_s']:.1f} s"
    )
    if second is not None and second[_TIME.key] is not None:
        ratio = second["time_to_target_accuracy_s"] / max(win["time_to_target_accuracy_s"], 1e-9)
        reason += (
            f", {ratio:.2f}× sooner than {second['name']} "
            f"({second['time_to_target_accuracy_s']:.1f} s)"
        )
    return win, second, reason, _TIME


def _cheapest(equal: list[Mapping[str, Any]], target: str) -> _Decision | None:
    """The run with the lowest estimated cost, against the next cheapest.

    Args:
        equal: the runs of equal quality; none reached the target.
        target: the target in words (`target_words`).

    Returns:
        The winner, the runner-up, the reason without its quality and the
        measure; None when no run could be priced.
    """
    priced = sorted(
        (r for r in equal if r["estimated_cost_usd"] is not None),
        key=lambda r: r["estimated_cost_usd"],
    )
    if not priced:
        return None
    win = priced[0]
    second = priced[1] if len(priced) > 1 else None
    reason = (
        f"No run of equal quality reached the target {target}, so the cheapest wins: "
        f"{win['name']} at "
        f"{usd(win['estimated_cost_usd'])}"
    )
    if second is not None:
        reason += f" against {usd(second['estimated_cost_usd'])} for {second['name']}"
    return win, second, reason, _COST


def _fastest(equal: list[Mapping[str, Any]], target: str) -> _Decision:
    """The run with the highest throughput, the rule of last resort.

    Args:
        equal: the runs of equal quality (at least one); none reached the
            target and none could be priced.
        target: the target in words (`target_words`).

    Returns:
        The winner, the runner-up, the reason without its quality and the measure.
    """
    ordered = sorted(equal, key=lambda r: -r["examples_per_second"])
    win = ordered[0]
    reason = (
        f"No run of equal quality reached the target {target} "
        "and none could be priced, so the highest throughput wins: "
        f"{win['name']} at {win['examples_per_second']:,.0f} examples/s"
    )
    return win, ordered[1] if len(ordered) > 1 else None, reason, _SPEED


def build_report(
    results: list[dict],
    *,
    target_accuracy: float = 0.9,
    target_metric: str = ACCURACY,
    prices: PriceTable | None = None,
    recommendation: dict | None = None,
    generated_at: str | None = None,
) -> dict:
    """Builds the content of `comparison.json` from `metrics.json` records.

    Records of the same strategy and cluster shape are repeated runs of it
    (`strategist compare --repeats N`): the report shows each strategy once,
    with the medians of its runs and their spread.

    Args:
        results: one `metrics.json` record per run; not modified.
        target_accuracy: the training value of `target_metric` that counts as
            "trained" for `time_to_target_accuracy_s` and the winner (0-1 for
            accuracy).
        target_metric: the metric the target is on (`--target-metric`):
            `accuracy` or any metric the runs recorded per epoch (`loss`,
            `mae`, a compiled metric); losses and errors are better lower.
        prices: price table for `estimated_cost_usd`; the bundled one by default.
        recommendation: what `strategist select` would have chosen (its
            `--json` output), passed through.
        generated_at: ISO timestamp to record; now (UTC) by default.

    Returns:
        A JSON-serialisable dict: `results` (one per strategy and shape: the
        record of its median run plus `name`, `speedup`, `scaling_efficiency`,
        `time_to_target_accuracy_s`, `seconds_per_epoch`, `eval_quality`,
        `estimated_cost_usd`, `cost_usd_per_hour`, `priced_as`, `cost_note`,
        `repeats` and `spread`, the measures being medians over its runs),
        `baseline`, `measured_on` (the hardware, in words, and its runs),
        `rehearsal_note` (None unless a run was a local CPU rehearsal),
        `stall_notes` (one per run a stalled task held up),
        `winner` (None when no winner is clear), `winner_reason`,
        `winner_rule`, `repeats` (runs per strategy), `target_accuracy`,
        `target_metric`, `equal_quality_tolerance`, `recommendation`,
        `prices`, `prices_as_of`, `dataset`, `model` and `generated_at`.

    Raises:
        ReportError: when a record lacks a required field, or the target is
            not between 0 and 1.
    """
    if not is_number(target_accuracy) or (
        target_metric == ACCURACY and not 0 < target_accuracy <= 1
    ):
        raise ReportError(f"target accuracy must be in (0, 1], got {target_accuracy!r}")
    prices = prices if prices is not None else load_prices()
    runs = _named_records(results)
    for run in runs:
        _add_run_derived(run, target_accuracy, target_metric, prices)
    quality = "eval_accuracy" if target_metric == ACCURACY else f"eval_metrics.{target_metric}"
    records = [combine(group, quality) for group in group_runs(runs)]
    baseline = choose_baseline(records) if records else None
    for r in records:
        _add_scaling(r, baseline)

    winner, reason = choose_winner(records, target_accuracy, target_metric)
    if generated_at is None:
        generated_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    counts = runs_per_result(records)
    return {
        "generated_at": generated_at,
        "dataset": _common(records, "dataset"),
        "model": _common(records, "model"),
        "target_accuracy": target_accuracy,
        "target_metric": target_metric,
        "equal_quality_tolerance": EQUAL_QUALITY,
        "repeats": max(counts) if counts else 0,
        "baseline": baseline,
        "measured_on": measured_on(records),
        "rehearsal_note": rehearsal_note(records),
        "stall_notes": stall_notes(runs),
        "winner": winner,
        "winner_reason": reason,
        "winner_rule": winner_rule(records, target_metric) if records else None,
        "recommendation": recommendation,
        "prices_as_of": prices.as_of,
        "prices": prices.describe(),
        "results": records,
    }


def stall_notes(runs: list[Mapping[str, Any]]) -> list[str]:
    """One sentence per run that a stalled task held up: its numbers are not clean.

    A stall under `parameter_server` may not lengthen any epoch (the other
    workers carry it), so the record's `stalls` (written by the local launcher),
    not the epoch times, say whether a run was healthy.

    Args:
        runs: every run's record with its `name`, repeats included.
    """
    notes = []
    for run in runs:
        stalls = run.get("stalls") or []
        if stalls:
            what = "; ".join(
                f"{s['task']} for {s['seconds']:.1f} s in epoch {s['epoch']} ({s['how']})"
                for s in stalls
            )
            notes.append(f"{run['name']}: not a clean measurement: stalled by {what}.")
    return notes


def _named_records(results: list[dict]) -> list[dict]:
    """Checked, JSON-safe copies of the records in strategy order, each with its `name`.

    The sort is stable, so a strategy's repeated runs keep the order they ran in.

    Raises:
        ReportError: when a record lacks a required field.
    """
    parsed = [_parse_record(record, index) for index, record in enumerate(results)]
    order = {name: i for i, name in enumerate(STRATEGIES)}
    records = sorted(
        (finite(json.loads(json.dumps(r, default=str))) for r in parsed),
        key=lambda r: order.get(r["strategy"], len(order)),
    )
    for record, name in zip(records, _names(records), strict=True):
        record["name"] = name
    return records


def _add_run_derived(
    record: dict, target_accuracy: float, target_metric: str, prices: PriceTable
) -> None:
    """Adds one run's time to target, test quality and cost."""
    record["time_to_target_accuracy_s"] = round_or_none(
        time_to_target(record, target_accuracy, target_metric), 3
    )
    record["eval_quality"] = eval_quality(record, target_metric)
    cost = estimate_cost(record, prices)
    record["estimated_cost_usd"] = cost.usd
    record["cost_usd_per_hour"] = round_or_none(cost.usd_per_hour, 6)
    record["priced_as"] = cost.priced_as
    record["cost_note"] = cost.note


def _add_scaling(record: dict, baseline: Mapping[str, Any] | None) -> None:
    """Adds speed-up and scaling efficiency of a strategy's median throughput."""
    speedup = efficiency = None
    if baseline and (baseline["examples_per_second"] or 0) > 0:
        speedup = record["examples_per_second"] / baseline["examples_per_second"]
        efficiency = (record["examples_per_second"] / record["num_replicas"]) / baseline[
            "per_replica_examples_per_second"
        ]
    record["speedup"] = round_or_none(speedup, 4)
    record["scaling_efficiency"] = round_or_none(efficiency, 4)


def _common(records: list[Mapping[str, Any]], key: str) -> Any:
    """The value of `key` shared by every record, or None when they differ."""
    values = {json.dumps(r.get(key)) for r in records}
    return records[0].get(key) if len(values) == 1 and records else None
