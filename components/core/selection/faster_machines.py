"""A GPU mix's (or `--heterogeneous`') faster machines alone: the candidates on them,
and why the slower machines are better left free."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from components.core.model_profile import ModelProfile
from components.core.selection.machine_speeds import machine_gpus, machine_slowdowns
from components.core.selection.machine_subsets import (
    costed_on_fewer_machines,
    faster_machine_counts,
)
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology, a_device, device
from components.core.strategy_spec import spec_for


def on_faster_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
) -> list[Prediction]:
    """The feasible candidates on a mix's fastest machines alone, up to each GPU type's end
    (the faster half of `--heterogeneous` machines), that `preds` lacks."""
    ends = set(faster_machine_counts(topology))
    known = {(p.strategy, p.layout) for p in preds}
    return [
        p
        for k, _, costed in costed_on_fewer_machines(preds, topology, model, batch, history)
        if k in ends
        for p in costed
        if p.feasible and p.layout.workers == k and (p.strategy, p.layout) not in known
    ]


def faster_machines_sentence(
    chosen: Prediction, preds: list[Prediction], topology: Topology, model: ModelProfile
) -> str:
    """Why `chosen`, on the faster machines alone, leaves the others free: a replica does not
    fit their GPU, or every synchronous step would wait for them (`preds`: those weighed)."""
    k, n = chosen.layout.workers, topology.machines
    use, leave = _kept_and_left(topology, k)
    head = f"Use {use} alone and leave {leave} free"
    on_all = [p for p in preds if p.layout.workers == n]
    short = [p for p in on_all if p.misfit]
    if short:
        smallest = min((device(g) for g in machine_gpus(topology, n)[k:]),
                       key=lambda g: g.memory_gb)  # fmt: skip
        strategies = " and ".join(p.strategy for p in short)
        return (
            f"{head}: a replica of {model.name} at a per-GPU batch of "
            f"{chosen.per_replica_batch} does not fit {a_device(smallest.name)} "
            f"({smallest.memory_gb:g} GB), so {strategies} on all {n} machines cannot run."
        )
    same = next((p for p in on_all if p.strategy == chosen.strategy and p.feasible), None)
    why = []
    if same is not None and not spec_for(same.strategy).uses_ps:
        why.append("every synchronous step waits for the slowest machine")
    why += _slower_said(topology, k)
    if same is None:
        return f"{head}: {', and '.join(why)}."
    return (
        f"{head}: {', and '.join(why) + ': ' if why else ''}{same.strategy} on all {n} "
        f"machines is predicted {same.rank_examples_per_second:,.0f} examples/s, against "
        f"{chosen.rank_examples_per_second:,.0f} on {use} alone."
    )


def _kept_and_left(topology: Topology, k: int) -> tuple[str, str]:
    """The first `k` machines and the rest, for a sentence: `the 4 a100 machines`,
    `the t4 machine`; `the 2 faster machines`, `the 2 slower ones` (`--heterogeneous`)."""
    if not topology.gpu_mix:
        left = topology.machines - k
        return (
            f"the {k} faster machine{'s' if k > 1 else ''}",
            f"the {left} slower one{'s' if left > 1 else ''}",
        )
    gpus = machine_gpus(topology, topology.machines)
    return _machines_said(gpus[:k]), _machines_said(gpus[k:])


def _machines_said(gpus: list[str]) -> str:
    """`the 4 a100 machines`, `the t4 machine`, `the 2 v100 and 4 t4 machines`."""
    counts = Counter(gpus)
    if len(gpus) == 1:
        return f"the {gpus[0]} machine"
    return "the " + " and ".join(f"{n} {name}" for name, n in counts.items()) + " machines"


def _slower_said(topology: Topology, k: int) -> list[str]:
    """How much slower the slowest machine left free computes, for a sentence (none when
    the machines differ in memory alone)."""
    slowdowns = machine_slowdowns(topology, topology.machines)
    slowest = max(slowdowns[k:])
    if slowest <= 1.0:
        return []
    if topology.gpu_mix:
        gpu = machine_gpus(topology, topology.machines)[slowdowns.index(slowest)]
        return [f"{a_device(gpu)} computes {slowest:.2g}x slower than {a_device(topology.gpu)}"]
    return [f"the slower machines compute {slowest:.2g}x slower than the rest"]
