"""The cost of one run, priced by the price table (`components.core.prices`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.core.comparison.values import is_number
from components.core.config import ClusterConfig
from components.core.prices import DEFAULT_PRICES_PATH, PriceTable, load_prices
from components.core.run_metrics import Hardware
from components.core.strategy_spec import SPECS

__all__ = ["DEFAULT_PRICES_PATH", "CostEstimate", "PriceTable", "estimate_cost", "load_prices"]


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
    local = Hardware(platform=hw.get("platform") or "local").is_local
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
    """TensorFlow processes a run used, from its strategy and cluster shape."""
    spec = SPECS.get(str(record.get("strategy")))
    if spec is None:
        return 1
    shape = ClusterConfig(spec.name, int(record.get("workers") or 1), int(record.get("ps") or 0))
    return spec.num_processes(shape)


def _wall_seconds(record: Mapping[str, Any]) -> float | None:
    """Fit wall time: `wall_seconds`, else the sum of `epoch_seconds`, else None."""
    if is_number(record.get("wall_seconds")):
        return float(record["wall_seconds"])
    epochs = record.get("epoch_seconds")
    if isinstance(epochs, list) and epochs and all(is_number(s) for s in epochs):
        return float(sum(epochs))
    return None
