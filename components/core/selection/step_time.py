"""The step-time model: per-step compute and communication time of a strategy on a topology.

A step is compute (3 x forward FLOPs at the device's sustained rate) plus the communication it
does not hide: one NCCL-style ring all-reduce over every replica (2 (N-1)/N x the gradient bytes
over the slowest link, plus a latency per hop and per gradient tensor), or parameter servers'
pulls and pushes. TensorFlow's all-reduce as Strategist builds it hides nothing unless split
into packs (`--all-reduce-pack-mb`); parameter servers hide a fitted share. Scaling efficiency
is the one-GPU step over the step (weak scaling). The constants are fitted
(`device_compute.FittedConstants`); docs/selection.md describes the model.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import (
    FITTED,
    FittedConstants,
    achievable_tflops,
    devices_sharing_compute,
    step_compute_share,
    step_compute_time,
)
from components.core.selection.links import (
    PCIE3_GBPS,
    PCIE_GBPS,
    network_hop_latency,
    network_path_share,
    ring_link,
)
from components.core.selection.machine_speeds import mean_machine_speed, slowest_machine
from components.core.selection.memory import GRADIENT_BYTES_FACTOR, server_state_bytes
from components.core.selection.ps_servers import server_network_gbps, servers_share_the_host
from components.core.selection.topology import Topology
from components.core.strategy_spec import PS_MIN_SHARD_BYTES

# tf_keras under multi_worker_mirrored all-reduces 3 scalars a step for each `Mean` it tracks (the
# loss and every compiled metric), each in a collective of its own: the traced step holds 4
# `CollectiveReduceV2` ops with the loss alone, 7 with accuracy (tests/allreduce_pack_probe.py).
KERAS_LOSS_ALL_REDUCES = 3
KERAS_METRIC_ALL_REDUCES = 3
TRAINER_COMPILED_METRICS = 1  # Strategist's trainer compiles the loss and one metric


def keras_step_scalar_all_reduces(metrics: int | None = TRAINER_COMPILED_METRICS) -> int:
    """The scalars Keras all-reduces every `multi_worker_mirrored` step when the model
    is compiled with `metrics` metrics besides its loss (None: the trainer's one)."""
    metrics = TRAINER_COMPILED_METRICS if metrics is None else metrics
    return KERAS_LOSS_ALL_REDUCES + KERAS_METRIC_ALL_REDUCES * metrics


def ring_allreduce_time(
    nbytes: float, peers: int, bytes_per_s: float, latency_s: float = 0.0
) -> float:
    """Ring all-reduce: 2 (n-1)/n x bytes / bandwidth + 2 (n-1) hop latencies."""
    if peers <= 1:
        return 0.0
    return 2.0 * (peers - 1) / peers * nbytes / bytes_per_s + 2 * (peers - 1) * latency_s


def allreduce_across_machines_time(
    nbytes: float,
    machines: int,
    gpus_per_machine: int,
    intra_bytes_per_s: float,
    network_bytes_per_s: float,
    intra_latency_s: float = 0.0,
    network_latency_s: float = 0.0,
) -> float:
    """One ring over every replica of every machine, as NCCL and TensorFlow run it.

    TensorFlow builds one NCCL communicator over all N = M x G devices
    (tensorflow/core/nccl/nccl_manager.cc): every link, each NIC included, carries 2 (N-1)/N x
    bytes (nccl-tests' "bus bandwidth"), at the slowest link's pace. Of the 2 (N-1) steps, 2 M
    cross the network (NVIDIA/nccl src/graph/tuning.cc, `nInterSteps`).
    """
    if machines <= 1:
        return ring_allreduce_time(nbytes, gpus_per_machine, intra_bytes_per_s, intra_latency_s)
    replicas = machines * gpus_per_machine
    slowest = min(intra_bytes_per_s, network_bytes_per_s)
    # with one replica per machine every one of the 2 (N-1) steps crosses the network
    network_steps = min(2 * machines, 2 * (replicas - 1))
    intra_steps = 2 * (replicas - 1) - network_steps
    latency = intra_steps * intra_latency_s + network_steps * network_latency_s
    return 2.0 * (replicas - 1) / replicas * nbytes / slowest + latency


def parameter_server_time(
    nbytes: float,
    largest_variable_bytes: float,
    workers: int,
    ps: int,
    network_bytes_per_s: float,
    server_bytes_per_s: float | None = None,
) -> float:
    """Pull parameters and push gradients, one after the other, between workers and `ps` servers.

    Each worker moves `nbytes` each way; each server moves its share for every worker, at
    `server_bytes_per_s` (default: a worker's rate). A large variable is split into shards of at
    least `PS_MIN_SHARD_BYTES`, at most one per server (`MinSizePartitioner`, as
    components/core/strategies.py builds it), so a server's share is at least one shard.
    """
    largest = min(largest_variable_bytes, nbytes)
    largest /= min(max(ps, 1), max(1, int(largest // PS_MIN_SHARD_BYTES)))
    shard = max(nbytes / max(ps, 1), largest)
    server_side = workers * shard / (server_bytes_per_s or network_bytes_per_s)
    return 2.0 * max(nbytes / network_bytes_per_s, server_side)


def all_reduce_overlaps(topology: Topology, model: ModelProfile, machines: int) -> bool:
    """Whether a step's all-reduce on `machines` machines overlaps back-propagation: only when
    split into more than one pack; one pack starts once the last gradient exists."""
    return step_all_reduce_packs(topology, model, machines) > 1


def step_all_reduce_packs(topology: Topology, model: ModelProfile, machines: int) -> int:
    """The all-reduces a step of `machines` machines runs: one pack, or as many packs of
    `--all-reduce-pack-mb` as the gradients fill across machines, at most one per tensor
    (TensorFlow's `group_by_size` never splits a tensor, cross_device_utils.py)."""
    if machines <= 1 or topology.all_reduce_pack_mb <= 0:
        return 1
    nbytes = gradient_bytes(model, topology.precision)
    filled = math.ceil(nbytes / (topology.all_reduce_pack_mb * 2**20))
    return max(1, min(filled, model.tensors))


def overlap_share(overlap: float, topology: Topology, constants: FittedConstants) -> float:
    """The share of communication `topology` hides where it overlaps: `overlap`, less under XLA."""
    return overlap * (constants.xla_overlap_kept if topology.jit_compile else 1.0)


def exposed_communication(comm_s: float, compute_s: float, overlap: float) -> float:
    """Communication left after `overlap` of it hides behind back-propagation (2/3 of compute)."""
    hidden = min(overlap * comm_s, 2.0 / 3.0 * compute_s)
    return max(0.0, comm_s - hidden)


@dataclass(frozen=True)
class Rates:
    """A topology's sustained rates: one device's TFLOP/s; bytes/s within a machine, of a
    collective and of a parameter-server transfer between machines; seconds per hop within."""

    tflops: float
    intra_bps: float
    net_bps: float
    ps_bps: float
    intra_lat: float


def rates(topology: Topology, c: FittedConstants, machines: int = 1) -> Rates:
    """The fitted rates of `topology`, its GPU links the slowest of its first `machines`
    machines' (`ring_link`)."""
    intra_bps, intra_lat, _ = ring_link(topology, machines, c)
    machine_gbps = topology.machine_network_gbps * network_path_share(topology, c)
    return Rates(
        tflops=achievable_tflops(topology.gpu, topology.precision, c),
        intra_bps=intra_bps,
        net_bps=machine_gbps / 8 * 1e9 * c.network_efficiency,
        ps_bps=machine_gbps / 8 * 1e9 * c.ps_network_efficiency,
        intra_lat=intra_lat,
    )


def gradient_bytes(model: ModelProfile, precision: str) -> float:
    """Dense gradient bytes a replica exchanges per step at `precision`."""
    return model.gradient_bytes * GRADIENT_BYTES_FACTOR[precision]


def allreduce_step_parts(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    machines: int,
    gpus: int,
    constants: FittedConstants | None = None,
) -> tuple[float, float]:
    """(compute_s, comm_s) of a synchronous all-reduce step on machines x gpus, before any
    of the communication hides behind back-propagation."""
    c = constants or FITTED
    hw = rates(topology, c, machines)  # one ring through every machine: its slowest link
    step = step_compute_time(model, batch, hw.tflops)
    share = step_compute_share(step)
    compute = step * devices_sharing_compute(topology, gpus)
    replicas = machines * gpus
    nbytes = gradient_bytes(model, topology.precision)
    ring = (machines, gpus, hw.intra_bps, hw.net_bps, hw.intra_lat, network_hop_latency(topology))
    comm = allreduce_across_machines_time(nbytes, *ring)
    packs = step_all_reduce_packs(topology, model, machines)
    if packs > 1:  # every pack past the first is one more ring: its hops' latency again
        comm += (packs - 1) * allreduce_across_machines_time(0.0, *ring)
    if replicas > 1:
        comm += model.tensors * c.tensor_latency_s
    if model.sparse_embedding_params and replicas > 1:
        # Sparse gradients are all-gathered: every replica receives every other's rows.
        rows = model.embedding_rows_touched(batch) * model.embedding_dim * 4
        slowest = hw.net_bps if machines > 1 else hw.intra_bps
        comm += (replicas - 1) * rows / slowest
    if replicas > 1:
        compute *= 1 + c.sync_overhead * math.log2(replicas)
        # every step waits for the slowest: its compute, the same launch
        compute *= slowest_machine(topology, machines, share)
    return compute, comm


def sync_wait_s(replicas: int, constants: FittedConstants | None = None) -> float:
    """Seconds a step of `replicas` synchronised replicas waits, never hidden."""
    c = constants or FITTED
    return c.sync_latency_s * math.log2(replicas) if replicas > 1 else 0.0


def predict_allreduce(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    machines: int,
    gpus: int,
    constants: FittedConstants | None = None,
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of synchronous all-reduce on machines x gpus.

    One pack (`CommunicationOptions(bytes_per_pack=0)`) hides nothing; packs of
    `--all-reduce-pack-mb` start as their gradients appear, all but the last.
    """
    c = constants or FITTED
    compute, comm = allreduce_step_parts(topology, model, batch, machines, gpus, c)
    packs = step_all_reduce_packs(topology, model, machines)
    overlap = 0.0
    if packs > 1:
        overlap = min(overlap_share(c.allreduce_overlap, topology, c), (packs - 1) / packs)
    exposed = exposed_communication(comm, compute, overlap) + sync_wait_s(machines * gpus, c)
    scalars = step_scalar_seconds(topology, model, machines, gpus)
    return compute, exposed + scalars, comm + scalars


# NCCL's latency model of a small all-reduce (tree algorithm, LL protocol), in seconds:
# a base, and per hop within a machine (x 1.8 when the tree spans machines) and across
# (NVIDIA/nccl src/graph/tuning.cc at 01afd20a, `baseLat` and `hwLat`).
NCCL_TREE_LL_BASE_S = 4.4e-6
NCCL_TREE_LL_HOP_S = {"nvlink": 0.52e-6 * 1.8, "pcie": 1.0e-6 * 1.8, "network": 5.0e-6}


def step_scalar_seconds(topology: Topology, model: ModelProfile, machines: int, gpus: int) -> float:
    """Seconds a step spends on Keras's scalar all-reduces across `machines` machines, each
    paying its latency in full and never hidden (collectives run in order).

    Between CPU workers each is a ring of gRPC hops (`CPU_RING_HOP_S`); between GPU machines,
    NCCL's tree latency, base + 2 ((G-1) hops within + floor(log2 M) across). One machine sums
    them locally.
    """
    scalars = keras_step_scalar_all_reduces(model.compiled_metrics)
    if machines <= 1:
        return 0.0
    if topology.gpu == "cpu":
        hop = network_hop_latency(topology)
        one = allreduce_across_machines_time(0.0, machines, gpus, 1.0, 1.0, hop, hop)
    else:
        hop = max(NCCL_TREE_LL_HOP_S[name] for name in ring_link(topology, machines)[2])
        within = (gpus - 1) * hop
        across = int(math.log2(machines)) * NCCL_TREE_LL_HOP_S["network"]
        one = NCCL_TREE_LL_BASE_S + 2 * (within + across)
    return scalars * one


def server_bytes_per_s(
    topology: Topology, model: ModelProfile, ps: int, constants: FittedConstants | None = None
) -> float | None:
    """Bytes/s one of `ps` parameter servers moves on the machine it runs on
    (`ps_servers.server_network_gbps`), None where they share the worker's one machine."""
    c = constants or FITTED
    gbps = server_network_gbps(topology, server_state_bytes(model) / max(ps, 1))
    if gbps is None:
        return None
    return gbps * network_path_share(topology, c) / 8 * 1e9 * c.ps_network_efficiency


def predict_parameter_server(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    workers: int,
    ps: int,
    gpus: int,
    constants: FittedConstants | None = None,
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of an average worker's parameter-server step.

    The servers share the host on one CPU machine (over PCIe), else run on `--ps-machine-type`
    machines whose egress bounds them. Each worker first reduces its GPUs' gradients; workers of
    different speeds each run at their own pace.
    """
    c = constants or FITTED
    hw = rates(topology, c)
    shares_host = servers_share_the_host(topology)
    server_bps = server_bytes_per_s(topology, model, ps, c)
    if shares_host:
        host = PCIE_GBPS.get(topology.gpu, PCIE3_GBPS) * 1e9 * c.pcie_efficiency
        hw = dataclasses.replace(hw, net_bps=host, ps_bps=host)
    elif topology.machines == 1 and server_bps is not None:
        hw = dataclasses.replace(hw, net_bps=server_bps, ps_bps=server_bps)
    step = step_compute_time(model, batch, hw.tflops)
    compute = step * devices_sharing_compute(topology, gpus)
    compute /= mean_machine_speed(topology, workers, step_compute_share(step))
    nbytes = gradient_bytes(model, topology.precision)
    comm = ring_allreduce_time(nbytes, gpus, hw.intra_bps, hw.intra_lat)
    comm += parameter_server_time(
        nbytes, model.largest_variable_bytes, workers, ps, hw.ps_bps, server_bps
    )
    comm += model.tensors * c.tensor_latency_s
    if not shares_host:
        # the pull and the push: a round trip each (gRPC; the fitted 50 us on GPU machines)
        comm += 2 * network_hop_latency(topology)
    if model.sparse_embedding_params:
        rows = model.embedding_rows_touched(batch * gpus) * model.embedding_dim * 4
        comm += 2 * max(rows / hw.ps_bps, workers * rows / max(ps, 1) / (server_bps or hw.ps_bps))
    # each variable's update is pushed as soon as its gradient exists: the fitted overlap
    overlap = overlap_share(c.ps_overlap, topology, c)
    exposed = exposed_communication(comm, compute, overlap)
    # a worker's pull and push are round trips too: the same wait per doubling of workers
    exposed += sync_wait_s(workers, c)
    return compute, exposed, comm
