"""The step-time model: per-step compute and communication time of a strategy on a topology.

A step is compute plus the communication it does not hide (docs/selection.md).
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
from components.core.selection.machine_speeds import gpu_types, mean_machine_speed, slowest_machine
from components.core.selection.memory import (
    GRADIENT_BYTES_FACTOR,
    server_network_gbps,
    server_state_bytes,
    servers_share_the_host,
)
from components.core.selection.topology import Topology
from components.core.strategy_spec import PS_MIN_SHARD_BYTES

# One GPU link's one-way GB/s: NVLink 1-4 (P100 4 x 20, V100 6 x 25, A100 12 x 25, H100 18 x 25),
# PCIe x16 gen 3/4/5 (15.8/31.5/63): NVIDIA's data sheets and the PCI-SIG specifications.
NVLINK_GBPS = {"p100": 80.0, "v100": 150.0, "v100-32gb": 150.0, "a100": 300.0,
               "a100-80gb": 300.0, "h100": 450.0, "h200": 450.0}  # fmt: skip
PCIE_GBPS = {"a100": 31.5, "a100-80gb": 31.5, "l4": 31.5, "a10g": 31.5, "h100": 63.0, "h200": 63.0}
PCIE3_GBPS = 15.8
LATENCY_S = {"nvlink": 10e-6, "pcie": 15e-6, "network": 50e-6}  # per ring hop
# One ring hop of TensorFlow's collective all-reduce between CPU workers, a gRPC call: measured on
# 127.0.0.1 by `python -m benchmarks.collective_latency` (docs/benchmarks.md section 8).
CPU_RING_HOP_S = 0.75e-3
# tf_keras under multi_worker_mirrored all-reduces 3 scalars a step for each `Mean` it tracks (the
# loss and every compiled metric), each in a collective of its own: the traced step holds 4
# `CollectiveReduceV2` ops with the loss alone, 7 with accuracy (tests/allreduce_pack_probe.py).
KERAS_LOSS_ALL_REDUCES = 3
KERAS_METRIC_ALL_REDUCES = 3
TRAINER_COMPILED_METRICS = 1  # Strategist's trainer compiles the loss and one metric
# NCCL's latency model of a small all-reduce (tree algorithm, LL protocol), in seconds: a base,
# and per hop within a machine (x 1.8 when the tree spans machines) and across
# (NVIDIA/nccl src/graph/tuning.cc at 01afd20a, `baseLat` and `hwLat`).
NCCL_TREE_LL_BASE_S = 4.4e-6
NCCL_TREE_LL_HOP_S = {"nvlink": 0.52e-6 * 1.8, "pcie": 1.0e-6 * 1.8, "network": 5.0e-6}


def network_hop_latency(topology: Topology) -> float:
    """Seconds per ring hop between machines: a gRPC call between CPU workers, else NCCL's."""
    return CPU_RING_HOP_S if topology.gpu == "cpu" else LATENCY_S["network"]


def link_bandwidth_gbps(topology: Topology, gpu: str | None = None) -> float:
    """Nominal one-direction GB/s of one GPU's link: of `topology.gpu`, or of `gpu`'s machines."""
    gpu = gpu or topology.gpu
    if topology.link_of(gpu) == "nvlink":
        return NVLINK_GBPS.get(gpu, NVLINK_GBPS["v100"])
    return PCIE_GBPS.get(gpu, PCIE3_GBPS)


def ring_link(
    topology: Topology, machines: int, constants: FittedConstants | None = None
) -> tuple[float, float, tuple[str, ...]]:
    """A ring through the first `machines` machines' GPU links: the bytes/s it reaches on the
    slowest (a mix's T4 PCIe, not its A100 NVLink), the longest hop latency, the links' names."""
    c = constants or FITTED
    links = {gpu: topology.link_of(gpu) for gpu in gpu_types(topology, machines)}
    efficiency = {"nvlink": c.nvlink_efficiency}  # any other link: PCIe's
    bps = min(
        link_bandwidth_gbps(topology, gpu) * 1e9 * efficiency.get(link, c.pcie_efficiency)
        for gpu, link in links.items()
    )
    names = tuple(dict.fromkeys(links.values()))
    return bps, max(LATENCY_S.get(name, LATENCY_S["pcie"]) for name in names), names


