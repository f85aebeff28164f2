"""The selector's answer for a topology and a model, and how it is reached."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.core.config import ConfigError
from components.core.model_profile import ModelProfile
from components.core.selection import cost, explanation, input_bound, machine_floor, memory
from components.core.selection.history import apply_history
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.machine_subsets import (
    faster_machines_sentence,
    on_faster_machines,
    on_first_machines,
)
from components.core.selection.prediction import Prediction, candidates_that_fit
from components.core.selection.rules import apply_rules, input_fed_on_fewer_gpus, prefer_simpler
from components.core.selection.topology import Layout, Topology, device
from components.core.selection.unknown_inputs import unknown_input_reasons
from components.core.strategy_spec import spec_for

MODEL_PARALLELISM = "model_parallelism"
OBJECTIVES = ("time", "cost")


@dataclass
class Recommendation:
    """The selector's answer."""

    strategy: str  # one of `config.STRATEGIES`, or `model_parallelism`
    supported: bool  # False when Strategist cannot train the model as asked
    layout: Layout | None  # None when unsupported
    chosen: Prediction | None  # the chosen candidate, None when unsupported
    alternatives: list[Prediction]  # the other candidates, best first
    reasons: list[str]  # plain sentences with numbers
    topology: Topology  # the hardware asked about
    model: ModelProfile  # the model asked about
    batch_size: int = 64  # the per-replica batch the predictions use
    # (machines, strategy, speed-up, machine efficiency) per machine count, below the floor
    machine_options: list[tuple[int, str, float, float]] = dataclasses.field(default_factory=list)
    prices: dict[str, Any] | None = None  # what the candidates were priced at (`prices_used`)
    deciding_inputs: list[str] = dataclasses.field(default_factory=list)  # assumed, deciding

    def to_dict(self) -> dict[str, Any]:
        """The `strategist select --json` document."""
        # the chosen candidate's: a mix's slower type it runs on alone, its price in `prices`
        chosen = self.chosen.to_dict() if self.chosen else {}
        keys = ("machines_gpu", "predicted", "measured", "usd_per_million_examples")
        return {
            "strategy": self.strategy,
            "supported": self.supported,
            "layout": self.layout.to_dict() if self.layout else None,
            **{key: chosen.get(key) for key in (*keys, "usd_per_million_examples_range")},
            "prices": self.prices,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "reasons": list(self.reasons),
            "depends_on": list(self.deciding_inputs),
            "machine_options": [
                dict(machines=m, strategy=s, speedup=round(x, 3), machine_efficiency=round(e, 4))
                for m, s, x, e in self.machine_options
            ],
            "inputs": {
                "topology": dataclasses.asdict(self.topology),
                "model": self.model.to_dict(),
                "per_replica_batch_size": self.batch_size,
            },
        }


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
    """Chooses a strategy and layout for `model` on `topology`: `model_parallelism`, unsupported,
    when the model's weights and Adam state fit no GPU.

    Args:
        topology: the hardware.
        model: the model's profile (`model_profile.profile_model`, `from_params`, ...).
        batch_size: per-GPU (per-replica) batch.
        async_ok: asynchronous updates (parameter_server in TF2) are acceptable.
        history: `comparison.json` result records (`load_history`).
        prices: a `prices.PriceTable` to price each candidate per million examples.
        objective: `time` (fastest above the machine floor) or `cost` (needs `prices`).
        unstated: hardware inputs the user did not give (`network`), answered at both ends.

    Raises:
        ConfigError: invalid hardware or batch size, or no candidate can run.
    """
    topology.validate()
    if objective not in OBJECTIVES or (objective == "cost" and prices is None):
        raise ConfigError(f"--objective {objective!r}: choose time, or cost with a price table")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"--batch-size must be a whole number of at least 1, got {batch_size!r}")
    gpu = device(machine_gpus(topology, 1)[0])  # a mix's first machine, its largest if tied
    fit_replicated = memory.max_batch_that_fits(model, gpu.memory_gb, True, topology.precision)
    fit_ps = memory.max_batch_that_fits(model, gpu.memory_gb, False, topology.precision)
    if fit_ps == 0 or (fit_replicated == 0 and not model.sparse_embedding_params):
        static_gb = memory.memory_needed_bytes(model, 0, False) / 1e9
        why = [
            f"{model.name} needs {static_gb:,.1f} GB for weights, gradients and Adam state, more "
            f"than the {gpu.memory_gb * memory.USABLE_MEMORY_FRACTION:.0f} GB usable on one "
            f"{gpu.name}: split it across GPUs (tensor or pipeline parallelism, which Strategist "
            "does not do) or use larger GPUs."
        ]
        return Recommendation(
            MODEL_PARALLELISM, False, None, None, [], why, topology, model, batch_size
        )
    preds, batch, reasons = candidates_that_fit(topology, model, batch_size, gpu, fit_replicated)
    if not any(p.feasible for p in preds):
        # one machine whose GPU holds no replica with the table, nor its host the servers
        notes = "; ".join(f"{p.strategy}: {p.note}" for p in preds)
        raise ConfigError(f"no strategy runs on {topology.describe()}: {notes}")
    findings = apply_history(preds, history, topology, model, batch) if history else None
    history_reasons = findings.sentences if findings else []
    basis, cheaper, fed, measured_alone = [], [], [], []
    if prices is not None:
        basis = cost.price_basis_reasons(topology, prices)
        cost.price_candidates(preds, topology, prices)
        # fewer machines, a mix's slower type alone, or fewer GPUs can cost less per example
        cheaper = cost.on_fewer_machines(preds, topology, model, batch, history, prices)
        of_one_type, measured_alone = cost.on_one_gpu_type(topology, model, batch, history, prices)
        cheaper += of_one_type
        fed = cost.on_fewer_gpus(preds + cheaper, topology, model, batch, history, prices)
        cheaper += [p for _, p in fed]
    if objective == "cost":
        if any(p.measured_examples_per_second is not None for p in cheaper):
            # one tally over every candidate weighed, but a mix's slower type (its own machines)
            alike = [p for p in preds + cheaper if not p.machines_gpu]
            findings = apply_history(alike, history, topology, model, batch)
            history_reasons = findings.sentences
        if measured_alone:
            # a slower type's records match its own machines, not the first machines' tally
            history_reasons = (findings.about_the_measured if findings else []) + measured_alone
        chosen, lead, why, others = cost.cheapest(
            preds + cheaper, topology, model, batch, reasons + history_reasons, prices, async_ok
        )
        fewer = [input_bound.fewer_gpus_sentence(f, p, topology) for f, p in fed if p is chosen]
        why, options = [lead, *basis, *fewer, *why], []  # the basis right after the price
    else:
        chosen, others, why, options = _choose(
            preds, topology, model, batch, async_ok, reasons, history, history_reasons, prices
        )
        if prices is not None:
            # what --objective cost weighs: the table, the floor's count and the cheaper layouts
            weighed = [chosen, *others, *cheaper]
            why += cost.cost_sentences(chosen, weighed, topology, model, async_ok, prices) + basis
    # the answer, all else as asked, on other hardware or for another model
    answer = functools.partial(recommend, batch_size=batch_size, async_ok=async_ok,
                               history=history, prices=prices, objective=objective)  # fmt: skip
    unknown = unknown_input_reasons(topology, model, batch_size, unstated, answer)
    why += [*unknown.reasons, *_unmeasured_choice_reasons(chosen, preds)]
    rec = Recommendation(
        chosen.strategy, True, chosen.layout, chosen, others, why, topology, model, batch, options
    )
    rec.prices = None if prices is None else cost.prices_used(topology, prices)
    rec.deciding_inputs = list(unknown.deciding)
    return rec


