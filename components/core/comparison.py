"""Comparison of strategy runs: the report, its pages and plots, and the CI gate.

`build_report` turns the `metrics.json` records of several training runs into
the content of `comparison.json`: each record gains its speed-up and scaling
efficiency against a baseline run, the wall-clock time it took to reach a
target accuracy and an estimated cost from an editable price table; a winner
is chosen with a reason in plain words. `write_report` writes that content as
JSON, a self-contained HTML page (plots embedded, no external resources, so
the KFP UI's HTML viewer shows it), a Markdown summary and PNG plots, each file
atomically. `gate` compares a report with a committed baseline and lists what
regressed.

Pure Python and matplotlib (Agg canvas, no pyplot); never imports TensorFlow
or KFP.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.core import atomic
from components.core.config import STRATEGIES, ConfigError
from components.core.hardware import GPUS

DEFAULT_PRICES_PATH = Path(__file__).parent / "data" / "prices.json"

# Runs whose eval accuracy is within this of the best count as equal quality.
EQUAL_QUALITY = 0.01

REPORT_JSON = "comparison.json"
REPORT_HTML = "report.html"
SUMMARY_MD = "summary.md"
PLOT_FILES = ("throughput.png", "loss_vs_time.png", "accuracy_vs_time.png", "epoch_times.png")

_STRATEGY_COLORS = {
    "one_device": "#6b7280",
    "mirrored": "#2563eb",
    "multi_worker_mirrored": "#ea580c",
    "parameter_server": "#16a34a",
}
_EXTRA_COLORS = ("#9333ea", "#db2777", "#0891b2", "#ca8a04", "#4b5563")


class ReportError(ConfigError):
    """A report, baseline, metrics record or price table cannot be used.

    The message says which file or field is wrong and what to do. It is a
    `ConfigError`, so the `strategist` command exits 2 on it.
    """


# --------------------------------------------------------------------------- prices


@dataclass(frozen=True)
class PriceTable:
    """Hourly prices of machine types and accelerators.

    Attributes:
        as_of: the date the prices were taken (ISO format).
        source: where they were taken from.
        machine_types: machine type -> USD per hour for one machine.
        bundled_gpus: machine type -> GPUs included in its price (a2, g2, ...).
        accelerators: GPU name as users type it (`t4`) -> USD per hour for one GPU.
        default_machine_type: what a local run is priced as when its hardware
            record names no machine type.
        currency: currency of all prices.
        caveat: what the prices leave out.
        convention: how local rehearsal runs are priced, in words.
    """

    as_of: str
    source: str
    machine_types: Mapping[str, float]
    bundled_gpus: Mapping[str, int] = field(default_factory=dict)
    accelerators: Mapping[str, float] = field(default_factory=dict)
    default_machine_type: str = "n1-standard-4"
    currency: str = "USD"
    caveat: str = ""
    convention: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], origin: str = "price table") -> PriceTable:
        """Builds a table from the layout of `data/prices.json`.

        Raises:
            ReportError: when a section or price is missing or not a number.
        """
        if not isinstance(raw, Mapping):
            raise ReportError(f"{origin}: expected a JSON object")
        for key in ("as_of", "source", "machine_types"):
            if key not in raw:
                raise ReportError(f"{origin}: missing {key!r}")
        machine_types: dict[str, float] = {}
        bundled: dict[str, int] = {}
        for name, entry in dict(raw["machine_types"]).items():
            machine_types[name] = _price(entry, f"{origin}: machine type {name!r}")
            if isinstance(entry, Mapping) and entry.get("bundled_gpus"):
                bundled[name] = int(entry["bundled_gpus"])
        accelerators = {
            name.lower(): _price(entry, f"{origin}: accelerator {name!r}")
            for name, entry in dict(raw.get("accelerators", {})).items()
        }
        local = dict(raw.get("local_rehearsal", {}))
        default = str(local.get("default_machine_type", "n1-standard-4"))
        if default not in machine_types:
            raise ReportError(f"{origin}: default machine type {default!r} has no price")
        return cls(
            as_of=str(raw["as_of"]),
            source=str(raw["source"]),
            machine_types=machine_types,
            bundled_gpus=bundled,
            accelerators=accelerators,
            default_machine_type=default,
            currency=str(raw.get("currency", "USD")),
            caveat=str(raw.get("caveat", "")),
            convention=str(local.get("convention", "")),
        )

    def accelerator_price(self, gpu: str) -> float | None:
        """USD per hour for one GPU, by user name (`t4`) or Vertex enum (`NVIDIA_TESLA_T4`)."""
        key = gpu.lower()
        if key in self.accelerators:
            return self.accelerators[key]
        for spec in GPUS.values():
            if key in (spec.vertex_accelerator.lower(), spec.gke_accelerator.lower()):
                return self.accelerators.get(spec.name)
        return None

    def describe(self) -> dict[str, Any]:
        """What a report records about the prices it used."""
        return {
            "as_of": self.as_of,
            "source": self.source,
            "currency": self.currency,
            "default_machine_type": self.default_machine_type,
            "convention": self.convention,
            "caveat": self.caveat,
        }


def _price(entry: Any, what: str) -> float:
    value = entry.get("usd_per_hour") if isinstance(entry, Mapping) else entry
    if not _is_number(value) or value < 0:
        raise ReportError(f"{what}: price must be a number of USD per hour, got {value!r}")
    return float(value)


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """Loads a price table; the bundled `components/core/data/prices.json` by default.

    Args:
        path: a JSON file in the layout of the bundled one.

    Returns:
        The price table.

    Raises:
        ReportError: when the file cannot be read or is not a valid price table.
    """
    target = Path(path) if path is not None else DEFAULT_PRICES_PATH
    return PriceTable.from_dict(_read_json(target, "price table"), origin=str(target))


@dataclass(frozen=True)
class CostEstimate:
    """The estimated cost of one run.

    Attributes:
        usd: the cost, or None when it cannot be priced.
        usd_per_hour: the hourly price of everything the run used.
        priced_as: what the run was priced as, in words.
        note: why the cost is None, or a remark on how it was estimated.
    """

    usd: float | None
    usd_per_hour: float | None
    priced_as: str
    note: str | None = None


def estimate_cost(record: Mapping[str, Any], prices: PriceTable) -> CostEstimate:
    """Prices one run: machines x hourly price x fit wall time.

    A cloud run is priced as `hardware.machines` machines of
    `hardware.machine_type`. A local run is priced by the local-rehearsal
    convention: one machine per TensorFlow process, of the machine type in its
    hardware record or the table's default CPU machine type. GPUs in the
    hardware record are added at the accelerator price unless the machine type
    bundles them.

    Args:
        record: a `metrics.json` record.
        prices: the price table.

    Returns:
        The estimate; `usd` is None (with a note) for an unknown machine type,
        an unknown GPU or a record without timings.
    """
    hw = record.get("hardware") or {}
    local = (hw.get("platform") or "local") == "local"
    count_key = "processes" if local else "machines"
    count = hw.get(count_key) or _processes(record)
    machine_type = hw.get("machine_type") or (prices.default_machine_type if local else None)
    if machine_type is None:
        return CostEstimate(None, None, "unknown", "the hardware record names no machine type")
    rate = prices.machine_types.get(machine_type)
    priced_as = f"{count} × {machine_type}"
    if local:
        priced_as += " (local rehearsal: one machine per process)"
    if rate is None:
        return CostEstimate(
            None,
            None,
            priced_as,
            f"machine type {machine_type!r} is not in the price table ({prices.as_of}); "
            "add it to components/core/data/prices.json",
        )
    gpu = hw.get("gpu")
    gpus = int(hw.get("gpus_per_machine") or 0)
    per_machine = rate
    if gpu and gpus and machine_type not in prices.bundled_gpus:
        gpu_rate = prices.accelerator_price(str(gpu))
        priced_as = f"{count} × ({machine_type} + {gpus} × {gpu})"
        if gpu_rate is None:
            return CostEstimate(
                None,
                None,
                priced_as,
                f"GPU {gpu!r} is not in the price table ({prices.as_of}); "
                "add it to components/core/data/prices.json",
            )
        per_machine += gpus * gpu_rate
    hourly = count * per_machine
    seconds = _wall_seconds(record)
    if seconds is None:
        return CostEstimate(None, hourly, priced_as, "the record has no wall time")
    return CostEstimate(hourly * seconds / 3600.0, hourly, priced_as)


def _processes(record: Mapping[str, Any]) -> int:
    strategy = record.get("strategy")
    workers = int(record.get("workers") or 1)
    if strategy in ("one_device", "mirrored"):
        return 1
    if strategy == "parameter_server":
        return 1 + workers + int(record.get("ps") or 0)
    return workers


def _wall_seconds(record: Mapping[str, Any]) -> float | None:
    if _is_number(record.get("wall_seconds")):
        return float(record["wall_seconds"])
    epochs = record.get("epoch_seconds")
    if isinstance(epochs, list) and epochs and all(_is_number(s) for s in epochs):
        return float(sum(epochs))
    return None


# --------------------------------------------------------------------------- report


def time_to_target(record: Mapping[str, Any], target_accuracy: float) -> float | None:
    """Seconds from fit start to the end of the first epoch at or above the target.

    Uses the training accuracy history and `elapsed_at_epoch_end` (or the
    running sum of `epoch_seconds` when that is absent), so it is measured at
    epoch granularity.

    Returns:
        The time, or None when the target was never reached.
    """
    accuracy = _accuracy_history(record)
    elapsed = _elapsed(record)
    for acc, seconds in zip(accuracy, elapsed, strict=False):
        if _is_number(acc) and acc >= target_accuracy:
            return float(seconds)
    return None


def _accuracy_history(record: Mapping[str, Any]) -> list[float]:
    history = record.get("history") or {}
    if "accuracy" in history:
        return list(history["accuracy"])
    for key, values in history.items():
        if key.endswith("accuracy") and not key.startswith("val_"):
            return list(values)
    return []


def _elapsed(record: Mapping[str, Any]) -> list[float]:
    elapsed = record.get("elapsed_at_epoch_end")
    if isinstance(elapsed, list) and elapsed:
        return [float(s) for s in elapsed]
    total, out = 0.0, []
    for seconds in record.get("epoch_seconds") or []:
        total += float(seconds)
        out.append(total)
    return out


_REQUIRED = {
    "strategy": str,
    "num_replicas": int,
    "examples_per_second": float,
    "eval_accuracy": float,
}


def _check_record(record: Any, index: int) -> None:
    if not isinstance(record, Mapping):
        raise ReportError(
            f"result {index}: expected a metrics.json object, got {type(record).__name__}"
        )
    label = record.get("strategy", f"#{index}")
    for key, kind in _REQUIRED.items():
        if key not in record or record[key] is None:
            raise ReportError(f"result {label}: missing {key!r} (is this a metrics.json record?)")
        value = record[key]
        ok = isinstance(value, str) if kind is str else _is_number(value)
        if not ok:
            raise ReportError(f"result {label}: {key!r} must be a {kind.__name__}, got {value!r}")
    if record["num_replicas"] < 1:
        raise ReportError(f"result {label}: 'num_replicas' must be at least 1")
    if record["examples_per_second"] < 0:
        raise ReportError(f"result {label}: 'examples_per_second' must not be negative")


def _names(records: list[Mapping[str, Any]]) -> list[str]:
    """Strategy names, with the cluster shape added where a strategy ran twice."""
    counts: dict[str, int] = {}
    for r in records:
        counts[r["strategy"]] = counts.get(r["strategy"], 0) + 1
    names = []
    for r in records:
        name = r["strategy"]
        if counts[name] > 1:
            name += (
                f" (workers={r.get('workers', 1)}, ps={r.get('ps', 0)}, "
                f"replicas={r['num_replicas']})"
            )
        names.append(name)
    if len(set(names)) != len(names):
        raise ReportError(
            "two results have the same strategy and cluster shape: pass each run once"
        )
    return names


def choose_baseline(results: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The run speed-ups and scaling efficiencies are measured against.

    The `one_device` run when it ran, otherwise the run with the lowest
    throughput per replica.

    Args:
        results: records carrying `name`, `strategy`, `num_replicas` and
            `examples_per_second`.

    Returns:
        `name`, `strategy`, `kind` (`one_device` or `slowest_per_replica`),
        `examples_per_second`, `num_replicas`, `per_replica_examples_per_second`
        and a `description` in words.
    """
    single = [r for r in results if r["strategy"] == "one_device"]
    if single:
        base, kind = single[0], "one_device"
        description = (
            f"Speed-up and scaling efficiency are measured against the single-device run "
            f"({base['name']}, {base['examples_per_second']:,.0f} examples/s)."
        )
    else:
        base = min(results, key=lambda r: r["examples_per_second"] / r["num_replicas"])
        kind = "slowest_per_replica"
        description = (
            f"No one_device run: speed-up and scaling efficiency are measured against the run "
            f"with the lowest throughput per replica ({base['name']}, "
            f"{base['examples_per_second'] / base['num_replicas']:,.0f} examples/s per replica), "
            "so efficiencies are relative to it, not to a single device."
        )
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
    results: list[Mapping[str, Any]], target_accuracy: float
) -> tuple[str | None, str]:
    """Picks the best run and says why, with numbers.

    Rules, in order: only runs within 1 pp of the best eval accuracy compete
    (equal quality); of those, the first to reach the target accuracy wins;
    when none reached it, the cheapest wins; when no cost is known, the
    highest throughput wins.

    Args:
        results: records enriched by `build_report`.
        target_accuracy: the training accuracy that counts as done.

    Returns:
        The winner's name (None without results) and the reason in a sentence.
    """
    if not results:
        return None, "No runs to compare."
    best = max(r["eval_accuracy"] for r in results)
    equal = [r for r in results if r["eval_accuracy"] >= best - EQUAL_QUALITY - 1e-9]
    left_out = [r for r in results if r not in equal]

    def quality(run: Mapping[str, Any]) -> str:
        if run["eval_accuracy"] >= best:
            return f"with the best eval accuracy, {_pct(best)}"
        return (
            f"with eval accuracy {_pct(run['eval_accuracy'])}, within 1 pp of the best "
            f"({_pct(best)}), which counts as equal quality"
        )

    dropped = ""
    if left_out:
        dropped = (
            " "
            + ", ".join(f"{r['name']} ({_pct(r['eval_accuracy'])})" for r in left_out)
            + " fell more than 1 pp short and did not compete."
        )

    reached = sorted(
        (r for r in equal if r["time_to_target_accuracy_s"] is not None),
        key=lambda r: (r["time_to_target_accuracy_s"], -r["examples_per_second"]),
    )
    if reached:
        win = reached[0]
        reason = (
            f"{win['name']} reached the target training accuracy of {_pct(target_accuracy)} "
            f"first, after {win['time_to_target_accuracy_s']:.1f} s"
        )
        if len(reached) > 1:
            second = reached[1]
            ratio = second["time_to_target_accuracy_s"] / max(
                win["time_to_target_accuracy_s"], 1e-9
            )
            reason += (
                f", {ratio:.2f}× sooner than {second['name']} "
                f"({second['time_to_target_accuracy_s']:.1f} s)"
            )
        reason += f", {quality(win)}."
        return win["name"], reason + dropped

    priced = sorted(
        (r for r in equal if r["estimated_cost_usd"] is not None),
        key=lambda r: r["estimated_cost_usd"],
    )
    if priced:
        win = priced[0]
        reason = (
            f"No run of equal quality reached the target training accuracy of "
            f"{_pct(target_accuracy)}, so the cheapest wins: {win['name']} at "
            f"{_usd(win['estimated_cost_usd'])}"
        )
        if len(priced) > 1:
            reason += f" against {_usd(priced[1]['estimated_cost_usd'])} for {priced[1]['name']}"
        reason += f", {quality(win)}."
        return win["name"], reason + dropped

    fastest = sorted(equal, key=lambda r: -r["examples_per_second"])
    win = fastest[0]
    reason = (
        f"No run of equal quality reached the target training accuracy of "
        f"{_pct(target_accuracy)} and none could be priced, so the highest throughput wins: "
        f"{win['name']} at {win['examples_per_second']:,.0f} examples/s, {quality(win)}."
    )
    return win["name"], reason + dropped


