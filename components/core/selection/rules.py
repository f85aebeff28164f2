"""Practitioner rules applied to the ranked candidates.

The fastest candidate wins, but a simpler one within SIMPLER_MARGIN is preferred, and
parameter_server within a tolerance when a reason the predictions leave out favours it. Without
a reason a dense model trains synchronously: TF2's ParameterServerStrategy applies gradients
asynchronously, and stale gradients cost it accuracy and steps to converge (Chen et al. 2016,
https://arxiv.org/abs/1604.00981). A measurement (`--history`) still decides.
"""

from __future__ import annotations

from typing import NamedTuple

from components.core.config import STRATEGIES
from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import step_compute_share
from components.core.selection.explanation import pct, pct_shown, slower_machines_phrase
from components.core.selection.machine_speeds import preemption_rate, slowest_machine
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology
from components.core.strategy_spec import spec_for

# How much slower than the fastest parameter_server may be predicted and still be chosen, when a
# reason the predictions leave out favours it.
PS_TOLERANCE_ASYNC_OK = 0.10
MANY_WORKERS = 16
# Rank ties within this relative margin go to the simpler strategy.
SIMPLER_MARGIN = 0.03
SIMPLICITY = {name: i for i, name in enumerate(STRATEGIES)}
COMPARE = "Compare its accuracy with a synchronous run's (strategist compare) before relying on it"


class _Reason(NamedTuple):
    """A reason that favours parameter_server: what it says, the slack it grants, and how
    the predictions already count it when it grants none."""

    said: str
    tolerance: float
    counted: str


def prefer_simpler(ranked: list[Prediction]) -> Prediction:
    """The fastest candidate, or a simpler one within SIMPLER_MARGIN of it."""
    top = ranked[0].rank_examples_per_second
    close = [p for p in ranked if p.rank_examples_per_second >= top * (1 - SIMPLER_MARGIN)]
    close = [p for p in close if p.measured_examples_per_second is not None] or close
    return min(close, key=lambda p: (p.replicas < ranked[0].replicas, SIMPLICITY[p.strategy]))


def apply_rules(
    best: Prediction,
    ranked: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    async_ok: bool,
) -> tuple[Prediction, list[str]]:
    """Moves to parameter_server when a practitioner rule favours it and its speed allows.

    Args:
        best: the candidate ranking chose (`prefer_simpler`).
        ranked: the feasible candidates, best first.
        topology: the hardware.
        model: the model's profile.
        async_ok: asynchronous updates are acceptable.

    Returns:
        The chosen candidate and the sentences on the rule's verdict (none: no rule applies).
    """
    ps = next((p for p in ranked if _asynchronous(p)), None)
    if ps is None or (best is not ps and topology.machines < 2):
        return best, []
    if _measured(best) and _measured(ps):
        # both measured: the measurement decides, but not what asynchrony costs accuracy
        return best, _measured_asynchronous(best, ranked, async_ok)
    # one machine waits for no slower one: the machines' speeds weigh only against several
    share = step_compute_share(best.single_gpu_step_s)
    why = _why_parameter_server(topology, model, async_ok, best.layout.workers > 1, share)
    if not why:
        return _synchronous_for_a_dense_model(best, ranked)
    return _verdict(best, ps, why, async_ok)


def rules_for_the_cheapest(
    cheapest: Prediction,
    by_price: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    async_ok: bool,
    claim: str,
) -> tuple[Prediction, list[str]]:
    """`apply_rules`' verdict on asynchrony, for the cheapest candidate of `--objective cost`.

    Args:
        cheapest: the cheapest candidate.
        by_price: the feasible priced candidates, cheapest first.
        topology: the machines `cheapest` runs on.
        model: the model's profile.
        async_ok: asynchronous updates are acceptable.
        claim: what `cheapest` is predicted to save, for the sentence that sets it aside.

    Returns:
        The chosen candidate (the cheapest synchronous one instead of an unmeasured
        parameter_server nothing favours) and the sentences on its asynchrony.
    """
    if not _asynchronous(cheapest) or cheapest.layout.workers < 2:
        return cheapest, []
    share = step_compute_share(cheapest.single_gpu_step_s)
    why = _why_parameter_server(topology, model, async_ok, compute_share=share)
    if why:
        said = f"Parameter_server is both the cheapest and favoured: {_said(why)}."
        return cheapest, [said + _asynchrony_warning(cheapest, async_ok)]
    return _synchronous_for_a_dense_model(cheapest, by_price, claim)


