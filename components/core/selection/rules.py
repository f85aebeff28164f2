"""Practitioner rules applied to the ranked candidates.

The fastest candidate wins, but a simpler strategy within a small margin is preferred, and
parameter_server within a tolerance when asynchronous updates are acceptable or a sparse
embedding table lives on the servers. Machines of different speeds or preemptible ones let
parameter_server compete on throughput alone (the predictions already count them).

Without such a reason a dense model trains synchronously, however much faster parameter_server
is predicted: TF2's ParameterServerStrategy applies gradients asynchronously, and stale gradients
cost a dense model accuracy and steps to converge (Chen et al. 2016,
https://arxiv.org/abs/1604.00981). A measurement (`--history`) still decides.
"""

from __future__ import annotations

from components.core.config import STRATEGIES
from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import step_compute_share
from components.core.selection.explanation import pct, pct_shown, slower_machines_phrase
from components.core.selection.machine_speeds import preemption_rate, slowest_machine
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology
from components.core.strategy_spec import spec_for

# How much slower than the fastest parameter_server may be predicted and still be chosen, when a
# rule favours it for something the predictions leave out (machine speeds and preemptions are in
# the predictions already, so they grant none).
PS_TOLERANCE_ASYNC_OK = 0.10
MANY_WORKERS = 16
# Rank ties within this relative margin go to the simpler strategy.
SIMPLER_MARGIN = 0.03
SIMPLICITY = {name: i for i, name in enumerate(STRATEGIES)}


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
    ps = next((p for p in ranked if spec_for(p.strategy).uses_ps), None)
    if ps is None or (best is not ps and topology.machines < 2):
        return best, []
    if (
        best.measured_examples_per_second is not None
        and ps.measured_examples_per_second is not None
    ):
        # both measured: the measurement decides, but not what asynchrony costs accuracy
        return best, _measured_asynchronous(best, ranked, async_ok)
    # one machine waits for no slower one: the machines' speeds weigh only against several
    why, tolerance = _why_parameter_server(
        topology,
        model,
        async_ok,
        speeds_matter=best.layout.workers > 1,
        compute_share=step_compute_share(best.single_gpu_step_s),
    )
    if not why:
        return _synchronous_for_a_dense_model(best, ranked)
    counted = _counted_in_the_predictions(topology, speeds_matter=best.layout.workers > 1)
    return _verdict(best, ps, why, tolerance, async_ok, counted)


def rules_for_the_cheapest(
    cheapest: Prediction,
    by_price: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    async_ok: bool,
    claim: str,
) -> tuple[Prediction, list[str]]:
    """`apply_rules`' verdict on asynchrony, for the cheapest candidate of `--objective cost`.

    An unmeasured asynchronous parameter_server nothing favours gives way to the cheapest
    synchronous candidate; no reason moves a synchronous choice to parameter_server.

    Args:
        cheapest: the cheapest candidate.
        by_price: the feasible priced candidates, cheapest first.
        topology: the machines `cheapest` runs on.
        model: the model's profile.
        async_ok: asynchronous updates are acceptable.
        claim: what `cheapest` is predicted to save, for the sentence that sets it aside.

    Returns:
        The chosen candidate and the sentences on its asynchrony.
    """
    if not spec_for(cheapest.strategy).uses_ps or cheapest.layout.workers < 2:
        return cheapest, []
    share = step_compute_share(cheapest.single_gpu_step_s)
    why, _ = _why_parameter_server(topology, model, async_ok, compute_share=share)
    if why:
        favoured = f"Parameter_server is both the cheapest and favoured: {'; '.join(why)}."
        return cheapest, [favoured + _asynchrony_warning(cheapest, async_ok)]
    return _synchronous_for_a_dense_model(cheapest, by_price, claim)


def asynchronous_allowed(
    prediction: Prediction, topology: Topology, model: ModelProfile, async_ok: bool
) -> bool:
    """Whether `prediction` may be recommended on its prediction alone: it is
    synchronous, measured, or parameter_server with a reason that favours it."""
    if not spec_for(prediction.strategy).uses_ps:
        return True
    if prediction.measured_examples_per_second is not None:
        return True
    return bool(_why_parameter_server(topology, model, async_ok)[0])


def _synchronous_for_a_dense_model(
    best: Prediction, ranked: list[Prediction], claim: str = ""
) -> tuple[Prediction, list[str]]:
    """`best`, or the best synchronous candidate when `best` is an unmeasured asynchronous
    parameter_server nothing favours; `claim` says what `best` gains over it."""
    sync = next((p for p in ranked if not spec_for(p.strategy).uses_ps), None)
    if not spec_for(best.strategy).uses_ps or sync is None or best.layout.workers < 2:
        return best, []  # one worker's updates are not stale
    if best.measured_examples_per_second is not None:
        # a measurement decides, but not what asynchrony costs accuracy
        return best, _measured_asynchronous(best, ranked, async_ok=False)
    return sync, [_staleness_sentence(best, sync, claim)]


