"""The machine-efficiency floor: the most machines worth paying for, or a measured part of them."""

from __future__ import annotations

from components.core.model_profile import ModelProfile
from components.core.selection.explanation import pct_against, plural
from components.core.selection.machine_speeds import mean_machine_speed
from components.core.selection.machine_subsets import (
    History,
    on_faster_machines,
    predicted_on_fewer_machines,
)
from components.core.selection.prediction import Prediction
from components.core.selection.rules import asynchronous_allowed, measured
from components.core.selection.topology import Topology

# Below this machine scaling efficiency, extra machines buy too little to be worth paying for.
EFFICIENCY_FLOOR = 0.50


def best_on_each_machine_count(
    full: Prediction,
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: History,
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
    return best_on | {full.layout.workers: full}


def machine_efficiency(topology: Topology, best_on: dict[int, Prediction], k: int) -> float:
    """Throughput on `k` machines over `k` alone: a predicted count over one machine predicted."""
    one = best_on[1]
    one_alone = one.rank_examples_per_second if measured(best_on[k]) else one.examples_per_second
    alone = k * mean_machine_speed(topology, k)
    return best_on[k].rank_examples_per_second / (alone * one_alone)


def fewer_machines(
    topology: Topology, best_on: dict[int, Prediction], one_measured: float | None
) -> tuple[Prediction, list[tuple[int, str, float, float]], list[str]]:
    """Below EFFICIENCY_FLOOR: the answer (fewer machines if faster), each count's, and why."""
    options = []
    for k, p in best_on.items():
        one_device = (measured(p) and one_measured) or p.per_replica_batch / p.single_gpu_step_s
        speed_up = p.rank_examples_per_second / one_device
        options.append((k, p.strategy, speed_up, machine_efficiency(topology, best_on, k)))
    n, gpu = max(best_on), topology.gpu  # n: all the machines, or the measured part chosen
    fastest = max(best_on, key=lambda m: (best_on[m].rank_examples_per_second, -m))
    above = [m for m, _, _, efficiency in options if efficiency >= EFFICIENCY_FLOOR]
    full, fewer = best_on[n], best_on[fastest if fastest != n else max(above or [1])]
    use = f"{plural(fewer.layout.workers, 'machine')} ({fewer.strategy})"
    advice = f"Use {use} and leave the rest free."
    if fastest == n:
        share = fewer.rank_examples_per_second / full.rank_examples_per_second
        advice = f"All of them train, the fastest answer; {use} would keep {share:.0%} of its "
        advice += "speed (--objective cost weighs the price)."
    # what the speed-ups are over when a measurement takes part
    predicted = [p for p in best_on.values() if not measured(p)]
    over_measured = one_measured and len(predicted) < len(best_on)
    basis = ""
    if over_measured:
        basis = f"; measured counts over one {gpu}'s measured {one_measured:,.0f} examples/s"
    if predicted and (one_measured or measured(best_on[1])):
        one = predicted[0].per_replica_batch / predicted[0].single_gpu_step_s
        its = f"its predicted {one:,.0f} and " if over_measured else ""
        basis += f"{', ' if basis else '; '}predicted counts over {its}one machine's prediction"
    listing = "; ".join(
        f"{plural(m, 'machine')} ({st}{', measured' if measured(best_on[m]) else ''}): "
        f"{x:,.1f}x one {gpu}, {pct_against(e, EFFICIENCY_FLOOR)} machine efficiency"
        for m, st, x, e in options
    )
    sentence = (
        f"Adding machines buys little here: {'all ' if n == topology.machines else ''}{n} "
        f"machines ({full.strategy}) are {'measured' if measured(full) else 'predicted'} at "
        f"{pct_against(options[-1][3], EFFICIENCY_FLOOR)} machine scaling efficiency, below the "
        f"{EFFICIENCY_FLOOR:.0%} floor. {advice} Speed-up by machine count (predicted unless "
        f"measured{basis}): {listing}."
    )
    return (fewer if fastest != n else full), options, [sentence]


def measured_on_fewer_machines(
    preds: list[Prediction], topology: Topology, model: ModelProfile, batch: int, history: History
) -> list[Prediction]:
    """Measured candidates on fewer than all machines: a measured part can outrun all of them."""
    if not history:
        return []  # nothing measured
    fewer = on_faster_machines(preds, topology, model, batch, history, range(2, topology.machines))
    return [p for p in fewer if measured(p)]


def measured_part_sentence(chosen: Prediction, topology: Topology) -> str:
    """Why a measured candidate on some of the machines is the answer."""
    k, n, ran = chosen.layout.workers, topology.machines, chosen.measured_examples_per_second
    return (
        f"Measured on {k} of the {n} machines, {chosen.strategy} ran at {ran:,.0f} examples/s, "
        f"more than any candidate on all {n}: use {k} machines and leave the rest free."
    )
