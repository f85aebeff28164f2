"""Measured throughput from earlier `comparison.json` files, matched to a topology and model."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components.core import json_input
from components.core.config import STRATEGIES, ConfigError
from components.core.model_profile import ModelProfile
from components.core.run_metrics import RunMetrics
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology


def load_history(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Result records of `comparison.json` files, each tagged with its file.

    Each record is read as a `RunMetrics` (any known version), so the hardware
    it states is the one the run detected.

    Raises:
        ConfigError: when a file cannot be read, has no `results` list, or
            holds a record that is not a run record.
    """
    records = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            p = p / "comparison.json"
        try:
            data = json_input.parse(p.read_bytes(), f"--history {path}", "pass a comparison.json")
        except OSError as err:
            raise ConfigError(f"--history {path}: cannot read it ({err.strerror})") from None
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise ConfigError(f"--history {path}: no 'results' list; pass a comparison.json")
        for r in results:
            record = RunMetrics.from_dict(r, f"--history {path}").to_dict()
            records.append({**record, "_source": str(p)})
    return records


def _matches(record: Mapping[str, Any], topology: Topology, model: ModelProfile) -> bool:
    """Whether `record` measured a known strategy on this hardware and model.

    The GPU type, GPUs per machine and machine count must agree; the model
    must too unless `model` was given by parameter count alone.
    """
    hw = record.get("hardware")
    if not isinstance(hw, Mapping):
        return False
    gpu = hw.get("gpu")
    if not isinstance(gpu, str) or gpu.lower() != topology.gpu.lower():
        return False
    if (
        hw.get("gpus_per_machine") != topology.gpus_per_machine
        or hw.get("machines") != topology.machines
    ):
        return False
    rec_model = record.get("model")
    if rec_model and not model.name.startswith("params:") and rec_model != model.name:
        return False
    eps = record.get("examples_per_second")
    return isinstance(eps, (int, float)) and eps > 0 and record.get("strategy") in STRATEGIES


def apply_history(
    preds: list[Prediction],
    records: Sequence[Mapping[str, Any]],
    topology: Topology,
    model: ModelProfile,
) -> list[str]:
    """Attaches measured throughput to matching candidates; returns reasons.

    Measured candidates rank by their measurement; the others by the prediction
    rescaled by the median measured/predicted ratio on this hardware.
    """
    by_strategy = _fastest_per_strategy(records, topology, model)
    reasons = []
    ratios = []
    for p in preds:
        r = by_strategy.get(p.strategy)
        if r is None:
            continue
        p.measured_examples_per_second = float(r["examples_per_second"])
        p.measured_source = r["_source"]
        ratios.append(p.measured_examples_per_second / p.examples_per_second)
        reasons.append(
            f"Measured on matching hardware ({topology.describe()}, {r['_source']}): "
            f"{p.strategy} ran at {p.measured_examples_per_second:,.0f} examples/s against "
            f"{p.examples_per_second:,.0f} predicted; the measurement outranks the prediction."
        )
    if ratios:
        ratio = statistics.median(ratios)
        for p in preds:
            if p.measured_examples_per_second is None:
                p.adjusted_examples_per_second = p.examples_per_second * ratio
        if len(ratios) < len(preds):
            reasons.append(
                f"Unmeasured candidates are ranked by their prediction times {ratio:.2f}, the "
                "median measured/predicted ratio on this hardware."
            )
    unmatched = len(records) - sum(1 for r in records if _matches(r, topology, model))
    if records and not ratios:
        reasons.append(
            f"None of the {len(records)} history records matches this hardware and model "
            "(GPU type, GPUs per machine, machines); the choice rests on the cost model."
        )
    elif unmatched:
        reasons.append(f"{unmatched} history record(s) on other hardware or models were ignored.")
    return reasons


def _fastest_per_strategy(
    records: Sequence[Mapping[str, Any]], topology: Topology, model: ModelProfile
) -> dict[str, Mapping[str, Any]]:
    """The fastest matching record of each strategy."""
    by_strategy: dict[str, Mapping[str, Any]] = {}
    for r in records:
        if _matches(r, topology, model):
            best = by_strategy.get(r["strategy"])
            if best is None or r["examples_per_second"] > best["examples_per_second"]:
                by_strategy[r["strategy"]] = r
    return by_strategy
