"""The hardware a training job may use, and the cluster shape a strategy asks for."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from components.core.config import ConfigError
from components.core.hardware import get_gpu, interconnect_bandwidth

PRECISIONS = ("fp32", "mixed")

# Bounds of real hardware: 16 GPUs is the most one cloud machine holds (a2-megagpu-16g,
# https://cloud.google.com/compute/docs/gpus); 3,200 Gbit/s the fastest machine network
# (a3-ultragpu-8g, https://cloud.google.com/compute/docs/accelerator-optimized-machines).
MAX_GPUS_PER_MACHINE = 16
MAX_NETWORK_GBPS = 3200


def precision_of_policy(policy: str) -> str:
    """The selector's precision of a run's tf-keras policy (`training.precision`).

    `float32` is `fp32`; `mixed_float16` and `mixed_bfloat16` are `mixed`
    (16-bit tensor cores and activations).
    """
    return "fp32" if policy == "float32" else "mixed"


@dataclass(frozen=True)
class Topology:
    """The hardware a training job may use.

    Attributes:
        machines: machines with GPUs.
        gpus_per_machine: GPUs in each machine.
        gpu: GPU name from `hardware.GPUS`.
        interconnect: link between GPUs of one machine (`nvlink` or `pcie`);
            the GPU's usual link when None.
        network_gbps: network bandwidth between machines, Gbit/s.
        precision: `fp32` or `mixed` (FP16/BF16 tensor cores).
        preemptible: machines may be taken away (Spot/preemptible VMs).
        heterogeneous: machines differ in speed.
    """

    machines: int = 1
    gpus_per_machine: int = 1
    gpu: str = "v100"
    interconnect: str | None = None
    network_gbps: float = 10.0
    precision: str = "fp32"
    preemptible: bool = False
    heterogeneous: bool = False

    def validate(self) -> None:
        """Refuses hardware the cost model cannot describe.

        Raises:
            ConfigError: naming the flag to change.
        """
        for flag, value in (
            ("--machines", self.machines),
            ("--gpus-per-machine", self.gpus_per_machine),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{flag} must be a whole number of at least 1, got {value!r}")
        if self.gpus_per_machine > MAX_GPUS_PER_MACHINE:
            raise ConfigError(
                f"--gpus-per-machine {self.gpus_per_machine}: no machine holds more than "
                f"{MAX_GPUS_PER_MACHINE} GPUs; spread them over more --machines"
            )
        get_gpu(self.gpu)
        if self.interconnect is not None:
            interconnect_bandwidth(self.interconnect)
        if not isinstance(self.network_gbps, (int, float)) or not (
            math.isfinite(self.network_gbps) and 0 < self.network_gbps <= MAX_NETWORK_GBPS
        ):
            raise ConfigError(
                f"--network-gbps must be a positive number of Gbit/s up to {MAX_NETWORK_GBPS}, "
                f"got {self.network_gbps!r}"
            )
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}"
            )

    @property
    def link(self) -> str:
        """The intra-machine link name."""
        return (self.interconnect or get_gpu(self.gpu).default_interconnect).lower()

    @property
    def total_gpus(self) -> int:
        """GPUs over all machines."""
        return self.machines * self.gpus_per_machine

    def describe(self) -> str:
        """One line for people, e.g. `4 x 8 v100 (nvlink), 100 Gbps network, preemptible`."""
        text = f"{self.machines} x {self.gpus_per_machine} {self.gpu}"
        if self.gpus_per_machine > 1:
            text += f" ({self.link})"
        if self.machines > 1:
            text += f", {self.network_gbps:g} Gbps network"
        flags = [
            f
            for f, on in (("preemptible", self.preemptible), ("heterogeneous", self.heterogeneous))
            if on
        ]
        return text + (f", {', '.join(flags)}" if flags else "")


@dataclass(frozen=True)
class Layout:
    """Cluster shape in `ClusterConfig` terms.

    Attributes:
        workers: `multi_worker_mirrored`: all machines incl. the chief;
            `parameter_server`: workers besides the coordinator chief; else 1.
        ps: parameter-server tasks.
        gpus_per_machine: GPUs each worker uses.
    """

    workers: int
    ps: int
    gpus_per_machine: int

    def to_dict(self) -> dict[str, int]:
        """The layout as a JSON-ready dict."""
        return dataclasses.asdict(self)
