"""The step-time model: per-step compute and communication time of a strategy on a topology.

Per step and replica (per-replica batch b, forward FLOPs F per example, gradient bytes B in T
tensors):

* compute = 3 F b / (peak x achievable fraction) (forward + backward = 3 x forward), at the
  precision's peak (FP32/TF32, or FP16/BF16 tensor cores for `mixed`);
* ring all-reduce over n peers at bandwidth W: 2 (n-1)/n x B / W plus 2 (n-1) link latencies; across
  machines it is one ring over all N replicas, as NCCL runs it, so each machine's network
  (`--network-gbps` per NIC x `--nics`, of which a container overlay network, `--network-path
  overlay`, delivers a share set from a measurement) carries 2 (N-1)/N x B, and the GPU link (NVLink
  or PCIe of the GPU's generation) the same; a hop between CPU workers is a gRPC call through
  TensorFlow's collective executor (`CPU_RING_HOP_S`, measured by
  `benchmarks/collective_latency.py`), not an NCCL send;
* every tensor (or fusion bucket) of a multi-replica step costs a fixed latency: models with many
  small tensors pay it hundreds of times a step;
* parameter servers: each worker pulls and pushes B over its network (a round trip each), and each
  of the P servers moves max(B/P, largest variable) for every worker;
* a synchronous step may also wait a fitted time per doubling of the replicas (`sync_latency_s`),
  whatever its compute (fitted to 0 since the fourth and fifth blind sets joined the fit: short,
  well-scaling steps contradict it);
* a fitted fraction of communication hides behind back-propagation (at most the backward time, 2/3
  of compute) where the framework overlaps them (Horovod, PyTorch DDP: most published cases); under
  XLA (`--jit-compile`) only a fitted share of that overlap is kept. TensorFlow's all-reducing
  strategies as Strategist builds them hide none (`Topology.overlaps_backward`): every gradient goes
  into one all-reduce after back-propagation;
* step = compute + exposed communication; scaling efficiency = one-GPU step / step (weak scaling,
  fixed per-replica batch).

The fitted constants (`FittedConstants`) come from `data/step_time_fit.json`, written by `python -m
research.selection.fit` from the training part of the published cases
(`data/published_scaling.json`); `docs/selection.md` shows the held-out error next to a constant
guess.
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

# tf_keras under multi_worker_mirrored all-reduces scalars across the workers every step besides the
# gradients, each in a collective of its own: 3 for each `Mean` it tracks, the loss and every
# compiled metric (its total and count read in cross-replica context, and its log entry summed by
# `reduce_per_replica`, "auto" = "sum" off TPUs). The traced train step over the trainer's repeated
# `DatasetCreator` holds 4 `CollectiveReduceV2` ops with the loss alone and 7 with accuracy, one of
# them the gradients' pack (tests/allreduce_pack_probe.py); a finite input (numpy arrays) adds a
# partial-batch check. Strategist's trainer compiles the loss and one metric.
KERAS_LOSS_ALL_REDUCES = 3


KERAS_METRIC_ALL_REDUCES = 3


TRAINER_COMPILED_METRICS = 1


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

    TensorFlow's collective all-reduce builds one NCCL communicator (or one RING reducer) over all N
    = M x G devices of the job (tensorflow/core/nccl/nccl_manager.cc), not an all-reduce within each
    machine and then one across them. Every link of that ring, each machine's NIC included, carries
    2 (N-1)/N x bytes: nccl-tests' "bus bandwidth" (NVIDIA/nccl-tests doc/PERFORMANCE.md), which is
    why two 8-GPU machines already pay almost twice the bytes a two-node hierarchical all-reduce (2
    (M-1)/M) would. The slowest link, usually the NIC, sets the pace. Of the ring's 2 (N-1) steps, 2
    M cross the network and the rest stay within a machine, as NCCL's own tuning counts them
    (NVIDIA/nccl src/graph/tuning.cc, `nInterSteps`).
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
    """Whether the all-reduce of a step on `machines` machines of `topology` overlaps
    back-propagation: where a multi-machine TensorFlow run splits it into more than one
    pack (`--all-reduce-pack-mb`, `multi_worker_mirrored` only); one pack starts once the
    last gradient exists."""
    return step_all_reduce_packs(topology, model, machines) > 1


def step_all_reduce_packs(topology: Topology, model: ModelProfile, machines: int) -> int:
    """The all-reduces a step of `machines` machines runs: one pack, or as many packs of
    `--all-reduce-pack-mb` as `model`'s gradients fill (`multi_worker_mirrored` across machines),
    at most one per gradient tensor: TensorFlow's `group_by_size` fills each pack past
    the pack size before it starts the next, and never splits a tensor
    (tensorflow/python/distribute/cross_device_utils.py).

    Each pack past the first is charged its ring's hop latency again, an upper bound: on
    2 CPU workers, 0.02 MB packs (4 for the MLP's 69 KB) trained 11-19 % slower than one
    pack (4,663-5,118 against 5,725-5,756 examples/s), about 0.65 ms a step per extra
    pack where this charges 1.5 ms; the packs' rings partly run at once.
    """
    if machines <= 1 or topology.all_reduce_pack_mb <= 0:
        return 1
    nbytes = gradient_bytes(model, topology.precision)
    filled = math.ceil(nbytes / (topology.all_reduce_pack_mb * 2**20))
    return max(1, min(filled, model.tensors))


def overlap_share(
    overlap: float, topology: Topology, constants: FittedConstants, overlaps: bool = True
) -> float:
    """The share of communication `topology` hides: `overlap`, less under XLA, and none
    when it does not `overlaps` back-propagation."""
    if not overlaps:
        return 0.0
    return overlap * (constants.xla_overlap_kept if topology.jit_compile else 1.0)


def exposed_communication(comm_s: float, compute_s: float, overlap: float) -> float:
    """Communication left after `overlap` of it hides behind back-propagation (2/3 of compute)."""
    hidden = min(overlap * comm_s, 2.0 / 3.0 * compute_s)
    return max(0.0, comm_s - hidden)


@dataclass(frozen=True)
class Rates:
    """A topology's sustained rates as the step-time model uses them.

    Attributes:
        tflops: sustained TFLOP/s of one device.
        intra_bps: bytes/s between devices of one machine.
        net_bps: bytes/s a collective achieves between machines.
        ps_bps: bytes/s a parameter-server transfer achieves between machines.
        intra_lat: seconds per ring hop between devices of one machine.
    """

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

    TensorFlow's all-reducing strategies as Strategist builds them put every gradient into one pack,
    concatenated once the last one is computed (`CommunicationOptions(bytes_per_pack=0)`,
    tensorflow/python/distribute/ cross_device_utils.py `group_by_size`): it hides nothing behind
    back-propagation. Packs of `--all-reduce-pack-mb` start as their gradients appear, all but the
    last (the first layers' gradients, computed last).
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
    """Seconds a step spends on the scalar all-reduces Keras runs for `model`'s loss and compiled
    metrics (`keras_step_scalar_all_reduces`) across `machines` machines of `gpus` devices, each
    paying its latency in full.

    Between CPU workers each is a ring of gRPC hops, as measured (`CPU_RING_HOP_S`). Between GPU
    machines NCCL sends a few bytes up and down a tree: its own latency model, base + 2 ((G-1) hops
    within a machine + floor(log2 M) across), a lower bound, as TensorFlow's launch of each
    collective adds to it. Never hidden: TensorFlow launches a step's collectives in order (the
    ordering token), and Keras reads its loss and metrics after the gradients' all-reduce. Within
    one machine (`mirrored`) Keras sums them locally (`AddN`), without one.
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
    """(compute_s, exposed_comm_s, raw_comm_s) of a parameter-server step of an average
    worker, its servers placed as `strategist train` places them.

    On one CPU machine the servers share the worker's host (`servers_share_the_host`):
    traffic crosses host memory over PCIe. Else they run on CPU machines of
    `--ps-machine-type` whose egress bounds them; on one GPU machine the worker moves its
    traffic at their rate (its NIC is at least as fast). Each worker first reduces its GPUs'
    gradients over the machine's link; workers of different speeds each run at their own
    pace (compute is scaled by the harmonic mean of the slowdowns).
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
        # the pull and the push: a round trip each. TensorFlow's parameter servers talk
        # gRPC on GPU machines too; those keep the fitted 50 us (the published
        # parameter-server cases were fitted with it), a CPU the measured call.
        comm += 2 * network_hop_latency(topology)
    if model.sparse_embedding_params:
        rows = model.embedding_rows_touched(batch * gpus) * model.embedding_dim * 4
        comm += 2 * max(rows / hw.ps_bps, workers * rows / max(ps, 1) / (server_bps or hw.ps_bps))
    # TensorFlow pushes each variable's update as soon as its gradient exists (one
    # `extended.update` per variable, tf_keras optimizer `_distributed_apply_gradients_fn`):
    # parameter servers keep the fitted overlap
    overlap = overlap_share(c.ps_overlap, topology, c)
    exposed = exposed_communication(comm, compute, overlap)
    # a worker's pull and push are round trips too: the same wait per doubling of workers
    exposed += sync_wait_s(workers, c)
    return compute, exposed, comm
