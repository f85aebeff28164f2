"""The selector's answer for a topology and a model, and how it is reached."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.core.config import ConfigError
from components.core.hardware import Gpu
from components.core.model_profile import ModelProfile
from components.core.selection.cost import (
    missing_prices,
    price_basis,
    price_basis_reasons,
    prices_used,
)
from components.core.selection.cost_model import (
    OPTIMIZER_STATE_FACTOR,
    USABLE_MEMORY_FRACTION,
    machine_gpus,
    machine_slowdowns,
    max_batch_that_fits,
    mean_machine_speed,
    memory_needed_bytes,
)
from components.core.selection.explanation import communication_sentences, explain
from components.core.selection.history import apply_history
from components.core.selection.prediction import Prediction, candidates, six_digits
from components.core.selection.rules import (
    apply_rules,
    asynchronous_allowed,
    prefer_simpler,
)
from components.core.selection.topology import (
    HETEROGENEITY_RANGE,
    NETWORK_RANGE_GBPS,
    Layout,
    Topology,
    device,
)
from components.core.strategy_spec import spec_for

MODEL_PARALLELISM = "model_parallelism"
# Below this machine scaling efficiency (throughput on k machines over what the k
# machines give alone), extra machines buy too little to be worth paying for:
# the selector recommends the most machines that stay above it.
EFFICIENCY_FLOOR = 0.50
OBJECTIVES = ("time", "cost")


@dataclass
class Recommendation:
    """The selector's answer.

    Attributes:
        strategy: one of `config.STRATEGIES`, or `model_parallelism`.
        supported: False when Strategist cannot train the model as asked.
        layout: workers / ps / GPUs per machine, or None when unsupported.
        chosen: the chosen candidate's prediction, or None when unsupported.
        alternatives: the other candidates, best first.
        reasons: plain sentences with numbers.
        topology: the hardware asked about.
        model: the model asked about.
        batch_size: the per-replica batch the predictions use.
        machine_options: (machines, strategy, predicted speed-up over one
            device, machine scaling efficiency) for each machine count
            considered when the full cluster scales below `EFFICIENCY_FLOOR`.
        prices: what the candidates were priced at (`cost.prices_used`), or
            None when they were not priced.
    """

    strategy: str
    supported: bool
    layout: Layout | None
    chosen: Prediction | None
    alternatives: list[Prediction]
    reasons: list[str]
    topology: Topology
    model: ModelProfile
    batch_size: int = 64
    machine_options: list[tuple[int, str, float, float]] = dataclasses.field(default_factory=list)
    prices: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The `strategist select --json` document."""
        chosen = self.chosen.to_dict() if self.chosen else None
        return {
            "strategy": self.strategy,
            "supported": self.supported,
            "layout": self.layout.to_dict() if self.layout else None,
            # a GPU mix's slower type the choice runs on alone (None: its first machines)
            "machines_gpu": (self.chosen.machines_gpu or None) if self.chosen else None,
            "predicted": chosen["predicted"] if chosen else None,
            "measured": chosen.get("measured") if chosen else None,
            # As each alternative carries it: the text table's USD/M column, when priced.
            "usd_per_million_examples": chosen.get("usd_per_million_examples") if chosen else None,
            "prices": self.prices,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "reasons": list(self.reasons),
            "machine_options": [
                {
                    "machines": m,
                    "strategy": st,
                    "speedup": round(x, 3),
                    "machine_efficiency": round(e, 4),
                }
                for m, st, x, e in self.machine_options
            ],
            "inputs": {
                "topology": dataclasses.asdict(self.topology),
                "model": self.model.to_dict(),
                "per_replica_batch_size": self.batch_size,
            },
        }

    def _on_machines_of(self) -> str:
        """`, on the t4 machines` when the choice runs on one slower type of a mix alone."""
        gpu = self.chosen.machines_gpu if self.chosen else ""
        return f", on the {gpu} machines" if gpu else ""

    def _rows(self) -> list[list[str]]:
        """One table row per candidate, the chosen one first and marked `> `."""
        rows = []
        preds = ([self.chosen] if self.chosen else []) + self.alternatives
        for i, p in enumerate(preds):
            measured = (
                f"{p.measured_examples_per_second:,.0f}" if p.measured_examples_per_second else "-"
            )
            mark = "> " if i == 0 and self.supported else ""
            cost = p.usd_per_million_examples
            rows.append(
                [
                    mark + p.label + ("" if p.feasible else f" (infeasible: {p.note})"),
                    f"{p.layout.workers}/{p.layout.ps}/{p.layout.gpus_per_machine}",
                    f"{p.step_time_s * 1e3:,.1f}",
                    f"{p.compute_s * 1e3:,.1f}",
                    f"{p.communication_s * 1e3:,.1f}",
                    f"{p.examples_per_second:,.0f}" + (" (input)" if p.input_bound else ""),
                    f"{p.scaling_efficiency:.0%}",
                    measured,
                    "-" if cost is None else f"{cost:,.2f}",
                ]
            )
        return rows

    HEADER = [
        "strategy",
        "workers/ps/gpus",
        "step ms",
        "compute ms",
        "comm ms",
        "examples/s",
        "efficiency",
        "measured/s",
        "USD/1M examples",
    ]

    def to_markdown(self) -> str:
        """The same content as Markdown (for a KFP Markdown artifact)."""
        title = self.strategy + ("" if self.supported else " (not supported)")
        lines = [f"## Recommended strategy: `{title}`", ""]
        lines.append(
            f"Hardware: {self.topology.describe()}; model: "
            f"{self.model.name}; per-GPU batch {self.batch_size}."
        )
        if self.layout:
            lines.append(
                f"Layout: workers {self.layout.workers}, ps {self.layout.ps}, "
                f"GPUs per machine {self.layout.gpus_per_machine}{self._on_machines_of()}."
            )
        lines.append("")
        rows = self._rows()
        if rows:
            lines.append("| " + " | ".join(self.HEADER) + " |")
            lines.append("|" + "---|" * len(self.HEADER))
            lines.extend("| " + " | ".join(r) + " |" for r in rows)
            lines.append("")
        lines.append("### Reasons")
        lines.extend(f"- {r}" for r in self.reasons)
        return "\n".join(lines) + "\n"

    def to_text(self) -> str:
        """Plain text for the terminal."""
        lines = [
            f"recommended: {self.strategy}"
            + ("" if self.supported else " (not supported by Strategist)")
        ]
        if self.layout:
            lines.append(
                f"layout:      workers {self.layout.workers}, ps {self.layout.ps}, "
                f"GPUs per machine {self.layout.gpus_per_machine}{self._on_machines_of()}"
            )
        rows = self._rows()
        if rows:
            widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(self.HEADER)]
            lines.append("")
            lines.append("  ".join(h.ljust(w) for h, w in zip(self.HEADER, widths, strict=True)))
            lines.extend(
                "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows
            )
        lines.append("")
        lines.append("reasons:")
        lines.extend(f"  - {r}" for r in self.reasons)
        return "\n".join(lines)