def _measured_asynchronous(
    chosen: Prediction, ranked: list[Prediction], async_ok: bool
) -> list[str]:
    """The warning a parameter_server chosen on its measured examples/s carries without
    --async-ok: examples/s is not time to train when its gradients land late."""
    if not spec_for(chosen.strategy).uses_ps or async_ok or chosen.layout.workers < 2:
        return []
    sync = next((p for p in ranked if not spec_for(p.strategy).uses_ps), None)
    against = (
        f" against {sync.strategy}'s {sync.rank_examples_per_second:,.0f} "
        f"({'measured' if sync.measured_examples_per_second is not None else 'predicted'})"
        if sync is not None
        else ""
    )
    return [
        f"Parameter_server is chosen on its measured {chosen.rank_examples_per_second:,.0f} "
        f"examples/s{against}, but examples/s is not time to train here: TF2's "
        f"ParameterServerStrategy applies each worker's gradients asynchronously, each "
        f"{_staleness(chosen)}, and stale gradients cost a dense model accuracy and steps "
        "to converge (Chen et al. 2016, https://arxiv.org/abs/1604.00981). Compare its "
        "accuracy with a synchronous run's (strategist compare records each run's eval "
        "accuracy) before relying on it; --async-ok says asynchronous updates are known to "
        "be acceptable."
    ]


def _staleness_sentence(ps: Prediction, sync: Prediction, claim: str = "") -> str:
    """Why an unmeasured asynchronous parameter_server does not train a dense model;
    `claim` says what it gains over `sync` (by default, examples/s)."""
    if not claim:
        gain = ps.rank_examples_per_second / sync.rank_examples_per_second - 1
        claim = f"Parameter_server is predicted {pct(gain)} more examples/s than {sync.strategy}"
    if sync.step_time_s > ps.step_time_s and sync.replicas == ps.replicas:
        claim += (
            f" (a step of {_ms(ps.step_time_s)} ms against "
            f"{_ms(sync.step_time_s)}: {_why_shorter(ps, sync)})"
        )
    return (
        f"{claim}, but asynchronous examples are worth less to a dense model: TF2's "
        f"ParameterServerStrategy applies each worker's gradients asynchronously, so with "
        f"{ps.layout.workers} workers a gradient lands {_staleness(ps)}, and "
        "stale gradients cost accuracy and steps to converge (Chen et al. 2016, "
        "https://arxiv.org/abs/1604.00981). Without a reason for parameter servers (an "
        f"embedding table, machines that differ in speed or are preemptible), {sync.strategy} "
        "keeps training synchronous. Give --async-ok to let throughput decide, or measure "
        "both (strategist compare) and pass --history."
    )


def _why_shorter(ps: Prediction, sync: Prediction) -> str:
    """Where a parameter-server step saves time over a synchronous one, in ms."""
    parts = []
    # a tenth of the saving, and at least what one decimal of a millisecond shows
    worth = max((sync.step_time_s - ps.step_time_s) / 10, 0.05e-3)
    comm = sync.communication_s - ps.communication_s
    if comm >= worth:
        parts.append(
            f"{_ms(comm)} ms less exposed communication (the servers receive each gradient "
            "as back-propagation produces it)"
        )
    wait = sync.compute_s - ps.compute_s
    if wait >= worth:
        parts.append(f"{_ms(wait)} ms less compute (no worker waits for the slowest replica)")
    return " and ".join(parts) or "about the same work, differently spread"


def _ms(seconds: float) -> str:
    """`seconds` in milliseconds for a sentence: one decimal below 10 ms, none above."""
    ms = seconds * 1e3
    return f"{ms:,.1f}" if ms < 10 else f"{ms:,.0f}"


def _staleness(ps: Prediction) -> str:
    """How late an asynchronous gradient lands with two or more workers, for a sentence."""
    stale = ps.layout.workers - 1
    return (
        f"about {stale} update{'s' if stale > 1 else ''} after the weights it was computed "
        "on were read"
    )


def _why_parameter_server(
    topology: Topology,
    model: ModelProfile,
    async_ok: bool,
    speeds_matter: bool = True,
    compute_share: float = 1.0,
) -> tuple[list[str], float]:
    """The reasons that favour parameter_server, and how much slower they let it be; machines
    of different speeds count only when `speeds_matter` (the synchronous choice spans them)."""
    why = []
    tolerance = 0.0
    # a step that is mostly the fixed launch time runs about as long on any GPU of a mix
    slowest = slowest_machine(topology, topology.machines, compute_share)
    machines_differ = topology.heterogeneous and speeds_matter and slowest > 1 + SIMPLER_MARGIN
    if machines_differ:
        why.append(
            "the machines differ in speed and synchronous "
            "all-reduce waits for the slowest every step"
        )
    # one machine's loss stops every worker: no reason there
    if preemption_rate(topology) > 0 and topology.machines > 1:
        why.append(
            "machines are preemptible: a lost worker stops every synchronous replica, while "
            "parameter-server training retries its steps on the other workers"
        )
    # asynchrony allowed, and failures other than preemptions, are in no prediction
    if async_ok:
        why.append("asynchronous updates are acceptable")
        tolerance = max(tolerance, PS_TOLERANCE_ASYNC_OK)
        if topology.machines >= MANY_WORKERS:
            why.append(
                f"with {topology.machines} workers a single "
                "failure would otherwise restart all of them"
            )
            tolerance += PS_TOLERANCE_ASYNC_OK
    # a table in the servers' host memory leaves every GPU's free: in no prediction either
    if model.sparse_embedding_params:
        why.append("the sparse embedding table lives on the parameter servers")
        tolerance = max(tolerance, PS_TOLERANCE_ASYNC_OK)
    if machines_differ:
        which = (
            f"the slowest is {slowest:.2g}x slower than one {topology.gpu}"
            if topology.gpu_mix
            else f"{slower_machines_phrase(topology)} {slowest:.2g}x slower than the rest"
        )
        why[0] += (
            f" ({which}: every synchronous step takes that much longer, while "
            "parameter-server workers each run at their own speed)"
        )
    return why, tolerance