def asynchronous_allowed(
    prediction: Prediction, topology: Topology, model: ModelProfile, async_ok: bool
) -> bool:
    """Whether `prediction` may be recommended on its prediction alone: it is synchronous,
    measured, or parameter_server with a reason that favours it."""
    if not _asynchronous(prediction) or _measured(prediction):
        return True
    return bool(_why_parameter_server(topology, model, async_ok))


def input_fed_on_fewer_gpus(
    fed: Prediction, full: Prediction, topology: Topology, model: ModelProfile, async_ok: bool
) -> list[str]:
    """Why parameter_server `fed` replaces the synchronous `full` when the input caps both
    alike on every GPU and only `fed` takes all of it on fewer GPUs per machine."""
    why = _why_parameter_server(topology, model, async_ok)
    g = fed.layout.gpus_per_machine
    return [
        f"Parameter_server is favoured because {_said(why)}: on {g} GPU{'s' if g > 1 else ''} "
        f"per machine its workers, each at its own speed, still take all the input, which "
        f"{full.strategy} on as few does not." + _asynchrony_warning(fed, async_ok)
    ]


def _asynchronous(p: Prediction) -> bool:
    return spec_for(p.strategy).uses_ps


def _measured(p: Prediction) -> bool:
    return p.measured_examples_per_second is not None


def _why_parameter_server(
    topology: Topology,
    model: ModelProfile,
    async_ok: bool,
    speeds_matter: bool = True,
    compute_share: float = 1.0,
) -> list[_Reason]:
    """The reasons that favour parameter_server; machines of different speeds count only when
    `speeds_matter` (the synchronous choice spans them)."""
    # a step that is mostly the fixed launch time runs about as long on any GPU of a mix
    slowest = slowest_machine(topology, topology.machines, compute_share)
    differ = topology.heterogeneous and speeds_matter and slowest > 1 + SIMPLER_MARGIN
    slower = ""
    if differ:
        slower = (
            f"the slowest is {slowest:.2g}x slower than one {topology.gpu}"
            if topology.gpu_mix
            else f"{slower_machines_phrase(topology)} {slowest:.2g}x slower than the rest"
        )
    tolerance = PS_TOLERANCE_ASYNC_OK
    # speeds and preemptions are in the predictions already, so they grant no slack; one
    # machine's loss stops every worker, so preemptions favour nothing there
    table = [
        (differ, f"the machines differ in speed ({slower}) and only synchronous steps wait for "
         "the slowest", 0.0, "each machine's speed"),
        (preemption_rate(topology) > 0 and topology.machines > 1, "the machines are "
         "preemptible and a lost worker stops every synchronous replica, not the other "
         "parameter-server workers", 0.0, "the restarts preemptions cost"),
        (async_ok, "asynchronous updates are acceptable", tolerance, ""),
        (async_ok and topology.machines >= MANY_WORKERS, f"with {topology.machines} workers "
         "a single failure would otherwise restart all of them", 2 * tolerance, ""),
        # a table in the servers' host memory leaves every GPU's free
        (bool(model.sparse_embedding_params), "the sparse embedding table lives on the "
         "parameter servers", tolerance, ""),
    ]  # fmt: skip
    return [_Reason(*row) for applies, *row in table if applies]


def _said(why: list[_Reason]) -> str:
    return "; ".join(reason.said for reason in why)


def _verdict(
    best: Prediction, ps: Prediction, why: list[_Reason], async_ok: bool
) -> tuple[Prediction, list[str]]:
    """parameter_server when it is fastest or within the reasons' tolerance of `best` (and
    not capped by the input alike), else `best`."""
    because = _said(why)
    if best is ps:
        said = f"Parameter_server is both the fastest prediction and favoured: {because}."
        return ps, [said + _asynchrony_warning(ps, async_ok)]
    tolerance = max(reason.tolerance for reason in why)
    gap = 1 - ps.rank_examples_per_second / best.rank_examples_per_second
    considered = f"Parameter_server was considered because {because}, but"
    if gap >= 0 and ps.input_bound and best.input_bound:
        return best, [
            f"{considered} the input pipelines cap it at {ps.rank_examples_per_second:,.0f} "
            f"examples/s, as {best.strategy} at {best.rank_examples_per_second:,.0f}: "
            f"asynchronous updates gain nothing and {best.strategy} keeps training synchronous."
        ]
    if gap <= tolerance:
        within = f"; it is predicted {pct(gap)} slower than {best.strategy}, within the "
        within += f"{pct(tolerance)} such reasons justify"
        said = f"Parameter_server is preferred because {because}{within if gap >= 0 else ''}."
        return ps, [said + _asynchrony_warning(ps, async_ok)]
    counted = " and ".join(reason.counted for reason in why if reason.counted)
    beyond = (
        f"more than the {pct(tolerance)} such reasons justify"
        if tolerance
        else f"with {counted} already counted"
    )
    slower = f"it is predicted {pct_shown(gap)} slower than {best.strategy}"
    return best, [f"{considered} {slower}, {beyond}."]


