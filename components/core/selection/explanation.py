"""Plain sentences, with numbers, on why the chosen strategy wins and how the others compare."""

from __future__ import annotations

from collections import Counter

from components.core.checkpoint_interval import MIN_SECONDS, CheckpointInterval
from components.core.cpu_machine import EGRESS_GBPS_PER_VCPU, MAX_EGRESS_GBPS
from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import achievable_tflops
from components.core.selection.links import link_bandwidth_gbps, network_path_share, ring_link
from components.core.selection.machine_speeds import machine_slowdowns, preemption_rate
from components.core.selection.percent import pct, pct_shown
from components.core.selection.prediction import (
    PS_HOST_MEMORY_GB,
    Prediction,
    preemption_share,
    ps_needed_for_memory,
)
from components.core.selection.ps_servers import (
    server_machine,
    server_network_gbps,
    servers_memory_gb,
    servers_share_the_host,
)
from components.core.selection.step_time import (
    KERAS_LOSS_ALL_REDUCES,
    KERAS_METRIC_ALL_REDUCES,
    all_reduce_overlaps,
    keras_step_scalar_all_reduces,
    step_scalar_seconds,
)
from components.core.selection.topology import ASSUMED_EPOCH_S, RESTART_S, Topology, device
from components.core.strategy_spec import spec_for


def slower_machines_phrase(topology: Topology) -> str:
    """The slower machines of `--heterogeneous` for a sentence, with its verb: `half
    the machines are`, or `1 of the 3 machines is` when the count is odd."""
    slower = sum(1 for s in machine_slowdowns(topology, topology.machines) if s > 1)
    if 2 * slower == topology.machines:
        return "half the machines are"
    return f"{slower} of the {topology.machines} machines {'is' if slower == 1 else 'are'}"


def explain(
    chosen: Prediction,
    ranked: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    strategy_sentence: bool = True,
) -> list[str]:
    """The reasons for `chosen`, then one sentence per other candidate.

    Args:
        chosen: the chosen candidate.
        ranked: the feasible candidates, best first (`chosen` among them).
        topology: the hardware.
        model: the model's profile.
        batch: the per-replica batch the predictions use.
        strategy_sentence: False leaves out why the chosen strategy is fastest.

    Returns:
        The model's compute, why the chosen strategy, its preemption losses and input cap
        when any, and how each alternative compares.
    """
    reasons = [
        _compute_sentence(chosen, topology, model, batch),
        *communication_sentences(
            chosen,
            topology,
            model,
            measured_one_device(ranked),
            strategy_sentence=strategy_sentence,
        ),
    ]
    if chosen.overhead_fraction:
        reasons.append(_preemption_sentence(chosen, topology))
    if chosen.input_bound:
        reasons.append(
            f"The input pipelines limit {chosen.strategy} to {chosen.input_limit:,.0f} "
            f"examples/s ({topology.input_examples_per_second:,.0f} per machine x "
            f"{chosen.layout.workers}): the {_devices(topology)} could take more, so faster "
            "input (more CPU cores, cached or pre-processed data) pays before more "
            f"{_devices(topology)} do."
        )
    reasons.extend(_alternative_sentences(chosen, ranked))
    return reasons


def _devices(topology: Topology) -> str:
    """What computes the gradients, for a sentence: `GPUs`, or `CPU devices`."""
    return f"{_device(topology)}s"


def _device(topology: Topology) -> str:
    """One of what computes the gradients, for a sentence: `GPU`, or `CPU device`."""
    return "CPU device" if topology.gpu == "cpu" else "GPU"


def communication_sentences(
    candidate: Prediction,
    topology: Topology,
    model: ModelProfile,
    one_device_measured: float | None = None,
    strategy_sentence: bool = True,
) -> list[str]:
    """What `candidate` spends on communication (unless not `strategy_sentence`), and the
    overlay's share."""
    sentences = []
    if strategy_sentence:
        efficiency = _efficiency(candidate, topology, one_device_measured)
        say = _STRATEGY_SENTENCES.get(candidate.strategy, _parameter_server_sentence)
        sentences.append(say(candidate, topology, model, efficiency))
    if topology.machines > 1 and topology.network_path == "overlay":
        sentences.append(_overlay_sentence(topology))
    return sentences


