"""The parts of a cluster candidates run on, and why a mix's slower machines are left free."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from components.core.model_profile import ModelProfile
from components.core.selection.history import apply_history
from components.core.selection.machine_speeds import machine_gpus, machine_slowdowns
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.prediction import Prediction, candidates_that_fit
from components.core.selection.topology import Topology, a_device, device
from components.core.strategy_spec import spec_for

History = Sequence[Mapping[str, Any]]


def machine_counts(machines: int, also: Sequence[int] = ()) -> list[int]:
    """1, 2, 4, ... up to `machines`, the counts `also` below it, and `machines` itself."""
    powers = (2**i for i in range(machines.bit_length()))
    return sorted({k for k in (*also, *powers) if 0 < k < machines}) + [machines]


def faster_machine_counts(topology: Topology) -> list[int]:
    """The counts, fewer than all, at which a kind of machine ends (a GPU type, a faster half)."""
    if topology.gpu_mix:
        gpus = machine_gpus(topology, topology.machines)
        return [k for k in range(1, topology.machines) if gpus[k] != gpus[k - 1]]
    fast = topology.machines - topology.machines // 2  # `machine_slowdowns`' order
    return [fast] if topology.heterogeneous and fast < topology.machines else []


def on_first_machines(topology: Topology, machines: int) -> Topology:
    """`topology`'s first `machines` machines (a mix's fastest), as plain hardware if alike."""
    if not topology.gpu_mix:
        # the faster half first, as `machine_slowdowns` has it
        uneven = topology.heterogeneous and machines > topology.machines - topology.machines // 2
        return replace(topology, machines=machines, heterogeneous=uneven)
    mix = tuple(Counter(machine_gpus(topology, machines)).items())
    if len(mix) == 1:
        return of_one_type(topology, mix[0][0], machines)
    return replace(topology, machines=machines, gpu_mix=mix)


def of_one_type(topology: Topology, gpu: str, machines: int) -> Topology:
    """`machines` machines of a GPU mix's type `gpu`, as plain hardware."""
    return replace(topology, machines=machines, gpu=gpu, gpu_mix=(), heterogeneous=False)


def machines_running(candidate: Prediction, topology: Topology) -> Topology:
    """The machines `candidate` runs on, with as many GPUs each as its layout uses."""
    k, gpu = candidate.layout.workers, candidate.machines_gpu
    on = of_one_type(topology, gpu, k) if gpu else on_first_machines(topology, k)
    if spec_for(candidate.strategy).single_device or topology.gpu == "cpu":
        return on  # their layouts say 1 of the machine's
    return replace(on, gpus_per_machine=candidate.layout.gpus_per_machine)


def predicted_on(on: Topology, model: ModelProfile, batch: int) -> list[Prediction]:
    """Every candidate on the machines `on`, memory-checked against its first machine's GPU."""
    gpu = device(machine_gpus(on, 1)[0])
    fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, on.precision)
    return candidates_that_fit(on, model, batch, gpu, fit_replicated)[0]


def predicted_on_fewer_machines(preds: list[Prediction], topology: Topology, model: ModelProfile,
                                batch: int, history: History,
                                ) -> Iterator[tuple[int, Topology, list[Prediction]]]:  # fmt: skip
    """(k, first k machines, their candidates, `preds`' kept), k = 1, 2, 4, ... and kinds' ends."""
    known = {(p.strategy, p.layout): p for p in preds}
    for k in machine_counts(topology.machines, faster_machine_counts(topology))[:-1]:
        on = on_first_machines(topology, k)
        predicted = predicted_on(on, model, batch)
        if history:
            apply_history([p for p in predicted if (p.strategy, p.layout) not in known], history,
                          on, model, batch)  # fmt: skip
        yield k, on, [known.get((p.strategy, p.layout), p) for p in predicted]


def on_faster_machines(preds: list[Prediction], topology: Topology, model: ModelProfile,
                       batch: int, history: History,
                       counts: Collection[int] | None = None) -> list[Prediction]:  # fmt: skip
    """Feasible candidates `preds` lacks on the fastest k machines, k in `counts` or kinds' ends."""
    counts = faster_machine_counts(topology) if counts is None else counts
    known = {(p.strategy, p.layout) for p in preds}
    parts = predicted_on_fewer_machines(preds, topology, model, batch, history)
    new = [(k, p) for k, _, ps in parts for p in ps if (p.strategy, p.layout) not in known]
    return [p for k, p in new if p.feasible and p.layout.workers == k and k in counts]


def faster_machines_sentence(chosen: Prediction, preds: list[Prediction], topology: Topology,
                             model: ModelProfile) -> str:  # fmt: skip
    """Why `chosen` leaves the slower machines free: too little memory, or too slow (`preds`)."""
    k, n = chosen.layout.workers, topology.machines
    gpus = machine_gpus(topology, n)
    kinds = gpus if topology.gpu_mix else ["faster"] * k + ["slower"] * (n - k)
    head = f"Use {_machines_said(kinds[:k])} alone and leave {_machines_said(kinds[k:])} free"
    on_all = [p for p in preds if p.layout.workers == n]
    if short := [p.strategy for p in on_all if p.misfit]:
        small = min(map(device, gpus[k:]), key=lambda gpu: gpu.memory_gb)
        replica = f"a replica of {model.name} at a per-GPU batch of {chosen.per_replica_batch}"
        return (f"{head}: {replica} does not fit {a_device(small.name)} ({small.memory_gb:g} GB), "
                f"so {' and '.join(short)} on all {n} machines cannot run.")  # fmt: skip
    slowest = max(machine_slowdowns(topology, n)[k:])
    head += f" ({slowest:.2g}x slower)" if slowest > 1.0 else ""
    same = next((p for p in on_all if p.strategy == chosen.strategy and p.feasible), None)
    if same is None:
        return f"{head}."
    waits = "" if spec_for(same.strategy).uses_ps else ": synchronous steps wait for the slowest"
    return (f"{head}{waits}; {same.strategy} on all {n}: {same.rank_examples_per_second:,.0f} "
            f"examples/s against {chosen.rank_examples_per_second:,.0f}.")  # fmt: skip


def _machines_said(kinds: list[str]) -> str:
    """`the t4 machine`, `the 4 a100 machines`, `the 2 v100 and 4 t4 machines`."""
    if len(kinds) == 1:
        return f"the {kinds[0]} machine"
    return "the " + " and ".join(f"{n} {kind}" for kind, n in Counter(kinds).items()) + " machines"
