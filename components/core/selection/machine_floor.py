"""The machine-efficiency floor: when adding machines buys little, the most machines
worth paying for, and a measured part of the cluster that outruns all of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.core.model_profile import ModelProfile
from components.core.selection.explanation import pct_against
from components.core.selection.machine_speeds import mean_machine_speed
from components.core.selection.machine_subsets import on_first_machines, predicted_on_fewer_machines
from components.core.selection.prediction import Prediction
from components.core.selection.rules import asynchronous_allowed
from components.core.selection.topology import Topology

# Below this machine scaling efficiency (throughput on k machines over what the k
# machines give alone), extra machines buy too little to be worth paying for:
# the selector recommends the most machines that stay above it.
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
    """The fastest allowed candidate on 1, 2, 4, ... machines (`predicted_on_fewer_machines`);
    `full` on all of them. A count where nothing is feasible is left out."""
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
    """Throughput on `k` machines over the sum of what each of them gives alone (a mix's slower
    machine proportionally less), both known alike: a predicted count over one machine's
    prediction even when one machine was measured (`_one_machine_alike`)."""
    alone = k * mean_machine_speed(topology, k)
    return best_on[k].rank_examples_per_second / (alone * _one_machine_alike(best_on, k))


def _one_machine_alike(best_on: dict[int, Prediction], k: int) -> float:
    """One machine's best throughput, known as `best_on[k]`'s is: measured for a measured
    count when one machine was measured, else predicted."""
    one = best_on[1]
    if best_on[k].measured_examples_per_second is None:
        return one.examples_per_second
    return one.rank_examples_per_second


def _one_device_alike(candidate: Prediction, one_device_measured: float | None) -> float:
    """One device's throughput, known as `candidate`'s is (measured or predicted)."""
    predicted = candidate.per_replica_batch / candidate.single_gpu_step_s
    if candidate.measured_examples_per_second is None:
        return predicted
    return one_device_measured or predicted


def fewer_machines(
    topology: Topology, best_on: dict[int, Prediction], one_device_measured: float | None = None
) -> tuple[Prediction, list[tuple[int, str, float, float]], list[str]]:
    """The answer when all the machines scale below EFFICIENCY_FLOOR: fewer machines only where
    they are faster than all of them, else all of them, with the most machines above the floor
    named as the cheaper alternative.

    Args:
        topology: the hardware.
        best_on: the best candidate on each machine count (`best_on_each_machine_count`).
        one_device_measured: one device's measured examples/s, which a measured count's
            speed-up is over (a predicted count's is over one device's prediction).

    Returns:
        The answer, every machine count's (machines, strategy, speed-up over one device,
        machine scaling efficiency), and the sentence that says so.
    """
    options = [
        (
            k,
            p.strategy,
            p.rank_examples_per_second / _one_device_alike(p, one_device_measured),
            machine_efficiency(topology, best_on, k),
        )
        for k, p in best_on.items()
    ]
    n = max(best_on)  # all of the machines, or the measured part of them that was chosen
    fastest = max(best_on, key=lambda m: (best_on[m].rank_examples_per_second, -m))
    replaces = fastest != n
    k = (
        fastest
        if replaces
        else max([m for m, _, _, eff in options if eff >= EFFICIENCY_FLOOR] or [1])
    )
    fewer, full = best_on[k], best_on[n]
    on_n = topology if n == topology.machines else on_first_machines(topology, n)
    listing = "; ".join(
        f"{m} machine{'s' if m > 1 else ''} ({st}"
        f"{', measured' if best_on[m].measured_examples_per_second is not None else ''}): "
        f"{x:,.1f}x one {topology.gpu}, {pct_against(e, EFFICIENCY_FLOOR)} machine efficiency"
        for m, st, x, e in options
    )
    over = _speed_up_basis(topology, best_on, one_device_measured)
    sentence = (
        f"Adding machines buys little here: {'all ' if n == topology.machines else ''}{n} "
        f"machines ({_gpus_said(on_n)}, {full.strategy}) are {_how_known(full)} at "
        f"{pct_against(options[-1][3], EFFICIENCY_FLOOR)} "
        f"machine scaling efficiency (throughput over what the {n} machines "
        f"give alone), below the {EFFICIENCY_FLOOR:.0%} floor. {_advice(fewer, full, replaces)} "
        f"Speed-up by machine count (predicted unless measured{over}): {listing}."
    )
    return (fewer if replaces else full), options, [sentence]


def _advice(fewer: Prediction, full: Prediction, replaces: bool) -> str:
    """What to do with the floor's `fewer` machines: use them, or (slower than all of
    them, under the time objective) know them as the cheaper alternative."""
    k = fewer.layout.workers
    machines = f"{k} machine{'s' if k > 1 else ''} ({fewer.strategy})"
    if replaces:
        return f"Use {machines} and leave the rest free."
    share = fewer.rank_examples_per_second / full.rank_examples_per_second
    return (
        f"All of them train, the fastest answer; {machines} would keep {share:.0%} of its "
        "speed and leave the rest free (--objective cost weighs what each costs)."
    )


def _speed_up_basis(
    topology: Topology, best_on: dict[int, Prediction], one_device_measured: float | None
) -> str:
    """What the speed-ups are over when a measurement takes part (`; over one t4's measured 90
    examples/s`); nothing when all is predicted."""
    predicted = [p for p in best_on.values() if p.measured_examples_per_second is None]
    over_measured = one_device_measured and len(predicted) < len(best_on)
    over_predicted = predicted and (
        one_device_measured or best_on[1].measured_examples_per_second is not None
    )
    if over_measured and not over_predicted:
        return f"; over one {topology.gpu}'s measured {one_device_measured:,.0f} examples/s"
    if not over_predicted:
        return ""
    alike = "as if every count fell short of its prediction alike"
    one = _one_device_alike(predicted[0], None)
    if not over_measured:
        return f"; a predicted count over one machine's prediction, {alike}"
    return (
        f"; measured counts over one {topology.gpu}'s measured {one_device_measured:,.0f} "
        f"examples/s, predicted ones over its predicted {one:,.0f} and one machine's "
        f"prediction, {alike}"
    )


def _how_known(candidate: Prediction) -> str:
    """`measured` or `predicted`, for a sentence on `candidate`'s throughput."""
    return "predicted" if candidate.measured_examples_per_second is None else "measured"


