"""Repeated runs of one strategy: grouped, summarised by their median and spread.

`strategist compare --repeats N` runs every strategy N times, interleaved, so
slow drift of the machine hits every strategy alike. The report shows each
strategy once: its numbers are the medians of its runs, and `spread` keeps the
minimum, maximum and every value of the measures the winner can be decided on,
so the winner is called only when the best and the runner-up do not overlap.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Mapping
from typing import Any

from components.core.comparison.values import round_or_none

# The measures whose spread the report shows: record key -> decimals kept.
SPREAD_KEYS: dict[str, int | None] = {
    "seconds_per_epoch": 3,
    "examples_per_second": 3,
    "time_to_target_s": 3,
    "eval_quality": None,
    "estimated_cost_usd": None,  # as estimated (to the micro-dollar)
}


def run_key(record: Mapping[str, Any]) -> tuple:
    """What makes two records repeats of one run: the strategy and the cluster shape."""
    return (
        record["strategy"],
        record.get("workers", 1),
        record.get("ps", 0),
        record["num_replicas"],
    )


def group_runs(records: list[dict]) -> list[list[dict]]:
    """Records grouped by `run_key`, groups in the order of their first record."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(run_key(record), []).append(record)
    return list(groups.values())


def seconds_per_epoch(record: Mapping[str, Any]) -> float | None:
    """Wall-clock seconds per epoch: `wall_seconds` over the epochs run (None without them)."""
    epochs = len(record.get("epoch_seconds") or []) or record.get("epochs")
    wall = record.get("wall_seconds")
    if not epochs or wall is None:
        return None
    return float(wall) / epochs


def _sort_key(value: float | None) -> float:
    """None (not reached, not priced) sorts after every number."""
    return math.inf if value is None else value


def summarise(values: list[float | None], digits: int | None) -> dict[str, Any]:
    """The median, minimum and maximum of one measure over repeated runs.

    None stands for "not reached" (or not known) and counts as worse than any
    number, so a median or bound that lands on it is None.

    Args:
        values: one value per run, in run order.
        digits: decimals to round to; None keeps the values as they are.

    Returns:
        `median`, `min`, `max`, `n` and `values`.
    """
    ordered = sorted(_sort_key(v) for v in values)
    middle = statistics.median(ordered) if ordered else math.inf

    def shown(value: float | None) -> float | None:
        if value is None or math.isinf(value):
            return None
        return value if digits is None else round_or_none(value, digits)

    return {
        "median": shown(middle),
        "min": shown(ordered[0]) if ordered else None,
        "max": shown(ordered[-1]) if ordered else None,
        "n": len(values),
        "values": [shown(v) for v in values],
    }


def combine(runs: list[dict], quality: str) -> dict:
    """One strategy's repeated runs as one result: medians, with their spread.

    The result is a copy of the run with the median wall-clock per epoch (its
    history and phases are what the plots show), whose measures are replaced by
    the medians over all runs.

    Args:
        runs: the strategy's runs, each with `time_to_target_s`,
            `estimated_cost_usd` and `eval_quality` already derived.
        quality: the record key of the test metric the winner is judged on
            (`eval_accuracy`, or `eval_metrics.<metric>`).

    Returns:
        The result, with `repeats` (N) and `spread` (`SPREAD_KEYS` -> `summarise`).
    """
    for run in runs:
        run["seconds_per_epoch"] = round_or_none(seconds_per_epoch(run), 3)
    by_pace = sorted(runs, key=lambda r: _sort_key(r["seconds_per_epoch"]))
    result = copy.deepcopy(by_pace[(len(by_pace) - 1) // 2])
    spread = {
        key: summarise([r.get(key) for r in runs], digits) for key, digits in SPREAD_KEYS.items()
    }
    for key, summary in spread.items():
        result[key] = summary["median"]
    walls = summarise([r.get("wall_seconds") for r in runs], 3)
    result["wall_seconds"] = walls["median"]
    _set_quality(result, quality, spread["eval_quality"]["median"])
    result["repeats"] = len(runs)
    result["spread"] = spread
    return result


def _set_quality(result: dict, quality: str, value: float | None) -> None:
    """Writes the median test value where the report reads it (`eval_accuracy`, `eval_metrics`)."""
    if quality == "eval_accuracy":
        result["eval_accuracy"] = value
    else:
        metric = quality.split(".", 1)[1]
        result.setdefault("eval_metrics", {})[metric] = value
        if metric == "loss":
            result["eval_loss"] = value


def value_range(result: Mapping[str, Any], key: str) -> tuple[float, float]:
    """The (min, max) of `key` over a result's runs; a one-run result's value twice.

    None (not reached, not priced) counts as infinitely bad for a measure
    where lower is better.
    """
    spread = (result.get("spread") or {}).get(key)
    if spread:
        low, high = spread["min"], spread["max"]
    else:
        low = high = result.get(key)
    return _sort_key(low), _sort_key(high)


def runs_per_result(results: list[Mapping[str, Any]]) -> list[int]:
    """How many runs each result summarises (1 for a result without `repeats`)."""
    return [int(r.get("repeats") or 1) for r in results]