def measured_one_device(preds: list[Prediction]) -> float | None:
    """The examples/s one device of the topology's GPU was measured at alone (its
    one_device record), or None."""
    return next(
        (
            p.measured_examples_per_second
            for p in preds
            if p.strategy == "one_device"
            and not p.machines_gpu
            and p.measured_examples_per_second is not None
        ),
        None,
    )


def _efficiency(
    candidate: Prediction, topology: Topology, one_device_measured: float | None
) -> str:
    """`candidate`'s scaling efficiency for a sentence: predicted, or measured over one
    device's measured (else predicted) throughput."""
    if candidate.measured_examples_per_second is None:
        return f"{pct(candidate.scaling_efficiency)} scaling efficiency"
    measured = candidate.measured_examples_per_second
    if one_device_measured is not None:
        one, known = one_device_measured, "one_device's measured"
    else:
        one = candidate.per_replica_batch / candidate.single_gpu_step_s
        known = f"one {topology.gpu}'s predicted"
    each = " (each at its GPU's speed)" if candidate.replica_speed != 1 else ""
    efficiency = measured / (candidate.replicas * candidate.replica_speed * one)
    return (
        f"{pct(efficiency)} scaling efficiency as measured ({measured:,.0f} examples/s over "
        f"{candidate.replicas} x {known} {one:,.0f}{each})"
    )


def _compute_sentence(
    chosen: Prediction, topology: Topology, model: ModelProfile, batch: int
) -> str:
    """The model's size and FLOPs, and how long one GPU takes for a step."""
    gpu = device(topology.gpu)
    tflops = achievable_tflops(topology.gpu, topology.precision)
    return (
        f"{model.name}: {model.params:,} parameters ({model.gradient_bytes / 1e6:,.1f} MB of dense "
        f"gradients per step), {model.flops_per_example / 1e9:,.3g} GFLOPs forward per example; "
        f"at batch {batch} one {gpu.name} computes a step "
        f"in {chosen.single_gpu_step_s * 1e3:,.1f} ms "
        f"(3 x forward FLOPs at {tflops:,.1f} TFLOP/s sustained, {_precision_said(topology)})."
        + _no_tensor_cores_note(topology)
    )


def _precision_said(topology: Topology) -> str:
    """The precision the step computes at: float32 on TF32 tensor cores says so."""
    if topology.precision == "fp32" and device(topology.gpu).peak_tflops_tf32:
        return "fp32 on TF32 tensor cores"
    return topology.precision


def _no_tensor_cores_note(topology: Topology) -> str:
    """Why `mixed` precision computes no faster on devices without tensor cores."""
    if topology.precision != "mixed":
        return ""
    names = [name for name, _ in topology.gpu_mix] if topology.gpu_mix else [topology.gpu]
    slow = [name for name in names if not device(name).has_tensor_cores]
    if not slow:
        return ""
    return (
        f" Mixed precision computes no faster than fp32 on {' or '.join(slow)}: only GPUs of "
        "compute capability 7.0 or higher have the tensor cores it runs on (TensorFlow's mixed "
        "precision guide; a CPU runs float16 slower than float32), so only its smaller "
        "activations are counted there."
    )


def _one_device_sentence(
    chosen: Prediction, topology: Topology, model: ModelProfile, efficiency: str
) -> str:
    """Why one GPU: there is only one, or communication costs more than more GPUs give."""
    if topology.total_gpus == 1:
        return f"One {_device(topology)}: one_device, no communication at all."
    if chosen.measured_examples_per_second is not None:
        return (
            f"Measured fastest: one_device ran at {chosen.measured_examples_per_second:,.0f} "
            "examples/s on this hardware, more than the other candidates measured or are "
            "predicted to give (a prediction the measurement beat may be low too)."
        )
    if topology.gpu == "cpu" and topology.gpus_per_machine > 1:
        across = (
            ", and across machines communication would cost more than the extra machines give"
            if topology.machines > 1
            else ""
        )
        return (
            f"The {topology.gpus_per_machine} logical CPU devices share this machine's cores: "
            f"{topology.gpus_per_machine} replicas' steps take as long as all of them on one "
            f"device, so more replicas add an all-reduce and no speed{across}. one_device "
            f"runs at {chosen.examples_per_second:,.0f} examples/s."
        )
    if chosen.input_bound:
        return (
            f"The input pipeline feeds {chosen.input_limit:,.0f} examples/s and one "
            f"{topology.gpu} alone takes all of it, so more {_devices(topology)} would wait "
            "for input: one_device."
        )
    return (
        f"Communication would cost more than the extra {_devices(topology)} give: one_device "
        f"runs at {chosen.examples_per_second:,.0f} examples/s."
    )