def _gpus_said(topology: Topology) -> str:
    """The cluster's GPUs for a sentence: `128 v100`, or `2 a100 and 6 t4` for a mix."""
    per = topology.gpus_per_machine
    if topology.gpu_mix:
        return " and ".join(f"{n * per} {name}" for name, n in topology.gpu_mix)
    return f"{topology.machines * per} {topology.gpu}"


def measured_on_fewer_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    async_ok: bool,
    history: Sequence[Mapping[str, Any]],
) -> list[Prediction]:
    """The candidates on 2, 4, ... of the machines, fewer than all, that `history` measured (and
    a rule allows): a measured part of the cluster can outrun every candidate on all of it."""
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
        and p.measured_examples_per_second is not None
        and asynchronous_allowed(p, on, model, async_ok)
    ]


def measured_part_sentence(chosen: Prediction, topology: Topology) -> str:
    """Why a measured candidate on some of the machines is the answer."""
    return (
        f"Measured on {chosen.layout.workers} of the {topology.machines} machines, "
        f"{chosen.strategy} ran at {chosen.measured_examples_per_second:,.0f} examples/s, "
        f"more than any candidate on all {topology.machines} is measured or predicted to "
        f"give: use {chosen.layout.workers} machines and leave the rest free (or measure "
        f"all {topology.machines}: strategist compare, then --history)."
    )
