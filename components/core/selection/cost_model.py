"""The cost model: per-step compute and communication time of a strategy on a topology.

Per step and replica (per-replica batch b, forward FLOPs F per example,
gradient bytes B):

* compute = 3 F b / (peak x achievable fraction) (forward + backward = 3 x forward);
* ring all-reduce over n peers at bandwidth W: 2 (n-1)/n x B / W plus 2 (n-1)
  link latencies; across machines it is hierarchical: within the machine over
  NVLink/PCIe, then between machines over the network;
* parameter servers: each worker pulls and pushes B over its NIC, and each of
  the P servers moves max(B/P, largest variable) for every worker;
* a calibrated fraction of communication hides behind back-propagation
  (at most the backward time, 2/3 of compute);
* step = compute + exposed communication; scaling efficiency = one-GPU step /
  step (weak scaling, fixed per-replica batch).

The constants below are calibrated on published scaling results
(`data/published_scaling.json`; `docs/selection.md` shows every case with its
prediction and error).
"""

from __future__ import annotations

from dataclasses import dataclass

from components.core.config import ConfigError
from components.core.hardware import get_gpu, interconnect_bandwidth
from components.core.model_profile import ModelProfile
from components.core.selection.topology import PRECISIONS, Topology

# Fraction of the data-sheet peak a well-tuned TensorFlow CNN reaches. FP32 on
# CUDA cores: ResNet-50 on V100 at 412 img/s (DeepLearningExamples, XLA) is
# 3 x 8.2 GFLOP x 412 = 10.1 TFLOP/s of 15.7, P100 at 219 img/s (TF benchmarks)
# 5.4 of 10.6. Tensor-core peaks (TF32, FP16) are reached far less: A100 TF32
# 909 img/s is 22 TFLOP/s of 156, V100 mixed 1270 img/s 31 of 125.
ACHIEVABLE_FRACTION_CUDA_CORES = 0.55
ACHIEVABLE_FRACTION_TENSOR_CORES = 0.20
# GPUs whose `peak_tflops_fp32` in hardware.py is the TF32 tensor-core figure.
TF32_PEAK_GPUS = frozenset({"a100", "a100-80gb", "h100"})
# Share of the nominal network rate a collective or gRPC transfer achieves.
NETWORK_EFFICIENCY = 0.80
# Parameter-server transfers (gRPC, per-variable RPCs) reach less of it.
PS_NETWORK_EFFICIENCY = 0.55
# Link latency per ring hop, seconds.
LATENCY_S = {"nvlink": 10e-6, "pcie": 15e-6, "network": 50e-6}
# Fraction of communication hidden behind back-propagation (capped by backward time).
ALLREDUCE_OVERLAP = 0.50
PS_OVERLAP = 0.20
# Fixed per-step cost of a synchronous multi-replica step (barrier, fusion
# buffers, launch), relative to compute.
SYNC_OVERHEAD = 0.02
# Fixed cost of launching one training step (tf.function dispatch, kernel
# launches, the optimizer update): small models never reach millions of steps/s.
STEP_LAUNCH_S = 1e-3
# Usable share of GPU memory (the CUDA context, cuDNN workspaces and
# fragmentation take the rest).
USABLE_MEMORY_FRACTION = 0.90
# Adam keeps two values per parameter (first and second moment).
OPTIMIZER_STATE_FACTOR = 2
# Bytes of activations kept for back-propagation relative to float32: a mixed
# policy computes (and keeps) layer outputs in 16 bits; weights, gradients and
# Adam state stay float32 (Keras keeps float32 variables under a mixed policy).
ACTIVATION_BYTES_FACTOR = {"fp32": 1.0, "mixed": 0.5}
# Heterogeneous machines: the slowest runs this much slower than the named GPU,
# and synchronous strategies wait for it every step.
HETEROGENEITY_SLOWDOWN = 1.5
# Preemptible (Spot) machines: Compute Engine ends a preemptible VM after at
# most 24 h, so each machine is preempted at least once a day; a restart of a
# synchronous cluster (relaunch, restore the last checkpoint, redo lost steps)
# costs about this long.
PREEMPTIONS_PER_MACHINE_HOUR = 1 / 24
RESTART_COST_S = 600.0