def _not_hidden(chosen: Prediction) -> str:
    """The communication left in the step once back-propagation hid what it could."""
    return f"{chosen.communication_s * 1e3:,.1f} ms of it not hidden behind back-propagation"


def _exposed(chosen: Prediction, topology: Topology, model: ModelProfile) -> str:
    """How much of the all-reduce shows in the step, and why none of TensorFlow's hides
    unless it is split into packs."""
    if all_reduce_overlaps(topology, model, chosen.layout.workers):
        return _not_hidden(chosen)
    packs = (
        "; --all-reduce-pack-mb splits multi_worker_mirrored's into packs that overlap it"
        if topology.machines > 1
        else ""
    )
    return (
        "all of it in the step: TensorFlow's all-reduce, as Strategist builds the "
        "strategies, takes every gradient at once after back-propagation (one pack), "
        f"where Horovod and PyTorch DDP hide much of it{packs}"
    )


def _mirrored_sentence(
    chosen: Prediction, topology: Topology, model: ModelProfile, efficiency: str
) -> str:
    """All-reduce within one machine: its time and the scaling efficiency left."""
    link = (
        "in host memory"
        if topology.gpu == "cpu"
        else f"over {topology.link} ({link_bandwidth_gbps(topology):g} GB/s nominal)"
    )
    return (
        f"One machine with {topology.gpus_per_machine} {_devices(topology)}: mirrored "
        f"all-reduces {model.gradient_bytes / 1e6:,.1f} MB {link} "
        f"in {chosen.raw_communication_s * 1e3:,.1f} ms, {_exposed(chosen, topology, model)}: "
        f"{efficiency}."
    )


def _ring_links(topology: Topology, machines: int) -> str:
    """The GPU links a ring through `machines` machines crosses, for a sentence: `nvlink
    within a machine`, or a mix's links and which one sets the pace."""
    links = ring_link(topology, machines)[2]
    if len(links) == 1:
        return f"{links[0]} within a machine"
    return f"each machine's {' or '.join(links)}, at the pace of the slowest"


def _multi_worker_sentence(
    chosen: Prediction, topology: Topology, model: ModelProfile, efficiency: str
) -> str:
    """All-reduce across machines: its time and the scaling efficiency left."""
    return (
        f"{topology.machines} "
        f"{'heterogeneous' if topology.heterogeneous else 'homogeneous'} machines on a "
        f"{topology.network_phrase}: "
        + (
            f"one all-reduce ring over all {chosen.replicas} GPUs (over "
            f"{_ring_links(topology, chosen.layout.workers)}, the network between them) takes "
            if chosen.layout.gpus_per_machine > 1
            else "ring all-reduce across machines takes "
        )
        + f"{chosen.raw_communication_s * 1e3:,.1f} ms per step"
        + f"{_scalars(chosen, topology, model)}, "
        f"{_exposed(chosen, topology, model)}: "
        f"{efficiency} on {chosen.replicas} {_devices(topology)}."
    )


def _scalars(chosen: Prediction, topology: Topology, model: ModelProfile) -> str:
    """The part of a multi-worker step Keras spends all-reducing its loss and metrics."""
    layout = chosen.layout
    seconds = step_scalar_seconds(topology, model, layout.workers, layout.gpus_per_machine)
    if not seconds:
        return ""
    scalars = keras_step_scalar_all_reduces(model.compiled_metrics)
    metrics = (scalars - KERAS_LOSS_ALL_REDUCES) // KERAS_METRIC_ALL_REDUCES
    return (
        f", {seconds * 1e3:,.1f} ms of it in the {scalars} scalar all-reduces Keras runs "
        f"every step, each a collective of its own (3 for the loss and 3 for each compiled "
        f"metric, {metrics} here)"
    )


