"""The hardware vocabulary shared by the selector and the cloud launchers.

One table names each GPU the way users say it (`--gpu a100`), and gives what
the step-time model needs (peak throughput, memory, the link between GPUs of one
machine) and what the clouds need (the Vertex AI accelerator type and machine
types, the GKE accelerator label).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.core.config import ConfigError

# Compute Engine attaches GPUs to N1 machine types at a price per GPU of their own; the
# accelerator-optimized types (a2, a3, g2) come with theirs, in the machine's price
# (cloud.google.com/compute/gpus-pricing).
GPUS_PRICED_APART_ON = ("n1-",)


@dataclass(frozen=True)
class Gpu:
    """One GPU model.

    Attributes:
        name: the name users type (`t4`, `a100`, ...).
        vertex_accelerator: `aiplatform_v1.AcceleratorType` enum name.
        gke_accelerator: value of the `cloud.google.com/gke-accelerator` label.
        peak_tflops_fp32: dense FP32 peak on the CUDA cores.
        peak_tflops_fp16: dense FP16/BF16 peak (tensor cores where the GPU has them; the
            FP32 figure where FP16 computes no faster).
        memory_gb: device memory.
        default_interconnect: the link between GPUs of one machine.
        machine_types: GPUs per machine -> the Vertex AI machine type that takes them.
        compute_capability: NVIDIA's CUDA compute capability (0 for a CPU).
        peak_tflops_tf32: dense TF32 tensor-core peak, what float32 training runs at on
            Ampere and later (TensorFlow enables TF32 by default); 0 without TF32.
        source: where the figures come from.
    """

    name: str
    vertex_accelerator: str
    gke_accelerator: str
    peak_tflops_fp32: float
    peak_tflops_fp16: float
    memory_gb: float
    default_interconnect: str
    machine_types: dict[int, str]
    compute_capability: float = 0.0
    peak_tflops_tf32: float = 0.0
    source: str = ""

    @property
    def has_tensor_cores(self) -> bool:
        """Whether `mixed` precision computes faster than fp32 here.

        TensorFlow's mixed precision guide: GPUs of compute capability 7.0 or
        higher have Tensor Cores; "Older GPUs offer no math performance benefit
        for using mixed precision" (https://www.tensorflow.org/guide/mixed_precision).
        """
        return self.compute_capability >= 7.0

    @property
    def sold_in_its_machines(self) -> bool:
        """Whether this GPU comes only inside its machine types' price (l4 in g2, h100 in
        a3), never as an accelerator priced apart: a price for it alone would count it
        twice."""
        types = self.machine_types.values()
        return bool(types) and not any(t.startswith(GPUS_PRICED_APART_ON) for t in types)

    def machine_type(self, gpus_per_machine: int) -> str:
        """The Vertex AI machine type for this many GPUs on one machine.

        Raises:
            ConfigError: when no machine type takes that many of this GPU.
        """
        try:
            return self.machine_types[gpus_per_machine]
        except KeyError:
            counts = ", ".join(str(c) for c in sorted(self.machine_types))
            raise ConfigError(
                f"{gpus_per_machine} x {self.name} do not fit one machine: "
                f"{self.name} machines take {counts} GPUs"
            ) from None


A100_SOURCE = (
    "NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5, TF32 156 dense (312 sparse), FP16/BF16 "
    "312 dense TFLOPS; 40 or 80 GB; NVLink 600 GB/s"
)
H100_SOURCE = (
    "NVIDIA H100 Tensor Core GPU datasheet (SXM): FP32 67, TF32 494 dense (989 sparse), "
    "FP16/BF16 989 dense TFLOPS; 80 GB; NVLink 900 GB/s"
)
# Peak figures from the vendors' data sheets; machine types from Google Cloud's
# GPU machine-type tables; compute capabilities from developer.nvidia.com/cuda-gpus.
GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu(
            "t4",
            "NVIDIA_TESLA_T4",
            "nvidia-tesla-t4",
            8.1,
            65.0,
            16,
            "pcie",
            {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32"},
            compute_capability=7.5,
        ),
        Gpu(
            "l4",
            "NVIDIA_L4",
            "nvidia-l4",
            30.3,
            121.0,
            24,
            "pcie",
            {1: "g2-standard-8", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
            compute_capability=8.9,
        ),
        Gpu(
            "v100",
            "NVIDIA_TESLA_V100",
            "nvidia-tesla-v100",
            15.7,
            125.0,
            16,
            "nvlink",
            {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32", 8: "n1-standard-64"},
            compute_capability=7.0,
        ),
        Gpu(
            "p100",
            "NVIDIA_TESLA_P100",
            "nvidia-tesla-p100",
            9.3,
            18.7,
            16,
            "pcie",
            {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32"},
            compute_capability=6.0,
        ),
        Gpu(
            "a100",
            "NVIDIA_TESLA_A100",
            "nvidia-tesla-a100",
            19.5,
            312.0,
            40,
            "nvlink",
            {
                1: "a2-highgpu-1g",
                2: "a2-highgpu-2g",
                4: "a2-highgpu-4g",
                8: "a2-highgpu-8g",
                16: "a2-megagpu-16g",
            },
            compute_capability=8.0,
            peak_tflops_tf32=156.0,
            source=A100_SOURCE,
        ),
        Gpu(
            "a100-80gb",
            "NVIDIA_A100_80GB",
            "nvidia-a100-80gb",
            19.5,
            312.0,
            80,
            "nvlink",
            {1: "a2-ultragpu-1g", 2: "a2-ultragpu-2g", 4: "a2-ultragpu-4g", 8: "a2-ultragpu-8g"},
            compute_capability=8.0,
            peak_tflops_tf32=156.0,
            source=A100_SOURCE,
        ),
        Gpu(
            "h100",
            "NVIDIA_H100_80GB",
            "nvidia-h100-80gb",
            67.0,
            989.0,
            80,
            "nvlink",
            {1: "a3-highgpu-1g", 2: "a3-highgpu-2g", 4: "a3-highgpu-4g", 8: "a3-highgpu-8g"},
            compute_capability=9.0,
            peak_tflops_tf32=494.0,
            source=H100_SOURCE,
        ),
        Gpu(
            "h200",
            "NVIDIA_H200_141GB",
            "nvidia-h200-141gb",
            67.0,
            989.0,
            141,
            "nvlink",
            {8: "a3-ultragpu-8g"},
            compute_capability=9.0,
            peak_tflops_tf32=494.0,
            source="NVIDIA H200 Tensor Core GPU datasheet (SXM: FP32 67, TF32 494 dense "
            "(989 sparse), FP16/BF16 989 dense, 141 GB HBM3e, NVLink 900 GB/s); a3-ultragpu-8g "
            "(cloud.google.com/compute/docs/gpus#h200-gpus)",
        ),
        Gpu(
            "k80",
            "NVIDIA_TESLA_K80",
            "nvidia-tesla-k80",
            4.37,
            4.37,
            12,
            "pcie",
            {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32", 8: "n1-standard-64"},
            compute_capability=3.7,
            source="NVIDIA Tesla K80 datasheet: 8.73 FP32 TFLOPS at boost and 24 GB per board "
            "of two GK210 GPUs; Compute Engine sells each GK210 as one GPU (half of each), "
            "no FP16 speed-up; retired from Compute Engine in 2024",
        ),
        Gpu(
            "p4",
            "NVIDIA_TESLA_P4",
            "nvidia-tesla-p4",
            5.5,
            5.5,
            8,
            "pcie",
            {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32"},
            compute_capability=6.1,
            source="NVIDIA Tesla P4 datasheet: FP32 5.5 TFLOPS, 8 GB GDDR5, PCIe gen 3 (no fast "
            "FP16: its 22 TOPS are INT8)",
        ),
        Gpu(
            "v100-32gb",
            "",
            "",
            15.7,
            125.0,
            32,
            "nvlink",
            {},
            compute_capability=7.0,
            source="NVIDIA V100 datasheet (SXM2 32 GB: FP32 15.7, tensor 125 TFLOPS, NVLink "
            "300 GB/s); sold by AWS (p3dn.24xlarge) and in DGX systems, not by Vertex AI",
        ),
        Gpu(
            "a10g",
            "",
            "",
            31.2,
            125.0,
            24,
            "pcie",
            {},
            compute_capability=8.6,
            peak_tflops_tf32=62.5,
            source="NVIDIA A10 datasheet (FP32 31.2, TF32 62.5 and FP16 125 TFLOPS dense, 24 GB, "
            "PCIe gen 4); the A10G is AWS's variant in g5 instances, not sold by Vertex AI",
        ),
    )
}

# Usable one-direction bandwidth of the link between GPUs of one machine, GB/s.
INTERCONNECT_GBPS: dict[str, float] = {"pcie": 12.0, "nvlink": 150.0}


def catalogue_name(detected: str) -> str | None:
    """The catalogue GPU a detected or typed name is, or None for a GPU outside it.

    Matches whole words of the name, so `NVIDIA A100-SXM4-40GB` is `a100`,
    `NVIDIA A100-SXM4-80GB` and `NVIDIA_A100_80GB` are `a100-80gb`, `Tesla T4`
    and `NVIDIA_TESLA_T4` are `t4`, and `NVIDIA L40S` or `Tesla V100S` are none.
    """
    words = set(re.split(r"[\s_\-]+", detected.lower()))
    matches = [name for name in GPUS if set(name.split("-")) <= words]
    return max(matches, key=len, default=None)  # the most specific: a100-80gb over a100


def get_gpu(name: str) -> Gpu:
    """Looks up a GPU by the name users type.

    Raises:
        ConfigError: for an unknown GPU, listing the known ones.
    """
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise ConfigError(f"unknown GPU {name!r}; choose one of {', '.join(GPUS)}") from None


def interconnect_bandwidth(name: str) -> float:
    """Bandwidth in GB/s of an intra-machine link.

    Raises:
        ConfigError: for an unknown link.
    """
    try:
        return INTERCONNECT_GBPS[name.lower()]
    except KeyError:
        raise ConfigError(
            f"unknown interconnect {name!r}; choose one of {', '.join(INTERCONNECT_GBPS)}"
        ) from None