# ----------------------------------------------------------------------------- formulas
def achievable_tflops(gpu_name: str, precision: str = "fp32") -> float:
    """Calibrated sustained TFLOP/s of one GPU for CNN training.

    Raises:
        ConfigError: for an unknown GPU or precision.
    """
    gpu = get_gpu(gpu_name)
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if precision == "mixed":
        return gpu.peak_tflops_fp16 * ACHIEVABLE_FRACTION_TENSOR_CORES
    if gpu.name in TF32_PEAK_GPUS:
        return gpu.peak_tflops_fp32 * ACHIEVABLE_FRACTION_TENSOR_CORES
    return gpu.peak_tflops_fp32 * ACHIEVABLE_FRACTION_CUDA_CORES


def compute_time(flops_per_example: float, batch: int, tflops: float) -> float:
    """Seconds of forward + backward (3 x forward FLOPs) for `batch` examples."""
    return 3.0 * flops_per_example * batch / (tflops * 1e12)


def step_compute_time(model: ModelProfile, batch: int, tflops: float) -> float:
    """`compute_time` plus the fixed per-step launch cost."""
    return compute_time(model.flops_per_example, batch, tflops) + STEP_LAUNCH_S


def ring_allreduce_time(
    nbytes: float, peers: int, bytes_per_s: float, latency_s: float = 0.0
) -> float:
    """Ring all-reduce: 2 (n-1)/n x bytes / bandwidth + 2 (n-1) hop latencies."""
    if peers <= 1:
        return 0.0
    return 2.0 * (peers - 1) / peers * nbytes / bytes_per_s + 2 * (peers - 1) * latency_s


def hierarchical_allreduce_time(
    nbytes: float,
    machines: int,
    gpus_per_machine: int,
    intra_bytes_per_s: float,
    network_bytes_per_s: float,
    intra_latency_s: float = 0.0,
    network_latency_s: float = 0.0,
) -> float:
    """All-reduce within each machine over its GPU link, then across machines.

    The inter-machine ring moves 2 (M-1)/M x bytes through each machine's NIC
    (its GPUs each carry a 1/G share, sharing the NIC).
    """
    intra = ring_allreduce_time(nbytes, gpus_per_machine, intra_bytes_per_s, intra_latency_s)
    inter = ring_allreduce_time(nbytes, machines, network_bytes_per_s, network_latency_s)
    return intra + inter


def parameter_server_time(
    nbytes: float,
    largest_variable_bytes: float,
    workers: int,
    ps: int,
    network_bytes_per_s: float,
    streams_per_worker: int = 1,
) -> float:
    """Pull parameters and push gradients between workers and `ps` servers.

    Each worker NIC moves `streams_per_worker` x bytes each way; each server
    holds max(bytes/ps, largest variable) and moves it for every stream. Pull
    and push run one after the other.
    """
    streams = workers * streams_per_worker
    worker_side = streams_per_worker * nbytes / network_bytes_per_s
    shard = max(nbytes / max(ps, 1), min(largest_variable_bytes, nbytes))
    server_side = streams * shard / network_bytes_per_s
    return 2.0 * max(worker_side, server_side)


def exposed_communication(comm_s: float, compute_s: float, overlap: float) -> float:
    """Communication left after `overlap` of it hides behind back-propagation (2/3 of compute)."""
    hidden = min(overlap * comm_s, 2.0 / 3.0 * compute_s)
    return max(0.0, comm_s - hidden)


def activation_bytes_per_example(model: ModelProfile, precision: str = "fp32") -> float:
    """Activation bytes one example keeps for back-propagation at `precision`."""
    return model.activation_bytes_per_example * ACTIVATION_BYTES_FACTOR[precision]


def memory_needed_bytes(
    model: ModelProfile, per_replica_batch: int, replicated_embedding: bool, precision: str = "fp32"
) -> float:
    """Bytes one GPU needs: weights, gradients, Adam state and activations.

    Sparse embedding tables count only when every replica holds them
    (all-reduce strategies); parameter servers keep them off the GPU.
    Activations take half the bytes under `mixed` precision.
    """
    params = model.params if replicated_embedding else model.dense_params
    static = params * 4 * (1 + 1 + OPTIMIZER_STATE_FACTOR)
    return static + activation_bytes_per_example(model, precision) * per_replica_batch