def network_path_share(topology: Topology, constants: FittedConstants | None = None) -> float:
    """The share of the machines' network rate `topology`'s network path delivers."""
    overlay = topology.network_path == "overlay"
    return (constants or FITTED).overlay_network_share if overlay else 1.0


def keras_step_scalar_all_reduces(metrics: int | None = TRAINER_COMPILED_METRICS) -> int:
    """Scalars Keras all-reduces a step with `metrics` compiled metrics (None: the trainer's)."""
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

    One communicator spans all N = M x G devices (tensorflow/core/nccl/nccl_manager.cc): each link
    carries 2 (N-1)/N x bytes at the slowest's pace; 2 M of the 2 (N-1) steps cross the network
    (NVIDIA/nccl src/graph/tuning.cc, `nInterSteps`).
    """
    if machines <= 1:
        return ring_allreduce_time(nbytes, gpus_per_machine, intra_bytes_per_s, intra_latency_s)
    replicas = machines * gpus_per_machine
    # with one replica per machine every step crosses the network
    network_steps = min(2 * machines, 2 * (replicas - 1))
    latency = (2 * (replicas - 1) - network_steps) * intra_latency_s
    latency += network_steps * network_latency_s
    slowest = min(intra_bytes_per_s, network_bytes_per_s)
    return 2.0 * (replicas - 1) / replicas * nbytes / slowest + latency


def parameter_server_time(
    nbytes: float,
    largest_variable_bytes: float,
    workers: int,
    ps: int,
    network_bytes_per_s: float,
    server_bytes_per_s: float | None = None,
) -> float:
    """Pulls then pushes: each worker moves `nbytes` each way, each server (default: at a worker's
    rate) its share for every worker, at least one of `MinSizePartitioner`'s shards of the largest
    variable (of `PS_MIN_SHARD_BYTES` or more, at most one per server: core/strategies.py)."""
    largest = min(largest_variable_bytes, nbytes)
    largest /= min(max(ps, 1), max(1, int(largest // PS_MIN_SHARD_BYTES)))
    shard = max(nbytes / max(ps, 1), largest)
    server_side = workers * shard / (server_bytes_per_s or network_bytes_per_s)
    return 2.0 * max(nbytes / network_bytes_per_s, server_side)


def all_reduce_overlaps(topology: Topology, model: ModelProfile, machines: int) -> bool:
    """Whether the all-reduce overlaps back-propagation: only in more than one pack."""
    return step_all_reduce_packs(topology, model, machines) > 1


def step_all_reduce_packs(topology: Topology, model: ModelProfile, machines: int) -> int:
    """All-reduces a step runs: one pack, or the `--all-reduce-pack-mb` packs the gradients fill,
    at most one per tensor (`group_by_size` never splits a tensor, cross_device_utils.py)."""
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
    return max(0.0, comm_s - min(overlap * comm_s, 2.0 / 3.0 * compute_s))


@dataclass(frozen=True)
class Rates:
    """Sustained rates: TFLOP/s; bytes/s within, collective and parameter-server; hop latency."""

    tflops: float
    intra_bps: float
    net_bps: float
    ps_bps: float
    intra_lat: float


def rates(topology: Topology, c: FittedConstants, machines: int = 1) -> Rates:
    """The fitted rates of `topology`, its GPU links the slowest of its first `machines`'."""
    intra_bps, intra_lat, _ = ring_link(topology, machines, c)
    machine_bps = topology.machine_network_gbps * network_path_share(topology, c) / 8 * 1e9
    tflops = achievable_tflops(topology.gpu, topology.precision, c)
    net_bps, ps_bps = machine_bps * c.network_efficiency, machine_bps * c.ps_network_efficiency
    return Rates(tflops, intra_bps, net_bps, ps_bps, intra_lat)


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
    """(compute_s, comm_s) of a synchronous all-reduce step on machines x gpus, nothing hidden."""
    c = constants or FITTED
    hw = rates(topology, c, machines)  # one ring through every machine: its slowest link
    step = step_compute_time(model, batch, hw.tflops)
    compute = step * devices_sharing_compute(topology, gpus)
    replicas = machines * gpus
    ring = (machines, gpus, hw.intra_bps, hw.net_bps, hw.intra_lat, network_hop_latency(topology))
    comm = allreduce_across_machines_time(gradient_bytes(model, topology.precision), *ring)
    packs = step_all_reduce_packs(topology, model, machines)
    comm += (packs - 1) * allreduce_across_machines_time(0.0, *ring)  # a ring's hops per pack
    if replicas <= 1:
        return compute, comm
    comm += model.tensors * c.tensor_latency_s
    if model.sparse_embedding_params:  # all-gathered: every replica receives every other's rows
        rows = model.embedding_rows_touched(batch) * model.embedding_dim * 4
        comm += (replicas - 1) * rows / (hw.net_bps if machines > 1 else hw.intra_bps)
    compute *= 1 + c.sync_overhead * math.log2(replicas)
    # every step waits for the slowest machine: its compute, the same launch
    return compute * slowest_machine(topology, machines, step_compute_share(step)), comm


