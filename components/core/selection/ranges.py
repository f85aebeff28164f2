"""How far a prediction may be off: the ranges around a predicted scaling efficiency and throughput,
and the unknown input that makes them wide.

The widths (`ranges` in `data/step_time_fit.json`) are the 10th and 90th percentiles of published
over predicted figures on the fit's training part, apart for each unknown a kind of run leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from components.core.selection.device_compute import FIT_PATH, read_fit


@dataclass(frozen=True)
class Unknown:
    """An input the prediction cannot know, and how a user measures it.

    Attributes:
        what: the unknown, as the answer names it.
        measure: what to measure to narrow the range.
    """

    what: str
    measure: str


_RUN_IT = "a short run (strategist compare), then --history"
_NETWORK = Unknown("the network path between machines", "a two-machine run, then --history")
# By efficiency group, the unknown that widens its range most over the group before it
# (one machine in fp32: the overlap alone); and one GPU's own speed.
UNKNOWNS = {
    "one_machine": Unknown("the all-reduce's overlap with compute", _RUN_IT),
    "one_machine_mixed": Unknown("kernel speed under mixed precision or XLA", _RUN_IT),
    "machines": _NETWORK,
    "machines_mixed": _NETWORK,
    "one_gpu_speed": Unknown("one GPU's speed (kernels, input)", "one GPU's run, then --history"),
}


def efficiency_group(machines: int, mixed_or_xla: bool) -> str:
    """The error group of a run on `machines` machines: `one_machine`, `machines`, with
    `_mixed` when it computes in mixed precision or under XLA."""
    return ("machines" if machines > 1 else "one_machine") + ("_mixed" if mixed_or_xla else "")


def speed_group(mixed_or_xla: bool) -> str:
    """The one-GPU speed group: `mixed` (mixed precision or XLA) or `fp32`."""
    return "mixed" if mixed_or_xla else "fp32"


@dataclass(frozen=True)
class RangeWidths:
    """The calibrated widths.

    Attributes:
        efficiency: by `efficiency_group`, (low, high) ratios of a published scaling
            efficiency to the predicted one (ratios, not offsets: an 11 % prediction
            is not 33 points too high, as a 95 % one may be).
        one_gpu_speed: by `speed_group`, (low, high) ratios of a published one-GPU
            throughput to the predicted one.
    """

    efficiency: dict[str, tuple[float, float]]
    one_gpu_speed: dict[str, tuple[float, float]]


def load_widths(path: str | Path = FIT_PATH) -> RangeWidths:
    """The widths stored in `path` (no width when it has none: a point range)."""
    data = (read_fit(path) or {}).get("ranges", {})
    return RangeWidths(
        {k: (float(lo), float(hi)) for k, (lo, hi) in data.get("efficiency", {}).items()},
        {k: (float(lo), float(hi)) for k, (lo, hi) in data.get("one_gpu_speed", {}).items()},
    )


WIDTHS = load_widths()


def efficiency_range(
    efficiency: float, group: str, widths: RangeWidths = WIDTHS
) -> tuple[float, float]:
    """The range around a predicted scaling efficiency, within [0, 1] (and holding it)."""
    low, high = widths.efficiency.get(group, (1.0, 1.0))
    return efficiency * low, max(efficiency, min(1.0, efficiency * high))


def speed_range(group: str, widths: RangeWidths = WIDTHS) -> tuple[float, float]:
    """The range of one GPU's real speed over its predicted speed."""
    return widths.one_gpu_speed.get(group, (1.0, 1.0))


def widest_unknown(efficiency: float, group: str | None, speed: str) -> Unknown:
    """The unknown behind the wider part of a range: one GPU's speed, or what the
    efficiency group adds (`group` None: one GPU, no efficiency range)."""
    low, high = speed_range(speed)
    if group is None:
        return UNKNOWNS["one_gpu_speed"]
    e_low, e_high = efficiency_range(efficiency, group)
    if high / low >= e_high / max(e_low, 1e-9):
        return UNKNOWNS["one_gpu_speed"]
    return UNKNOWNS[group]