def _synchronous_for_a_dense_model(
    best: Prediction, ranked: list[Prediction], claim: str = ""
) -> tuple[Prediction, list[str]]:
    """`best`, or the best synchronous candidate when `best` is an unmeasured asynchronous
    parameter_server nothing favours; `claim` says what `best` gains over it."""
    sync = next((p for p in ranked if not _asynchronous(p)), None)
    if not _asynchronous(best) or sync is None or best.layout.workers < 2:
        return best, []  # one worker's updates are not stale
    if _measured(best):
        # a measurement decides, but not what asynchrony costs accuracy
        return best, _measured_asynchronous(best, ranked, async_ok=False)
    if not claim:
        gain = best.rank_examples_per_second / sync.rank_examples_per_second - 1
        claim = f"Parameter_server is predicted {pct(gain)} more examples/s than {sync.strategy}"
    if sync.step_time_s > best.step_time_s and sync.replicas == best.replicas:
        claim += (
            f" (a step of {_ms(best.step_time_s)} ms against {_ms(sync.step_time_s)}: "
            f"{_why_shorter(best, sync)})"
        )
    return sync, [
        f"{claim}, but asynchronous examples are worth less to a dense model: {_stale(best)}. "
        "Without a reason for parameter servers (--async-ok, an embedding table, machines "
        f"that differ in speed or are preemptible), {sync.strategy} keeps training "
        "synchronous; measuring both (strategist compare, then --history) lets measurements decide."
    ]


def _measured_asynchronous(
    chosen: Prediction, ranked: list[Prediction], async_ok: bool
) -> list[str]:
    """The warning a parameter_server chosen on its measured examples/s carries without
    --async-ok: examples/s is not time to train when its gradients land late."""
    if not _asynchronous(chosen) or async_ok or chosen.layout.workers < 2:
        return []
    sync = next((p for p in ranked if not _asynchronous(p)), None)
    against = ""
    if sync is not None:
        known = "measured" if _measured(sync) else "predicted"
        against = f" against {sync.strategy}'s {sync.rank_examples_per_second:,.0f} ({known})"
    return [
        f"Parameter_server is chosen on its measured {chosen.rank_examples_per_second:,.0f} "
        f"examples/s{against}, but examples/s is not time to train here: {_stale(chosen)}. "
        f"{COMPARE}, or give --async-ok if asynchrony is known to be acceptable."
    ]


def _asynchrony_warning(ps: Prediction, async_ok: bool) -> str:
    """` It trains asynchronously: ...`, for a parameter_server chosen without --async-ok;
    nothing for one worker, whose steps run in turn."""
    if async_ok or ps.layout.workers < 2:
        return ""
    return f" It trains asynchronously: {_stale(ps)}. {COMPARE}."


def _stale(ps: Prediction) -> str:
    """How late `ps`'s gradients land with two or more workers, and what that costs."""
    late = ps.layout.workers - 1
    return (
        f"TF2's ParameterServerStrategy applies each worker's gradients about {late} "
        f"update{'s' if late > 1 else ''} after the weights they were computed on were read, "
        "and stale gradients cost a dense model accuracy and steps to converge (Chen et al. "
        "2016, https://arxiv.org/abs/1604.00981)"
    )


def _why_shorter(ps: Prediction, sync: Prediction) -> str:
    """Where a parameter-server step saves time over a synchronous one, in ms."""
    # a tenth of the saving, and at least what one decimal of a millisecond shows
    worth = max((sync.step_time_s - ps.step_time_s) / 10, 0.05e-3)
    savings = [
        (sync.communication_s - ps.communication_s, "less exposed communication (the servers "
         "receive each gradient as back-propagation produces it)"),
        (sync.compute_s - ps.compute_s, "less compute (no worker waits for the slowest replica)"),
    ]  # fmt: skip
    said = [f"{_ms(saved)} ms {what}" for saved, what in savings if saved >= worth]
    return " and ".join(said) or "about the same work, differently spread"


def _ms(seconds: float) -> str:
    """`seconds` in milliseconds for a sentence: one decimal below 10 ms, none above."""
    ms = seconds * 1e3
    return f"{ms:,.1f}" if ms < 10 else f"{ms:,.0f}"
