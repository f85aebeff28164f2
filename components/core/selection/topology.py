"""The hardware a training job may use, and the cluster shape a strategy asks for."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

from components.core.checkpoint_interval import (  # noqa: F401  (re-exported to the selection)
    EPOCH,
    PREEMPTIONS_PER_MACHINE_HOUR,
    RESTART_S,
    CheckpointInterval,
    check_preemption_rate,
)
from components.core.config import FLOAT32, MIXED_BFLOAT16, MIXED_FLOAT16, ConfigError
from components.core.config import PRECISIONS as POLICIES
from components.core.cpu_machine import DEFAULT_PS_MACHINE_TYPE, cpu_machine
from components.core.hardware import Gpu, get_gpu, interconnect_bandwidth

PRECISIONS = ("fp32", "mixed")
# A machine without GPUs: its CPU is the device (a few-core AVX2 server's order of magnitude).
CPU = Gpu("cpu", "", "", 1.0, 1.0, 16.0, "pcie", {})
CPU_NAMES = ("cpu", "none")
# `--heterogeneous` alone: half the machines run this much slower, an assumption the reasons
# say, with the answer at both ends of `HETEROGENEITY_RANGE`.
HETEROGENEITY_SLOWDOWN = 1.5
HETEROGENEITY_RANGE = (1.1, 3.0)
MAX_HETEROGENEITY_SLOWDOWN = 100.0
# The most GPUs of each type one machine is sold with (DGX-2: 16 V100; a2-megagpu-16g: 16 A100; DGX
# H100: 8; g4dn.metal: 8 T4; g2-standard-96: 8 L4; DGX-1: 8 P100).
MAX_GPUS_PER_MACHINE = {
    "t4": 8,
    "l4": 8,
    "v100": 16,
    "p100": 8,
    "a100": 16,
    "a100-80gb": 16,
    "h100": 8,
    "h200": 8,
    "k80": 8,
    "p4": 4,
    "v100-32gb": 16,
    "a10g": 8,
}
# The most cores of one machine (two 192-core AMD EPYC 9965): logical CPU devices, one per core.
MAX_CPU_CORES_PER_MACHINE = 384
# Devices without NVLink (T4 and L4 are PCIe-only cards; a CPU has none).
NO_NVLINK = frozenset({"t4", "l4", "k80", "p4", "a10g", "cpu"})
# The fastest NIC on sale is 800 Gbit/s; machines carry at most 16 of them.
MAX_NIC_GBPS = 800.0
MAX_NICS = 16
MIN_NETWORK_GBPS = 0.01
# What a preemption costs is `checkpoint_interval`'s (shared with the comparison's price);
# without `examples_per_epoch`, an epoch is assumed to take ASSUMED_EPOCH_S.
ASSUMED_EPOCH_S = 600.0
# The network assumed when none is given, with the answer at a commodity and a datacenter NIC.
DEFAULT_NETWORK_GBPS = 10.0
NETWORK_RANGE_GBPS = (1.0, 100.0)
# `host`: the machines' own network (pods with hostNetwork too); `overlay`: a container overlay
# network, which delivers a share of one NIC's rate.
NETWORK_PATHS = ("host", "overlay")


def device(name: str) -> Gpu:
    """The GPU named `name`, or the CPU for `cpu`/`none`.

    Raises:
        ConfigError: for an unknown name.
    """
    if name.lower() in CPU_NAMES:
        return CPU
    return get_gpu(name)


def a_device(name: str) -> str:
    """`name` with its indefinite article as the letter is spoken: `an a100`, `a t4`,
    `an h100`, `an l4`."""
    return f"{'an' if name[:1].lower() in 'aefhilmnorsx' else 'a'} {name}"


def precision_of_policy(policy: str) -> str:
    """The selector's precision (`fp32`, `mixed`) of a run's tf-keras policy.

    Raises:
        ConfigError: any other name (no policy of a run config).
    """
    if policy == FLOAT32:
        return "fp32"
    if policy in (MIXED_FLOAT16, MIXED_BFLOAT16):
        return "mixed"
    raise ConfigError(
        f"unknown precision {policy!r}; a run's precision is one of {', '.join(POLICIES)}"
    )


@dataclass(frozen=True)
class Topology:
    """The hardware a training job may use; each field is the `select` flag of its name.

    Attributes:
        machines: machines with GPUs.
        gpus_per_machine: GPUs in each machine (CPU devices with `gpu` `cpu`).
        gpu: GPU name from `hardware.GPUS`, or `cpu` (also `none`).
        interconnect: link between GPUs of one machine; the GPU's usual link when None.
        network_gbps: network bandwidth of one NIC, Gbit/s.
        nics: NICs each machine uses for training traffic on the host's network.
        network_path: `host` or `overlay` (a container overlay network, one NIC).
        gpu_mix: machines per GPU type when they differ, e.g. `(("a100", 2), ("t4", 6))`.
        preemptions_per_machine_hour: None: `PREEMPTIONS_PER_MACHINE_HOUR`.
        input_examples_per_second: examples/s one machine's input pipeline delivers (None:
            unlimited).
        precision: `fp32` or `mixed`.
        jit_compile: the train step is compiled with XLA.
        all_reduce_pack_mb: `multi_worker_mirrored`'s all-reduce packs, MB (0: one pack).
        ps_machine_type: CPU machine type of each parameter server and the coordinator.
        preemptible: machines may be taken away (Spot VMs).
        checkpoint_every: the run's `--checkpoint-every`, which prices a preemption.
        examples_per_epoch: examples in one epoch (None: an epoch of `ASSUMED_EPOCH_S`).
        heterogeneous: machines differ in speed.
        heterogeneity_slowdown: how many times slower the slower half computes, without a mix.
    """

    machines: int = 1
    gpus_per_machine: int = 1
    gpu: str = "v100"
    interconnect: str | None = None
    network_gbps: float = DEFAULT_NETWORK_GBPS
    precision: str = "fp32"
    preemptible: bool = False
    heterogeneous: bool = False
    nics: int = 1
    gpu_mix: tuple[tuple[str, int], ...] = ()
    preemptions_per_machine_hour: float | None = None
    input_examples_per_second: float | None = None
    jit_compile: bool = False
    network_path: str = "host"
    all_reduce_pack_mb: float = 0.0
    heterogeneity_slowdown: float = HETEROGENEITY_SLOWDOWN
    ps_machine_type: str = DEFAULT_PS_MACHINE_TYPE
    checkpoint_every: str = EPOCH
    examples_per_epoch: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.gpu, str) and self.gpu.lower() in CPU_NAMES:
            object.__setattr__(self, "gpu", "cpu")
        if self.gpu_mix:
            self._settle_mix()

    def _settle_mix(self) -> None:
        """Merges a mix's repeated GPU names; a mix of one name is plain hardware, and
        only GPUs of different speeds make the machines heterogeneous (an A100 40GB
        and 80GB differ in memory alone)."""
        if not all(isinstance(n, int) and not isinstance(n, bool) for _, n in self.gpu_mix):
            return  # validate() refuses the count
        counts: Counter[str] = Counter()
        for name, n in self.gpu_mix:
            counts[str(name).lower()] += n
        if len(counts) == 1:
            object.__setattr__(self, "gpu", next(iter(counts)))
            object.__setattr__(self, "gpu_mix", ())
            return
        object.__setattr__(self, "gpu_mix", tuple(counts.items()))
        try:
            speeds = {(get_gpu(g).peak_tflops_fp32, get_gpu(g).peak_tflops_fp16) for g in counts}
        except ConfigError:
            return  # an unknown name: validate() says so
        object.__setattr__(self, "heterogeneous", len(speeds) > 1)

    def validate(self) -> None:
        """Refuses hardware the step-time model cannot describe.

        Raises:
            ConfigError: naming the flag to change.
        """
        for flag, value in (
            ("--machines", self.machines),
            ("--gpus-per-machine", self.gpus_per_machine),
            ("--nics", self.nics),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{flag} must be a whole number of at least 1, got {value!r}")
        device(self.gpu)
        if self.interconnect is not None:
            interconnect_bandwidth(self.interconnect)
        if not isinstance(self.network_gbps, (int, float)) or not (
            math.isfinite(self.network_gbps) and self.network_gbps > 0
        ):
            raise ConfigError(
                f"--network-gbps must be a positive number of Gbit/s, got {self.network_gbps!r}"
            )
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}"
            )
        if self.network_path not in NETWORK_PATHS:
            raise ConfigError(
                f"--network-path {self.network_path!r}: choose one of {', '.join(NETWORK_PATHS)}"
            )
        self._check_mix()
        cpu_machine(self.ps_machine_type)
        slowdown = self.heterogeneity_slowdown
        if isinstance(slowdown, bool) or not (
            isinstance(slowdown, (int, float)) and 1 < slowdown <= MAX_HETEROGENEITY_SLOWDOWN
        ):
            raise ConfigError(
                f"--heterogeneous {slowdown!r}: give how many times slower the slower half of "
                f"the machines compute, above 1 (machines of one speed: drop the flag) and at "
                f"most {MAX_HETEROGENEITY_SLOWDOWN:g}"
            )
        if self.heterogeneous and self.machines < 2:
            raise ConfigError(
                "--heterogeneous: one machine waits for no slower one (its GPUs are of one "
                "type); drop the flag, or give --machines 2 or more"
            )
        check_preemption_rate(self.preemptions_per_machine_hour, self.preemptible)
        self._check_checkpointing()
        feed = self.input_examples_per_second
        if feed is not None and not (
            isinstance(feed, (int, float)) and math.isfinite(feed) and feed > 0
        ):
            raise ConfigError(
                f"--input-examples-per-second must be a positive number, got {feed!r}"
            )
        self._check_plausible()

    def checkpoint_interval(self) -> CheckpointInterval:
        """`checkpoint_every`, parsed (`validate` has refused a bad one)."""
        return CheckpointInterval.parse(self.checkpoint_every)

    def _check_checkpointing(self) -> None:
        """Refuses a bad `--checkpoint-every` or `--examples-per-epoch`, and either one
        without `--preemptible`, where nothing is lost to price.

        Raises:
            ConfigError: naming the flag and what to give.
        """
        self.checkpoint_interval()
        examples = self.examples_per_epoch
        if examples is not None and not (
            isinstance(examples, int) and not isinstance(examples, bool) and examples >= 1
        ):
            raise ConfigError(
                f"--examples-per-epoch must be a whole number from 1, got {examples!r}"
            )
        given = [
            flag
            for flag, value in (
                ("--checkpoint-every", self.checkpoint_every != EPOCH),
                ("--examples-per-epoch", examples is not None),
            )
            if value
        ]
        if given and not self.preemptible:
            raise ConfigError(
                f"{' and '.join(given)} {'price' if len(given) > 1 else 'prices'} the work a "
                "preemption loses: add --preemptible, or drop "
                f"{'them' if len(given) > 1 else 'it'}"
            )

    def _check_mix(self) -> None:
        """Refuses a GPU mix whose machines do not add up or whose GPUs are unknown.

        Raises:
            ConfigError: naming the flag to change.
        """
        if not self.gpu_mix:
            return
        for name, count in self.gpu_mix:
            if str(name).lower() in CPU_NAMES:
                raise ConfigError(self._cpu_in_mix())
            get_gpu(name)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigError(f"--gpu {name}:{count}: give a whole number of machines")
        total = sum(n for _, n in self.gpu_mix)
        if total != self.machines:
            raise ConfigError(
                f"--gpu mix names {total} machines but --machines is {self.machines}; "
                "make them agree"
            )

    def _cpu_in_mix(self) -> str:
        """Why a mix cannot hold machines without GPUs, and the question to ask instead."""
        written = ",".join(f"{n}:{c}" for n, c in self.gpu_mix)
        gpus = [(n, c) for n, c in self.gpu_mix if str(n).lower() not in CPU_NAMES]
        if not gpus:
            return f"--gpu {written}: these machines have no GPUs; give --gpu cpu"
        alone = ",".join(f"{n}:{c}" for n, c in gpus) if len(gpus) > 1 else str(gpus[0][0])
        return (
            f"--gpu {written}: machines without GPUs cannot be part of a GPU mix "
            "(--gpus-per-machine counts their CPU devices only with --gpu cpu alone); ask about "
            f"the GPU machines alone (--gpu {alone} --machines {sum(c for _, c in gpus)}), "
            "or the CPU machines alone (--gpu cpu)"
        )

    def _check_plausible(self) -> None:
        """Refuses hardware no one sells: too many GPUs, NVLink without it, absurd networks.

        Raises:
            ConfigError: saying what to change.
        """
        for gpu in sorted({self.gpu, *(name for name, _ in self.gpu_mix)}):
            self._check_machine_holds(gpu)
            if gpu in NO_NVLINK and (self.interconnect or "").lower() == "nvlink":
                raise ConfigError(
                    f"--interconnect nvlink: {gpu} GPUs have no NVLink; use --interconnect pcie"
                )
        if self.network_gbps > MAX_NIC_GBPS or self.network_gbps < MIN_NETWORK_GBPS:
            raise ConfigError(
                f"--network-gbps {self.network_gbps:g} is not a network speed (NICs run at "
                f"{MIN_NETWORK_GBPS:g} to {MAX_NIC_GBPS:g} Gbit/s); give one NIC's Gbit/s "
                "and the count with --nics"
            )
        if self.nics > MAX_NICS:
            raise ConfigError(f"--nics {self.nics}: machines carry at most {MAX_NICS} NICs")

    def _check_machine_holds(self, gpu: str) -> None:
        """Refuses more devices per machine than any machine of `gpu` holds.

        Raises:
            ConfigError: with a cluster shape that holds as many.
        """
        if gpu in CPU_NAMES:
            if self.gpus_per_machine > MAX_CPU_CORES_PER_MACHINE:
                raise ConfigError(
                    f"--gpus-per-machine {self.gpus_per_machine}: with --gpu {gpu} these are "
                    "logical CPU devices, at most one per core, and no machine has more than "
                    f"{MAX_CPU_CORES_PER_MACHINE} cores"
                )
            return
        most = MAX_GPUS_PER_MACHINE.get(gpu)
        if most is not None and self.gpus_per_machine > most:
            raise ConfigError(
                f"--gpus-per-machine {self.gpus_per_machine}: no machine holds more than {most} "
                f"{gpu} GPUs; describe a bigger cluster with --machines "
                f"(e.g. --machines {math.ceil(self.gpus_per_machine / most)} "
                f"--gpus-per-machine {most})"
            )

    @property
    def nics_used(self) -> int:
        """NICs that carry training traffic: all of them on the host's network, one through a
        container overlay, where a pod has a single interface."""
        return 1 if self.network_path == "overlay" else self.nics

    @property
    def machine_network_gbps(self) -> float:
        """A machine's network bandwidth for training traffic, Gbit/s (the NICs it uses)."""
        return self.network_gbps * self.nics_used

    @property
    def network_phrase(self) -> str:
        """The machine's network for a sentence: `100 Gbps network (4 x 25)`."""
        nics = f" ({self.nics_used} x {self.network_gbps:g})" if self.nics_used > 1 else ""
        return f"{self.machine_network_gbps:g} Gbps network{nics}"

    @property
    def link(self) -> str:
        """The intra-machine link name of a machine of `gpu` (a mix's first machines)."""
        return self.link_of(self.gpu)

    def link_of(self, gpu: str) -> str:
        """The intra-machine link name of a machine of `gpu`: `--interconnect`, else the
        GPU's usual link."""
        return (self.interconnect or device(gpu).default_interconnect).lower()

    def _machines_of(self, gpu: str, count: int) -> str:
        """`count` machines of `gpu` for `describe`: `4 x 8 v100 (nvlink)`."""
        text = f"{count} x {self.gpus_per_machine} {gpu}"
        if self.gpus_per_machine > 1:
            text += f" ({self.link_of(gpu)})"
        return text

    @property
    def total_gpus(self) -> int:
        """GPUs over all machines."""
        return self.machines * self.gpus_per_machine

    def describe(self) -> str:
        """One line for people, e.g. `4 x 8 v100 (nvlink), 100 Gbps network, preemptible`,
        or `2 x 8 a100 (nvlink) + 6 x 8 t4 (pcie), ...` for a GPU mix."""
        mix = self.gpu_mix or ((self.gpu, self.machines),)
        text = " + ".join(self._machines_of(name, count) for name, count in mix)
        if self.machines > 1:
            text += f", {self.network_phrase}"
            if self.network_path == "overlay":
                text += f" (overlay, 1 of {self.nics} NICs)" if self.nics > 1 else " (overlay)"
        flags = [
            f
            for f, on in (
                ("preemptible", self.preemptible),
                ("heterogeneous", self.heterogeneous),
                ("XLA", self.jit_compile),
            )
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
