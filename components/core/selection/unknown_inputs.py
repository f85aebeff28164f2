"""What was estimated or assumed for inputs the user did not give, and the answer at
both ends of each estimate."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from components.core import model_profile as mp
from components.core.model_profile import ModelProfile
from components.core.selection.explanation import slower_machines_phrase
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.prediction import Prediction
from components.core.selection.topology import (
    HETEROGENEITY_RANGE,
    NETWORK_RANGE_GBPS,
    Layout,
    Topology,
    device,
)


class Answer(Protocol):
    """What this module reads of an answer (`recommendation.Recommendation`)."""

    strategy: str
    layout: Layout | None
    chosen: Prediction | None


def _choice(rec: Answer) -> tuple[str, int, str]:
    """An answer's choice: its strategy, machines and (in a mix) their GPU."""
    machines = rec.layout.workers if rec.layout else 0
    gpu = rec.chosen.machines_gpu if rec.chosen else ""
    return rec.strategy, machines, gpu


@dataclass(frozen=True)
class UnknownInputs:
    """What was estimated or assumed, said, and the flags whose value changes the choice.

    Attributes:
        reasons: a sentence per estimate or assumption, with the answer at its ends.
        deciding: the flag that settles each estimate whose ends give different choices.
    """

    reasons: tuple[str, ...] = ()
    deciding: tuple[str, ...] = ()


def unknown_input_reasons(
    topology: Topology,
    model: ModelProfile,
    batch_size: int,
    unstated: Sequence[str],
    answer: Callable[[Topology, ModelProfile], Answer],
) -> UnknownInputs:
    """What was estimated or assumed (FLOPs and activations of a `--params` model; the network,
    its path and the machines' speeds in `unstated`), and the answer at each estimate's ends:
    `answer` recommends with every other setting as asked, on other hardware or model."""
    reasons = []
    deciding: list[str] = []

    def weigh(answers: Sequence[tuple[str, tuple[str, int, str]]], flag: str) -> str:
        """`_at_both_ends`, noting `flag` as deciding when the choices differ."""
        if len({choice for _, choice in answers}) > 1:
            deciding.append(flag)
        return _at_both_ends(answers)

    if "flops" in model.estimated:
        answers = []
        for label, per_param in (("MLP-like", mp.FLOPS_PER_PARAM_LOW),
                                 ("CNN-like", mp.FLOPS_PER_PARAM_HIGH)):  # fmt: skip
            variant = dataclasses.replace(
                model, flops_per_example=per_param * model.params, estimated=()
            )
            rec = answer(topology, variant)
            layout = f"{rec.layout.workers} worker(s)" if rec.layout else "no layout"
            said = f"{label} ({per_param:g} FLOPs per parameter): {rec.strategy}, {layout}"
            answers.append((said, _choice(rec)))
        reasons.append(
            "The FLOPs per example were not given (--gflops-per-example), so they are an "
            f"estimate: {model.flops_per_example / 1e9:,.3g} GFLOPs "
            f"({mp.FLOPS_PER_PARAM_ESTIMATE:.0f} per parameter, between an MLP and a CNN). "
            f"{weigh(answers, '--gflops-per-example')} Give --gflops-per-example "
            "for one answer."
        )
    if "network" in unstated and topology.machines > 1:
        answers = [
            _said(f"at {gbps:g} Gbit/s", answer(on, model))
            for gbps, on in _varied(topology, "network_gbps", NETWORK_RANGE_GBPS)
        ]
        reasons.append(
            f"The network was not given (--network-gbps): {topology.network_gbps:g} Gbit/s "
            f"per NIC is assumed. {weigh(answers, '--network-gbps')} Give "
            "--network-gbps (iperf between two of the machines measures it) for one answer."
        )
    if "network_path" in unstated and topology.machines > 1:
        overlay = dataclasses.replace(topology, network_path="overlay")
        through = answer(overlay, model)
        if _choice(through) != _choice(answer(topology, model)):
            deciding.append("--network-path")
        reasons.append(
            "The network path was not given (--network-path): the machines' own network "
            "(host) is assumed. Through a container overlay network (Kubernetes kubenet, "
            f"flannel VXLAN) the answer would be {_on_machines(through)}. Give "
            "--network-path for one answer."
        )
    if "heterogeneity" in unstated and topology.machines > 1:
        answers = [
            _said(f"at {slowdown:g}x", answer(on, model))
            for slowdown, on in _varied(topology, "heterogeneity_slowdown", HETEROGENEITY_RANGE)
        ]
        reasons.append(
            "How much slower the slower machines are was not given (--heterogeneous "
            f"without FACTOR): {slower_machines_phrase(topology)} assumed "
            f"{topology.heterogeneity_slowdown:g}x slower. "
            f"{weigh(answers, '--heterogeneous FACTOR')} Give --heterogeneous FACTOR "
            "(one step's time on the slowest machine over the fastest's) or a --gpu mix for "
            "one answer."
        )
    if "activations" in model.estimated:
        reasons.append(
            "Activation memory was not given (--activation-bytes-per-example): estimated at "
            f"{model.activation_bytes_per_example / 1e6:,.3g} MB per example "
            f"({mp.ACTIVATION_BYTES_PER_FLOP:g} bytes per forward FLOP, the high end of "
            f"the published CNNs).{_batch_cap_range(topology, model, batch_size)}"
        )
    return UnknownInputs(tuple(reasons), tuple(deciding))


