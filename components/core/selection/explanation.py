"""Plain sentences, with numbers, on why the chosen strategy wins and how the best other strategy
compares."""

from __future__ import annotations

from components.core.checkpoint_interval import MIN_SECONDS, CheckpointInterval
from components.core.cpu_machine import EGRESS_GBPS_PER_VCPU, MAX_EGRESS_GBPS
from components.core.model_profile import ModelProfile
from components.core.selection import memory, prediction, step_time
from components.core.selection.device_compute import achievable_tflops
from components.core.selection.machine_speeds import machine_slowdowns, preemption_rate
from components.core.selection.prediction import Prediction
from components.core.selection.topology import ASSUMED_EPOCH_S, RESTART_S, Topology, device
from components.core.strategy_spec import spec_for

DEVICES = {"cpu": "CPU devices"}  # what computes the gradients, by --gpu: else GPUs


def pct(x: float) -> str:
    """`x` as a whole percentage, e.g. `42%`."""
    return f"{x:.0%}"


def pct_shown(x: float) -> str:
    """`x` as a percentage never shown as 0: whole from 1% on, else 2 significant digits."""
    return pct(x) if x == 0 or abs(x) >= 0.01 else f"{x * 100:.2g}%"


def pct_against(x: float, threshold: float) -> str:
    """`x` as a percentage with the decimals that keep it on its side of `threshold`: `49.8%`."""
    decimals = 0
    while decimals < 6 and (round(x * 100, decimals) < threshold * 100) != (x < threshold):
        decimals += 1
    return f"{x:.{decimals}%}"


def plural(n: int, word: str) -> str:
    """`n word`, with an `s` unless `n` is 1: `1 machine`, `4 machines`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def slower_machines_phrase(topology: Topology) -> str:
    """The slower machines of `--heterogeneous` and verb: `half the machines are`, `1 of 3 is`."""
    slower = sum(1 for s in machine_slowdowns(topology, topology.machines) if s > 1)
    if 2 * slower == topology.machines:
        return "half the machines are"
    return f"{slower} of the {topology.machines} machines {'is' if slower == 1 else 'are'}"


def explain(chosen: Prediction, ranked: list[Prediction], topology: Topology, model: ModelProfile,
            batch: int, strategy_sentence: bool = True) -> list[str]:  # fmt: skip
    """Why `chosen` wins among `ranked` (feasible, best first) at per-replica `batch`."""
    one = measured_one_device(ranked)
    reasons = [_compute_sentence(chosen, topology, model, batch)]
    reasons += communication_sentences(chosen, topology, model, one, strategy_sentence)
    if chosen.overhead_fraction:
        reasons.append(_preemption_sentence(chosen, topology))
    if chosen.input_bound:
        reasons.append(f"The input pipelines limit {chosen.strategy} to {chosen.input_limit:,.0f} "
                       f"examples/s ({topology.input_examples_per_second:,.0f} per machine x "
                       f"{chosen.layout.workers}): faster input pays first.")  # fmt: skip
    many = not spec_for(chosen.strategy).single_device  # then one_device is no runner-up
    for p in ranked:
        if p.strategy != chosen.strategy and not (many and spec_for(p.strategy).single_device):
            known = "predicted" if p.measured_examples_per_second is None else "measured"
            rate = p.rank_examples_per_second
            return [*reasons, f"The fastest other strategy, {p.label} ({p.layout.workers}/"
                    f"{p.layout.ps}/{p.layout.gpus_per_machine} workers/ps/gpus), is {known} at "
                    f"{rate:,.0f} examples/s, {rate / chosen.rank_examples_per_second:.2f}x the "
                    "choice."]  # fmt: skip
    return reasons


def communication_sentences(candidate: Prediction, topology: Topology, model: ModelProfile,
                            one_device_measured: float | None = None,
                            strategy_sentence: bool = True) -> list[str]:  # fmt: skip
    """What `candidate` spends on communication, and the overlay network's share."""
    sentences = []
    if strategy_sentence:
        spec = spec_for(candidate.strategy)
        say = _one_device_sentence if spec.single_device else _all_reduce_sentence
        say = _ps_sentence if spec.uses_ps else say
        efficiency = _efficiency(candidate, topology, one_device_measured)
        sentences.append(say(candidate, topology, model, efficiency))
    if topology.machines > 1 and topology.network_path == "overlay":
        share, gbps = step_time.network_path_share(topology), topology.machine_network_gbps
        host = f"all {topology.nics} NICs (a pod uses 1)" if topology.nics > 1 else "all of it"
        sentences.append(f"A container overlay network (--network-path overlay) delivers "
                         f"{pct(share)} of the {gbps:g} Gbps NIC rate, {share * gbps:.3g} Gbps "
                         "(fitted on kubenet runs, https://github.com/horovod/horovod/issues/396); "
                         f"hostNetwork gives {host}.")  # fmt: skip
    return sentences