def _parameter_server_sentence(
    chosen: Prediction, topology: Topology, model: ModelProfile, efficiency: str
) -> str:
    """The parameter-server layout, its transfer time and where to run the servers."""
    workers, ps = chosen.layout.workers, chosen.layout.ps
    by_memory = ps == ps_needed_for_memory(model) > 1
    if chosen.measured_examples_per_second is not None:
        count = f"{ps} server{'s' if ps > 1 else ''} as measured ({chosen.measured_source})"
    elif by_memory:
        count = (
            f"{ps} servers are the fewest whose {PS_HOST_MEMORY_GB:g} GB of host memory each "
            "hold the embedding table and its Adam state"
        )
    else:
        count = f"{ps} is the fewest servers within 3% of the best predicted step"
    if servers_share_the_host(topology):  # train runs every process on the one machine
        where = "they share the worker's machine"
        if by_memory:
            where += (
                f", whose host memory must then hold the "
                f"{servers_memory_gb(chosen.server_state_bytes):,.0f} GB they need"
            )
    else:
        where = (
            f"{_server_machine_clause(chosen, topology)}run them on "
            "non-preemptible machines: a lost parameter server needs a restart from a checkpoint"
        )
    return (
        f"parameter_server with {workers} worker{'s' if workers > 1 else ''} and {ps} "
        f"parameter server{'s' if ps > 1 else ''} (plus the chief coordinator): pulling and "
        f"pushing {model.gradient_bytes / 1e6:,.1f} MB per worker step "
        f"takes {chosen.raw_communication_s * 1e3:,.1f} ms, {_not_hidden(chosen)}: "
        f"{efficiency}. {count}; {where}."
    )


def _server_machine_clause(chosen: Prediction, topology: Topology) -> str:
    """Which machine type each server is predicted and billed on, and the rate it moves its shard at
    where that is below a worker machine's: its egress cap, or one NIC of the network."""
    share = chosen.server_share_bytes
    machine = server_machine(topology, share)
    if machine is None:
        return ""
    clause = f"each server is costed on an {machine.name}"
    if machine.name != topology.ps_machine_type:
        clause += f" (--ps-machine-type {topology.ps_machine_type} does not hold its share)"
    if topology.machines == 1:  # no network between machines: its egress alone
        return clause + f", sending at most {machine.egress_gbps:g} Gbit/s to the worker; "
    rate = server_network_gbps(topology, share)
    workers_gbps = topology.machine_network_gbps
    if rate is None or rate >= workers_gbps:
        return clause + "; "
    if machine.egress_gbps > topology.network_gbps:
        return clause + (
            f", which moves {rate:g} Gbit/s, one NIC of the network, where a worker machine "
            f"moves {workers_gbps:g}; "
        )
    clause += (
        f", which sends at most {machine.egress_gbps:g} Gbit/s where a worker machine "
        f"moves {workers_gbps:g}"
    )
    if machine.egress_gbps < min(MAX_EGRESS_GBPS, topology.network_gbps):
        clause += (
            f" (Compute Engine allows {EGRESS_GBPS_PER_VCPU:g} per vCPU: a larger "
            f"--ps-machine-type moves up to {min(MAX_EGRESS_GBPS, topology.network_gbps):g})"
        )
    return clause + "; "


_STRATEGY_SENTENCES = {
    "one_device": _one_device_sentence,
    "mirrored": _mirrored_sentence,
    "multi_worker_mirrored": _multi_worker_sentence,
}


def _overlay_sentence(topology: Topology) -> str:
    """What the overlay network leaves of the NICs' rate, and how to get it all."""
    share = network_path_share(topology)
    rated = topology.machine_network_gbps
    nics = topology.nics
    one_of = (
        f" A pod on the overlay has one network interface, so it uses 1 of the {nics} NICs."
        if nics > 1
        else ""
    )
    return (
        f"The machines talk through a container overlay network (--network-path overlay), "
        f"which delivers {pct(share)} of the {rated:g} Gbps the NIC it uses is rated for, "
        f"about {share * rated:.3g} Gbps, to all-reduce and parameter-server traffic (fitted "
        f"on Kubernetes kubenet runs, https://github.com/horovod/horovod/issues/396).{one_of} "
        "Host networking (pods with hostNetwork: true) would give them "
        f"{'all of it' if nics == 1 else f'all {nics} NICs at their full rate'}."
    )