def recommend(
    topology: Topology,
    model: ModelProfile,
    *,
    batch_size: int = 64,
    async_ok: bool = False,
    history: Sequence[Mapping[str, Any]] = (),
    prices: Any = None,
    objective: str = "time",
    unstated: Sequence[str] = (),
) -> Recommendation:
    """Chooses a strategy and layout for `model` on `topology`.

    Args:
        topology: the hardware.
        model: the model's profile (`model_profile.profile_model`, `from_params`, ...).
        batch_size: per-GPU (per-replica) batch.
        async_ok: asynchronous updates (parameter_server in TF2) are acceptable.
        history: `comparison.json` result records (`load_history`); measured
            throughput on matching hardware outranks the prediction.
        prices: a `comparison.pricing.PriceTable`; each candidate is then
            priced per million examples.
        objective: `time` (fastest at a machine scaling efficiency floor of
            `EFFICIENCY_FLOOR`) or `cost` (cheapest per example; needs `prices`).
        unstated: hardware inputs the user did not give (`network`): the
            reasons say what was assumed and give the answer at both ends.

    Returns:
        The recommendation; `model_parallelism` with `supported` False when the
        model cannot fit one GPU.

    Raises:
        ConfigError: for invalid hardware or batch size.
    """
    topology.validate()
    if objective not in OBJECTIVES or (objective == "cost" and prices is None):
        raise ConfigError(f"--objective {objective!r}: choose time, or cost with a price table")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"--batch-size must be a whole number of at least 1, got {batch_size!r}")
    gpu = device(topology.gpu)
    fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, topology.precision)
    fit_ps = max_batch_that_fits(model, gpu.memory_gb, False, topology.precision)
    if fit_ps == 0 or (fit_replicated == 0 and not model.sparse_embedding_params):
        return _model_parallelism(topology, model, batch_size, gpu)
    preds, batch, reasons = _candidates_that_fit(topology, model, batch_size, gpu, fit_replicated)
    history_reasons = apply_history(preds, history, topology, model, batch) if history else []
    basis: list[str] = []
    if prices is not None:
        basis = price_basis_reasons(topology, prices)
        _price(preds, topology, prices)
        # fewer machines, a mix's slower type alone, or fewer GPUs can cost less per example
        cheaper = _on_fewer_machines(preds, topology, model, batch, history, prices)
        of_one_type, measured_alone = _on_one_gpu_type(topology, model, batch, history, prices)
        cheaper += of_one_type
        fed = _on_fewer_gpus(preds + cheaper, topology, model, batch, history, prices)
        cheaper += [p for _, p in fed]
    if objective == "cost":
        if any(p.measured_examples_per_second is not None for p in cheaper):
            # one tally over every candidate weighed (a mix's slower type alone is
            # matched on its own machines, so it stays out of this one)
            alike = [p for p in preds + cheaper if not p.machines_gpu]
            history_reasons = apply_history(alike, history, topology, model, batch)
        if measured_alone:
            # records of a slower type matched on its own machines: the tally over the
            # mix's first machines would call them unmatched or ignored
            history_reasons = [
                r for r in history_reasons if r.startswith(("Measured:", "History records"))
            ] + measured_alone
        rec = _cheapest(preds + cheaper, topology, model, batch, reasons + history_reasons, prices)
        rec.reasons[1:1] = [
            _fewer_gpus_sentence(full, p, topology) for full, p in fed if p is rec.chosen
        ]
        rec.reasons[1:1] = basis  # right after the price that decided
    else:
        rec = _choose(
            preds, topology, model, batch, async_ok, reasons, history, history_reasons, prices
        )
        if prices is not None and rec.chosen is not None:
            # what --objective cost weighs: the table, the floor's count and the cheaper layouts
            weighed = [rec.chosen, *rec.alternatives, *cheaper]
            rec.reasons.extend(_cost_sentences(rec.chosen, weighed, topology, prices) + basis)

    if prices is not None:
        rec.prices = prices_used(topology, prices)

    def answer(on: Topology, variant: ModelProfile) -> Recommendation:
        """The answer, all else as asked, on other hardware or for another model."""
        return recommend(on, variant, batch_size=batch_size, async_ok=async_ok,
                         history=history, prices=prices, objective=objective)  # fmt: skip

    rec.reasons.extend(unknown_input_reasons(topology, model, batch_size, unstated, answer))
    rec.reasons.extend(_unmeasured_choice_reasons(rec, preds))
    return rec