def measured_one_device(preds: list[Prediction]) -> float | None:
    """The examples/s one device of the topology's GPU was measured at alone, or None."""
    measured = [p.measured_examples_per_second for p in preds if p.strategy == "one_device"
                and not p.machines_gpu]  # fmt: skip
    return next((m for m in measured if m is not None), None)


def _efficiency(p: Prediction, topology: Topology, one_measured: float | None) -> str:
    """The scaling efficiency predicted, or measured over one device's measured throughput."""
    measured, one, known = p.measured_examples_per_second, one_measured, "one_device's measured"
    if measured is None:
        return f"{pct(p.scaling_efficiency)} scaling efficiency"
    if one is None:
        one, known = p.per_replica_batch / p.single_gpu_step_s, f"one {topology.gpu}'s predicted"
    each = " (each at its GPU's speed)" if p.replica_speed != 1 else ""
    efficiency = measured / (p.replicas * p.replica_speed * one)
    return (f"{pct(efficiency)} scaling efficiency as measured ({measured:,.0f} examples/s over "
            f"{p.replicas} x {known} {one:,.0f}{each})")  # fmt: skip


def _compute_sentence(p: Prediction, topology: Topology, model: ModelProfile, batch: int) -> str:
    """The model's size and FLOPs, one GPU's step, and the GPUs mixed precision cannot speed."""
    gpu, precision = device(topology.gpu), topology.precision
    tf32 = " on TF32 tensor cores" if precision == "fp32" and gpu.peak_tflops_tf32 else ""
    tflops, step_ms = achievable_tflops(topology.gpu, precision), p.single_gpu_step_s * 1e3
    sentence = (f"{model.name}: {model.params:,} parameters ({model.gradient_bytes / 1e6:,.1f} MB "
                f"of dense gradients), {model.flops_per_example / 1e9:,.3g} GFLOPs forward per "
                f"example; at batch {batch} one {gpu.name} computes a step in {step_ms:,.1f} ms "
                f"({tflops:,.1f} TFLOP/s sustained, {precision}{tf32}).")  # fmt: skip
    names = [name for name, _ in topology.gpu_mix] if topology.gpu_mix else [topology.gpu]
    slow = " or ".join(name for name in names if not device(name).has_tensor_cores)
    if precision == "mixed" and slow:
        sentence += f" Mixed precision computes no faster than fp32 on {slow}: no tensor cores."
    return sentence


def _one_device_sentence(p: Prediction, topology: Topology, model: ModelProfile, eff: str) -> str:
    """Why one device: there is one, it measured fastest, or more would not be faster."""
    devices, measured = DEVICES.get(topology.gpu, "GPUs"), p.measured_examples_per_second
    speed = f"one_device runs at {p.examples_per_second:,.0f} examples/s."
    if topology.total_gpus == 1:
        return f"One {devices.removesuffix('s')}: one_device, no communication."
    if measured is not None:
        return (f"Measured fastest: one_device ran at {measured:,.0f} examples/s, more than the "
                "others measured or predicted to give.")  # fmt: skip
    if topology.gpu == "cpu" and topology.gpus_per_machine > 1:
        return (f"The {topology.gpus_per_machine} logical CPU devices share this machine's "
                f"cores: more replicas add an all-reduce and no speed; {speed}")  # fmt: skip
    if p.input_bound:
        return (f"The input pipeline feeds {p.input_limit:,.0f} examples/s and one {topology.gpu} "
                f"alone takes all of it, so more {devices} would wait for input.")  # fmt: skip
    return f"Communication would cost more than the extra {devices} give: {speed}"


def _all_reduce_sentence(p: Prediction, topology: Topology, model: ModelProfile, eff: str) -> str:
    """The all-reduce within one machine or across machines, and the efficiency it leaves."""
    ms, devices = f"{p.raw_communication_s * 1e3:,.1f} ms", DEVICES.get(topology.gpu, "GPUs")
    shown = f"{p.communication_s * 1e3:,.1f} ms of it not hidden behind back-propagation"
    workers, gpus = p.layout.workers, p.layout.gpus_per_machine
    if not step_time.all_reduce_overlaps(topology, model, workers):
        shown = "all of it exposed (one pack after back-propagation"
        shown += "; --all-reduce-pack-mb splits it)" if topology.machines > 1 else ")"
    if not spec_for(p.strategy).multi_machine:
        link = "in host memory"
        if topology.gpu != "cpu":
            link = f"over {topology.link} ({step_time.link_bandwidth_gbps(topology):g} GB/s)"
        return (f"One machine with {topology.gpus_per_machine} {devices}: mirrored all-reduces "
                f"the gradients {link} in {ms}, {shown}: {eff}.")  # fmt: skip
    ring = "ring all-reduce across machines"
    if gpus > 1:
        links = step_time.ring_link(topology, workers)[2]
        over = f"each machine's {' or '.join(links)}, at the pace of the slowest"
        over = f"{links[0]} within a machine" if len(links) == 1 else over
        ring = f"one all-reduce ring over all {p.replicas} GPUs (over {over}, the network "
        ring += "between them)"
    if scalar_ms := 1e3 * step_time.step_scalar_seconds(topology, model, workers, gpus):
        scalars = step_time.keras_step_scalar_all_reduces(model.compiled_metrics)
        ms += f" ({scalar_ms:,.1f} ms in the {scalars} scalar all-reduces Keras runs every step)"
    kind = "heterogeneous" if topology.heterogeneous else "homogeneous"
    return (f"{topology.machines} {kind} machines on a {topology.network_phrase}: {ring} takes "
            f"{ms} a step, {shown}: {eff} on {p.replicas} {devices}.")  # fmt: skip


