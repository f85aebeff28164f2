"""Parts of a cluster a candidate can run on: its first machines, one GPU type of a mix, and the
candidates predicted on 1, 2, 4, ... of the machines and on a mix's faster machines alone, with why
the slower machines are better left free."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from components.core.model_profile import ModelProfile
from components.core.selection.history import apply_history
from components.core.selection.machine_speeds import machine_gpus, machine_slowdowns
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.prediction import Prediction, candidates_that_fit
from components.core.selection.topology import Topology, a_device, device
from components.core.strategy_spec import spec_for


def machine_counts(machines: int, also: Sequence[int] = ()) -> list[int]:
    """1, 2, 4, ... up to `machines`, the counts `also` below it, and `machines` itself."""
    counts = set(k for k in also if 0 < k < machines)
    k = 1
    while k < machines:
        counts.add(k)
        k *= 2
    return sorted(counts) + [machines]


def faster_machine_counts(topology: Topology) -> list[int]:
    """The machine counts, fewer than all, at which a kind of machine ends (a mix's GPU type, the
    faster half of `--heterogeneous` machines), fastest first."""
    if topology.gpu_mix:
        gpus = machine_gpus(topology, topology.machines)
        return [k for k in range(1, topology.machines) if gpus[k] != gpus[k - 1]]
    if topology.heterogeneous:
        fast = topology.machines - topology.machines // 2  # `machine_slowdowns`' order
        return [fast] if 0 < fast < topology.machines else []
    return []


def on_first_machines(topology: Topology, machines: int) -> Topology:
    """`topology` cut to its first `machines` machines (a GPU mix's fastest first); plain
    hardware when they are of one kind."""
    if not topology.gpu_mix:
        fast = topology.machines - topology.machines // 2  # `machine_slowdowns`' order
        alike = topology.heterogeneous and machines <= fast
        return dataclasses.replace(
            topology, machines=machines, heterogeneous=topology.heterogeneous and not alike
        )
    mix = tuple(Counter(machine_gpus(topology, machines)).items())
    if len(mix) == 1:
        return of_one_type(topology, mix[0][0], machines)
    return dataclasses.replace(topology, machines=machines, gpu_mix=mix)


def of_one_type(topology: Topology, gpu: str, machines: int) -> Topology:
    """`machines` machines of a GPU mix's type `gpu`, as plain hardware."""
    return dataclasses.replace(
        topology, machines=machines, gpu=gpu, gpu_mix=(), heterogeneous=False
    )


def machines_running(candidate: Prediction, topology: Topology) -> Topology:
    """The machines of `topology` that `candidate` runs on: its first machines
    (`on_first_machines`), or those of its `machines_gpu` alone, with as many GPUs
    each as its layout uses."""
    if candidate.machines_gpu:
        on = of_one_type(topology, candidate.machines_gpu, candidate.layout.workers)
    else:
        on = on_first_machines(topology, candidate.layout.workers)
    spec = spec_for(candidate.strategy)
    if spec.single_device or topology.gpu == "cpu":  # their layouts say 1 of the machine's
        return on
    return dataclasses.replace(on, gpus_per_machine=candidate.layout.gpus_per_machine)


def predicted_on_fewer_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
) -> Iterator[tuple[int, Topology, list[Prediction]]]:
    """For 1, 2, 4, ... machines and each kind's end, fewer than all: the count, its machines
    and every candidate on them, memory-checked; one `preds` has is taken from it, one it lacks
    takes the `history` records that measured it."""
    known = {(p.strategy, p.layout): p for p in preds}
    gpu = device(machine_gpus(topology, 1)[0])
    fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, topology.precision)
    for k in machine_counts(topology.machines, faster_machine_counts(topology))[:-1]:
        on = on_first_machines(topology, k)
        predicted, _, _ = candidates_that_fit(on, model, batch, gpu, fit_replicated)
        if history:
            apply_history([p for p in predicted if (p.strategy, p.layout) not in known], history,
                          on, model, batch)  # fmt: skip
        yield k, on, [known.get((p.strategy, p.layout), p) for p in predicted]


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
        for k, _, predicted in predicted_on_fewer_machines(preds, topology, model, batch, history)
        if k in ends
        for p in predicted
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