def _unmeasured_choice_reasons(rec: Recommendation, preds: list[Prediction]) -> list[str]:
    """A warning when the choice is unmeasured while the measured fell short of predictions."""
    chosen = rec.chosen
    measured = [p for p in preds if p.measured_examples_per_second is not None]
    if chosen is None or chosen.measured_examples_per_second is not None or not measured:
        return []
    ratios = [p.measured_examples_per_second / p.examples_per_second for p in measured]
    if min(ratios) >= 0.9:
        return []
    return [
        f"{chosen.strategy} is chosen on its prediction alone, while the measured candidates "
        f"here ran at {min(ratios):.0%}-{max(ratios):.0%} of their predictions: measure it "
        f"(strategist compare --strategies {chosen.strategy},...) before relying on it."
    ]


def unknown_input_reasons(
    topology: Topology,
    model: ModelProfile,
    batch_size: int,
    unstated: Sequence[str],
    answer: Callable[[Topology, ModelProfile], Recommendation],
) -> list[str]:
    """What was estimated or assumed, and the answer at the ends of the estimate:
    `answer` recommends with every other setting as asked (objective, prices,
    history), on other hardware or for another model.

    A `--params` model without FLOPs gets `FLOPS_PER_PARAM_ESTIMATE` per
    parameter; the recommendation can flip between an MLP-like model (2 per
    parameter) and a CNN-like one (`FLOPS_PER_PARAM_HIGH`), so both are shown.
    Machines whose network was not given (`network` in `unstated`) are
    assumed to have one `DEFAULT_NETWORK_GBPS` NIC; the answer on a commodity
    and a datacenter NIC (`NETWORK_RANGE_GBPS`) is shown beside it. A network
    path not given (`network_path` in `unstated`) is assumed to be the host's;
    the answer through a container overlay network is shown beside it. Machines
    said to differ in speed by no mix or factor (`heterogeneity` in `unstated`)
    are assumed `HETEROGENEITY_SLOWDOWN` apart; the answer at both ends of
    `HETEROGENEITY_RANGE` is shown beside it.
    """
    from components.core import model_profile as mp

    reasons = []
    if "flops" in model.estimated:
        answers = []
        for label, per_param in (("MLP-like", mp.FLOPS_PER_PARAM_LOW),
                                 ("CNN-like", mp.FLOPS_PER_PARAM_HIGH)):  # fmt: skip
            variant = dataclasses.replace(
                model, flops_per_example=per_param * model.params, estimated=()
            )
            rec = answer(topology, variant)
            layout = f"{rec.layout.workers} worker(s)" if rec.layout else "no layout"
            answers.append(f"{label} ({per_param:g} FLOPs per parameter): {rec.strategy}, {layout}")
        reasons.append(
            "The FLOPs per example were not given (--gflops-per-example), so they are an "
            f"estimate: {model.flops_per_example / 1e9:,.3g} GFLOPs "
            f"({mp.FLOPS_PER_PARAM_ESTIMATE:.0f} per parameter, between an MLP and a CNN). "
            f"{_at_both_ends(answers)} Give --gflops-per-example "
            "for one answer."
        )
    if "network" in unstated and topology.machines > 1:
        answers = [
            f"at {gbps:g} Gbit/s: {_on_machines(answer(on, model))}"
            for gbps, on in _varied(topology, "network_gbps", NETWORK_RANGE_GBPS)
        ]
        reasons.append(
            f"The network was not given (--network-gbps): {topology.network_gbps:g} Gbit/s "
            f"per NIC is assumed. {_at_both_ends(answers)} Give "
            "--network-gbps (iperf between two of the machines measures it) for one answer."
        )
    if "network_path" in unstated and topology.machines > 1:
        overlay = dataclasses.replace(topology, network_path="overlay")
        reasons.append(
            "The network path was not given (--network-path): the machines' own network "
            "(host) is assumed. Through a container overlay network (Kubernetes kubenet, "
            f"flannel VXLAN) the answer would be {_on_machines(answer(overlay, model))}. Give "
            "--network-path for one answer."
        )
    if "heterogeneity" in unstated and topology.machines > 1:
        answers = [
            f"at {slowdown:g}x: {_on_machines(answer(on, model))}"
            for slowdown, on in _varied(topology, "heterogeneity_slowdown", HETEROGENEITY_RANGE)
        ]
        reasons.append(
            "How much slower the slower machines are was not given (--heterogeneous "
            f"without FACTOR): half are assumed {topology.heterogeneity_slowdown:g}x slower. "
            f"{_at_both_ends(answers)} Give --heterogeneous FACTOR "
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
    return reasons


def _varied(topology: Topology, field: str, values: Sequence[Any]) -> list[tuple[Any, Topology]]:
    """`topology` with its `field` at each of `values`."""
    return [(v, dataclasses.replace(topology, **{field: v})) for v in values]


def _on_machines(rec: Recommendation) -> str:
    """An answer for a sentence: `mirrored on 1 machine(s)`, or `... 1 t4 machine(s)`."""
    if not rec.layout:
        return f"{rec.strategy} on no layout"
    gpu = f"{rec.chosen.machines_gpu} " if rec.chosen and rec.chosen.machines_gpu else ""
    return f"{rec.strategy} on {rec.layout.workers} {gpu}machine(s)"


def _at_both_ends(answers: list[str]) -> str:
    """`answers` at the ends of an estimate, for a sentence: whether they differ."""
    same = len({a.partition(": ")[2] for a in answers}) == 1
    lead = "The answer is the same at both ends" if same else "The answer depends on it"
    return f"{lead}: {'; '.join(answers)}."


def _batch_cap_range(topology: Topology, model: ModelProfile, batch_size: int) -> str:
    """When estimated activations cap the batch: the cap at the estimate's low end too."""
    from components.core import model_profile as mp

    memory_gb = device(topology.gpu).memory_gb
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


def _model_parallelism(
    topology: Topology, model: ModelProfile, batch: int, gpu: Gpu
) -> Recommendation:
    """The unsupported answer for a model whose weights and state do not fit one GPU."""
    static_gb = memory_needed_bytes(model, 0, False) / 1e9
    reasons = [
        f"{model.name} needs {static_gb:,.1f} GB for weights, gradients and Adam state "
        f"({model.dense_params:,} parameters x 16 bytes) plus activations, more than the "
        f"{gpu.memory_gb * USABLE_MEMORY_FRACTION:.0f} GB usable on one {gpu.name} "
        f"({gpu.memory_gb:g} GB): data parallelism keeps a full copy per GPU, so it cannot run.",
        "Split the model across GPUs (tensor or pipeline parallelism, e.g. DTensor or "
        "Mesh TensorFlow), or use GPUs with more memory; Strategist does not do model "
        "parallelism.",
    ]
    return Recommendation(MODEL_PARALLELISM, False, None, None, [], reasons, topology, model, batch)


def _candidates_that_fit(
    topology: Topology, model: ModelProfile, batch: int, gpu: Gpu, fit_replicated: int
) -> tuple[list[Prediction], int, list[str]]:
    """The candidates at a per-replica batch that fits one GPU, that batch, and reasons.

    When the sparse embedding table does not fit one GPU, only parameter_server
    stays feasible; when the batch is too large, the predictions use the
    largest batch that fits.
    """
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
        f"{gpu.memory_gb * USABLE_MEMORY_FRACTION:.0f} GB usable on a {gpu.name}; "
        f"use at most {usable} per GPU (or accumulate gradients). Predictions use {usable}."
    )
    preds = candidates(topology, model, usable)
    _check_mix_memory(preds, topology, model)
    return preds, usable, [reason]


