"""Machines of different speeds: each machine's GPU in a mix, how much slower each
computes, and the share of a parameter-server step each worker takes."""

from __future__ import annotations

from components.core.selection.device_compute import achievable_tflops
from components.core.selection.topology import PREEMPTIONS_PER_MACHINE_HOUR, Topology, device


def machine_rank(gpu_name: str, precision: str = "fp32") -> tuple[float, float, str]:
    """Where a machine of `gpu_name` stands in a mix: the fastest first, then the most memory,
    then by name (the order the mix was written in never decides).

    Raises:
        ConfigError: for an unknown device or precision.
    """
    return (-achievable_tflops(gpu_name, precision), -device(gpu_name).memory_gb, gpu_name)


def machine_gpus(topology: Topology, machines: int) -> list[str]:
    """The GPU type of each of the first `machines` machines: a mix's fastest first
    (`machine_rank`)."""
    if not topology.gpu_mix:
        return [topology.gpu] * machines
    ranked = _ranked_mix(topology)
    return [name for name, count in ranked for _ in range(count)][:machines]


def gpu_types(topology: Topology, machines: int) -> list[str]:
    """The GPU types of the first `machines` machines, fastest first, each once: what
    `machine_gpus` holds without a list per machine."""
    if not topology.gpu_mix:
        return [topology.gpu]
    types: list[str] = []
    for name, count in _ranked_mix(topology):
        types.append(name)
        machines -= count
        if machines <= 0:
            break
    return types


def _ranked_mix(topology: Topology) -> list[tuple[str, int]]:
    """`topology.gpu_mix` in `machine_rank` order."""
    return sorted(topology.gpu_mix, key=lambda gc: machine_rank(gc[0], topology.precision))


def machine_slowdowns(topology: Topology, machines: int, compute_share: float = 1.0) -> list[float]:
    """How much longer than on `topology.gpu` a step takes on each of the first `machines`
    machines: by each GPU's sustained TFLOP/s for the `compute_share` of the step that scales
    with it, or `heterogeneity_slowdown` for the slower half of `--heterogeneous` machines."""
    return [slowdown for slowdown, count in _slowdown_groups(topology, machines, compute_share)
            for _ in range(count)]  # fmt: skip


def slowest_machine(topology: Topology, machines: int, compute_share: float = 1.0) -> float:
    """`max(machine_slowdowns(...))` without a list per machine: a synchronous step's pace."""
    return max(slowdown for slowdown, _ in _slowdown_groups(topology, machines, compute_share))


def _slowdown_groups(
    topology: Topology, machines: int, compute_share: float = 1.0
) -> list[tuple[float, int]]:
    """`machine_slowdowns` as (slowdown, machines) groups, fastest first: one per GPU
    type, so a count in the thousands needs no list per machine."""
    if topology.gpu_mix:
        ref = achievable_tflops(topology.gpu, topology.precision)
        ranked = _ranked_mix(topology)
        counts = [
            (compute_share * ref / achievable_tflops(name, topology.precision)
             + 1.0 - compute_share, n)
            for name, n in ranked
        ]  # fmt: skip
    elif topology.heterogeneous:  # the faster half first, as a mix's fastest type
        slower = topology.machines // 2
        counts = [(1.0, topology.machines - slower), (topology.heterogeneity_slowdown, slower)]
    else:
        counts = [(1.0, machines)]
    groups, left = [], machines
    for slowdown, n in counts:
        if left > 0 and n > 0:
            groups.append((slowdown, min(n, left)))
            left -= min(n, left)
    return groups


def mean_machine_speed(topology: Topology, machines: int, compute_share: float = 1.0) -> float:
    """The mean speed of the first `machines` machines, each alone, relative to one machine of
    `topology.gpu` (`machine_slowdowns`)."""
    groups = _slowdown_groups(topology, machines, compute_share)
    return sum(n / slowdown for slowdown, n in groups) / sum(n for _, n in groups)


def worker_shares(
    topology: Topology, workers: int, compute_share: float, compute_s: float, exposed_s: float
) -> tuple[tuple[float, int], ...]:
    """The share of a parameter-server step's examples each of the first `workers` machines
    computes, as (share of one machine, machines) groups, fastest first (empty: one speed).

    Each worker runs at its own compute plus the average worker's exposed communication.
    """
    groups = _slowdown_groups(topology, workers, compute_share)
    if len({slowdown for slowdown, _ in groups}) < 2:
        return ()
    one = compute_s * mean_machine_speed(topology, workers, compute_share)  # on topology.gpu
    rates = [(1.0 / (one * slowdown + exposed_s), n) for slowdown, n in groups]
    total = sum(rate * n for rate, n in rates)
    return tuple((rate / total, n) for rate, n in rates)


def preemption_rate(topology: Topology) -> float:
    """Expected preemptions per machine-hour of `topology` (0 when not preemptible)."""
    if not topology.preemptible:
        return 0.0
    rate = topology.preemptions_per_machine_hour
    return PREEMPTIONS_PER_MACHINE_HOUR if rate is None else rate
