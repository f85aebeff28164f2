"""The cost of one run, priced by the price table (`components.core.prices`), on demand
or on Spot with the work expected preemptions throw away."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.core.checkpoint_interval import (
    PREEMPTIONS_PER_MACHINE_HOUR,
    RESTART_S,
    CheckpointInterval,
    preemption_loss_seconds,
    preemption_share,
)
from components.core.comparison.values import is_number
from components.core.config import ClusterConfig
from components.core.errors import ConfigError
from components.core.prices import DEFAULT_PRICES_PATH, PriceTable, load_prices
from components.core.run_metrics import Hardware
from components.core.strategy_spec import SPECS

__all__ = [
    "DEFAULT_PRICES_PATH",
    "Capacity",
    "CostEstimate",
    "PriceTable",
    "estimate_cost",
    "load_prices",
]

SPOT = "spot"
ON_DEMAND = "on-demand"


@dataclass(frozen=True)
class Capacity:
    """What the compared runs are priced on (`compare --preemptible`).

    Attributes:
        preemptible: price the machines as Spot VMs, which the platform may take
            back: at the table's Spot prices, with the expected preemption losses.
            A cloud run that ran on Spot (`hardware.spot`) is priced so anyway.
        preemptions_per_machine_hour: expected preemptions of one machine per
            hour (`--preemptions-per-machine-hour`); by default
            `PREEMPTIONS_PER_MACHINE_HOUR` (one a day), as `select` takes it.
    """

    preemptible: bool = False
    preemptions_per_machine_hour: float = PREEMPTIONS_PER_MACHINE_HOUR

    def describe(self) -> dict[str, Any]:
        """What a report records about the capacity its runs were priced on."""
        return {
            "preemptible": self.preemptible,
            "preemptions_per_machine_hour": self.preemptions_per_machine_hour,
            "rate_given": self.preemptions_per_machine_hour != PREEMPTIONS_PER_MACHINE_HOUR,
            "restart_seconds": RESTART_S,
        }


@dataclass(frozen=True)
class CostEstimate:
    """The estimated cost of one run.

    Attributes:
        usd: the cost, expected preemption losses included; None when it cannot
            be priced.
        usd_per_hour: the hourly price of everything the run used.
        priced_as: what the run was priced as, in words.
        note: why the cost is None, or a remark on how it was estimated.
        priced_on: `spot` or `on-demand`: the prices used.
        preemption: on Spot, the expected preemptions and what they cost
            (`_preemption`); None on demand.
    """

    usd: float | None
    usd_per_hour: float | None
    priced_as: str
    note: str | None = None
    priced_on: str = ON_DEMAND
    preemption: dict[str, Any] | None = None


def estimate_cost(
    record: Mapping[str, Any], prices: PriceTable, capacity: Capacity | None = None
) -> CostEstimate:
    """Prices one run: machines x hourly price x fit wall time, and on Spot the time
    expected preemptions add.

    A cloud run is priced as `hardware.machines` machines of
    `hardware.machine_type`. A local run is priced by the local-rehearsal
    convention: one machine per TensorFlow process, of the machine type in its
    hardware record or the table's default CPU machine type. GPUs in the
    hardware record are added at the accelerator price unless the machine type
    bundles them.

    A run is priced on Spot when it ran on Spot (`hardware.spot`) or, being a
    local run that stands for cloud machines, when `capacity.preemptible`. Then
    every price is the table's `spot_usd_per_hour` (a table without any prices
    on demand and says so; an entry without one leaves the run unpriced), and
    the time in epochs is stretched by the share of each hour expected
    preemptions take: each costs the restart and half the run's checkpoint
    interval, timed by its measured step time (`checkpoint_interval`).

    Args:
        record: a `metrics.json` record.
        prices: the price table.
        capacity: what the runs are priced on; on demand by default.

    Returns:
        The estimate; `usd` is None (with a note) for an unknown machine type,
        an unknown GPU, a missing Spot price or a record without timings.
    """
    capacity = capacity or Capacity()
    hw = record.get("hardware") or {}
    local = Hardware(platform=hw.get("platform") or "local").is_local
    count_key = "processes" if local else "machines"
    count = hw.get(count_key) or _processes(record)
    machine_type = hw.get("machine_type") or (prices.default_machine_type if local else None)
    if machine_type is None:
        return CostEstimate(None, None, "unknown", "the hardware record names no machine type")
    preemptible = bool(hw.get("spot")) or (local and capacity.preemptible)
    spot = preemptible and prices.has_spot_prices
    priced_on = SPOT if spot else ON_DEMAND
    priced_as = f"{count} × {machine_type}"
    if local:
        priced_as += " (local rehearsal: one machine per process)"
    field = "spot_usd_per_hour" if spot else "usd_per_hour"
    rate = prices.machine_price(machine_type, spot)
    if rate is None:
        return CostEstimate(
            None,
            None,
            priced_as,
            f"machine type {machine_type!r} has no {field} in the price table "
            f"({prices.as_of}); add it to a copy of components/core/data/prices.json",
            priced_on,
        )
    gpu = hw.get("gpu")
    gpus = int(hw.get("gpus_per_machine") or 0)
    per_machine = rate
    if gpu and gpus and machine_type not in prices.bundled_gpus:
        gpu_rate = prices.accelerator_price(str(gpu), spot)
        priced_as = f"{count} × ({machine_type} + {gpus} × {gpu})"
        if gpu_rate is None:
            return CostEstimate(
                None,
                None,
                priced_as,
                f"GPU {gpu!r} has no {field} in the price table ({prices.as_of}); "
                "add it to a copy of components/core/data/prices.json",
                priced_on,
            )
        per_machine += gpus * gpu_rate
    hourly = count * per_machine
    note = None
    if preemptible and not spot:
        note = (
            "Spot machines priced at on-demand list prices: the price table has no "
            "spot_usd_per_hour (pass a table with them, --prices FILE)"
        )
    seconds = _wall_seconds(record)
    if seconds is None:
        return CostEstimate(None, hourly, priced_as, "the record has no wall time", priced_on)
    if not preemptible:
        return CostEstimate(hourly * seconds / 3600.0, hourly, priced_as, note, priced_on)
    preemption = _preemption(record, count, capacity.preemptions_per_machine_hour, seconds)
    if preemption is None:
        return CostEstimate(
            None, hourly, priced_as, "no measured step time to price preemptions by", priced_on
        )
    if preemption["share"] >= 1.0:
        return CostEstimate(
            None,
            hourly,
            priced_as,
            f"its expected preemption losses fill every hour ({preemption['machines']} "
            f"machines x {capacity.preemptions_per_machine_hour:g} preemptions an hour x "
            f"{preemption['loss_seconds']:,.0f} s each)",
            priced_on,
            preemption,
        )
    preemption["usd"] = hourly * preemption["lost_seconds"] / 3600.0
    total = hourly * (seconds + preemption["lost_seconds"]) / 3600.0
    return CostEstimate(total, hourly, priced_as, note, priced_on, preemption)


def _preemption(
    record: Mapping[str, Any], count: int, rate: float, seconds: float
) -> dict[str, Any] | None:
    """The preemptions a Spot run of `seconds` in epochs should expect, and their cost.

    A synchronous strategy restarts when any of its machines is preempted;
    parameter_server counts one machine, since its other workers keep training
    when one is lost (the selector's rule, `selection.prediction`). None when
    the record has no step time.
    """
    step_s, epoch_s = _step_and_epoch_seconds(record)
    if step_s is None:
        return None
    interval = _interval(record)
    loss_s = preemption_loss_seconds(interval, epoch_s, step_s)
    spec = SPECS.get(str(record.get("strategy")))
    machines = 1 if spec is not None and spec.uses_ps else int(count)
    share = preemption_share(loss_s, machines, rate)
    # Time stretches so that the time left after losses is the measured time.
    lost_s = seconds * share / (1 - share) if share < 1 else None
    return {
        "machines": machines,
        "preemptions_per_machine_hour": rate,
        "checkpoint_every": interval.describe(),
        "step_seconds": step_s,
        "loss_seconds": loss_s,
        "redone_seconds": loss_s - RESTART_S,
        "share": share,
        "lost_seconds": lost_s,
        "expected_preemptions": None
        if lost_s is None
        else machines * rate * (seconds + lost_s) / 3600,
        "usd": None,
    }


def _interval(record: Mapping[str, Any]) -> CheckpointInterval:
    """The checkpoint interval that ran: the steps a duration became, or as given."""
    steps = record.get("checkpoint_steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        return CheckpointInterval(steps=steps)
    try:
        return CheckpointInterval.parse(str(record.get("checkpoint_every") or "epoch"))
    except ConfigError:  # a record written by hand: priced as the default, per epoch
        return CheckpointInterval()


def _step_and_epoch_seconds(record: Mapping[str, Any]) -> tuple[float | None, float]:
    """The measured seconds of a step and of an epoch: the median epoch after the first
    (which holds tracing) over its steps."""
    epochs = [float(s) for s in record.get("epoch_seconds") or [] if is_number(s)]
    steps = record.get("steps_per_epoch")
    if not epochs or not (is_number(steps) and steps > 0):
        return None, 0.0
    epoch_s = statistics.median(epochs[1:] or epochs)
    return epoch_s / steps, epoch_s


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