def _check_mix_memory(preds: list[Prediction], topology: Topology, model: ModelProfile) -> None:
    """Marks infeasible the candidates of a GPU mix whose replica does not fit the
    smallest GPU of the machines they use (the fastest GPU was checked already)."""
    if not topology.gpu_mix:
        return
    for p in preds:
        smallest = min((device(g) for g in machine_gpus(topology, p.layout.workers)),
                       key=lambda g: g.memory_gb)  # fmt: skip
        replicated = not spec_for(p.strategy).uses_ps
        fits = max_batch_that_fits(model, smallest.memory_gb, replicated, topology.precision)
        if p.feasible and fits < p.per_replica_batch:
            p.feasible = False
            p.note = f"a replica does not fit a {smallest.name}"


def _choose(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    reasons: list[str],
    history: Sequence[Mapping[str, Any]] = (),
    history_reasons: Sequence[str] = (),
    prices: Any = None,
) -> Recommendation:
    """Ranks the feasible candidates, applies the rules and the machine floor, and
    explains the choice.

    When the floor moves the answer to fewer machines, the reasons say what the
    whole cluster would spend on communication, then explain that candidate on
    its own machines (`on_first_machines`); a candidate the full cluster does
    not have is measured and priced there. `reasons` (memory findings) and
    `history_reasons` (`apply_history` on `preds`, taken again with the fewer
    machines' candidates when a record measured one) follow the explanation.
    """
    measured_fewer = _measured_on_fewer_machines(preds, topology, model, batch, async_ok, history)
    preds = [*preds, *measured_fewer]  # a measured part of the cluster weighs as it ran
    feasible = [p for p in preds if p.feasible]
    feasible.sort(key=lambda p: -p.rank_examples_per_second)
    best = prefer_simpler(feasible)
    chosen, rule_reasons = apply_rules(best, feasible, topology, model, async_ok)
    options: list[tuple[int, str, float, float]] = []
    fewer: list[str] = []
    on = topology if chosen.layout.workers in (1, topology.machines) else (
        on_first_machines(topology, chosen.layout.workers)
    )  # fmt: skip
    if chosen in measured_fewer:
        fewer.append(_measured_part_sentence(chosen, topology))
    weighed: list[Prediction] = list(measured_fewer)  # candidates the full table lacks
    if chosen.layout.workers > 1:
        best_on = _best_on_each_machine_count(
            chosen, preds, topology, model, batch, async_ok, history
        )
        weighed += [p for p in best_on.values() if p not in preds]
        if 1 in best_on and _machine_efficiency(topology, best_on, chosen.layout.workers) < (
            EFFICIENCY_FLOOR
        ):
            full = chosen
            chosen, options, fewer = _fewer_machines(topology, best_on)
            fewer += communication_sentences(full, on, model)
            on = on_first_machines(topology, chosen.layout.workers)
            _, rule_reasons = apply_rules(chosen, [chosen], on, model, async_ok)
    input_sentences: list[str] = []
    if chosen.input_bound:
        chosen, on, input_sentences = _fewest_gpus_the_input_keeps_busy(
            chosen, on, model, batch, async_ok, history
        )
    if chosen not in preds:  # fewer machines or GPUs than all: a candidate of its own
        if prices is not None:
            _price([chosen], on, prices)
        preds = [*preds, chosen]
        feasible.append(chosen)
    if any(p.measured_examples_per_second is not None for p in weighed):
        # one tally over every candidate weighed, the fewer machines' measured ones included
        extra = [p for p in weighed if p not in preds]
        history_reasons = apply_history([*preds, *extra], history, topology, model, batch)
    reasons = [
        *fewer, *input_sentences, *explain(chosen, feasible, on, model, batch), *rule_reasons,
        *reasons, *history_reasons,
    ]  # fmt: skip
    alternatives = [p for p in preds if p is not chosen and p.feasible]
    alternatives.sort(key=lambda p: -p.rank_examples_per_second)
    alternatives += [p for p in preds if not p.feasible]
    return Recommendation(
        chosen.strategy,
        True,
        chosen.layout,
        chosen,
        alternatives,
        reasons,
        topology,
        model,
        batch,
        options,
    )


