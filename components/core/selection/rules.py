"""Practitioner rules applied to the ranked candidates.

The fastest candidate wins, except that a simpler strategy within a small
margin is preferred, and parameter_server is preferred, within a tolerance,
when the machines are heterogeneous or preemptible, asynchronous updates are
acceptable, or a sparse embedding table should live on the parameter servers.

Without such a reason, a dense model trains synchronously, however much more
examples/s parameter_server is predicted: TF2's ParameterServerStrategy is
asynchronous ("workers read and update these variables independently without
synchronizing with each other",
https://www.tensorflow.org/api_docs/python/tf/distribute/experimental/ParameterServerStrategy),
so with W workers each gradient is applied about W - 1 updates after the
weights it came from were read. Stale gradients cost a dense model accuracy
and steps to converge (Chen et al. 2016, "Revisiting Distributed Synchronous
SGD", https://arxiv.org/abs/1604.00981), so its examples/s is not time to
train. The predicted gain there is the synchronisation wait (`sync_overhead`)
that asynchronous workers skip, which is what buys that staleness. A
measurement from the user's own runs (`--history`) still decides.
"""

from __future__ import annotations

from components.core.config import STRATEGIES
from components.core.model_profile import ModelProfile
from components.core.selection.cost_model import machine_slowdowns, preemption_rate
from components.core.selection.explanation import pct
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology
from components.core.strategy_spec import spec_for

# How much slower than the fastest synchronous candidate parameter_server may be
# predicted and still be chosen, when a rule favours it.
PS_TOLERANCE_ASYNC_OK = 0.10
PS_TOLERANCE_FAULTS = 0.25
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
    """Moves to parameter_server when a practitioner rule favours it and the cost allows.

    Args:
        best: the candidate ranking chose (`prefer_simpler`).
        ranked: the feasible candidates, best first.
        topology: the hardware.
        model: the model's profile.
        async_ok: asynchronous updates are acceptable.

    Returns:
        The chosen candidate and the sentences that explain the rule's verdict
        (none when no rule applies).
    """
    ps = next((p for p in ranked if spec_for(p.strategy).uses_ps), None)
    if ps is None or (best is not ps and topology.machines < 2):
        return best, []
    if (
        best.measured_examples_per_second is not None
        and ps.measured_examples_per_second is not None
    ):
        return best, []  # both measured: the measurement decides
    # one machine waits for no slower one: the machines' speeds weigh only against several
    why, tolerance = _why_parameter_server(
        topology, model, async_ok, speeds_matter=best.layout.workers > 1
    )
    if not why:
        return _synchronous_for_a_dense_model(best, ranked)
    return _verdict(best, ps, why, tolerance, async_ok)


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
    best: Prediction, ranked: list[Prediction]
) -> tuple[Prediction, list[str]]:
    """`best`, or the best synchronous candidate when `best` is an unmeasured
    asynchronous parameter_server and nothing favours it (module docstring)."""
    sync = next((p for p in ranked if not spec_for(p.strategy).uses_ps), None)
    if not spec_for(best.strategy).uses_ps or sync is None or best.layout.workers < 2:
        return best, []  # one worker's updates are not stale
    if best.measured_examples_per_second is not None:
        return best, []  # a measurement decides
    return sync, [_staleness_sentence(best, sync)]


def _staleness_sentence(ps: Prediction, sync: Prediction) -> str:
    """Why an unmeasured asynchronous parameter_server does not train a dense model."""
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
    topology: Topology, model: ModelProfile, async_ok: bool, speeds_matter: bool = True
) -> tuple[list[str], float]:
    """The reasons that favour parameter_server, and how much slower they let it be;
    machines that differ in speed count only when `speeds_matter` (the synchronous
    alternative runs on several of them)."""
    why = []
    tolerance = 0.0
    machines_differ = topology.heterogeneous and speeds_matter
    if machines_differ:
        why.append(
            "the machines differ in speed and synchronous "
            "all-reduce waits for the slowest every step"
        )
        tolerance = max(tolerance, PS_TOLERANCE_FAULTS)
    # preemptible machines never taken away favour nothing, nor does one machine, whose
    # loss stops every worker
    if preemption_rate(topology) > 0 and topology.machines > 1:
        why.append(
            "machines are preemptible: a lost worker stops every synchronous replica, while "
            "parameter-server training retries its steps on the other workers"
        )
        tolerance = max(tolerance, PS_TOLERANCE_FAULTS)
    if async_ok:
        why.append("asynchronous updates are acceptable")
        tolerance = max(tolerance, PS_TOLERANCE_ASYNC_OK)
        if topology.machines >= MANY_WORKERS:
            why.append(
                f"with {topology.machines} workers a single "
                "failure would otherwise restart all of them"
            )
            tolerance += PS_TOLERANCE_ASYNC_OK
    if model.sparse_embedding_params:
        why.append("the sparse embedding table lives on the parameter servers")
        tolerance = max(tolerance, PS_TOLERANCE_ASYNC_OK)
    if machines_differ:
        slowest = max(machine_slowdowns(topology, topology.machines))
        which = (
            f"the slowest is {slowest:.2g}x slower than one {topology.gpu}"
            if topology.gpu_mix
            else f"half the machines are {slowest:.2g}x slower than the rest"
        )
        why[0] += (
            f" ({which}: every synchronous step takes that much longer, while "
            "parameter-server workers each run at their own speed)"
        )
    return why, tolerance


def _verdict(
    best: Prediction, ps: Prediction, why: list[str], tolerance: float, async_ok: bool
) -> tuple[Prediction, list[str]]:
    """parameter_server when it is fastest or within `tolerance` of `best`, else `best`."""
    if best is ps:
        sentence = (
            f"Parameter_server is both the fastest prediction and favoured: {'; '.join(why)}."
        )
        if not async_ok and ps.layout.workers > 1:  # one worker's steps run in turn
            sentence += (
                " It trains asynchronously: TF2's ParameterServerStrategy applies each "
                f"worker's gradients as they come, each {_staleness(ps)}; compare its "
                "accuracy with a synchronous run (strategist compare) before relying on it."
            )
        return ps, [sentence]
    gap = 1 - ps.rank_examples_per_second / best.rank_examples_per_second
    if gap <= tolerance:
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
    return best, [
        f"Parameter_server was considered because {'; '.join(why)}, but it is predicted "
        f"{pct(gap)} slower than {best.strategy} (more "
        f"than the {pct(tolerance)} such reasons justify)."
    ]
