"""What was estimated or assumed for inputs the user did not give, and the answer at
both ends of each estimate."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from components.core import model_profile as mp
from components.core.model_profile import ModelProfile
from components.core.selection.explanation import slower_machines_phrase
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.topology import HETEROGENEITY_RANGE, NETWORK_RANGE_GBPS, device

if TYPE_CHECKING:
    from components.core.selection.recommendation import Recommendation
    from components.core.selection.topology import Topology


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
    """Each estimate or assumption, with the answer at its ends (`answer` recommends with every
    other setting as asked); `unstated` names the hardware inputs the user did not give."""
    replace, several = dataclasses.replace, topology.machines > 1
    assumed = []  # (flag, what was assumed, the (label, hardware, model) at each end)
    if "flops" in model.estimated:
        assumed.append(("--gflops-per-example", "The FLOPs per example were not given "
            f"(--gflops-per-example): estimated at {model.flops_per_example / 1e9:,.3g} GFLOPs "
            f"({mp.FLOPS_PER_PARAM_ESTIMATE:.0f} per parameter, between an MLP and a CNN).",
            [(f"{label} ({k:g} FLOPs per parameter)", topology,
              replace(model, flops_per_example=k * model.params, estimated=()))
             for label, k in (("MLP-like", mp.FLOPS_PER_PARAM_LOW),
                              ("CNN-like", mp.FLOPS_PER_PARAM_HIGH))]))  # fmt: skip
    if several and "network" in unstated:
        assumed.append(("--network-gbps", "The network was not given (--network-gbps): "
            f"{topology.network_gbps:g} Gbit/s per NIC is assumed (iperf between two of the "
            "machines measures it).",
            [(f"at {v:g} Gbit/s", replace(topology, network_gbps=v), model)
             for v in NETWORK_RANGE_GBPS]))  # fmt: skip
    if several and "network_path" in unstated:
        overlay = replace(topology, network_path="overlay")
        assumed.append(("--network-path", "The network path was not given (--network-path): "
            "the machines' own network (host) is assumed.",
            [("through a container overlay (kubenet, flannel VXLAN)", overlay, model),
             ("on the host network", topology, model)]))  # fmt: skip
    if several and "heterogeneity" in unstated:
        assumed.append(("--heterogeneous FACTOR", "How much slower the slower machines are was "
            f"not given (--heterogeneous without FACTOR): {slower_machines_phrase(topology)} "
            f"assumed {topology.heterogeneity_slowdown:g}x slower.",
            [(f"at {v:g}x", replace(topology, heterogeneity_slowdown=v), model)
             for v in HETEROGENEITY_RANGE]))  # fmt: skip
    reasons, deciding = [], []
    for flag, said, ends in assumed:
        choices = [(label, *_choice(answer(on, variant))) for label, on, variant in ends]
        if len({choice for _, choice, _ in choices}) > 1:
            deciding.append(flag)
        lead = "depends on it" if flag in deciding else "is the same at both ends"
        at_ends = "; ".join(f"{label}: {words}" for label, _, words in choices)
        reasons.append(f"{said} The answer {lead}: {at_ends}. Give {flag} for one answer.")
    if "activations" in model.estimated:
        memory_gb = device(machine_gpus(topology, 1)[0]).memory_gb  # what `recommend` checks
        low = mp.ACTIVATION_BYTES_PER_FLOP_LOW * model.flops_per_example
        fits, fits_low = (
            max_batch_that_fits(m, memory_gb, True, topology.precision)
            for m in (model, replace(model, activation_bytes_per_example=low))
        )
        cap = (
            f" The estimate decides the batch: {fits:,} per GPU fits at it, "
            f"{min(fits_low, batch_size):,} at the low end ({mp.ACTIVATION_BYTES_PER_FLOP_LOW:g} "
            "bytes per FLOP, VGG-16). Give --activation-bytes-per-example for one answer."
        )
        reasons.append(
            "Activation memory was not given (--activation-bytes-per-example): estimated at "
            f"{model.activation_bytes_per_example / 1e6:,.3g} MB per example "
            f"({mp.ACTIVATION_BYTES_PER_FLOP:g} bytes per forward FLOP, the high end of the "
            f"published CNNs).{cap if fits != 0 and fits < batch_size else ''}"
        )
    return UnknownInputs(tuple(reasons), tuple(deciding))


def _choice(rec: Recommendation) -> tuple[tuple[str, int, str], str]:
    """An answer's choice (strategy, machines, a mix's GPU), and its words for a sentence."""
    gpu = rec.chosen.machines_gpu if rec.chosen else ""
    machines = rec.layout.workers if rec.layout else 0
    on = f"{machines} {gpu + ' ' if gpu else ''}machine(s)" if rec.layout else "no layout"
    return (rec.strategy, machines, gpu), f"{rec.strategy} on {on}"