def build_report(
    results: list[dict],
    *,
    target_accuracy: float = 0.9,
    prices: PriceTable | None = None,
    recommendation: dict | None = None,
    generated_at: str | None = None,
) -> dict:
    """Builds the content of `comparison.json` from `metrics.json` records.

    Args:
        results: one `metrics.json` record per run; not modified.
        target_accuracy: training accuracy (0-1) that counts as "trained" for
            `time_to_target_accuracy_s` and the winner.
        prices: price table for `estimated_cost_usd`; the bundled one by default.
        recommendation: what `strategist select` would have chosen (its
            `--json` output), passed through.
        generated_at: ISO timestamp to record; now (UTC) by default.

    Returns:
        A JSON-serialisable dict: `results` (each record plus `name`,
        `speedup`, `scaling_efficiency`, `time_to_target_accuracy_s`,
        `estimated_cost_usd`, `cost_usd_per_hour`, `priced_as`, `cost_note`),
        `baseline`, `winner`, `winner_reason`, `target_accuracy`,
        `equal_quality_tolerance`, `recommendation`, `prices`, `prices_as_of`,
        `dataset`, `model` and `generated_at`.

    Raises:
        ReportError: when a record lacks a required field, or the target is
            not between 0 and 1.
    """
    if not _is_number(target_accuracy) or not 0 < target_accuracy <= 1:
        raise ReportError(f"target accuracy must be in (0, 1], got {target_accuracy!r}")
    prices = prices if prices is not None else load_prices()
    for index, record in enumerate(results):
        _check_record(record, index)
    order = {name: i for i, name in enumerate(STRATEGIES)}
    records = sorted(
        (_finite(json.loads(json.dumps(r, default=str))) for r in results),
        key=lambda r: order.get(r["strategy"], len(order)),
    )
    for record, name in zip(records, _names(records), strict=True):
        record["name"] = name

    baseline = choose_baseline(records) if records else None
    for r in records:
        speedup = efficiency = None
        if baseline and baseline["examples_per_second"] > 0:
            speedup = r["examples_per_second"] / baseline["examples_per_second"]
            efficiency = (r["examples_per_second"] / r["num_replicas"]) / baseline[
                "per_replica_examples_per_second"
            ]
        r["speedup"] = _round(speedup, 4)
        r["scaling_efficiency"] = _round(efficiency, 4)
        r["time_to_target_accuracy_s"] = _round(time_to_target(r, target_accuracy), 3)
        cost = estimate_cost(r, prices)
        r["estimated_cost_usd"] = cost.usd
        r["cost_usd_per_hour"] = _round(cost.usd_per_hour, 6)
        r["priced_as"] = cost.priced_as
        r["cost_note"] = cost.note

    winner, reason = choose_winner(records, target_accuracy)
    if generated_at is None:
        generated_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "generated_at": generated_at,
        "dataset": _common(records, "dataset"),
        "model": _common(records, "model"),
        "target_accuracy": target_accuracy,
        "equal_quality_tolerance": EQUAL_QUALITY,
        "baseline": baseline,
        "winner": winner,
        "winner_reason": reason,
        "recommendation": recommendation,
        "prices_as_of": prices.as_of,
        "prices": prices.describe(),
        "results": records,
    }