def _ps_sentence(p: Prediction, topology: Topology, model: ModelProfile, eff: str) -> str:
    """The parameter-server layout, its transfer time, the server count and where they run."""
    ps, by_memory = p.layout.ps, p.layout.ps == prediction.ps_needed_for_memory(model) > 1
    count = f"{ps} is the fewest servers within 3% of the best predicted step"
    if p.measured_examples_per_second is not None:
        count = f"{plural(ps, 'server')} as measured ({p.measured_source})"
    elif by_memory:
        count = (f"{ps} servers are the fewest whose {prediction.PS_HOST_MEMORY_GB:g} GB of host "
                 "memory each hold the embedding table and its Adam state")  # fmt: skip
    where = "they share the worker's machine"  # train runs every process on the one machine
    if not memory.servers_share_the_host(topology):
        where = f"{_server_machine_clause(p, topology)}run them on non-preemptible machines"
    elif by_memory:
        gb = memory.servers_memory_gb(p.server_state_bytes)
        where += f", whose host memory must then hold the {gb:,.0f} GB they need"
    return (f"parameter_server with {plural(p.layout.workers, 'worker')} and "
            f"{plural(ps, 'parameter server')} (plus the chief): pulling and pushing takes "
            f"{p.raw_communication_s * 1e3:,.1f} ms a worker step, {p.communication_s * 1e3:,.1f} "
            f"ms of it not hidden behind back-propagation: {eff}. {count}; {where}.")  # fmt: skip


def _server_machine_clause(p: Prediction, topology: Topology) -> str:
    """The machine each server is costed on, and its rate where below a worker machine's."""
    machine = memory.server_machine(topology, p.server_share_bytes)
    if machine is None:
        return ""
    clause = f"each server is costed on an {machine.name}"
    if machine.name != topology.ps_machine_type:
        clause += f" (--ps-machine-type {topology.ps_machine_type} does not hold its share)"
    if topology.machines == 1:  # no network between machines: its egress alone
        return f"{clause}, sending at most {machine.egress_gbps:g} Gbit/s to the worker; "
    rate = memory.server_network_gbps(topology, p.server_share_bytes)
    workers_gbps, most = topology.machine_network_gbps, min(MAX_EGRESS_GBPS, topology.network_gbps)
    if rate is None or rate >= workers_gbps:
        return f"{clause}; "
    moves = f"moves {rate:g} Gbit/s, one NIC of the network,"
    if machine.egress_gbps <= topology.network_gbps:
        moves = f"sends at most {machine.egress_gbps:g} Gbit/s"
    clause += f", which {moves} where a worker machine moves {workers_gbps:g}"
    if machine.egress_gbps < most:
        clause += (f" (Compute Engine allows {EGRESS_GBPS_PER_VCPU:g} per vCPU: a larger "
                   f"--ps-machine-type moves up to {most:g})")  # fmt: skip
    return f"{clause}; "


def _preemption_sentence(p: Prediction, topology: Topology) -> str:
    """What expected preemptions take off the choice, and what a tenth of the interval saves."""
    given = "given" if topology.preemptions_per_machine_hour is not None else "default: one a day"
    interval, redone_s = topology.checkpoint_interval(), p.preemption_loss_s - RESTART_S
    epoch = ""
    if interval.per_epoch and topology.examples_per_epoch is None:
        epoch = f", an epoch assumed to take {ASSUMED_EPOCH_S:.0f} s (give --examples-per-epoch)"
    rate, each_s = preemption_rate(topology), p.preemption_loss_s
    sentence = (f"Expected preemption losses take {pct_shown(p.overhead_fraction)} off {p.strategy}"
                f": {rate:.3f} ({given}) preemptions per machine-hour, each costing about "
                f"{each_s:,.0f} s ({RESTART_S:.0f} s restart + {redone_s:,.0f} s retrained, half "
                f"the interval of checkpoints written {interval.describe()}{epoch}).")  # fmt: skip
    shorter_s = round(2 * redone_s / 10)
    if redone_s < RESTART_S / 10 or shorter_s < MIN_SECONDS:
        return f"{sentence} A shorter interval would save at most {redone_s:,.0f} s a preemption."
    shorter = CheckpointInterval(seconds=float(shorter_s))
    loss_s, share = prediction.preemption_share(p, topology, shorter)
    return (f"{sentence} Checkpoints every {shorter_s:,} s (--checkpoint-every {shorter_s}s) would "
            f"cut that to {loss_s:,.0f} s a preemption, losses to {pct_shown(share)}.")  # fmt: skip
