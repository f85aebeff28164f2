"""The report: derived numbers per run, the baseline, the winner and why.

`build_report` turns the `metrics.json` records of several training runs into
the content of `comparison.json`: each record gains its speed-up and scaling
efficiency against a baseline run, the wall-clock time it took to reach a
target value and an estimated cost; `verdict.decide` names the winner, or
says none is clear, with the reason in plain words.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

from components.core.comparison.errors import ReportError
from components.core.comparison.failures import split_runs
from components.core.comparison.measured_on import measured_on, rehearsal_note
from components.core.comparison.pricing import Capacity, PriceTable, estimate_cost, load_prices
from components.core.comparison.repeats import combine, group_runs, run_key, runs_per_result
from components.core.comparison.values import finite, is_number, pct, round_or_none
from components.core.comparison.verdict import (
    ACCURACY,
    CONFIDENCE,
    decide,
    eval_quality,
    winner_rule,
)
from components.core.config import STRATEGIES, ConfigError
from components.core.evaluation import lower_is_better
from components.core.run_metrics import RunMetrics
from components.core.strategy_spec import spec_for


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


def build_report(
    results: list[dict],
    *,
    target_value: float = 0.9,
    target_metric: str = ACCURACY,
    prices: PriceTable | None = None,
    capacity: Capacity | None = None,
    recommendation: dict | None = None,
    generated_at: str | None = None,
) -> dict:
    """Builds the content of `comparison.json` from `metrics.json` records.

    Records of the same strategy and cluster shape are repeated runs of it
    (`strategist compare --repeats N`): the report shows each strategy once,
    with the medians of its runs and their spread.

    Args:
        results: one `metrics.json` record per run, or a `FailedRun`'s record
            for a run that failed or diverged; not modified.
        target_value: the training value of `target_metric` that counts as
            "trained" for `time_to_target_s` and the winner (0-1 for
            accuracy).
        target_metric: the metric the target is on (`--target-metric`):
            `accuracy` or any metric the runs recorded per epoch (`loss`,
            `mae`, a compiled metric); losses and errors are better lower.
        prices: price table for `estimated_cost_usd`; the bundled one by default.
        capacity: what the runs are priced on (`compare --preemptible`,
            `--preemptions-per-machine-hour`); on demand by default.
        recommendation: what `strategist select` would have chosen (its
            `--json` output), passed through.
        generated_at: ISO timestamp to record; now (UTC) by default.

    Returns:
        A JSON-serialisable dict: `results` (one per strategy and shape: the
        record of its median run plus `name`, `speedup`, `scaling_efficiency`,
        `time_to_target_s`, `seconds_per_epoch`, `eval_quality`,
        `estimated_cost_usd`, `cost_usd_per_hour`, `priced_as`, `priced_on`
        (`spot` or `on-demand`), `preemption` (on Spot: the expected preemptions,
        what each costs and their share of `estimated_cost_usd`),
        `cost_usd_per_million_examples`, `cost_note`, `repeats` and `spread`,
        the measures being medians over its runs),
        `baseline`, `measured_on` (the hardware, in words, and its runs),
        `rehearsal_note` (None unless a run was a local CPU rehearsal),
        `stall_notes` (one per run a stalled task held up),
        `winner` (None when no winner is clear), `winner_reason`,
        `winner_line` (one line), `decided_by`, `runner_up`,
        `speedup_over_runner_up`, `needed_speedup` (`verdict.decide`),
        `winner_rule`, `repeats` (runs per strategy), `failed` (per strategy
        whose training failed or diverged: how, and its error line; never in
        `results`, `failures.split_runs`), `target_value`,
        `target_metric`, `equal_quality_confidence`, `recommendation`,
        `prices`, `prices_as_of`, `capacity` (`Capacity.describe`), `dataset`,
        `model` and `generated_at`.

    Raises:
        ReportError: when a record lacks a required field, or the target is
            not between 0 and 1.
    """
    if not is_number(target_value) or (target_metric == ACCURACY and not 0 < target_value <= 1):
        raise ReportError(f"target accuracy must be in (0, 1], got {target_value!r}")
    prices = prices if prices is not None else load_prices()
    capacity = capacity or Capacity()
    finished, failed = split_runs(results)
    runs = _named_records(finished)
    for run in runs:
        _add_run_derived(run, target_value, target_metric, prices, capacity)
    quality = "eval_accuracy" if target_metric == ACCURACY else f"eval_metrics.{target_metric}"
    records = [combine(group, quality) for group in group_runs(runs)]
    baseline = choose_baseline(records) if records else None
    for r in records:
        _add_scaling(r, baseline)

    verdict = decide(records, target_words(target_metric, target_value), target_metric)
    if generated_at is None:
        generated_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    counts = runs_per_result(records)
    return {
        "generated_at": generated_at,
        "dataset": _common(records, "dataset"),
        "model": _common(records, "model"),
        "target_value": target_value,
        "target_metric": target_metric,
        "equal_quality_confidence": CONFIDENCE,
        "repeats": max(counts) if counts else 0,
        "baseline": baseline,
        "measured_on": measured_on(records),
        "rehearsal_note": rehearsal_note(records),
        "stall_notes": stall_notes(runs),
        "winner": verdict["winner"],
        "winner_reason": verdict["reason"],
        "winner_line": verdict["line"],
        "decided_by": verdict["decided_by"],
        "runner_up": verdict["runner_up"],
        "speedup_over_runner_up": verdict["speedup_over_runner_up"],
        "needed_speedup": verdict["needed_speedup"],
        "winner_rule": winner_rule(records, target_metric) if records else None,
        "recommendation": recommendation,
        "prices_as_of": prices.as_of,
        "prices": prices.describe(),
        "capacity": capacity.describe(),
        "results": records,
        "failed": failed,
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
    record: dict,
    target_value: float,
    target_metric: str,
    prices: PriceTable,
    capacity: Capacity,
) -> None:
    """Adds one run's time to target, test quality and cost."""
    record["time_to_target_s"] = round_or_none(
        time_to_target(record, target_value, target_metric), 3
    )
    record["eval_quality"] = eval_quality(record, target_metric)
    cost = estimate_cost(record, prices, capacity)
    record["estimated_cost_usd"] = cost.usd
    record["cost_usd_per_hour"] = round_or_none(cost.usd_per_hour, 6)
    record["priced_as"] = cost.priced_as
    record["priced_on"] = cost.priced_on
    record["preemption"] = cost.preemption
    record["cost_usd_per_million_examples"] = _per_million_examples(cost.usd, record)
    record["cost_note"] = cost.note


def _per_million_examples(usd: float | None, record: Mapping[str, Any]) -> float | None:
    """A run's cost over the examples its epochs trained on, per million."""
    examples = record.get("examples_per_epoch")
    epochs = len(record.get("epoch_seconds") or [])
    if usd is None or not is_number(examples) or examples <= 0 or not epochs:
        return None
    return usd / (examples * epochs) * 1e6


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
