"""The hardware a training job may use, and the cluster shape a strategy asks for."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterator
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
from components.core.hardware import GPUS, Gpu, get_gpu, interconnect_bandwidth

PRECISIONS = ("fp32", "mixed")
# A machine without GPUs: its CPU is the device (a few-core AVX2 server's order of magnitude).
CPU = Gpu("cpu", "", "", 1.0, 1.0, 16.0, "pcie", {})
CPU_NAMES = ("cpu", "none")
# `--heterogeneous` alone: half the machines assumed this much slower, the answer also at both ends
HETEROGENEITY_SLOWDOWN, HETEROGENEITY_RANGE, MAX_HETEROGENEITY_SLOWDOWN = 1.5, (1.1, 3.0), 100.0
# The most devices one machine is sold with (DGX-2: 16 V100; a2-megagpu-16g: 16 A100; DGX H100: 8;
# g4dn.metal: 8 T4; g2-standard-96: 8 L4; DGX-1: 8 P100); a CPU: one logical device per core of
# the largest machine (two 192-core AMD EPYC 9965).
MAX_DEVICES_PER_MACHINE = {
    **dict.fromkeys(("v100", "v100-32gb", "a100", "a100-80gb"), 16),
    **dict.fromkeys(("t4", "l4", "p100", "h100", "h200", "k80", "a10g"), 8),
    "p4": 4,
    "cpu": 384,
}
NO_NVLINK = frozenset({"t4", "l4", "k80", "p4", "a10g", "cpu"})  # PCIe-only cards, and a CPU
# The fastest NIC on sale is 800 Gbit/s; machines carry at most 16 of them.
MIN_NETWORK_GBPS, MAX_NIC_GBPS, MAX_NICS = 0.01, 800.0, 16
# Without `examples_per_epoch`, an epoch is assumed to take this long (prices a preemption).
ASSUMED_EPOCH_S = 600.0
# The network assumed when none is given, with the answer at a commodity and a datacenter NIC.
DEFAULT_NETWORK_GBPS, NETWORK_RANGE_GBPS = 10.0, (1.0, 100.0)
# the machines' own network (pods with hostNetwork too), or a container overlay (a share of a NIC)
NETWORK_PATHS = ("host", "overlay")


def device(name: str) -> Gpu:
    """The GPU named `name`, or the CPU for `cpu`/`none` (ConfigError: an unknown name)."""
    return CPU if name.lower() in CPU_NAMES else get_gpu(name)


def a_device(name: str) -> str:
    """`name` with its indefinite article as spoken: `an a100`, `a t4`, `an h100`."""
    return f"{'an' if name[:1].lower() in 'aefhilmnorsx' else 'a'} {name}"


def precision_of_policy(policy: str) -> str:
    """The selector's precision (`fp32`, `mixed`) of a tf-keras policy (ConfigError: another)."""
    if policy in (FLOAT32, MIXED_FLOAT16, MIXED_BFLOAT16):
        return "fp32" if policy == FLOAT32 else "mixed"
    raise ConfigError(
        f"unknown precision {policy!r}; a run's precision is one of {', '.join(POLICIES)}"
    )


WHOLE, POSITIVE = "a whole number of at least 1", "a positive number"