def _best_on_each_machine_count(
    full: Prediction,
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: Sequence[Mapping[str, Any]] = (),
) -> dict[int, Prediction]:
    """The fastest allowed candidate on 1, 2, 4, ... machines; `full` on all of them.

    Each count is costed on its own machines (`on_first_machines`), with the
    same memory checks as the full cluster (an embedding table that fits no
    GPU leaves parameter servers on that machine). A candidate the full
    cluster also has is taken from `preds`, with its measurement and price;
    one it lacks (a multi-machine layout on fewer machines) takes the `history`
    records that measured it, so a measured machine count weighs by what it
    ran at, as in the full table. An
    asynchronous parameter_server that nothing favours is no option on any
    machine count (`rules.asynchronous_allowed`). A count where nothing is
    feasible is left out.
    """
    best_on: dict[int, Prediction] = {}
    for k, on, costed in _costed_on_fewer_machines(preds, topology, model, batch, history):
        if k >= full.layout.workers:
            break  # `full` already runs on fewer machines than the cluster has
        pool = [p for p in costed if p.feasible and asynchronous_allowed(p, on, model, async_ok)]
        on_k = [p for p in pool if p.layout.workers == k and p.replicas > 1] or pool
        if on_k:
            best_on[k] = max(on_k, key=lambda p: p.rank_examples_per_second)
    best_on[full.layout.workers] = full
    return best_on


