"""Practitioner rules applied to the ranked candidates."""

from __future__ import annotations

from components.core.config import STRATEGIES
from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import step_compute_share
from components.core.selection.explanation import pct, pct_shown, plural, slower_machines_phrase
from components.core.selection.machine_speeds import preemption_rate, slowest_machine
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology
from components.core.strategy_spec import spec_for

PS_SLACK = 0.10  # how much slower parameter_server may be predicted, for a reason not predicted
MANY_WORKERS = 16  # so many workers that restarting all on one failure favours asynchrony
SIMPLER_MARGIN = 0.03  # rank ties within this relative margin go to the simpler strategy
SIMPLICITY = {name: i for i, name in enumerate(STRATEGIES)}


def prefer_simpler(ranked: list[Prediction]) -> Prediction:
    """The fastest candidate, or a simpler one within SIMPLER_MARGIN of it."""
    top = ranked[0].rank_examples_per_second
    close = [p for p in ranked if p.rank_examples_per_second >= top * (1 - SIMPLER_MARGIN)]
    close = [p for p in close if measured(p)] or close
    return min(close, key=lambda p: (p.replicas < ranked[0].replicas, SIMPLICITY[p.strategy]))


def apply_rules(
    best: Prediction,
    ranked: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    async_ok: bool,
    claim: str | None = None,
) -> tuple[Prediction, list[str]]:
    """`best` or a favoured parameter_server, and why; `claim`: what the cheapest `best` saves."""
    why, slack = _why_parameter_server(topology, model, async_ok, best)
    ps = next((p for p in ranked if _asynchronous(p)), None)
    if claim is not None:  # the cheapest parameter_server only
        ps = best if _asynchronous(best) and best.layout.workers > 1 else None
    if ps is None or (best is not ps and topology.machines < 2):
        return best, []
    if not why or (claim is None and measured(best) and measured(ps)):  # measurements decide
        return _dense_model_verdict(best, ranked, async_ok, claim)
    warning = _asynchrony_warning(ps, async_ok)
    if best is ps:
        first = "fastest prediction" if claim is None else "cheapest"
        return ps, [f"parameter_server is both the {first} and favoured: {why}.{warning}"]
    gap = 1 - ps.rank_examples_per_second / best.rank_examples_per_second
    considered = f"parameter_server was considered because {why}, but"
    if gap >= 0 and ps.input_bound and best.input_bound:
        caps = f"{ps.rank_examples_per_second:,.0f} examples/s, {best.strategy} at "
        caps += f"{best.rank_examples_per_second:,.0f}"
        return best, [f"{considered} the input caps it at {caps}: asynchrony gains nothing."]
    slower = f"it is predicted {pct_shown(gap)} slower than {best.strategy}"
    if gap <= slack:
        within = f"; {slower}, within the {pct(slack)} such reasons justify" if gap >= 0 else ""
        return ps, [f"parameter_server is preferred because {why}{within}.{warning}"]
    beyond = " with that already counted"  # the speeds and preemptions that grant no slack
    if slack:
        beyond = f", more than the {pct(slack)} such reasons justify"
    return best, [f"{considered} {slower}{beyond}."]


def asynchronous_allowed(
    prediction: Prediction, topology: Topology, model: ModelProfile, async_ok: bool
) -> bool:
    """Whether `prediction` may be recommended unmeasured: synchronous, or favoured."""
    if not _asynchronous(prediction) or measured(prediction):
        return True
    return bool(_why_parameter_server(topology, model, async_ok)[0])


def input_fed_on_fewer_gpus(
    fed: Prediction, full: Prediction, topology: Topology, model: ModelProfile, async_ok: bool
) -> list[str]:
    """Why parameter_server `fed` on fewer GPUs replaces `full`: only its workers take all input."""
    why, gpus = _why_parameter_server(topology, model, async_ok)[0], fed.layout.gpus_per_machine
    return [
        f"parameter_server is favoured because {why}: on {plural(gpus, 'GPU')} per machine only "
        f"its workers, each at its own speed, take all the input, not {full.strategy}'s."
        + _asynchrony_warning(fed, async_ok)
    ]


def measured(p: Prediction) -> bool:
    """Whether `p` ran: `--history` measured it."""
    return p.measured_examples_per_second is not None


def _asynchronous(p: Prediction) -> bool:
    return spec_for(p.strategy).uses_ps