def _whole(value: object) -> bool:
    """Whether `value` is a whole number of at least 1 (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _positive(value: object) -> bool:
    """Whether `value` is a finite number above 0 (a bool is not)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class Topology:
    """The hardware a training job may use; each field is the `select` flag of its name."""

    machines: int = 1
    gpus_per_machine: int = 1  # CPU devices with `gpu` `cpu`
    gpu: str = "v100"  # a name of `hardware.GPUS`, or `cpu` (also `none`)
    interconnect: str | None = None  # link between a machine's GPUs (None: the GPU's usual)
    network_gbps: float = DEFAULT_NETWORK_GBPS  # one NIC's Gbit/s
    precision: str = "fp32"  # or `mixed`
    preemptible: bool = False  # Spot VMs
    heterogeneous: bool = False  # machines differ in speed
    nics: int = 1  # NICs each machine uses for training traffic on the host's network
    gpu_mix: tuple[tuple[str, int], ...] = ()  # machines per GPU type, e.g. (("a100", 2), ...)
    preemptions_per_machine_hour: float | None = None  # None: `PREEMPTIONS_PER_MACHINE_HOUR`
    input_examples_per_second: float | None = None  # one machine's input pipeline (None: no cap)
    jit_compile: bool = False  # XLA
    network_path: str = "host"  # or `overlay` (a container overlay network, one NIC)
    all_reduce_pack_mb: float = 0.0  # `multi_worker_mirrored`'s packs, MB (0: one pack)
    heterogeneity_slowdown: float = HETEROGENEITY_SLOWDOWN  # the slower half's, without a mix
    ps_machine_type: str = DEFAULT_PS_MACHINE_TYPE  # each parameter server's and the chief's
    checkpoint_every: str = EPOCH  # prices a preemption
    examples_per_epoch: int | None = None  # None: an epoch of `ASSUMED_EPOCH_S`

    def __post_init__(self) -> None:
        """Merges a mix's repeated names; a mix of one name is plain hardware, and only GPUs of
        different speeds make it heterogeneous (an A100 40GB and 80GB differ in memory alone)."""
        if isinstance(self.gpu, str) and self.gpu.lower() in CPU_NAMES:
            object.__setattr__(self, "gpu", "cpu")
        if not all(isinstance(n, int) and not isinstance(n, bool) for _, n in self.gpu_mix):
            return  # validate() refuses the count
        counts: Counter[str] = Counter()
        for name, n in self.gpu_mix:
            counts[str(name).lower()] += n
        if len(counts) == 1:
            object.__setattr__(self, "gpu", next(iter(counts)))
        object.__setattr__(self, "gpu_mix", tuple(counts.items()) if len(counts) > 1 else ())
        if len(counts) > 1 and all(g in GPUS for g in counts):  # else validate() says so
            speeds = {(get_gpu(g).peak_tflops_fp32, get_gpu(g).peak_tflops_fp16) for g in counts}
            object.__setattr__(self, "heterogeneous", len(speeds) > 1)

    def validate(self) -> None:
        """Refuses hardware the step-time model cannot describe (ConfigError naming the flag)."""
        problem = next(self._problems(), None)
        if problem:
            raise ConfigError(problem)

    def _problems(self) -> Iterator[str]:
        """What is wrong, first things first (an unknown name raises its own error)."""
        precision, path, slowdown = self.precision, self.network_path, self.heterogeneity_slowdown
        examples, feed = self.examples_per_epoch, self.input_examples_per_second
        most = MAX_HETEROGENEITY_SLOWDOWN
        checks = (  # (flag, its value, whether it is allowed, what to give)
            ("--machines", self.machines, _whole(self.machines), WHOLE),
            ("--gpus-per-machine", self.gpus_per_machine, _whole(self.gpus_per_machine), WHOLE),
            ("--nics", self.nics, _whole(self.nics), WHOLE),
            ("--network-gbps", self.network_gbps, _positive(self.network_gbps), POSITIVE),
            ("--precision", precision, precision in PRECISIONS, " or ".join(PRECISIONS)),
            ("--network-path", path, path in NETWORK_PATHS, " or ".join(NETWORK_PATHS)),
            ("--heterogeneous", slowdown, _positive(slowdown) and 1 < slowdown <= most,
             f"the slower half's slowdown, above 1 (one speed: drop the flag), at most {most:g}"),
            ("--examples-per-epoch", examples, examples is None or _whole(examples), WHOLE),
            ("--input-examples-per-second", feed, feed is None or _positive(feed), POSITIVE),
        )  # fmt: skip
        for flag, value, ok, want in checks:
            if not ok:
                yield f"{flag} must be {want}, got {value!r}"
        device(self.gpu)
        if self.interconnect is not None:
            interconnect_bandwidth(self.interconnect)
        for name, count in self.gpu_mix:
            if str(name).lower() in CPU_NAMES:
                yield self._cpu_in_mix()
            get_gpu(name)
            if not _whole(count):
                yield f"--gpu {name}:{count}: give a whole number of machines"
        if self.gpu_mix and (total := sum(n for _, n in self.gpu_mix)) != self.machines:
            yield f"--gpu mix names {total} machines but --machines is {self.machines}: match them"
        cpu_machine(self.ps_machine_type)
        if self.heterogeneous and self.machines < 2:
            yield ("--heterogeneous: one machine waits for no slower one; drop the flag, or give "
                   "--machines 2 or more")  # fmt: skip
        check_preemption_rate(self.preemptions_per_machine_hour, self.preemptible)
        self.checkpoint_interval()
        flags = {"--checkpoint-every": self.checkpoint_every != EPOCH,
                 "--examples-per-epoch": examples is not None}  # fmt: skip
        if (given := [flag for flag, on in flags.items() if on]) and not self.preemptible:
            verb, them = ("price", "them") if len(given) > 1 else ("prices", "it")
            yield (f"{' and '.join(given)} {verb} the work a preemption loses: add --preemptible, "
                   f"or drop {them}")  # fmt: skip
        for gpu in sorted({self.gpu, *(name for name, _ in self.gpu_mix)}):
            limit = MAX_DEVICES_PER_MACHINE.get(gpu)
            if limit is not None and self.gpus_per_machine > limit:
                yield self._too_many_devices(gpu, limit)
            if gpu in NO_NVLINK and (self.interconnect or "").lower() == "nvlink":
                yield f"--interconnect nvlink: {gpu} GPUs have no NVLink; use --interconnect pcie"
        if not MIN_NETWORK_GBPS <= self.network_gbps <= MAX_NIC_GBPS:
            yield (f"--network-gbps {self.network_gbps:g} is not a network speed: give one NIC's "
                   f"Gbit/s ({MIN_NETWORK_GBPS:g} to {MAX_NIC_GBPS:g}) and --nics")  # fmt: skip
        if self.nics > MAX_NICS:
            yield f"--nics {self.nics}: machines carry at most {MAX_NICS} NICs"

    def _too_many_devices(self, gpu: str, most: int) -> str:
        """Why a machine of `gpu` cannot hold `gpus_per_machine` devices, and a shape that can."""
        what = "logical CPU devices, at most one per core" if gpu == "cpu" else f"{gpu} GPUs"
        return (
            f"--gpus-per-machine {self.gpus_per_machine}: no machine holds more than {most} "
            f"{what}; give more machines (e.g. --machines "
            f"{math.ceil(self.gpus_per_machine / most)} --gpus-per-machine {most})"
        )

    def _cpu_in_mix(self) -> str:
        """Why a mix cannot hold machines without GPUs, and the question to ask instead."""
        written = ",".join(f"{n}:{c}" for n, c in self.gpu_mix)
        gpus = [(n, c) for n, c in self.gpu_mix if str(n).lower() not in CPU_NAMES]
        if not gpus:
            return f"--gpu {written}: these machines have no GPUs; give --gpu cpu"
        alone = ",".join(f"{n}:{c}" for n, c in gpus) if len(gpus) > 1 else str(gpus[0][0])
        return (
            f"--gpu {written}: machines without GPUs cannot be part of a GPU mix; ask about the "
            f"GPU machines alone (--gpu {alone} --machines {sum(c for _, c in gpus)}), or the CPU "
            "machines alone (--gpu cpu)"
        )

    def checkpoint_interval(self) -> CheckpointInterval:
        """`checkpoint_every`, parsed (`validate` has refused a bad one)."""
        return CheckpointInterval.parse(self.checkpoint_every)

    @property
    def nics_used(self) -> int:
        """NICs that carry training traffic: all on the host's network, one through an overlay."""
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
        """The intra-machine link of a machine of `gpu` (a mix's first machines)."""
        return self.link_of(self.gpu)

    def link_of(self, gpu: str) -> str:
        """The intra-machine link of a machine of `gpu`: `--interconnect`, else the GPU's usual."""
        return (self.interconnect or device(gpu).default_interconnect).lower()

    @property
    def total_gpus(self) -> int:
        """GPUs over all machines."""
        return self.machines * self.gpus_per_machine

    def describe(self) -> str:
        """One line for people: `4 x 8 v100 (nvlink), 100 Gbps network, preemptible`, or
        `2 x 8 a100 (nvlink) + 6 x 8 t4 (pcie), ...` for a GPU mix."""
        per = self.gpus_per_machine
        mix = self.gpu_mix or ((self.gpu, self.machines),)
        text = " + ".join(
            f"{n} x {per} {g}" + (f" ({self.link_of(g)})" if per > 1 else "") for g, n in mix
        )
        if self.machines > 1:
            text += f", {self.network_phrase}"
            if self.network_path == "overlay":
                text += f" (overlay, 1 of {self.nics} NICs)" if self.nics > 1 else " (overlay)"
        flags = (("preemptible", self.preemptible), ("heterogeneous", self.heterogeneous),
                 ("XLA", self.jit_compile))  # fmt: skip
        return ", ".join([text, *(flag for flag, on in flags if on)])


@dataclass(frozen=True)
class Layout:
    """Cluster shape in `ClusterConfig` terms."""

    # multi_worker_mirrored: all machines with the chief; parameter_server: workers besides the
    # coordinator chief; else 1
    workers: int
    ps: int  # parameter-server tasks
    gpus_per_machine: int  # GPUs each worker uses

    def to_dict(self) -> dict[str, int]:
        """The layout as a JSON-ready dict."""
        return dataclasses.asdict(self)