def _fewest_gpus_the_input_keeps_busy(
    chosen: Prediction,
    on: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: Sequence[Mapping[str, Any]] = (),
) -> tuple[Prediction, Topology, list[str]]:
    """The input-bound `chosen` on the fewest GPUs per machine that still take all the
    input, the machines that run it, and the sentence that says so.

    Every machine's input pipeline feeds only its own GPUs, so past the GPU count
    that takes all of it, more GPUs per machine add nothing. The counts tried are
    those a machine type of the GPU offers (1, 2, 4, ... where the catalogue lists
    them). A candidate within `SIMPLER_MARGIN` of `chosen`'s throughput on as many
    machines counts as taking it all; the same strategy is kept where one is (a
    rule chose it), else the fastest allowed. A measured `chosen` stays: the
    measurement decides.
    """
    if chosen.measured_examples_per_second is not None or chosen.layout.gpus_per_machine < 2:
        return chosen, on, []
    gpu = device(on.gpu)
    counts = sorted(gpu.machine_types) or range(1, chosen.layout.gpus_per_machine)
    fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, on.precision)
    # the slowest machine's GPUs too must take all its input (a mix, --heterogeneous)
    slowest_gpu = (
        chosen.per_replica_batch
        / chosen.single_gpu_step_s
        / max(machine_slowdowns(on, chosen.layout.workers))
    )
    feed = on.input_examples_per_second
    for g in (c for c in counts if c < chosen.layout.gpus_per_machine and c * slowest_gpu > feed):
        fewer = dataclasses.replace(on, gpus_per_machine=g)
        costed, _, _ = _candidates_that_fit(fewer, model, batch, gpu, fit_replicated)
        if history:
            apply_history(costed, history, fewer, model, batch)
        pool = [
            p
            for p in costed
            if p.feasible
            and p.layout.workers == chosen.layout.workers
            and asynchronous_allowed(p, fewer, model, async_ok)
            and (p.input_bound or p.rank_examples_per_second >= chosen.examples_per_second)
        ]
        pool = [p for p in pool if p.strategy == chosen.strategy] or pool
        if pool:
            fed = max(pool, key=lambda p: p.rank_examples_per_second)
            return fed, fewer, [_fewer_gpus_sentence(chosen, fed, on)]
    return chosen, on, []


def _fewer_gpus_sentence(full: Prediction, fed: Prediction, topology: Topology) -> str:
    """Why `fed` leaves GPUs of each machine free: the input cannot keep them busy."""
    slowdowns = machine_slowdowns(topology, full.layout.workers)
    slowest = machine_gpus(topology, full.layout.workers)[slowdowns.index(max(slowdowns))]
    per_gpu = full.per_replica_batch / full.single_gpu_step_s / max(slowdowns)
    g, all_g = fed.layout.gpus_per_machine, full.layout.gpus_per_machine
    gpus = f"{g} GPU{'s' if g > 1 else ''}"
    which = f"one {slowest}" + (" (the slowest)" if max(slowdowns) > 1 else "")
    return (
        f"More GPUs per machine buy nothing here: each machine's input pipeline feeds "
        f"{topology.input_examples_per_second:,.0f} examples/s and {which} alone "
        f"computes {per_gpu:,.0f}, so {gpus} of each machine's {all_g} "
        f"{'takes' if g == 1 else 'take'} all of it: {fed.strategy} on "
        f"{fed.layout.workers}/{fed.layout.ps}/{g} workers/ps/gpus trains "
        f"{fed.rank_examples_per_second:,.0f} examples/s, against "
        f"{full.examples_per_second:,.0f} for {full.strategy} on all {all_g}. Use {gpus} per "
        f"machine and leave {all_g - g} free."
    )


def machines_running(candidate: Prediction, topology: Topology) -> Topology:
    """The machines of `topology` that `candidate` runs on: its first machines
    (`on_first_machines`), or those of its `machines_gpu` alone, with as many GPUs
    each as its layout uses."""
    if candidate.machines_gpu:
        on = _of_one_type(topology, candidate.machines_gpu, candidate.layout.workers)
    else:
        on = on_first_machines(topology, candidate.layout.workers)
    spec = spec_for(candidate.strategy)
    if spec.single_device or topology.gpu == "cpu":  # their layouts say 1 of the machine's
        return on
    return dataclasses.replace(on, gpus_per_machine=candidate.layout.gpus_per_machine)


def _measured_on_fewer_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: Sequence[Mapping[str, Any]],
) -> list[Prediction]:
    """The candidates on 2, 4, ... of the machines, fewer than all, that `history`
    measured (and a rule allows): a measured part of the cluster can outrun every
    candidate on all of it."""
    if not history:
        return []
    known = {(p.strategy, p.layout) for p in preds}
    return [
        p
        for k, on, costed in _costed_on_fewer_machines(preds, topology, model, batch, history)
        for p in costed
        if k > 1
        and p.layout.workers == k
        and (p.strategy, p.layout) not in known
        and p.feasible
        and p.measured_examples_per_second is not None
        and asynchronous_allowed(p, on, model, async_ok)
    ]


def _measured_part_sentence(chosen: Prediction, topology: Topology) -> str:
    """Why a measured candidate on some of the machines is the answer."""
    return (
        f"Measured on {chosen.layout.workers} of the {topology.machines} machines, "
        f"{chosen.strategy} ran at {chosen.measured_examples_per_second:,.0f} examples/s, "
        f"more than any candidate on all {topology.machines} is measured or predicted to "
        f"give: use {chosen.layout.workers} machines and leave the rest free (or measure "
        f"all {topology.machines}: strategist compare, then --history)."
    )


def on_first_machines(topology: Topology, machines: int) -> Topology:
    """`topology` cut to its first `machines` machines (a GPU mix's fastest first).

    A cut that holds one GPU type of a mix is plain hardware of that type, and so
    is one within the faster half of `--heterogeneous` machines.
    """
    if not topology.gpu_mix:
        fast = topology.machines - topology.machines // 2  # `machine_slowdowns`' order
        alike = topology.heterogeneous and machines <= fast
        return dataclasses.replace(
            topology, machines=machines, heterogeneous=topology.heterogeneous and not alike
        )
    mix = tuple(Counter(machine_gpus(topology, machines)).items())
    if len(mix) == 1:
        return _of_one_type(topology, mix[0][0], machines)
    return dataclasses.replace(topology, machines=machines, gpu_mix=mix)


