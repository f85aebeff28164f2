"""Sustained compute: the fitted constants, a device's achievable TFLOP/s, and the
compute time of a step.

The fitted constants come from `data/step_time_fit.json` (`python -m research.selection.fit`).
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
        achievable_fraction_cuda_cores: share of the FP32 CUDA-core peak a CNN sustains.
        achievable_fraction_tensor_cores: share of the FP16/BF16 tensor-core peak (`mixed`).
        achievable_fraction_tf32: share of the TF32 tensor-core peak (A100, H100 in float32).
        nvlink_efficiency: share of the nominal NVLink bandwidth a ring reaches.
        pcie_efficiency: share of the nominal PCIe bandwidth a ring reaches.
        network_efficiency: share of the network rate a collective reaches.
        ps_network_efficiency: share a parameter-server transfer reaches.
        allreduce_overlap: fraction of all-reduce hidden behind back-propagation.
        ps_overlap: fraction of parameter-server traffic hidden likewise.
        sync_overhead: time a synchronous multi-replica step adds, relative to compute, per
            doubling of the replicas (barriers and stragglers).
        sync_latency_s: seconds per doubling of the replicas every multi-replica step waits,
            however short its compute.
        tensor_latency_s: seconds per gradient tensor of a multi-replica step.
        xla_overlap_kept: share of the overlap that survives XLA (`--jit-compile`): XLA on
            GPU does not overlap NCCL reductions with compute
            (https://github.com/jax-ml/jax/issues/4666).
        overlay_network_share: share of the network rate a container overlay network
            (`--network-path overlay`) delivers (https://github.com/horovod/horovod/issues/396).
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


def read_fit(path: str | Path = FIT_PATH) -> dict | None:
    """The fit file at `path` (None when it does not exist).

    Raises:
        ConfigError: a file that is not JSON.
    """
    try:
        return json.loads(storage.read_text(path))
    except OSError:
        return None
    except ValueError as err:
        raise ConfigError(f"cannot read {path}: {err}") from None


def load_fitted(path: str | Path = FIT_PATH) -> FittedConstants:
    """The fitted constants from `path` (the defaults when it does not exist)."""
    data = read_fit(path)
    if data is None:
        return FittedConstants()
    known = {f.name for f in dataclasses.fields(FittedConstants)}
    return FittedConstants(**{k: float(v) for k, v in data["constants"].items() if k in known})


FITTED = load_fitted()


# Fixed time of launching one training step (tf.function dispatch, kernel launches, the
# optimizer update): small models never reach millions of steps/s.
STEP_LAUNCH_S = 1e-3


def step_compute_share(step_s: float) -> float:
    """The share of a `step_compute_time` of `step_s` seconds that scales with the GPU's
    speed: all but the fixed launch time."""
    return max(0.0, step_s - STEP_LAUNCH_S) / step_s


def devices_sharing_compute(topology: Topology, devices: int) -> int:
    """How many of a machine's `devices` share one device's compute: all of a machine's logical
    CPU devices (one thread pool on the same cores), else 1 (GPUs compute each alone)."""
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
    """`compute_time` plus the fixed per-step launch time."""
    return compute_time(model.flops_per_example, batch, tflops) + STEP_LAUNCH_S