def _common(records: list[Mapping[str, Any]], key: str) -> Any:
    values = {json.dumps(r.get(key)) for r in records}
    return records[0].get(key) if len(values) == 1 and records else None


# --------------------------------------------------------------------------- plain text


_TEXT_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("name", "Strategy", str),
    ("num_replicas", "Replicas", lambda v: f"{v:d}"),
    ("examples_per_second", "Examples/s", lambda v: f"{v:,.1f}"),
    ("speedup", "Speed-up", lambda v: f"{v:.2f}×"),
    ("scaling_efficiency", "Scaling eff.", lambda v: f"{100 * v:.1f}%"),
    ("time_to_target_accuracy_s", "To target (s)", lambda v: f"{v:.1f}"),
    ("eval_accuracy", "Eval accuracy", lambda v: f"{100 * v:.2f}%"),
    ("eval_loss", "Eval loss", lambda v: f"{v:.4f}"),
    ("wall_seconds", "Wall (s)", lambda v: f"{v:.1f}"),
    ("estimated_cost_usd", "Est. cost", lambda v: _usd(v)),
)

# Decimal places the HTML/Markdown cells show, for checking them against the JSON.
DISPLAY_PRECISION = {
    "num_replicas": 0,
    "examples_per_second": 1,
    "speedup": 2,
    "scaling_efficiency": 3,  # shown as a percentage with one decimal
    "time_to_target_accuracy_s": 1,
    "eval_accuracy": 4,  # shown as a percentage with two decimals
    "eval_loss": 4,
    "wall_seconds": 1,
    "estimated_cost_usd": 6,
}


