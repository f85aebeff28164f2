"""The machine-efficiency floor: when adding machines buys little, the most machines
worth paying for, and a measured part of the cluster that outruns all of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.core.model_profile import ModelProfile
from components.core.selection.explanation import pct_against
from components.core.selection.machine_speeds import mean_machine_speed
from components.core.selection.machine_subsets import predicted_on_fewer_machines
from components.core.selection.prediction import Prediction
from components.core.selection.rules import asynchronous_allowed
from components.core.selection.topology import Topology

# Below this machine scaling efficiency (throughput on k machines over what they give alone),
# extra machines buy too little to be worth paying for.
EFFICIENCY_FLOOR = 0.50


def best_on_each_machine_count(
    full: Prediction,
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: Sequence[Mapping[str, Any]] = (),
) -> dict[int, Prediction]:
    """The fastest allowed candidate on 1, 2, 4, ... machines, `full` on all; none: left out."""
    best_on: dict[int, Prediction] = {}
    for k, on, predicted in predicted_on_fewer_machines(preds, topology, model, batch, history):
        if k >= full.layout.workers:
            break  # `full` already runs on fewer machines than the cluster has
        pool = [p for p in predicted if p.feasible and asynchronous_allowed(p, on, model, async_ok)]
        on_k = [p for p in pool if p.layout.workers == k and p.replicas > 1] or pool
        if on_k:
            best_on[k] = max(on_k, key=lambda p: p.rank_examples_per_second)
    best_on[full.layout.workers] = full
    return best_on


def machine_efficiency(topology: Topology, best_on: dict[int, Prediction], k: int) -> float:
    """Throughput on `k` machines over what each gives alone (a predicted count over one
    machine's prediction, even when one machine was measured)."""
    one = best_on[1]
    one_alone = one.rank_examples_per_second if _measured(best_on[k]) else one.examples_per_second
    alone = k * mean_machine_speed(topology, k)
    return best_on[k].rank_examples_per_second / (alone * one_alone)


def fewer_machines(
    topology: Topology, best_on: dict[int, Prediction], one_device_measured: float | None = None
) -> tuple[Prediction, list[tuple[int, str, float, float]], list[str]]:
    """The answer when all machines scale below EFFICIENCY_FLOOR (fewer where faster, else all),
    each count's (machines, strategy, speed-up over one device, efficiency), and why."""
    options = []
    for k, p in best_on.items():
        one_device = p.per_replica_batch / p.single_gpu_step_s
        if _measured(p):
            one_device = one_device_measured or one_device
        speed_up = p.rank_examples_per_second / one_device
        options.append((k, p.strategy, speed_up, machine_efficiency(topology, best_on, k)))
    n = max(best_on)  # all of the machines, or the measured part of them that was chosen
    fastest = max(best_on, key=lambda m: (best_on[m].rank_examples_per_second, -m))
    above = [m for m, _, _, efficiency in options if efficiency >= EFFICIENCY_FLOOR]
    fewer, full = best_on[fastest if fastest != n else max(above or [1])], best_on[n]
    use = f"{_machines(fewer.layout.workers)} ({fewer.strategy})"
    advice = f"Use {use} and leave the rest free."
    if fastest == n:
        share = fewer.rank_examples_per_second / full.rank_examples_per_second
        advice = f"All of them train, the fastest answer; {use} would keep {share:.0%} of its "
        advice += "speed (--objective cost weighs the price)."
    listing = "; ".join(
        f"{_machines(m)} ({st}{', measured' if _measured(best_on[m]) else ''}): {x:,.1f}x one "
        f"{topology.gpu}, {pct_against(e, EFFICIENCY_FLOOR)} machine efficiency"
        for m, st, x, e in options
    )
    sentence = (
        f"Adding machines buys little here: {'all ' if n == topology.machines else ''}{n} "
        f"machines ({full.strategy}) are {'measured' if _measured(full) else 'predicted'} at "
        f"{pct_against(options[-1][3], EFFICIENCY_FLOOR)} machine scaling efficiency, below the "
        f"{EFFICIENCY_FLOOR:.0%} floor. {advice} Speed-up by machine count (predicted unless "
        f"measured{_speed_up_basis(best_on, one_device_measured, topology.gpu)}): {listing}."
    )
    return (fewer if fastest != n else full), options, [sentence]


def _speed_up_basis(best_on: dict[int, Prediction], one_measured: float | None, gpu: str) -> str:
    """What the speed-ups are over when a measurement takes part; nothing when none does."""
    predicted = [p for p in best_on.values() if not _measured(p)]
    over_measured = one_measured and len(predicted) < len(best_on)
    said = []
    if over_measured:
        said.append(f"measured counts over one {gpu}'s measured {one_measured:,.0f} examples/s")
    if predicted and (one_measured or _measured(best_on[1])):
        one = predicted[0].per_replica_batch / predicted[0].single_gpu_step_s
        its = f"its predicted {one:,.0f} and " if over_measured else ""
        said.append(f"predicted counts over {its}one machine's prediction")
    return f"; {', '.join(said)}" if said else ""


def measured_on_fewer_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: Sequence[Mapping[str, Any]],
) -> list[Prediction]:
    """The candidates on 2, 4, ... of the machines, fewer than all, that `history` measured and
    a rule allows: a measured part of the cluster can outrun every candidate on all of it."""
    if not history:
        return []
    known = {(p.strategy, p.layout) for p in preds}
    return [
        p
        for k, on, predicted in predicted_on_fewer_machines(preds, topology, model, batch, history)
        for p in predicted
        if k > 1
        and p.layout.workers == k
        and (p.strategy, p.layout) not in known
        and p.feasible
        and _measured(p)
        and asynchronous_allowed(p, on, model, async_ok)
    ]


def measured_part_sentence(chosen: Prediction, topology: Topology) -> str:
    """Why a measured candidate on some of the machines is the answer."""
    k, n, ran = chosen.layout.workers, topology.machines, chosen.measured_examples_per_second
    return (
        f"Measured on {k} of the {n} machines, {chosen.strategy} ran at {ran:,.0f} examples/s, "
        f"more than any candidate on all {n}: use {k} machines and leave the rest free."
    )


def _measured(candidate: Prediction) -> bool:
    return candidate.measured_examples_per_second is not None


def _machines(k: int) -> str:
    return f"{k} machine{'s' if k > 1 else ''}"