def sync_wait_s(replicas: int, constants: FittedConstants | None = None) -> float:
    """Seconds a step of `replicas` synchronised replicas waits, never hidden."""
    return (constants or FITTED).sync_latency_s * math.log2(replicas) if replicas > 1 else 0.0


def predict_allreduce(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    machines: int,
    gpus: int,
    constants: FittedConstants | None = None,
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of synchronous all-reduce on machines x gpus: one
    pack (`bytes_per_pack=0`) hides nothing; more start as their gradients appear, but the last."""
    c = constants or FITTED
    compute, comm = allreduce_step_parts(topology, model, batch, machines, gpus, c)
    packs = step_all_reduce_packs(topology, model, machines)
    share = overlap_share(c.allreduce_overlap, topology, c)
    overlap = min(share, (packs - 1) / packs) if packs > 1 else 0.0
    exposed = exposed_communication(comm, compute, overlap) + sync_wait_s(machines * gpus, c)
    scalars = step_scalar_seconds(topology, model, machines, gpus)
    return compute, exposed + scalars, comm + scalars


def step_scalar_seconds(topology: Topology, model: ModelProfile, machines: int, gpus: int) -> float:
    """Seconds of Keras's scalar all-reduces across machines, each a full latency in turn: a ring
    of gRPC hops between CPU workers, else NCCL's tree, base + 2 ((G-1) + floor(log2 M)) hops."""
    if machines <= 1:
        return 0.0
    if topology.gpu == "cpu":
        hop = network_hop_latency(topology)
        one = allreduce_across_machines_time(0.0, machines, gpus, 1.0, 1.0, hop, hop)
    else:
        hop = max(NCCL_TREE_LL_HOP_S[name] for name in ring_link(topology, machines)[2])
        across = int(math.log2(machines)) * NCCL_TREE_LL_HOP_S["network"]
        one = NCCL_TREE_LL_BASE_S + 2 * ((gpus - 1) * hop + across)
    return keras_step_scalar_all_reduces(model.compiled_metrics) * one


def predict_parameter_server(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    workers: int,
    ps: int,
    gpus: int,
    constants: FittedConstants | None = None,
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of an average worker's parameter-server step: each
    worker reduces its GPUs' gradients first, then talks to the servers at their egress rate."""
    c = constants or FITTED
    hw = rates(topology, c)
    shares_host = servers_share_the_host(topology)
    gbps = server_network_gbps(topology, server_state_bytes(model) / max(ps, 1))
    share = network_path_share(topology, c)
    server_bps = None if gbps is None else gbps * share / 8 * 1e9 * c.ps_network_efficiency
    if shares_host:  # one CPU machine: over PCIe
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
    if not shares_host:  # the pull and the push: a round trip each
        comm += 2 * network_hop_latency(topology)
    if model.sparse_embedding_params:
        rows = model.embedding_rows_touched(batch * gpus) * model.embedding_dim * 4
        comm += 2 * max(rows / hw.ps_bps, workers * rows / max(ps, 1) / (server_bps or hw.ps_bps))
    # each variable's update is pushed as soon as its gradient exists: the fitted overlap
    exposed = exposed_communication(comm, compute, overlap_share(c.ps_overlap, topology, c))
    # a worker's pull and push are round trips too: the same wait per doubling of workers
    return compute, exposed + sync_wait_s(workers, c), comm