def _why_parameter_server(
    topology: Topology, model: ModelProfile, async_ok: bool, against: Prediction | None = None
) -> tuple[str, float]:
    """The reasons for parameter_server over `against` (any when None), and the slack they grant."""
    # a step that is mostly the fixed launch time runs about as long on any GPU of a mix
    share = step_compute_share(against.single_gpu_step_s) if against is not None else 1.0
    slowest = slowest_machine(topology, topology.machines, share)
    # one machine waits for no slower one: the machines' speeds weigh only against several
    spans = against is None or against.layout.workers > 1
    differ = topology.heterogeneous and spans and slowest > 1 + SIMPLER_MARGIN
    slower = f"the slowest is {slowest:.2g}x slower than one {topology.gpu}"
    if differ and not topology.gpu_mix:
        slower = f"{slower_machines_phrase(topology)} {slowest:.2g}x slower than the rest"
    # speeds and preemptions are in the predictions already, so they grant no slack; one
    # machine's loss stops every worker, so preemptions favour nothing there
    table = [
        (differ, f"the machines differ in speed ({slower}) and only synchronous steps wait for "
         "the slowest", 0.0),
        (preemption_rate(topology) > 0 and topology.machines > 1, "the machines are "
         "preemptible and a lost worker stops every synchronous replica", 0.0),
        (async_ok, "asynchronous updates are acceptable", PS_SLACK),
        (async_ok and topology.machines >= MANY_WORKERS, f"with {topology.machines} workers "
         "a single failure would otherwise restart all of them", 2 * PS_SLACK),
        # a table in the servers' host memory leaves every GPU's free
        (bool(model.sparse_embedding_params), "the sparse embedding table lives on the "
         "parameter servers", PS_SLACK),
    ]  # fmt: skip
    held = [(said, slack) for applies, said, slack in table if applies]
    return "; ".join(said for said, _ in held), max((slack for _, slack in held), default=0.0)


def _dense_model_verdict(
    best: Prediction, ranked: list[Prediction], async_ok: bool, claim: str | None
) -> tuple[Prediction, list[str]]:
    """`best`, with a warning if a measured parameter_server, the best synchronous if unmeasured."""
    if not _asynchronous(best) or best.layout.workers < 2 or async_ok:
        return best, []  # one worker's updates are not stale
    sync = next((p for p in ranked if not _asynchronous(p)), None)
    warning = _asynchrony_warning(best, async_ok)
    if measured(best):  # a measurement decides, but not what asynchrony costs accuracy
        against = ""
        if sync is not None:
            known = "measured" if measured(sync) else "predicted"
            against = f" against {sync.strategy}'s {sync.rank_examples_per_second:,.0f} ({known})"
        return best, [
            f"parameter_server is chosen on its measured {best.rank_examples_per_second:,.0f} "
            f"examples/s{against}, but examples/s is not time to train here.{warning}"
        ]
    if sync is None:
        return best, []
    if not claim:
        gain = best.rank_examples_per_second / sync.rank_examples_per_second - 1
        claim = f"parameter_server is predicted {pct(gain)} more examples/s than {sync.strategy}"
    return sync, [
        f"{claim}{_shorter_step(best, sync)}, but asynchronous examples are worth less to a dense "
        f"model.{warning} Without a reason for parameter servers (--async-ok, an embedding table, "
        f"uneven or preemptible machines), {sync.strategy} keeps training synchronous."
    ]


def _asynchrony_warning(ps: Prediction, async_ok: bool) -> str:
    """What asynchrony costs `ps`, unless --async-ok accepts it or one worker runs its steps."""
    if async_ok or ps.layout.workers < 2:
        return ""
    return (
        " It trains asynchronously: TF2's ParameterServerStrategy applies each worker's gradients "
        f"about {plural(ps.layout.workers - 1, 'update')} after the weights they were computed on "
        "were read, and stale gradients cost a dense model accuracy and steps to converge (Chen "
        "et al. 2016, https://arxiv.org/abs/1604.00981). Compare its accuracy with a synchronous "
        "run's (strategist compare, then --history) before relying on it, or give --async-ok."
    )


def _shorter_step(ps: Prediction, sync: Prediction) -> str:
    """Where `ps`'s step saves time over a synchronous one of as many replicas, in ms."""
    if sync.step_time_s <= ps.step_time_s or sync.replicas != ps.replicas:
        return ""
    # a tenth of the saving, and at least what one decimal of a millisecond shows
    worth = max((sync.step_time_s - ps.step_time_s) / 10, 0.05e-3)
    savings = [
        (sync.communication_s - ps.communication_s, "less exposed communication (the servers "
         "receive each gradient as back-propagation produces it)"),
        (sync.compute_s - ps.compute_s, "less compute (no worker waits for the slowest replica)"),
    ]  # fmt: skip
    said = [f"{saved * 1e3:,.1f} ms {what}" for saved, what in savings if saved >= worth]
    step = f"a step of {ps.step_time_s * 1e3:,.1f} ms against {sync.step_time_s * 1e3:,.1f}"
    return f" ({step}: {' and '.join(said) or 'about the same work, differently spread'})"
