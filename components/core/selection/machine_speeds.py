"""Machines of different speeds: each machine's GPU in a mix, how much slower each
computes, and the share of a parameter-server step each worker takes."""

from __future__ import annotations

from components.core.selection.device_compute import achievable_tflops
from components.core.selection.topology import PREEMPTIONS_PER_MACHINE_HOUR, Topology, device


def machine_rank(gpu_name: str, precision: str = "fp32") -> tuple[float, float, str]:
    """A mix's order: the fastest, then the most memory, then by name (ConfigError: unknown)."""
    return (-achievable_tflops(gpu_name, precision), -device(gpu_name).memory_gb, gpu_name)


def _first(groups: list[tuple], machines: int) -> list[tuple]:
    """(value, machines) `groups` cut to their first `machines` machines, empty groups dropped."""
    kept, left = [], machines
    for value, n in groups:
        if left > 0 and n > 0:
            kept.append((value, min(n, left)))
            left -= min(n, left)
    return kept


def _gpu_groups(topology: Topology, machines: int) -> list[tuple[str, int]]:
    """(GPU type, machines) of the first `machines` machines, a mix's fastest first."""
    if not topology.gpu_mix:
        return [(topology.gpu, machines)]
    ranked = sorted(topology.gpu_mix, key=lambda gc: machine_rank(gc[0], topology.precision))
    return _first(ranked, machines)


def machine_gpus(topology: Topology, machines: int) -> list[str]:
    """The GPU type of each of the first `machines` machines, a mix's fastest first."""
    return [gpu for gpu, n in _gpu_groups(topology, machines) for _ in range(n)]


def gpu_types(topology: Topology, machines: int) -> list[str]:
    """The GPU types of the first `machines` machines (at least one), fastest first, each once."""
    return [gpu for gpu, _ in _gpu_groups(topology, max(machines, 1))]


def _slowdown_groups(
    topology: Topology, machines: int, compute_share: float = 1.0
) -> list[tuple[float, int]]:
    """(slowdown, machines) of the first `machines` machines, fastest first, against
    `topology.gpu`: by each GPU's sustained TFLOP/s for the `compute_share` of the step that
    scales with it, or `heterogeneity_slowdown` for the slower half of `--heterogeneous` ones."""
    if topology.gpu_mix:
        ref, share = achievable_tflops(topology.gpu, topology.precision), compute_share
        groups = _gpu_groups(topology, machines)
        return [(share * ref / achievable_tflops(g, topology.precision) + 1.0 - share, n)
                for g, n in groups]  # fmt: skip
    if not topology.heterogeneous:
        return [(1.0, machines)]
    slower = topology.machines // 2  # the faster half first, as a mix's fastest type
    groups = [(1.0, topology.machines - slower), (topology.heterogeneity_slowdown, slower)]
    return _first(groups, machines)


def machine_slowdowns(topology: Topology, machines: int, compute_share: float = 1.0) -> list[float]:
    """How much longer than on `topology.gpu` a step takes on each of the first `machines`."""
    groups = _slowdown_groups(topology, machines, compute_share)
    return [slowdown for slowdown, n in groups for _ in range(n)]


def slowest_machine(topology: Topology, machines: int, compute_share: float = 1.0) -> float:
    """The largest of `machine_slowdowns`: a synchronous step's pace."""
    return max(slowdown for slowdown, _ in _slowdown_groups(topology, machines, compute_share))


def mean_machine_speed(topology: Topology, machines: int, compute_share: float = 1.0) -> float:
    """The mean speed of the first `machines` machines, each alone, against `topology.gpu`."""
    groups = _slowdown_groups(topology, machines, compute_share)
    return sum(n / slowdown for slowdown, n in groups) / sum(n for _, n in groups)


def worker_shares(
    topology: Topology, workers: int, compute_share: float, compute_s: float, exposed_s: float
) -> tuple[tuple[float, int], ...]:
    """(share of a parameter-server step's examples one machine computes, machines), fastest first
    (empty: one speed); each runs at its own compute plus the average exposed communication."""
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