def _machine_efficiency(topology: Topology, best_on: dict[int, Prediction], k: int) -> float:
    """Throughput on `k` machines over the sum of what each of them gives alone.

    One machine's best throughput counts once per machine of the same speed;
    in a GPU mix a slower machine alone gives proportionally less.
    """
    alone = k * mean_machine_speed(topology, k)
    return best_on[k].rank_examples_per_second / (alone * best_on[1].rank_examples_per_second)


def _machine_counts(machines: int) -> list[int]:
    """1, 2, 4, ... up to `machines`, and `machines` itself."""
    counts = []
    k = 1
    while k < machines:
        counts.append(k)
        k *= 2
    return counts + [machines]


def _price(preds: list[Prediction], topology: Topology, prices: Any) -> None:
    """Sets each candidate's list price per million examples."""
    from components.core.selection.cost import usd_per_million_examples

    for p in preds:
        p.usd_per_million_examples = usd_per_million_examples(p, topology, prices)


def _costed_on_fewer_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
) -> Iterator[tuple[int, Topology, list[Prediction]]]:
    """For 1, 2, 4, ... machines, fewer than all: the count, its machines
    (`on_first_machines`) and every candidate costed on them, with the same memory
    checks as the full cluster. A candidate the full table `preds` has is taken from
    it, with its measurement and price; one it lacks takes the `history` records
    that measured it."""
    known = {(p.strategy, p.layout): p for p in preds}
    gpu = device(topology.gpu)
    fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, topology.precision)
    for k in _machine_counts(topology.machines)[:-1]:
        on = on_first_machines(topology, k)
        costed, _, _ = _candidates_that_fit(on, model, batch, gpu, fit_replicated)
        if history:
            apply_history([p for p in costed if (p.strategy, p.layout) not in known], history,
                          on, model, batch)  # fmt: skip
        yield k, on, [known.get((p.strategy, p.layout), p) for p in costed]


def _on_fewer_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
    prices: Any,
) -> list[Prediction]:
    """The feasible candidates that use 1, 2, 4, ... of the machines and the full table
    lacks, each priced on its own machines: fewer machines can be cheaper per example
    (parameter servers on one machine share it)."""
    known = {(p.strategy, p.layout) for p in preds}
    out = []
    for k, on, costed in _costed_on_fewer_machines(preds, topology, model, batch, history):
        extra = [
            p
            for p in costed
            if p.feasible and p.layout.workers == k and (p.strategy, p.layout) not in known
        ]
        _price(extra, on, prices)
        out += extra
    return out


def _of_one_type(topology: Topology, gpu: str, machines: int) -> Topology:
    """`machines` machines of a GPU mix's type `gpu`, as plain hardware."""
    return dataclasses.replace(
        topology, machines=machines, gpu=gpu, gpu_mix=(), heterogeneous=False
    )


def _on_one_gpu_type(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
    prices: Any,
) -> tuple[list[Prediction], list[str]]:
    """The feasible candidates on 1, 2, 4, ... machines of each slower GPU type of a mix
    alone, priced on them: a slower GPU can cost less per example, and the first
    machines of a mix (`on_first_machines`) are its fastest.

    Returns:
        The candidates, and a sentence for each that `history` measured on its own
        machines.
    """
    out: list[Prediction] = []
    measured: list[str] = []
    first = machine_gpus(topology, 1)[0]
    for name, count in topology.gpu_mix:
        if name == first:
            continue
        gpu = device(name)
        fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, topology.precision)
        for k in _machine_counts(count):
            on = _of_one_type(topology, name, k)
            costed, _, _ = _candidates_that_fit(on, model, batch, gpu, fit_replicated)
            costed = [p for p in costed if p.feasible and p.layout.workers == k]
            if history:
                said = apply_history(costed, history, on, model, batch)
                measured += [
                    f"On the {name} machines: {r}" for r in said if r.startswith("Measured:")
                ]
            for p in costed:
                p.machines_gpu = name
            _price(costed, on, prices)
            out += costed
    return out, measured


def _on_fewer_gpus(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
    prices: Any,
) -> list[tuple[Prediction, Prediction]]:
    """For each input-bound candidate, the same throughput on fewer GPUs per machine
    (`_fewest_gpus_the_input_keeps_busy`), priced on its machines: GPUs the input
    cannot keep busy are paid for and add nothing.

    Returns:
        (the candidate on all its GPUs, the one on fewer) pairs; none that `preds`
        already has (mirrored on one GPU is one_device).
    """
    known = {(p.strategy, p.layout) for p in preds}
    out: list[tuple[Prediction, Prediction]] = []
    for p in preds:
        if not (p.feasible and p.input_bound):
            continue
        on = on_first_machines(topology, p.layout.workers)
        fed, on, _ = _fewest_gpus_the_input_keeps_busy(p, on, model, batch, True, history)
        if (fed.strategy, fed.layout) not in known:
            known.add((fed.strategy, fed.layout))
            _price([fed], on, prices)
            out.append((p, fed))
    return out


