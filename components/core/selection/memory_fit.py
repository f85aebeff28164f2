"""The candidates at a per-replica batch that fits the GPUs' memory, and what the
memory check found."""

from __future__ import annotations

from components.core.hardware import Gpu
from components.core.model_profile import ModelProfile
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.memory import (
    OPTIMIZER_STATE_FACTOR,
    USABLE_MEMORY_FRACTION,
    max_batch_that_fits,
    memory_needed_bytes,
)
from components.core.selection.prediction import Prediction, candidates
from components.core.selection.topology import Topology, a_device, device
from components.core.strategy_spec import spec_for


def candidates_that_fit(
    topology: Topology, model: ModelProfile, batch: int, gpu: Gpu, fit_replicated: int
) -> tuple[list[Prediction], int, list[str]]:
    """The candidates at a per-replica batch that fits one GPU, that batch, and reasons: only
    parameter_server when the embedding table fits no GPU; the largest batch that fits when
    the batch is too large."""
    preds = candidates(topology, model, batch)
    if fit_replicated >= batch:
        _check_mix_memory(preds, topology, model)
        return preds, batch, []
    need_gb = memory_needed_bytes(model, batch, True, topology.precision) / 1e9
    if fit_replicated == 0:
        for p in preds:
            if not spec_for(p.strategy).uses_ps:
                p.feasible = False
                p.note = "sparse embedding table does not fit one GPU"
        reason = (
            f"The {model.sparse_embedding_params:,}-parameter embedding table does not fit "
            f"one {gpu.name}: a replica with it needs {need_gb:,.1f} GB for weights, gradients, "
            "Adam state and activations; "
            "parameter servers hold it in host memory and send only the rows a step touches."
        )
        _check_mix_memory(preds, topology, model)
        return preds, batch, [reason] + _sharded_embedding_reasons(topology, model, gpu)
    usable = fit_replicated
    reason = (
        f"A per-GPU batch of {batch} needs {need_gb:,.1f} GB, more than the "
        f"{gpu.memory_gb * USABLE_MEMORY_FRACTION:.0f} GB usable on {a_device(gpu.name)}; "
        f"use at most {usable:,} per GPU (or accumulate gradients). Predictions use {usable:,}."
    )
    preds = candidates(topology, model, usable)
    _check_mix_memory(preds, topology, model)
    return preds, usable, [reason]


def _check_mix_memory(preds: list[Prediction], topology: Topology, model: ModelProfile) -> None:
    """Marks infeasible the candidates of a GPU mix whose replica does not fit the
    smallest GPU of the machines they use (the first machine's was checked already)."""
    if not topology.gpu_mix:
        return
    for p in preds:
        smallest = min((device(g) for g in machine_gpus(topology, p.layout.workers)),
                       key=lambda g: g.memory_gb)  # fmt: skip
        replicated = not spec_for(p.strategy).uses_ps
        fits = max_batch_that_fits(model, smallest.memory_gb, replicated, topology.precision)
        if p.feasible and fits < p.per_replica_batch:
            p.feasible, p.misfit = False, True
            p.note = f"a replica does not fit {a_device(smallest.name)}"


def _sharded_embedding_reasons(topology: Topology, model: ModelProfile, gpu: Gpu) -> list[str]:
    """The GPU-sharded embedding alternative, when the table fits all the GPUs' memory."""
    table_gb = model.sparse_embedding_params * 4 * (2 + OPTIMIZER_STATE_FACTOR) / 1e9
    usable_gb = topology.total_gpus * gpu.memory_gb * USABLE_MEMORY_FRACTION
    if table_gb > usable_gb * 0.8:  # leave a fifth for the dense model and activations
        return []
    return [
        f"Beyond these three strategies: the table ({table_gb:,.0f} GB with gradients and "
        f"Adam state) fits the {topology.total_gpus} GPUs' {usable_gb:,.0f} GB together, so "
        "sharding it across GPU memory (each GPU holds a slice; looked-up rows travel "
        "all-to-all, as in TensorFlow Recommenders' sharded embeddings, DTensor or NVIDIA's "
        "HugeCTR/SOK) avoids parameter-server round trips. Strategist does not run it, as "
        "it does not run model parallelism."
    ]