def _preemption_sentence(chosen: Prediction, topology: Topology) -> str:
    """What expected preemptions take off the choice, and what a tenth of the interval saves."""
    rate = preemption_rate(topology)
    given = "given" if topology.preemptions_per_machine_hour is not None else "default: one a day"
    interval = topology.checkpoint_interval()
    redone_s = chosen.preemption_loss_s - RESTART_S
    epoch = (
        f", an epoch assumed to take {ASSUMED_EPOCH_S:.0f} s (give --examples-per-epoch)"
        if interval.per_epoch and topology.examples_per_epoch is None
        else ""
    )
    sentence = (
        f"Expected preemption losses take {pct_shown(chosen.overhead_fraction)} off "
        f"{chosen.strategy}: {rate:.3f} ({given}) preemptions per machine-hour, each costing "
        f"about {chosen.preemption_loss_s:,.0f} s ({RESTART_S:.0f} s to restart and "
        f"{redone_s:,.0f} s trained again, half the interval between checkpoints, written "
        f"{interval.describe()}{epoch}; --checkpoint-every)."
    )
    shorter_s = round(2 * redone_s / 10)
    if redone_s < RESTART_S / 10 or shorter_s < MIN_SECONDS:
        return (
            f"{sentence} A shorter interval would save at most {redone_s:,.0f} s a "
            "preemption: the restart is most of it."
        )
    shorter = CheckpointInterval(seconds=float(shorter_s))
    loss_s, share = preemption_share(chosen, topology, shorter)
    return (
        f"{sentence} Checkpointing every {shorter_s:,} s (--checkpoint-every {shorter_s}s) "
        f"would cut that to {loss_s:,.0f} s a preemption and the losses to "
        f"{pct_shown(share)}, at the cost of the checkpoints themselves "
        "(benchmarks/checkpointing.py measures it)."
    )


def _how_known(p: Prediction) -> str:
    """`predicted`, `measured`, or the measurement less its expected preemption losses."""
    if p.measured_examples_per_second is None:
        return "predicted"
    if not p.overhead_fraction:
        return "measured"
    return (
        f"measured at {p.measured_examples_per_second:,.0f}, less {pct(p.overhead_fraction)} "
        "expected preemption losses"
    )


def _alternative_sentences(chosen: Prediction, ranked: list[Prediction]) -> list[str]:
    """Each other candidate's throughput relative to the choice, and its predicted step (no
    one_device once more GPUs are chosen)."""
    reasons = []
    labels = Counter(p.label for p in ranked)
    for p in ranked:
        if p is chosen:
            continue
        if spec_for(p.strategy).single_device and not spec_for(chosen.strategy).single_device:
            continue
        rel = p.rank_examples_per_second / chosen.rank_examples_per_second
        layout = p.layout
        name = p.label + (
            f" ({layout.workers}/{layout.ps}/{layout.gpus_per_machine} workers/ps/gpus)"
            if labels[p.label] > 1
            else ""
        )
        reasons.append(
            f"{name}: {p.rank_examples_per_second:,.0f} examples/s ({_how_known(p)}), "
            f"{rel:.2f}x the choice; {_step_said(p)}."
        )
    return reasons


def _step_said(p: Prediction) -> str:
    """`p`'s step, split into compute and exposed communication: a prediction, said to
    be one beside a measurement (which times no part of the step)."""
    parts = (
        f"{p.step_time_s * 1e3:,.1f} ms = {p.compute_s * 1e3:,.1f} ms compute + "
        f"{p.communication_s * 1e3:,.1f} ms exposed communication"
    )
    if p.measured_examples_per_second is None:
        return f"step {parts}"
    return f"predicted at {p.examples_per_second:,.0f} examples/s, a step of {parts}"