def _varied(topology: Topology, field: str, values: Sequence[Any]) -> list[tuple[Any, Topology]]:
    """`topology` with its `field` at each of `values`."""
    return [(v, dataclasses.replace(topology, **{field: v})) for v in values]


def _on_machines(rec: Answer) -> str:
    """An answer for a sentence: `mirrored on 1 machine(s)`, or `... 1 t4 machine(s)`."""
    if not rec.layout:
        return f"{rec.strategy} on no layout"
    gpu = f"{rec.chosen.machines_gpu} " if rec.chosen and rec.chosen.machines_gpu else ""
    return f"{rec.strategy} on {rec.layout.workers} {gpu}machine(s)"


def _said(label: str, rec: Answer) -> tuple[str, tuple[str, int, str]]:
    """An answer at one end of an estimate: its words and its choice."""
    return f"{label}: {_on_machines(rec)}", _choice(rec)


def _at_both_ends(answers: Sequence[tuple[str, tuple[str, int, str]]]) -> str:
    """`answers` (words, choice) at the ends of an estimate, for a sentence: whether the
    choices differ."""
    same = len({choice for _, choice in answers}) == 1
    lead = "The answer is the same at both ends" if same else "The answer depends on it"
    return f"{lead}: {'; '.join(said for said, _ in answers)}."


def _batch_cap_range(topology: Topology, model: ModelProfile, batch_size: int) -> str:
    """When estimated activations cap the batch: the cap at the estimate's low end too."""
    memory_gb = device(machine_gpus(topology, 1)[0]).memory_gb  # what `recommend` checks
    fits = max_batch_that_fits(model, memory_gb, True, topology.precision)
    if fits >= batch_size or fits == 0:
        return ""
    low = dataclasses.replace(
        model,
        activation_bytes_per_example=mp.ACTIVATION_BYTES_PER_FLOP_LOW * model.flops_per_example,
    )
    fits_low = min(max_batch_that_fits(low, memory_gb, True, topology.precision), batch_size)
    return (
        f" The estimate decides the batch: {fits:,} per GPU fits at it, {fits_low:,} at the low "
        f"end ({mp.ACTIVATION_BYTES_PER_FLOP_LOW:g} bytes per FLOP, VGG-16). Give "
        "--activation-bytes-per-example for one answer."
    )