def _ranked(preds: Iterable[Prediction]) -> list[Prediction]:
    """The feasible of `preds`, the fastest (measured, else predicted) first."""
    return sorted((p for p in preds if p.feasible), key=lambda p: -p.rank_examples_per_second)


def _choose(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    reasons: list[str],
    history: Sequence[Mapping[str, Any]],
    history_reasons: list[str],
    prices: Any,
) -> tuple[Prediction, list[Prediction], list[str], list]:
    """Ranks the feasible candidates (a mix's faster machines alone too), applies the rules, the
    machine floor and the input's feed, and explains the choice on the machines it runs on."""
    measured_fewer = machine_floor.measured_on_fewer_machines(
        preds, topology, model, batch, history
    )
    # a mix's faster machines alone: a slower or memory-short machine must not hold back the rest
    alone = on_faster_machines([*preds, *measured_fewer], topology, model, batch, history)
    if prices is not None:
        for p in measured_fewer:  # each on the machines it ran on, as the table's others
            cost.price_candidates([p], on_first_machines(topology, p.layout.workers), prices)
        cost.price_candidates(alone, topology, prices)
    preds = [*preds, *measured_fewer, *alone]  # a measured part of the cluster weighs as it ran
    feasible = _ranked(preds)
    best = prefer_simpler(feasible)
    # the rules weigh the machines the best runs on (one speed: no case for parameter servers)
    rules_on = on_first_machines(topology, best.layout.workers) if best in alone else topology
    chosen, rule_reasons = apply_rules(best, feasible, rules_on, model, async_ok)
    workers = chosen.layout.workers
    on = topology if workers in (1, topology.machines) else on_first_machines(topology, workers)
    faster = [faster_machines_sentence(chosen, preds, topology, model)] if chosen in alone else []
    fewer = (
        [machine_floor.measured_part_sentence(chosen, topology)] if chosen in measured_fewer else []
    )
    options, weighed = [], [*measured_fewer, *alone]  # candidates the full table lacks
    if workers > 1:
        best_on = machine_floor.best_on_each_machine_count(
            chosen, preds, topology, model, batch, async_ok, history
        )
        weighed += [p for p in best_on.values() if p not in preds]
        floor = machine_floor.EFFICIENCY_FLOOR  # all the machines below it: weigh fewer
        if 1 in best_on and machine_floor.machine_efficiency(topology, best_on, workers) < floor:
            one = explanation.measured_one_device(preds)
            answer, options, fewer = machine_floor.fewer_machines(topology, best_on, one)
            if answer is not chosen:  # fewer machines are faster than all of them
                fewer += explanation.communication_sentences(chosen, on, model, one)
                chosen, on = answer, on_first_machines(topology, answer.layout.workers)
                _, rule_reasons = apply_rules(chosen, [chosen], on, model, async_ok)
    fed = []
    if chosen.input_bound:
        full = chosen
        chosen, on, fed = input_bound.fewest_gpus_the_input_keeps_busy(
            chosen, on, model, batch, async_ok, history
        )
        if spec_for(chosen.strategy).uses_ps and not spec_for(full.strategy).uses_ps:
            # all GPUs stayed synchronous (capped alike); on fewer only parameter_server is fed
            rule_reasons = input_fed_on_fewer_gpus(chosen, full, on, model, async_ok)
    elif chosen.input_capped:  # its faster machines only: each runs at its own speed
        fed = [input_bound.partly_fed_sentence(chosen, on)]
    if chosen not in preds:  # fewer machines or GPUs than all: a candidate of its own
        if prices is not None:
            cost.price_candidates([chosen], on, prices)
        preds = [*preds, chosen]
        feasible.append(chosen)
    if any(p.measured_examples_per_second is not None for p in weighed):
        # one tally over every candidate weighed, the fewer machines' measured ones included
        extra = [p for p in weighed if p not in preds]
        history_reasons = apply_history([*preds, *extra], history, topology, model, batch).sentences
    explained = explanation.explain(chosen, feasible, on, model, batch)
    why = [*faster, *fewer, *fed, *explained, *rule_reasons, *reasons, *history_reasons]
    others = _ranked(p for p in preds if p is not chosen) + [p for p in preds if not p.feasible]
    return chosen, others, why, options


def _unmeasured_choice_reasons(chosen: Prediction, preds: list[Prediction]) -> list[str]:
    """A warning when the choice is unmeasured while the measured fell short of predictions."""
    # one that trains nothing has no ratio; both sides are less the same preemption losses
    measured = [p for p in preds if p.measured_examples_per_second is not None and p.feasible]
    ratios = [p.rank_examples_per_second / p.examples_per_second for p in measured]
    if chosen.measured_examples_per_second is not None or min(ratios, default=1) >= 0.9:
        return []
    low, high = explanation.pct_shown(min(ratios)), explanation.pct_shown(max(ratios))
    return [
        f"{chosen.strategy} is chosen on its prediction alone, while the measured candidates "
        f"here ran at {low if low == high else f'{low}-{high}'} of their predictions: measure "
        f"it (strategist compare --strategies {chosen.strategy},...) before relying on it."
    ]