def _cell(record: Mapping[str, Any], key: str, fmt: Callable[[Any], str]) -> str:
    value = record.get(key)
    if value is None:
        return "not reached" if key == "time_to_target_accuracy_s" else "–"
    return fmt(value)


def _rows(report: Mapping[str, Any]) -> list[list[str]]:
    return [
        [_cell(r, key, fmt) for key, _, fmt in _TEXT_COLUMNS] for r in report.get("results", [])
    ]


def summary_table(report: Mapping[str, Any]) -> str:
    """A plain-text table of the report for terminals, with the winner below it.

    Args:
        report: `build_report` output.

    Returns:
        Lines of aligned columns, the winner and its reason, and the baseline.
    """
    headers = [title for _, title, _ in _TEXT_COLUMNS]
    rows = _rows(report)
    widths = [max(len(x) for x in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        out = [cells[0].ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    lines = [line(headers), "  ".join("-" * w for w in widths)]
    lines += [line(row) for row in rows]
    lines.append("")
    lines.append(f"Winner: {report.get('winner') or '–'}. {report.get('winner_reason', '')}")
    if report.get("baseline"):
        lines.append(report["baseline"]["description"])
    rec = _recommended(report)
    if rec:
        lines.append(f"`strategist select` would have chosen: {rec}.")
    return "\n".join(lines) + "\n"


def summary_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown (a KFP Markdown artifact, a CI job summary).

    Args:
        report: `build_report` output.

    Returns:
        A heading, the winner with its reason, a results table and notes.
    """
    headers = [title for _, title, _ in _TEXT_COLUMNS]
    winner = report.get("winner")
    out = [
        "# Strategy comparison",
        "",
        f"**Winner: {winner or '–'}.** {_md_escape(report.get('winner_reason', ''))}",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|",
    ]
    for r, row in zip(report.get("results", []), _rows(report), strict=True):
        cells = [_md_escape(c) for c in row]
        if r.get("name") == winner:
            cells[0] = f"**{cells[0]}**"
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.extend(f"- {_md_escape(note)}" for note in _notes(report))
    return "\n".join(out) + "\n"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def _recommended(report: Mapping[str, Any]) -> str | None:
    rec = report.get("recommendation")
    if not isinstance(rec, Mapping) or not rec.get("strategy"):
        return None
    return str(rec["strategy"])


def _notes(report: Mapping[str, Any]) -> list[str]:
    notes = []
    if report.get("baseline"):
        notes.append(report["baseline"]["description"])
    notes.append(
        f"Time to target: wall-clock seconds from the start of fit to the end of the first "
        f"epoch whose training accuracy reached {_pct(report.get('target_accuracy', 0))} "
        "(epoch granularity)."
    )
    prices = report.get("prices") or {}
    notes.append(
        f"Estimated cost = hourly price × fit wall time, with prices as of "
        f"{report.get('prices_as_of', '?')}: {prices.get('source', 'source unknown')}"
    )
    if prices.get("convention"):
        notes.append(f"Local runs: {prices['convention']}")
    if prices.get("caveat"):
        notes.append(f"Prices: {prices['caveat']}")
    for r in report.get("results", []):
        if r.get("cost_note"):
            notes.append(f"{r['name']}: cost not estimated: {r['cost_note']}.")
    rec = _recommended(report)
    if rec:
        agree = "agrees with" if rec == report.get("winner") else "differs from"
        notes.append(
            f"`strategist select` would have chosen {rec}, which {agree} the measured winner."
        )
    return notes


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _usd(value: float) -> str:
    return f"${value:.6f}" if value < 1 else f"${value:,.2f}"


# --------------------------------------------------------------------------- plots


def _colors(report: Mapping[str, Any]) -> dict[str, str]:
    colors, extra = {}, iter(_EXTRA_COLORS * 4)
    for r in report.get("results", []):
        colors[r["name"]] = (
            _STRATEGY_COLORS[r["strategy"]]
            if r["strategy"] in _STRATEGY_COLORS and r["name"] == r["strategy"]
            else next(extra)
        )
    return colors


def _figure(height: float = 3.6) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, height), dpi=125, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    return fig, ax


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="white", metadata={"Software": None})
    return buf.getvalue()


def _no_data(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} recorded", ha="center", va="center", transform=ax.transAxes)


def plot_throughput(report: Mapping[str, Any]) -> bytes:
    """Horizontal bars of examples/s per run, labelled with the speed-up; PNG bytes."""
    results = report.get("results", [])
    fig, ax = _figure(max(3.6, 1.4 + 0.55 * len(results)))
    colors = _colors(report)
    names = [r["name"] for r in results][::-1]
    values = [r["examples_per_second"] for r in results][::-1]
    if results:
        bars = ax.barh(names, values, color=[colors[n] for n in names], height=0.6)
        top = max(values) or 1.0
        for bar, r in zip(bars, results[::-1], strict=True):
            label = f"{r['examples_per_second']:,.0f}"
            if r.get("speedup") is not None:
                label += f"  ({r['speedup']:.2f}×)"
            ax.text(
                bar.get_width() + 0.01 * top,
                bar.get_y() + bar.get_height() / 2,
                label,
                va="center",
                fontsize=9,
            )
        ax.set_xlim(0, top * 1.3)
        for tick in ax.get_yticklabels():
            if tick.get_text() == report.get("winner"):
                tick.set_fontweight("bold")
    else:
        _no_data(ax, "throughput")
    ax.grid(False, axis="y")
    ax.set_xlabel("examples per second (median epoch after the first)")
    ax.set_title("Training throughput (speed-up vs baseline)", loc="left", fontsize=11)
    return _png(fig)


def _plot_history(report: Mapping[str, Any], metric: str, title: str, ylabel: str) -> bytes:
    fig, ax = _figure()
    colors = _colors(report)
    plotted = False
    for r in report.get("results", []):
        values = (r.get("history") or {}).get(metric) or (
            _accuracy_history(r) if metric == "accuracy" else []
        )
        elapsed = _elapsed(r)
        n = min(len(values), len(elapsed))
        if not n:
            continue
        ax.plot(
            elapsed[:n],
            values[:n],
            marker="o",
            markersize=4,
            linewidth=1.8,
            color=colors[r["name"]],
            label=r["name"],
        )
        plotted = True
        if metric == "accuracy" and r.get("time_to_target_accuracy_s") is not None:
            t = r["time_to_target_accuracy_s"]
            y = values[elapsed.index(t)] if t in elapsed else report["target_accuracy"]
            ax.plot(
                [t],
                [y],
                marker="*",
                markersize=13,
                color=colors[r["name"]],
                markeredgecolor="black",
                markeredgewidth=0.6,
                linestyle="none",
            )
    if metric == "accuracy" and report.get("target_accuracy") is not None:
        ax.axhline(
            report["target_accuracy"],
            color="#111827",
            linestyle="--",
            linewidth=1,
            label=f"target {_pct(report['target_accuracy'])} (★ = reached)",
        )
    if plotted:
        ax.legend(fontsize=8, frameon=False)
    else:
        _no_data(ax, metric)
    ax.set_xlim(left=0)
    ax.set_xlabel("wall-clock seconds since fit start")
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11)
    return _png(fig)


def plot_loss_vs_time(report: Mapping[str, Any]) -> bytes:
    """Training loss at each epoch end against wall-clock time; PNG bytes."""
    return _plot_history(report, "loss", "Training loss against wall-clock time", "training loss")


def plot_accuracy_vs_time(report: Mapping[str, Any]) -> bytes:
    """Training accuracy against wall-clock time with the target line; PNG bytes."""
    return _plot_history(
        report, "accuracy", "Training accuracy against wall-clock time", "training accuracy"
    )


def plot_epoch_times(report: Mapping[str, Any]) -> bytes:
    """Grouped bars of seconds per epoch for each run; PNG bytes."""
    fig, ax = _figure()
    colors = _colors(report)
    results = [r for r in report.get("results", []) if r.get("epoch_seconds")]
    if results:
        width = 0.8 / len(results)
        for i, r in enumerate(results):
            xs = [
                e + 1 + (i - (len(results) - 1) / 2) * width for e in range(len(r["epoch_seconds"]))
            ]
            ax.bar(xs, r["epoch_seconds"], width=width, color=colors[r["name"]], label=r["name"])
        epochs = max(len(r["epoch_seconds"]) for r in results)
        ax.set_xticks(range(1, epochs + 1))
        ax.legend(fontsize=8, frameon=False)
    else:
        _no_data(ax, "epoch times")
    ax.grid(False, axis="x")
    ax.set_xlabel("epoch (the first includes tracing and warm-up)")
    ax.set_ylabel("seconds")
    ax.set_title("Seconds per epoch", loc="left", fontsize=11)
    return _png(fig)


def render_plots(report: Mapping[str, Any]) -> dict[str, bytes]:
    """All plots of a report, file name -> PNG bytes (names in `PLOT_FILES`)."""
    return {
        "throughput.png": plot_throughput(report),
        "loss_vs_time.png": plot_loss_vs_time(report),
        "accuracy_vs_time.png": plot_accuracy_vs_time(report),
        "epoch_times.png": plot_epoch_times(report),
    }


# --------------------------------------------------------------------------- HTML

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f3f4f6; color: #111827;
  font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 28px 32px 40px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 10px; }
.meta { color: #4b5563; margin: 0 0 18px; }
.callouts { display: grid; grid-template-columns: 2fr 1fr; gap: 16px; }
.card { background: #fff; border: 1px solid #e5e7eb; border-radius: 10px; padding: 16px 20px; }
.winner { border-left: 6px solid #16a34a; }
.winner .label, .rec .label { font-size: 12px; letter-spacing: .06em; text-transform: uppercase;
  color: #4b5563; margin: 0; }
.winner .name { font-size: 24px; font-weight: 700; margin: 2px 0 6px; }
.rec .name { font-size: 20px; font-weight: 600; margin: 2px 0 6px; }
.agree { color: #166534; } .differ { color: #9a3412; }
.table-wrap { background: #fff; border: 1px solid #e5e7eb; border-radius: 10px; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 9px 12px; border-bottom: 1px solid #e5e7eb; white-space: nowrap; }
th { background: #f9fafb; font-size: 13px; color: #374151; text-align: right; }
td { text-align: right; }
th:first-child, td:first-child { text-align: left; }
tbody tr:last-child td { border-bottom: none; }
tr.is-winner td { background: #f0fdf4; font-weight: 600; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 8px; }
.muted { color: #9ca3af; font-weight: 400; }
.plots { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
figure { margin: 0; background: #fff; border: 1px solid #e5e7eb; border-radius: 10px;
  padding: 10px; }
figure img { width: 100%; height: auto; display: block; }
figcaption { font-size: 13px; color: #4b5563; padding: 6px 4px 0; }
ul.notes { color: #374151; padding-left: 20px; margin: 0; }
.caption { color: #4b5563; font-size: 13px; margin: 8px 2px 0; }
ul.notes li { margin-bottom: 6px; }
@media (max-width: 900px) { .callouts, .plots { grid-template-columns: 1fr; } }
"""

_CAPTIONS = {
    "throughput.png": "Examples per second per strategy; speed-up over the baseline in brackets.",
    "accuracy_vs_time.png": "Training accuracy at each epoch end; ★ marks reaching the target.",
    "loss_vs_time.png": "Training loss at each epoch end against wall-clock time.",
    "epoch_times.png": "Seconds per epoch; the first epoch includes graph tracing and warm-up.",
}


def render_html(report: Mapping[str, Any], plots: Mapping[str, bytes] | None = None) -> str:
    """The report as one self-contained HTML page.

    Plots are embedded as base64 PNG data URIs and the CSS is inline, so the
    page needs no other file or network access (the KFP UI's HTML viewer
    shows it as is).

    Args:
        report: `build_report` output.
        plots: file name -> PNG bytes; rendered from the report when None.

    Returns:
        The HTML text.
    """
    plots = render_plots(report) if plots is None else plots
    e = html.escape
    winner = report.get("winner")
    colors = _colors(report)
    subject = " · ".join(
        f"{label} {e(str(report[key]))}"
        for key, label in (("dataset", "dataset"), ("model", "model"))
        if report.get(key)
    )
    meta = " · ".join(
        x
        for x in (
            subject,
            f"target accuracy {_pct(report.get('target_accuracy', 0))}",
            f"generated {e(str(report.get('generated_at', '')))}",
        )
        if x
    )

    rec = _recommended(report)
    if rec:
        agree = rec == winner
        rec_html = (
            f'<p class="name">{e(rec)}</p><p class="{"agree" if agree else "differ"}">'
            f"{'Agrees with' if agree else 'Differs from'} the measured winner.</p>"
        )
        reasons = (report.get("recommendation") or {}).get("reasons") or []
        if isinstance(reasons, list) and reasons:
            rec_html += (
                "<ul class=notes>" + "".join(f"<li>{e(str(x))}</li>" for x in reasons[:4]) + "</ul>"
            )
    else:
        rec_html = (
            '<p class="name muted">not given</p><p>No recommendation was passed to the report.</p>'
        )

    head = "".join(
        f'<th scope="col" data-key="{key}">{e(title)}</th>' for key, title, _ in _TEXT_COLUMNS
    )
    body = []
    for r, row in zip(report.get("results", []), _rows(report), strict=True):
        cells = []
        for (key, _, _), text in zip(_TEXT_COLUMNS, row, strict=True):
            content = e(text)
            if key == "name":
                content = (
                    f'<span class="swatch" style="background:{colors[r["name"]]}"></span>' + content
                )
            elif r.get(key) is None:
                content = f'<span class="muted">{content}</span>'
            title = ""
            if key == "estimated_cost_usd" and (r.get("priced_as") or r.get("cost_note")):
                title = f' title="{e(r.get("cost_note") or r["priced_as"])}"'
            cells.append(f'<td data-key="{key}"{title}>{content}</td>')
        cls = ' class="is-winner"' if r["name"] == winner else ""
        body.append(f'<tr{cls} data-name="{e(r["name"])}">{"".join(cells)}</tr>')

    figures = []
    for name in PLOT_FILES:
        if name in plots:
            data = base64.b64encode(plots[name]).decode("ascii")
            figures.append(
                f'<figure><img alt="{e(_CAPTIONS[name])}" data-plot="{name}" '
                f'src="data:image/png;base64,{data}"><figcaption>{e(_CAPTIONS[name])}</figcaption></figure>'
            )
    baseline = (report.get("baseline") or {}).get("description")
    caption = f'<p class="caption" id="baseline">{e(baseline)}</p>' if baseline else ""
    notes = "".join(f"<li>{e(n)}</li>" for n in _notes(report) if n != baseline)

    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Strategy comparison{f" — winner {e(winner)}" if winner else ""}</title>
<style>{_CSS}</style>
</head>
<body>
<main>
<h1>Strategy comparison</h1>
<p class="meta">{meta}</p>
<section class="callouts">
<div class="card winner"><p class="label">Winner</p>
<p class="name" id="winner">{e(winner or "none")}</p>
<p id="winner-reason">{e(report.get("winner_reason", ""))}</p></div>
<div class="card rec"><p class="label">strategist select would choose</p>{rec_html}</div>
</section>
<h2>Results</h2>
<div class="table-wrap">
<table id="results">
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody>
</table>
</div>
{caption}
<h2>Plots</h2>
<section class="plots">
{chr(10).join(figures)}
</section>
<h2>Notes</h2>
<ul class="notes">{notes}</ul>
</main>
</body>
</html>
"""


# --------------------------------------------------------------------------- files


def write_report(report: dict, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Writes the report files into `out_dir`, each atomically.

    Files: `comparison.json`, `report.html` (self-contained), `summary.md` and
    the plots in `PLOT_FILES`. A reader never sees a half-written file: each is
    written to a temporary file in `out_dir` and renamed over the target.

    Args:
        report: `build_report` output.
        out_dir: the folder; created when missing.

    Returns:
        File name -> path of every file written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, data in render_files(report).items():
        atomic.write_bytes(out / name, data)
        written[name] = out / name
    return written


def render_files(report: dict) -> dict[str, bytes]:
    """File name -> content of every report file (JSON, HTML, Markdown, plots)."""
    plots = render_plots(report)
    return {
        REPORT_JSON: (json.dumps(report, indent=2, allow_nan=False) + "\n").encode(),
        REPORT_HTML: render_html(report, plots).encode(),
        SUMMARY_MD: summary_markdown(report).encode(),
        **plots,
    }


def compare_to_artifacts(
    metrics_paths: list[str],
    *,
    comparison_path: str,
    report_path: str,
    summary_path: str,
    plots_dir: str,
    recommendation_json: str = "{}",
    target_accuracy: float = 0.9,
) -> dict:
    """Builds the report from metrics.json files and writes each output where KFP wants it.

    Returns:
        The report.
    """
    results = [_read_json(Path(path), "metrics") for path in metrics_paths]
    recommendation = json.loads(recommendation_json or "{}") or None
    report = build_report(results, target_accuracy=target_accuracy, recommendation=recommendation)
    files = render_files(report)
    destinations = {
        REPORT_JSON: comparison_path,
        REPORT_HTML: report_path,
        SUMMARY_MD: summary_path,
    }
    for name, data in files.items():
        atomic.write_bytes(destinations.get(name) or os.path.join(plots_dir, name), data)
    return report


def load_report(path: str | os.PathLike[str], role: str = "report") -> dict:
    """Reads a `comparison.json` (or the one inside a folder).

    Args:
        path: the file, or a folder holding `comparison.json`.
        role: what the file is for, used in error messages (`report`, `baseline`).

    Raises:
        ReportError: when the file is missing, not JSON or not an object.
    """
    target = Path(path)
    if target.is_dir():
        target = target / REPORT_JSON
    raw = _read_json(target, role)
    if not isinstance(raw, dict):
        raise ReportError(f"{role} {target}: expected a JSON object, got {type(raw).__name__}")
    return raw


def _read_json(path: Path, role: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{role} {path}: file not found") from None
    except OSError as err:
        raise ReportError(f"{role} {path}: cannot read it ({err.strerror or err})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ReportError(
            f"{role} {path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})"
        ) from None


# --------------------------------------------------------------------------- gate


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
            f"({_pct(self.baseline)} -> {_pct(self.current)}; allowed {100 * self.limit:.2f} pp)"
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
                f"eval accuracy {_pct(c.baseline_eval_accuracy)} -> {_pct(c.eval_accuracy)} "
                f"({0.0 - 100 * c.accuracy_drop:+.2f} pp)"
            )
        if self.new:
            lines.append(f"New (not in the baseline, not gated): {', '.join(self.new)}")
        return "\n".join(lines)


def _gate_results(report: Any, role: str) -> dict[str, Mapping[str, Any]]:
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
            if not _is_number(r.get(key)):
                raise ReportError(
                    f"{role}: result {name}: {key!r} must be a number, got {r.get(key)!r}"
                )
        if r["examples_per_second"] < 0:
            raise ReportError(f"{role}: result {name}: 'examples_per_second' is negative")
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
        if not _is_number(value) or value < 0:
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
    for name, r in reference.items():
        if r["examples_per_second"] <= 0:
            raise ReportError(f"baseline: result {name}: 'examples_per_second' must be positive")

    regressions: list[Regression] = []
    checks: list[StrategyCheck] = []
    for name, base in reference.items():
        now = current.get(name)
        check = StrategyCheck(
            name=name,
            baseline_examples_per_second=float(base["examples_per_second"]),
            examples_per_second=None if now is None else float(now["examples_per_second"]),
            baseline_eval_accuracy=float(base["eval_accuracy"]),
            eval_accuracy=None if now is None else float(now["eval_accuracy"]),
        )
        checks.append(check)
        if check.missing:
            regressions.append(Regression(name, "missing"))
            continue
        if check.throughput_drop > max_throughput_drop + 1e-9:
            regressions.append(
                Regression(
                    name,
                    "examples_per_second",
                    check.baseline_examples_per_second,
                    check.examples_per_second,
                    check.throughput_drop,
                    max_throughput_drop,
                )
            )
        if check.accuracy_drop > max_accuracy_drop + 1e-9:
            regressions.append(
                Regression(
                    name,
                    "eval_accuracy",
                    check.baseline_eval_accuracy,
                    check.eval_accuracy,
                    check.accuracy_drop,
                    max_accuracy_drop,
                )
            )
    new = tuple(name for name in current if name not in reference)
    return GateResult(
        tuple(regressions), tuple(checks), new, float(max_throughput_drop), float(max_accuracy_drop)
    )


# --------------------------------------------------------------------------- helpers


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def _finite(value: Any) -> Any:
    """Replaces NaN and infinities with None, so the report is valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