def _asynchrony_warning(ps: Prediction, async_ok: bool) -> str:
    """` It trains asynchronously: ...`, for a parameter_server chosen without
    --async-ok; nothing for one worker, whose steps run in turn, or with it."""
    if async_ok or ps.layout.workers < 2:
        return ""
    return (
        " It trains asynchronously: TF2's ParameterServerStrategy applies each "
        f"worker's gradients as they come, each {_staleness(ps)}; compare its "
        "accuracy with a synchronous run (strategist compare) before relying on it."
    )


def input_fed_on_fewer_gpus(
    fed: Prediction, full: Prediction, topology: Topology, model: ModelProfile, async_ok: bool
) -> list[str]:
    """Why parameter_server `fed` replaces the synchronous `full` when the input caps both
    alike on every GPU and only `fed` takes all of it on fewer GPUs per machine."""
    why, _ = _why_parameter_server(topology, model, async_ok)
    g = fed.layout.gpus_per_machine
    return [
        f"Parameter_server is favoured because {'; '.join(why)}: on {g} GPU"
        f"{'s' if g > 1 else ''} per machine its workers, each at its own speed, still take "
        f"all the input, which {full.strategy} on as few does not."
        + _asynchrony_warning(fed, async_ok)
    ]


def _counted_in_the_predictions(topology: Topology, speeds_matter: bool) -> str:
    """How the predictions already hold the effects of the reasons that grant no
    tolerance (machines of different speeds, preemptions), for a sentence."""
    counted = []
    if topology.heterogeneous and speeds_matter:
        counted.append(
            "run each parameter-server worker at its own speed and a synchronous step at "
            "the slowest machine's"
        )
    if preemption_rate(topology) > 0 and topology.machines > 1:
        counted.append(
            "take a restart off a synchronous run for each of its machines preempted, off "
            "parameter_server for one"
        )
    return " and ".join(counted)


def _verdict(
    best: Prediction,
    ps: Prediction,
    why: list[str],
    tolerance: float,
    async_ok: bool,
    counted: str = "",
) -> tuple[Prediction, list[str]]:
    """parameter_server when it is fastest or within `tolerance` of `best` (and not capped by
    the input alike), else `best`; `counted` says how the predictions hold the reasons."""
    if best is ps:
        sentence = (
            f"Parameter_server is both the fastest prediction and favoured: {'; '.join(why)}."
        )
        return ps, [sentence + _asynchrony_warning(ps, async_ok)]
    gap = 1 - ps.rank_examples_per_second / best.rank_examples_per_second
    if gap >= 0 and ps.input_bound and best.input_bound:
        return best, [
            f"Parameter_server was considered because {'; '.join(why)}, but the input "
            f"pipelines cap it at {ps.rank_examples_per_second:,.0f} examples/s, as "
            f"{best.strategy} at {best.rank_examples_per_second:,.0f}: its workers would "
            f"wait for input as {best.strategy}'s do, so asynchronous updates gain nothing "
            f"and {best.strategy} keeps training synchronous."
        ]
    if gap < 0 or gap <= tolerance:
        sentence = (
            f"parameter_server is preferred because {'; '.join(why)}; it is predicted "
            f"{pct(gap)} slower than {best.strategy}, within "
            f"the {pct(tolerance)} such reasons justify."
        )
        if gap < 0:
            sentence = f"parameter_server is preferred because {'; '.join(why)}."
        if not async_ok:
            sentence += (
                " TF2's ParameterServerStrategy applies each worker's updates asynchronously; "
                f"if you need synchronous updates, {best.strategy} "
                "with BackupAndRestore is the alternative."
            )
        return ps, [sentence[0].upper() + sentence[1:]]
    if not tolerance:
        return best, [
            f"Parameter_server was considered because {'; '.join(why)}, but it is predicted "
            f"{pct_shown(gap)} slower than {best.strategy} with that already counted: the "
            f"predictions {counted}."
        ]
    return best, [
        f"Parameter_server was considered because {'; '.join(why)}, but it is predicted "
        f"{pct(gap)} slower than {best.strategy} (more "
        f"than the {pct(tolerance)} such reasons justify)."
    ]
