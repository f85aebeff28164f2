"""What was estimated or assumed for inputs the user did not give, and the answer at
both ends of each estimate."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from components.core import model_profile as mp
from components.core.model_profile import ModelProfile
from components.core.selection.explanation import slower_machines_phrase
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.topology import (
    HETEROGENEITY_RANGE,
    NETWORK_RANGE_GBPS,
    Topology,
    device,
)

if TYPE_CHECKING:
    from components.core.selection.recommendation import Recommendation


class UnknownInputs(NamedTuple):
    """A sentence per estimate or assumption, and the flags whose value changes the choice."""

    reasons: tuple[str, ...] = ()
    deciding: tuple[str, ...] = ()


def unknown_input_reasons(
    topology: Topology,
    model: ModelProfile,
    batch_size: int,
    unstated: Sequence[str],
    answer: Callable[[Topology, ModelProfile], Recommendation],
) -> UnknownInputs:
    """Each estimate or assumption with the answer at its ends (`answer` recommends with every
    other setting as asked); `unstated` names the hardware inputs the user did not give."""
    reasons, deciding = [], []
    for flag, assumed, ends in _assumed(topology, model, unstated):
        said = [(label, *_choice(answer(on, variant))) for label, on, variant in ends]
        if len({choice for _, choice, _ in said}) > 1:
            deciding.append(flag)
        lead = "depends on it" if flag in deciding else "is the same at both ends"
        at_ends = "; ".join(f"{label}: {words}" for label, _, words in said)
        reasons.append(f"{assumed} The answer {lead}: {at_ends}. Give {flag} for one answer.")
    if "activations" in model.estimated:
        reasons.append(
            "Activation memory was not given (--activation-bytes-per-example): estimated at "
            f"{model.activation_bytes_per_example / 1e6:,.3g} MB per example "
            f"({mp.ACTIVATION_BYTES_PER_FLOP:g} bytes per forward FLOP, the high end of "
            f"the published CNNs).{_batch_cap_range(topology, model, batch_size)}"
        )
    return UnknownInputs(tuple(reasons), tuple(deciding))


def _assumed(topology: Topology, model: ModelProfile, unstated: Sequence[str]) -> Iterator[tuple]:
    """Each input estimated or assumed: its flag, what was assumed, and the (label, hardware,
    model) at each of its ends."""
    replace = dataclasses.replace
    if "flops" in model.estimated:
        yield "--gflops-per-example", (
            "The FLOPs per example were not given (--gflops-per-example): estimated at "
            f"{model.flops_per_example / 1e9:,.3g} GFLOPs ({mp.FLOPS_PER_PARAM_ESTIMATE:.0f} "
            "per parameter, between an MLP and a CNN)."
        ), [
            (f"{label} ({k:g} FLOPs per parameter)", topology,
             replace(model, flops_per_example=k * model.params, estimated=()))
            for label, k in (("MLP-like", mp.FLOPS_PER_PARAM_LOW),
                             ("CNN-like", mp.FLOPS_PER_PARAM_HIGH))
        ]  # fmt: skip
    if topology.machines == 1:
        return
    if "network" in unstated:
        yield "--network-gbps", (
            f"The network was not given (--network-gbps): {topology.network_gbps:g} Gbit/s per "
            "NIC is assumed (iperf between two of the machines measures it)."
        ), [(f"at {v:g} Gbit/s", replace(topology, network_gbps=v), model)
            for v in NETWORK_RANGE_GBPS]  # fmt: skip
    if "network_path" in unstated:
        yield "--network-path", (
            "The network path was not given (--network-path): the machines' own network "
            "(host) is assumed."
        ), [("through a container overlay (kubenet, flannel VXLAN)",
             replace(topology, network_path="overlay"), model),
            ("on the host network", topology, model)]  # fmt: skip
    if "heterogeneity" in unstated:
        yield "--heterogeneous FACTOR", (
            "How much slower the slower machines are was not given (--heterogeneous without "
            f"FACTOR): {slower_machines_phrase(topology)} assumed "
            f"{topology.heterogeneity_slowdown:g}x slower."
        ), [(f"at {v:g}x", replace(topology, heterogeneity_slowdown=v), model)
            for v in HETEROGENEITY_RANGE]  # fmt: skip


def _choice(rec: Recommendation) -> tuple[tuple[str, int, str], str]:
    """An answer's choice (strategy, machines, a mix's GPU) and its words for a sentence:
    `mirrored on 1 machine(s)`, `... on 2 t4 machine(s)`."""
    gpu = rec.chosen.machines_gpu if rec.chosen else ""
    machines = rec.layout.workers if rec.layout else 0
    on = f"{machines} {gpu + ' ' if gpu else ''}machine(s)" if rec.layout else "no layout"
    return (rec.strategy, machines, gpu), f"{rec.strategy} on {on}"


def _batch_cap_range(topology: Topology, model: ModelProfile, batch_size: int) -> str:
    """When estimated activations cap the batch: the cap at the estimate's low end too."""
    memory_gb = device(machine_gpus(topology, 1)[0]).memory_gb  # what `recommend` checks
    fits = max_batch_that_fits(model, memory_gb, True, topology.precision)
    if fits >= batch_size or fits == 0:
        return ""
    low_bytes = mp.ACTIVATION_BYTES_PER_FLOP_LOW * model.flops_per_example
    low = dataclasses.replace(model, activation_bytes_per_example=low_bytes)
    fits_low = min(max_batch_that_fits(low, memory_gb, True, topology.precision), batch_size)
    return (
        f" The estimate decides the batch: {fits:,} per GPU fits at it, {fits_low:,} at the low "
        f"end ({mp.ACTIVATION_BYTES_PER_FLOP_LOW:g} bytes per FLOP, VGG-16). Give "
        "--activation-bytes-per-example for one answer."
    )
