"""Parts of a cluster a candidate can run on: its first machines, one GPU type of a mix, and the
candidates costed on 1, 2, 4, ... of the machines and on a mix's faster machines alone."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from components.core.model_profile import ModelProfile
from components.core.selection.history import apply_history
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.memory_fit import candidates_that_fit
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology, device
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


def costed_on_fewer_machines(
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
        costed, _, _ = candidates_that_fit(on, model, batch, gpu, fit_replicated)
        if history:
            apply_history([p for p in costed if (p.strategy, p.layout) not in known], history,
                          on, model, batch)  # fmt: skip
        yield k, on, [known.get((p.strategy, p.layout), p) for p in costed]
