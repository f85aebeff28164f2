"""An input-bound answer on the fewest GPUs per machine that take all the input, and an
answer whose faster machines alone the input holds back."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import step_compute_share
from components.core.selection.history import apply_history
from components.core.selection.machine_speeds import (
    machine_gpus,
    machine_slowdowns,
    slowest_machine,
)
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.prediction import Prediction, candidates_that_fit
from components.core.selection.rules import asynchronous_allowed
from components.core.selection.topology import Topology, a_device, device


def fewest_gpus_the_input_keeps_busy(
    chosen: Prediction,
    on: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: Sequence[Mapping[str, Any]] = (),
) -> tuple[Prediction, Topology, list[str]]:
    """The input-bound `chosen` on the fewest GPUs per machine (of the GPU's machine types) that
    still take all the input, the machines that run it, and the sentence that says so; the
    same strategy where it can, and a measured `chosen` stays."""
    if chosen.measured_examples_per_second is not None or chosen.layout.gpus_per_machine < 2:
        return chosen, on, []
    gpu = device(on.gpu)
    counts = sorted(gpu.machine_types) or range(1, chosen.layout.gpus_per_machine)
    fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, on.precision)
    # the slowest machine's GPUs too must take all its input (a mix, --heterogeneous)
    share = step_compute_share(chosen.single_gpu_step_s)
    slowest_gpu = (
        chosen.per_replica_batch
        / chosen.single_gpu_step_s
        / slowest_machine(on, chosen.layout.workers, share)
    )
    feed = on.input_examples_per_second
    for g in (c for c in counts if c < chosen.layout.gpus_per_machine and c * slowest_gpu > feed):
        fewer = dataclasses.replace(on, gpus_per_machine=g)
        predicted, _, _ = candidates_that_fit(fewer, model, batch, gpu, fit_replicated)
        if history:
            apply_history(predicted, history, fewer, model, batch)
        pool = [
            p
            for p in predicted
            if p.feasible
            and p.layout.workers == chosen.layout.workers
            and asynchronous_allowed(p, fewer, model, async_ok)
            and (p.input_bound or p.rank_examples_per_second >= chosen.examples_per_second)
        ]
        pool = [p for p in pool if p.strategy == chosen.strategy] or pool
        if pool:
            fed = max(pool, key=lambda p: p.rank_examples_per_second)
            return fed, fewer, [fewer_gpus_sentence(chosen, fed, on)]
    return chosen, on, []


def fewer_gpus_sentence(full: Prediction, fed: Prediction, topology: Topology) -> str:
    """Why `fed` leaves GPUs of each machine free: the input cannot keep them busy."""
    share = step_compute_share(full.single_gpu_step_s)
    slowdowns = machine_slowdowns(topology, full.layout.workers, share)
    slowest = machine_gpus(topology, full.layout.workers)[slowdowns.index(max(slowdowns))]
    per_gpu = full.per_replica_batch / full.single_gpu_step_s / max(slowdowns)
    g, all_g = fed.layout.gpus_per_machine, full.layout.gpus_per_machine
    gpus = f"{g} GPU{'s' if g > 1 else ''}"
    which = f"one {slowest}" + (" (the slowest)" if max(slowdowns) > 1 else "")
    return (
        "More GPUs per machine buy nothing here: each machine's input pipeline feeds "
        f"{topology.input_examples_per_second:,.0f} examples/s and {which} alone computes "
        f"{per_gpu:,.0f}, so {fed.strategy} on {gpus} per machine trains "
        f"{fed.rank_examples_per_second:,.0f} examples/s, against "
        f"{full.examples_per_second:,.0f} for {full.strategy} on all {all_g}. Use {gpus} per "
        f"machine and leave {all_g - g} free."
    )


def partly_fed_sentence(chosen: Prediction, topology: Topology) -> str:
    """Why parameter-server `chosen` trains fewer examples than its GPUs compute: its faster
    machines' input pipelines feed less than those compute."""
    feed = chosen.machine_feed
    computed = chosen.computed_examples_per_second
    kinds = _machine_kinds(topology, chosen.layout.workers)
    held: list[str] = []
    kept: list[str] = []
    for (share, n), kind in zip(chosen.machine_shares, kinds, strict=True):
        one = a_device(kind) if topology.gpu_mix else f"a {kind}"
        said = f"{one} machine" if n == 1 else f"{n} {kind} machines"
        (held if computed * share > feed else kept).append(f"{said} ({computed * share:,.0f})")
    return (
        f"Each machine's input pipeline feeds only its own GPUs, {feed:,.0f} examples/s: "
        f"less than the GPUs of {' and '.join(held)} compute, more than those of "
        f"{' and '.join(kept)}, so {chosen.strategy} trains "
        f"{chosen.examples_per_second:,.0f} examples/s where its GPUs compute "
        f"{computed:,.0f}: faster input on the {kinds[0]} machines pays first."
    )


def _machine_kinds(topology: Topology, workers: int) -> list[str]:
    """One word per `machine_slowdowns` group of the first `workers` machines: each GPU
    type of a mix (fastest first), or `faster` and `slower` (`--heterogeneous`)."""
    if topology.gpu_mix:
        return list(dict.fromkeys(machine_gpus(topology, workers)))
    return ["faster", "slower"]