def max_batch_that_fits(
    model: ModelProfile, memory_gb: float, replicated_embedding: bool, precision: str = "fp32"
) -> int:
    """Largest per-replica batch that fits one GPU (0 when not even the weights fit)."""
    usable = memory_gb * 1e9 * USABLE_MEMORY_FRACTION
    static = memory_needed_bytes(model, 0, replicated_embedding)
    per_example = activation_bytes_per_example(model, precision)
    if static + per_example > usable:
        return 0
    if per_example <= 0:
        return 1 << 30
    return int((usable - static) // per_example)


# ----------------------------------------------------------------------------- per strategy
@dataclass(frozen=True)
class _Hw:
    """A topology's sustained rates as the cost model uses them.

    Attributes:
        tflops: sustained TFLOP/s of one GPU.
        intra_bps: bytes/s between GPUs of one machine.
        net_bps: bytes/s a collective achieves between machines.
        ps_bps: bytes/s a parameter-server transfer achieves between machines.
        intra_lat: seconds per ring hop between GPUs of one machine.
    """

    tflops: float
    intra_bps: float
    net_bps: float
    ps_bps: float
    intra_lat: float


def _hw(topology: Topology) -> _Hw:
    """The calibrated rates of `topology`."""
    return _Hw(
        tflops=achievable_tflops(topology.gpu, topology.precision),
        intra_bps=interconnect_bandwidth(topology.link) * 1e9,
        net_bps=topology.network_gbps / 8 * 1e9 * NETWORK_EFFICIENCY,
        ps_bps=topology.network_gbps / 8 * 1e9 * PS_NETWORK_EFFICIENCY,
        intra_lat=LATENCY_S.get(topology.link, LATENCY_S["pcie"]),
    )


def predict_allreduce(
    topology: Topology, model: ModelProfile, batch: int, machines: int, gpus: int
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of synchronous all-reduce on machines x gpus."""
    hw = _hw(topology)
    compute = step_compute_time(model, batch, hw.tflops)
    replicas = machines * gpus
    comm = hierarchical_allreduce_time(
        model.gradient_bytes,
        machines,
        gpus,
        hw.intra_bps,
        hw.net_bps,
        hw.intra_lat,
        LATENCY_S["network"],
    )
    if model.sparse_embedding_params and replicas > 1:
        # Sparse gradients are all-gathered: every replica receives every other's rows.
        rows = model.embedding_rows_touched(batch) * model.embedding_dim * 4
        slowest = hw.net_bps if machines > 1 else hw.intra_bps
        comm += (replicas - 1) * rows / slowest
    if replicas > 1:
        compute *= 1 + SYNC_OVERHEAD
    if topology.heterogeneous and replicas > 1:
        compute *= HETEROGENEITY_SLOWDOWN
    return compute, exposed_communication(comm, compute, ALLREDUCE_OVERLAP), comm


def predict_parameter_server(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    workers: int,
    ps: int,
    gpus: int,
    streams_per_worker: int = 1,
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of a parameter-server step for one worker.

    Each worker first reduces its GPUs' gradients over the machine's link.
    """
    hw = _hw(topology)
    compute = step_compute_time(model, batch, hw.tflops)
    local = (
        ring_allreduce_time(model.gradient_bytes, gpus, hw.intra_bps, hw.intra_lat)
        if streams_per_worker == 1
        else 0.0
    )
    comm = local + parameter_server_time(
        model.gradient_bytes,
        model.largest_variable_bytes,
        workers,
        ps,
        hw.ps_bps,
        streams_per_worker,
    )
    if model.sparse_embedding_params:
        rows = model.embedding_rows_touched(batch * gpus) * model.embedding_dim * 4
        comm += 2 * max(rows, workers * rows / max(ps, 1)) / hw.ps_bps
    return compute, exposed_communication(comm, compute, PS_OVERLAP), comm
