"""How far a prediction may be off: the ranges around a predicted scaling efficiency and throughput,
and the unknown input that makes them wide."""

from __future__ import annotations

from typing import NamedTuple

from components.core.selection.device_compute import FIT_PATH, read_fit


class Unknown(NamedTuple):
    """An input the prediction cannot know (`what`), and what to `measure` to narrow it."""

    what: str
    measure: str


_RUN_IT = "a short run (strategist compare), then --history"
_NETWORK = Unknown("the network path between machines", "a two-machine run, then --history")
# By efficiency group, what widens its range most over the group before; one GPU's own speed.
UNKNOWNS = {
    "one_machine": Unknown("the all-reduce's overlap with compute", _RUN_IT),
    "one_machine_mixed": Unknown("kernel speed under mixed precision or XLA", _RUN_IT),
    "machines": _NETWORK,
    "machines_mixed": _NETWORK,
    "one_gpu_speed": Unknown("one GPU's speed (kernels, input)", "one GPU's run, then --history"),
}


def efficiency_group(machines: int, mixed_or_xla: bool) -> str:
    """`one_machine` or `machines`, with `_mixed` under mixed precision or XLA."""
    return ("machines" if machines > 1 else "one_machine") + ("_mixed" if mixed_or_xla else "")


def speed_group(mixed_or_xla: bool) -> str:
    """The one-GPU speed group: `mixed` (mixed precision or XLA) or `fp32`."""
    return "mixed" if mixed_or_xla else "fp32"


class RangeWidths(NamedTuple):
    """By group, the 10th and 90th percentiles of published over predicted on the fit's data."""

    efficiency: dict[str, tuple[float, float]]  # by `efficiency_group` (ratios, not points)
    one_gpu_speed: dict[str, tuple[float, float]]  # one GPU's throughput, by `speed_group`


_STORED = (read_fit(FIT_PATH) or {}).get("ranges", {})  # none stored: point ranges
WIDTHS = RangeWidths(
    *({k: (float(lo), float(hi)) for k, (lo, hi) in _STORED.get(kind, {}).items()}
      for kind in RangeWidths._fields)
)  # fmt: skip


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
    """The unknown behind the wider part of a range: one GPU's speed, or what the efficiency
    `group` adds (None: one GPU)."""
    low, high = speed_range(speed)
    if group is not None:
        e_low, e_high = efficiency_range(efficiency, group)
        if high / low < e_high / max(e_low, 1e-9):
            return UNKNOWNS[group]
    return UNKNOWNS["one_gpu_speed"]
