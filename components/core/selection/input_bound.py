"""Input-bound answers: on the fewest GPUs per machine that take all the input, or held back."""

from __future__ import annotations

import dataclasses

from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import step_compute_share
from components.core.selection.explanation import plural
from components.core.selection.history import apply_history
from components.core.selection.machine_speeds import gpu_types, slowest_machine
from components.core.selection.machine_subsets import History
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.prediction import Prediction, candidates_that_fit
from components.core.selection.rules import asynchronous_allowed, measured
from components.core.selection.topology import Topology, a_device, device


def fewest_gpus_the_input_keeps_busy(
    full: Prediction,
    on: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: History,
) -> tuple[Prediction, Topology, list[str]]:
    """The input-bound `full` on the fewest GPUs per machine that take all the input, where, why."""
    gpus, least = full.layout.gpus_per_machine, full.examples_per_second
    if measured(full) or gpus < 2:
        return full, on, []
    gpu = device(on.gpu)
    fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, on.precision)
    # the slowest machine's GPUs too must take all its input (a mix, --heterogeneous)
    per_gpu = _slowest_gpu(full, on)[1]
    counts = sorted(gpu.machine_types) or range(1, gpus)
    for g in (c for c in counts if c < gpus and c * per_gpu > on.input_examples_per_second):
        fewer = dataclasses.replace(on, gpus_per_machine=g)
        predicted, _, _ = candidates_that_fit(fewer, model, batch, gpu, fit_replicated)
        apply_history(predicted, history, fewer, model, batch)
        pool = [p for p in predicted if p.feasible and p.layout.workers == full.layout.workers]
        pool = [p for p in pool if p.input_bound or p.rank_examples_per_second >= least]
        pool = [p for p in pool if asynchronous_allowed(p, fewer, model, async_ok)]
        pool = [p for p in pool if p.strategy == full.strategy] or pool
        if pool:
            fed = max(pool, key=lambda p: p.rank_examples_per_second)
            return fed, fewer, [fewer_gpus_sentence(full, fed, on)]
    return full, on, []


def fewer_gpus_sentence(full: Prediction, fed: Prediction, topology: Topology) -> str:
    """Why `fed` leaves GPUs of each machine free: the input cannot keep them busy."""
    slowest, per_gpu = _slowest_gpu(full, topology)
    one = f"one {gpu_types(topology, full.layout.workers)[-1]}"
    one += " (the slowest)" if slowest > 1 else ""
    g, all_g = fed.layout.gpus_per_machine, full.layout.gpus_per_machine
    return (
        "More GPUs per machine buy nothing here: each machine's input pipeline feeds "
        f"{topology.input_examples_per_second:,.0f} examples/s and {one} alone computes "
        f"{per_gpu:,.0f}, so {fed.strategy} on {plural(g, 'GPU')} per machine trains "
        f"{fed.rank_examples_per_second:,.0f} examples/s, against {full.examples_per_second:,.0f} "
        f"for {full.strategy} on all {all_g}. Use {plural(g, 'GPU')} per machine and leave "
        f"{all_g - g} free."
    )


def partly_fed_sentence(chosen: Prediction, topology: Topology) -> str:
    """Why parameter-server `chosen` trains less than its GPUs compute: its faster ones starve."""
    feed, computed = chosen.machine_feed, chosen.computed_examples_per_second
    # one word per group of machines of a speed, fastest first
    kinds = gpu_types(topology, chosen.layout.workers) if topology.gpu_mix else ["faster", "slower"]
    held, kept = [], []
    for (share, n), kind in zip(chosen.machine_shares, kinds, strict=True):
        one = a_device(kind) if topology.gpu_mix else f"a {kind}"
        said = f"{one} machine" if n == 1 else f"{n} {kind} machines"
        (held if computed * share > feed else kept).append(f"{said} ({computed * share:,.0f})")
    return (
        f"Each machine's input pipeline feeds only its own GPUs, {feed:,.0f} examples/s: less than "
        f"the GPUs of {' and '.join(held)} compute, more than those of {' and '.join(kept)}, so "
        f"{chosen.strategy} trains {chosen.examples_per_second:,.0f} examples/s where its GPUs "
        f"compute {computed:,.0f}: faster input on the {kinds[0]} machines pays first."
    )


def _slowest_gpu(candidate: Prediction, topology: Topology) -> tuple[float, float]:
    """How much slower `candidate`'s slowest machine computes, and one of its GPUs' examples/s."""
    share = step_compute_share(candidate.single_gpu_step_s)
    slowest = slowest_machine(topology, candidate.layout.workers, share)
    return slowest, candidate.per_replica_batch / candidate.single_gpu_step_s / slowest