def _cost_sentences(
    chosen: Prediction, preds: list[Prediction], topology: Topology, prices: Any
) -> list[str]:
    """What the choice costs, and the cheapest feasible candidate when it is another."""
    basis = price_basis(topology, prices)
    if chosen.usd_per_million_examples is None:
        missing = "; ".join(missing_prices(chosen, machines_running(chosen, topology), prices))
        return [f"No price for this hardware among the table's {basis}: {missing}."]
    out = [
        f"At {basis}, {chosen.strategy} costs "
        f"{chosen.usd_per_million_examples:,.2f} USD per million examples."
    ]
    cheapest = _cheapest_first(preds)[0]
    if cheapest is not chosen:
        ratio = chosen.rank_examples_per_second / cheapest.rank_examples_per_second
        speed = f"{ratio:,.1f}x slower" if ratio >= 1 else f"{1 / ratio:,.2f}x faster"
        layout = cheapest.layout
        out.append(
            f"The cheapest is {cheapest.label} ({layout.workers}/{layout.ps}/"
            f"{layout.gpus_per_machine} workers/ps/gpus) at "
            f"{cheapest.usd_per_million_examples:,.2f} USD per million examples, {speed} "
            "(--objective cost picks it)."
        )
    return out


def _cheapest_first(preds: list[Prediction]) -> list[Prediction]:
    """The feasible priced candidates, cheapest per example first; prices equal but for
    float rounding (the same machines, more of them) tie, and the faster goes first."""
    priced = [p for p in preds if p.feasible and p.usd_per_million_examples is not None]
    return sorted(
        priced, key=lambda p: (six_digits(p.usd_per_million_examples), -p.rank_examples_per_second)
    )


def _cheapest(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    reasons: list[str],
    prices: Any,
) -> Recommendation:
    """The feasible candidate with the lowest price per example (ties: the faster)."""
    feasible = _cheapest_first(preds)
    if not feasible:
        raise ConfigError(
            f"--objective cost: the price table's {price_basis(topology, prices)} have no "
            "price for "
            f"{topology.describe()}; use --objective time"
        )
    chosen = feasible[0]
    lead = (
        f"Objective cost: {chosen.label} is the cheapest per example at "
        f"{price_basis(topology, prices)}: "
        f"{chosen.usd_per_million_examples:,.2f} USD per million examples."
    )
    explained = explain(chosen, feasible, machines_running(chosen, topology), model, batch)
    if spec_for(chosen.strategy).single_device and topology.total_gpus > 1:
        explained.pop(1)  # "communication costs more than the GPUs give" is a time argument
    reasons = [lead] + explained + reasons
    alternatives = feasible[1:] + [p for p in preds if p not in feasible]
    return Recommendation(
        chosen.strategy, True, chosen.layout, chosen, alternatives, reasons, topology, model, batch
    )


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


def _fewer_machines(
    topology: Topology, best_on: dict[int, Prediction]
) -> tuple[Prediction, list[tuple[int, str, float, float]], list[str]]:
    """The best candidate on the most machines that scale above EFFICIENCY_FLOOR.

    Machine scaling efficiency is throughput on k machines over what the k
    machines give alone (`_machine_efficiency`): what each added machine is
    worth.

    Returns:
        That candidate, every machine count's (machines, strategy, speed-up
        over one device, machine scaling efficiency), and the sentence that
        says so.
    """
    options = [
        (
            k,
            p.strategy,
            p.rank_examples_per_second / (p.per_replica_batch / p.single_gpu_step_s),
            _machine_efficiency(topology, best_on, k),
        )
        for k, p in best_on.items()
    ]
    k = max([m for m, _, _, eff in options if eff >= EFFICIENCY_FLOOR] or [1])
    n = max(best_on)  # all of the machines, or the measured part of them that was chosen
    chosen, full = best_on[k], best_on[n]
    on_n = topology if n == topology.machines else on_first_machines(topology, n)
    listing = "; ".join(
        f"{m} machine{'s' if m > 1 else ''} ({st}"
        f"{', measured' if best_on[m].measured_examples_per_second is not None else ''}): "
        f"{x:,.1f}x one {topology.gpu}, {e:.0%} machine efficiency"
        for m, st, x, e in options
    )
    sentence = (
        f"Adding machines buys little here: {'all ' if n == topology.machines else ''}{n} "
        f"machines ({_gpus_said(on_n)}, {full.strategy}) are predicted at {options[-1][3]:.0%} "
        f"machine scaling efficiency (throughput over what the {n} machines "
        f"give alone), below the {EFFICIENCY_FLOOR:.0%} floor. Use {k} "
        f"machine{'s' if k > 1 else ''} ({chosen.strategy}) and leave the rest free. "
        f"Speed-up by machine count (predicted unless measured): {listing}."
    )
    return chosen, options, [sentence]


def _gpus_said(topology: Topology) -> str:
    """The cluster's GPUs for a sentence: `128 v100`, or `2 a100 and 6 t4` for a mix."""
    per = topology.gpus_per_machine
    if topology.gpu_mix:
        return " and ".join(f"{n * per} {name}" for name, n in topology.gpu_mix)
    return f"{topology.machines * per} {topology.gpu}"
