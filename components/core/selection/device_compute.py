"""Sustained compute: the fitted constants, a device's achievable TFLOP/s, and the
compute time of a step."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from components.core import storage
from components.core.config import ConfigError
from components.core.model_profile import ModelProfile
from components.core.selection.topology import PRECISIONS, Topology, device

# written by `python -m research.selection.fit`
FIT_PATH = Path(__file__).parents[1] / "data" / "step_time_fit.json"


@dataclass(frozen=True)
class FittedConstants:
    """The constants the fit chooses (defaults: the hand-set starting point)."""

    achievable_fraction_cuda_cores: float = 0.55  # share of the FP32 CUDA-core peak a CNN sustains
    achievable_fraction_tensor_cores: float = 0.20  # of the FP16/BF16 tensor-core peak (`mixed`)
    achievable_fraction_tf32: float = 0.20  # of the TF32 peak (A100, H100 in float32)
    nvlink_efficiency: float = 0.8  # share of the nominal NVLink bandwidth a ring reaches
    pcie_efficiency: float = 0.8  # of the nominal PCIe bandwidth
    network_efficiency: float = 0.80  # share of the network rate a collective reaches
    ps_network_efficiency: float = 0.55  # that a parameter-server transfer reaches
    allreduce_overlap: float = 0.50  # share of all-reduce hidden behind back-propagation
    ps_overlap: float = 0.20  # of parameter-server traffic
    sync_overhead: float = 0.02  # compute a synchronous step adds per doubling of replicas
    sync_latency_s: float = 0.0  # seconds every multi-replica step waits per doubling
    tensor_latency_s: float = 10e-6  # per gradient tensor of a multi-replica step
    # share of the overlap XLA (`--jit-compile`) keeps: XLA on GPU does not overlap NCCL
    # reductions with compute (https://github.com/jax-ml/jax/issues/4666)
    xla_overlap_kept: float = 0.0
    # share of the network rate a container overlay network (`--network-path overlay`) delivers
    # (https://github.com/horovod/horovod/issues/396)
    overlay_network_share: float = 1.0


def read_fit(path: str | Path = FIT_PATH) -> dict | None:
    """The fit file at `path`, None when it does not exist (ConfigError: not JSON)."""
    try:
        return json.loads(storage.read_text(path))
    except OSError:
        return None
    except ValueError as err:
        raise ConfigError(f"cannot read {path}: {err}") from None


def load_fitted(path: str | Path = FIT_PATH) -> FittedConstants:
    """The fitted constants from `path` (the defaults when it does not exist)."""
    fitted = (read_fit(path) or {"constants": {}})["constants"]
    known = {f.name for f in dataclasses.fields(FittedConstants)}
    return FittedConstants(**{k: float(v) for k, v in fitted.items() if k in known})


FITTED = load_fitted()
# Fixed time of launching one training step (tf.function dispatch, kernel launches, the
# optimizer update): small models never reach millions of steps/s.
STEP_LAUNCH_S = 1e-3


def step_compute_share(step_s: float) -> float:
    """The share of a step of `step_s` seconds that scales with the GPU: all but the launch."""
    return max(0.0, step_s - STEP_LAUNCH_S) / step_s


def devices_sharing_compute(topology: Topology, devices: int) -> int:
    """How many of a machine's `devices` share one's compute: all CPU devices (one thread pool)."""
    return devices if topology.gpu == "cpu" else 1


def achievable_tflops(
    gpu_name: str, precision: str = "fp32", constants: FittedConstants | None = None
) -> float:
    """Fitted sustained TFLOP/s of one device for CNN training (ConfigError: unknown names)."""
    c = constants or FITTED
    gpu = device(gpu_name)
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if precision == "mixed" and gpu.has_tensor_cores:
        return gpu.peak_tflops_fp16 * c.achievable_fraction_tensor_cores
    if gpu.peak_tflops_tf32:
        return gpu.peak_tflops_tf32 * c.achievable_fraction_tf32
    return gpu.peak_tflops_fp32 * c.achievable_fraction_cuda_cores


def step_compute_time(model: ModelProfile, batch: int, tflops: float) -> float:
    """Seconds of forward + backward (3 x forward FLOPs) for `batch` examples, and the launch."""
    return 3.0 * model.flops_per_example * batch / (tflops * 1e12) + STEP_LAUNCH_S
