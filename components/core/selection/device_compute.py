"""Sustained compute: the fitted constants, a device's achievable TFLOP/s, and the
compute time of a step.

The fitted constants (`FittedConstants`) come from `data/step_time_fit.json`, written by
`python -m research.selection.fit` from the training part of the published cases.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from components.core import storage
from components.core.config import ConfigError
from components.core.model_profile import ModelProfile
from components.core.selection.topology import PRECISIONS, Topology, device

FIT_PATH = Path(__file__).parents[1] / "data" / "step_time_fit.json"


@dataclass(frozen=True)
class FittedConstants:
    """The constants the fit chooses (defaults: the hand-set starting point).

    Attributes:
        achievable_fraction_cuda_cores: share of the FP32 CUDA-core peak a TensorFlow CNN sustains.
        achievable_fraction_tensor_cores: share of the FP16/BF16 tensor-core peak it sustains under
            `mixed` precision.
        achievable_fraction_tf32: share of the TF32 tensor-core peak (A100, H100 in float32) it
            sustains. Apart from the FP16 share since the third blind look: one share for both let
            TF32 and FP16 cases pull it opposite ways.
        nvlink_efficiency: share of the nominal NVLink bandwidth a ring reaches.
        pcie_efficiency: share of the nominal PCIe bandwidth a ring reaches.
        network_efficiency: share of the network rate a collective reaches.
        ps_network_efficiency: share a parameter-server transfer reaches.
        allreduce_overlap: fraction of all-reduce hidden behind back-propagation.
        ps_overlap: fraction of parameter-server traffic hidden likewise.
        sync_overhead: cost of a synchronous multi-replica step relative to compute, per doubling of
            the replicas (barriers and stragglers grow with the log of the replica count).
        sync_latency_s: seconds per doubling of the replicas that every multi-replica step waits,
            however short its compute: launching the collectives or the parameter servers' round
            trips, waiting for the slowest replica's kernels, the framework's per-step bucketing. A
            share of compute (`sync_overhead`) alone charged a 3x faster mixed-precision step 3x
            less, and the third blind look over-predicted all 9 AMP runs on one NVLink machine by
            7-11 points (NVIDIA's PyTorch ConvNets: 84-87 % against 95-97 % for the same models in
            FP32/TF32). The fit sets it to 0 since the fifth look: CSC's 30 ms AMP steps on 2 x 4
            A100 keep 89 % (docs/selection.md, *After the fifth look*).
        tensor_latency_s: cost per gradient tensor of a multi-replica step.
        xla_overlap_kept: share of the overlap that survives XLA (`--jit-compile`). XLA fuses the
            step into clusters whose gradients appear only when a cluster ends, and its GPU
            collectives do not run beside compute, so the all-reduce overlaps back-propagation less:
            NVIDIA measured "little compute and communication overlap" for BERT with Horovod and XLA
            (https://github.com/NVIDIA/DeepLearningExamples/issues/156), and XLA on GPU does not
            overlap NCCL reductions with compute (https://github.com/jax-ml/jax/issues/4666).
        overlay_network_share: share of the network rate that reaches training traffic through a
            container overlay network (`--network-path overlay`). Kubernetes pods on kubenet or a
            VXLAN overlay send every packet through a bridge, veth pairs and encapsulation on the
            host's CPU: on p3.16xlarge at 25 Gbit/s, tf_cnn_benchmarks with Horovod on kubenet
            reached about half of one machine per machine, and host networking was 10 % faster
            (https://github.com/horovod/horovod/issues/396). Not fitted: set to the share at which
            those runs are predicted 10 % faster on the host network
            (`fit.overlay_share_from_source`).
    """

    achievable_fraction_cuda_cores: float = 0.55
    achievable_fraction_tensor_cores: float = 0.20
    achievable_fraction_tf32: float = 0.20
    nvlink_efficiency: float = 0.8
    pcie_efficiency: float = 0.8
    network_efficiency: float = 0.80
    ps_network_efficiency: float = 0.55
    allreduce_overlap: float = 0.50
    ps_overlap: float = 0.20
    sync_overhead: float = 0.02
    sync_latency_s: float = 0.0
    tensor_latency_s: float = 10e-6
    xla_overlap_kept: float = 0.0
    overlay_network_share: float = 1.0


def load_fitted(path: str | Path = FIT_PATH) -> FittedConstants:
    """The fitted constants from `path` (the defaults when it does not exist)."""
    try:
        data = json.loads(storage.read_text(path))
    except OSError:
        return FittedConstants()
    except ValueError as err:
        raise ConfigError(f"cannot read {path}: {err}") from None
    known = {f.name for f in dataclasses.fields(FittedConstants)}
    return FittedConstants(**{k: float(v) for k, v in data["constants"].items() if k in known})


FITTED = load_fitted()


# Fixed cost of launching one training step (tf.function dispatch, kernel
# launches, the optimizer update): small models never reach millions of steps/s.
STEP_LAUNCH_S = 1e-3


def step_compute_share(step_s: float) -> float:
    """The share of a `step_compute_time` of `step_s` seconds that scales with the GPU's
    speed: all but the fixed launch cost."""
    return max(0.0, step_s - STEP_LAUNCH_S) / step_s


def devices_sharing_compute(topology: Topology, devices: int) -> int:
    """How many of a machine's `devices` share one device's compute.

    A machine's logical CPU devices (`--gpu cpu`, Strategist's local runs) all
    run on the same cores, through TensorFlow's one thread pool: each replica's
    step takes as long as all of them on one device. GPUs compute each alone.
    """
    return devices if topology.gpu == "cpu" else 1


def achievable_tflops(
    gpu_name: str, precision: str = "fp32", constants: FittedConstants | None = None
) -> float:
    """Fitted sustained TFLOP/s of one device for CNN training.

    Raises:
        ConfigError: for an unknown device or precision.
    """
    c = constants or FITTED
    gpu = device(gpu_name)
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if gpu.name == "cpu":
        return gpu.peak_tflops_fp32 * c.achievable_fraction_cuda_cores
    if precision == "mixed" and gpu.has_tensor_cores:
        return gpu.peak_tflops_fp16 * c.achievable_fraction_tensor_cores
    if gpu.peak_tflops_tf32:
        return gpu.peak_tflops_tf32 * c.achievable_fraction_tf32
    return gpu.peak_tflops_fp32 * c.achievable_fraction_cuda_cores


def compute_time(flops_per_example: float, batch: int, tflops: float) -> float:
    """Seconds of forward + backward (3 x forward FLOPs) for `batch` examples."""
    return 3.0 * flops_per_example * batch / (tflops * 1e12)


def step_compute_time(model: ModelProfile, batch: int, tflops: float) -> float:
    """`compute_time` plus the fixed per-step launch cost."""
    return compute_time(model.flops_per_example, batch, tflops) + STEP_LAUNCH_S
