"""`RunMetrics`: the one record of a training run (`metrics.json`), and its hardware.

The chief's trainer writes it; the launchers add what only they know (restarts,
failures, their wall time) with `with_launcher`; every reader (the train
summary, the KFP metrics, the comparison, pricing, `strategist select
--history`, the gate) parses it with `RunMetrics.from_dict`. The JSON keeps the
flat layout of the first version so existing files and reports stay readable:

- `schema_version` 2 is this one. A file without `schema_version` is version 1
  (written before the hardware was detected): it is read, and its hardware is
  marked `detected: false` so nobody takes its `platform: local` for a fact.
- A newer version than this code knows is refused with a message to upgrade.

The hardware is detected in the process that writes the record (CPU model,
cores, memory, GPUs TensorFlow sees) and, in the cloud, completed from the
job's machine spec, which the backend passes to every replica in
`PLATFORM_ENV` variables.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.core import json_input
from components.core.config import FLOAT32, PRECISIONS
from components.core.errors import ConfigError

SCHEMA_VERSION = 2
# What a cloud backend tells every replica about the machines of the job.
PLATFORM_ENV = "STRATEGIST_PLATFORM"  # local | vertex | kubeflow
MACHINE_TYPE_ENV = "STRATEGIST_MACHINE_TYPE"  # of the machines that compute gradients
ACCELERATOR_ENV = "STRATEGIST_ACCELERATOR"  # GPU name (t4, a100, ...) of those machines
ACCELERATORS_ENV = "STRATEGIST_ACCELERATORS_PER_MACHINE"
SPOT_ENV = "STRATEGIST_SPOT"  # "1": the job's machines are Spot VMs (CloudConfig.spot)
# A cloud job's replicas run on this machine by `strategist train --rehearse`: the
# platform names the job it rehearsed, never the cloud machine it did not run on.
REHEARSAL_PREFIX = "rehearsal of "
PLATFORMS = ("local", "vertex", "kubeflow", "rehearsal of vertex", "rehearsal of kubeflow")


def rehearsal_platform(target: str) -> str:
    """The platform of a rehearsal of a `target` job (`rehearsal of vertex`)."""
    return f"{REHEARSAL_PREFIX}{target}"


@dataclass(frozen=True)
class Hardware:
    """What the run ran on.

    Attributes:
        platform: `local`, `vertex`, `kubeflow`, or `rehearsal of vertex|kubeflow`
            (a cloud job's replicas run on this machine).
        machines: machines that compute gradients (the job's, in the cloud;
            locally every process shares this one machine).
        processes: TensorFlow processes of the cluster.
        machine_type: the cloud machine type of the gradient machines; None
            locally.
        gpu: GPU name of the gradient machines (`t4`, `a100`, ... in the
            cloud; the device name TensorFlow reports locally); None without.
        gpus_per_machine: GPUs on each gradient machine (0 on CPU).
        logical_devices_per_machine: logical CPU devices standing in for GPUs
            on a machine without them (0 when GPUs ran, or one device).
        cpu_model: CPU of the machine that wrote the record.
        cpu_cores: cores this process could use there.
        memory_gb: memory of that machine.
        spot: the gradient machines were Spot VMs (a cloud job with `--spot`),
            which the platform may take back; False locally and in a rehearsal,
            which run on this machine.
        detected: False for a version-1 record, whose hardware was assumed.
    """

    platform: str = "local"
    machines: int = 1
    processes: int = 1
    machine_type: str | None = None
    gpu: str | None = None
    gpus_per_machine: int = 0
    logical_devices_per_machine: int = 0
    cpu_model: str | None = None
    cpu_cores: int | None = None
    memory_gb: float | None = None
    spot: bool = False
    detected: bool = True

    @property
    def is_local(self) -> bool:
        """Whether every process ran on this one machine (a local run or a rehearsal)."""
        return self.platform == "local" or self.platform.startswith(REHEARSAL_PREFIX)

    def describe(self) -> str:
        """One line a person reads: `local: 2 x Intel Xeon (2 cores, 23.5 GB), no GPU`."""
        where = self.platform if not self.machine_type else f"{self.platform} {self.machine_type}"
        cpu = f"{self.cpu_model or 'unknown CPU'} ({self.cpu_cores or '?'} cores"
        cpu += f", {self.memory_gb:.1f} GB)" if self.memory_gb else ")"
        if self.gpu and self.gpus_per_machine:
            devices = f"{self.gpus_per_machine} x {self.gpu} per machine"
        elif self.logical_devices_per_machine:
            devices = f"no GPU, {self.logical_devices_per_machine} logical CPU devices per machine"
        else:
            devices = "no GPU"
        capacity = ", Spot" if self.spot else ""
        return f"{where}: {self.machines} machine(s){capacity}, {cpu}, {devices}"


@dataclass(frozen=True)
class RunMetrics:
    """The record of one run; `to_dict()` is the `metrics.json` layout.

    Attributes are the JSON keys. The epoch series (`epoch_seconds`,
    `epoch_examples_per_second`, `elapsed_at_epoch_end`, `epoch_attempts`,
    `history`) hold one entry per epoch; `examples_per_second` is the median
    after the first epoch (which includes tracing); `wall_seconds` is time in
    epochs. A pilot (`max_steps` > 0: that many measured steps after
    `warmup_steps`) records windows of `steps_per_epoch` steps as its epochs,
    its warm-up first, so `epochs` counts its windows and its throughput
    excludes the warm-up alike; `phase_seconds` says where the chief's whole time went (`startup`,
    `setup`, `fit`, `epochs`, `export`, `evaluate`); `precision`,
    `jit_compile` and `steps_per_execution` repeat the run config's training
    options for readers (records older than them ran float32, without XLA,
    one step per execution); `xla_scope` is what XLA compiled under
    `jit_compile`: `train_step` (the whole step) or `model` (forward and
    backward only; where XLA has no collectives, as on CPU); `all_reduce` is
    the all-reduce that ran (`auto` resolved for this machine; None in records
    older than the field);
    `run_config` is the RunConfig the trainer ran, whole; `sidecar_evaluations`
    are the evaluator task's results, one per checkpoint it evaluated.
    `stalls` (added by a local launcher) lists every stretch the run was held
    up by a task that stopped (SIGSTOP, a debugger) or made no progress:
    `task`, the `epoch` it fell in, its `seconds`, `how` it ended (`resumed`,
    `killed` by the liveness check, `ended`) and `at_s` from the start; an
    epoch the stall fell in keeps it in its `epoch_seconds` unless a cluster
    restart redid that epoch, so a run with stalls is not a clean measurement.
    `task` is `classification` or `regression` (the label's); `eval_metrics`
    holds every test-split metric (the loss, the compiled metrics, the user's
    too, accuracy or MAE/RMSE/MSE), `eval_accuracy` is None for regression;
    `eval_examples` the test examples evaluated and `eval_points` a
    regression's sample of (true, predicted) pairs (the evaluate step reads
    them instead of evaluating again; None and empty in older records);
    `model_module` is the user's module (None for a built-in model);
    `compile_settings` what the model was compiled with (optimizer, learning
    rate, loss, metrics, and where they came from); `adjustments` what
    Strategist changed of the user's choices, one sentence each (the batch,
    the scaled learning rate, its warm-up).
    `optimizer_steps` is the optimizer's update count at the end (restored
    with each checkpoint, so a run resumed where it stopped ends at `epochs` x
    `steps_per_epoch`; None in older records).
    `checkpoint_every` is the run config's interval as given (`epoch`, `20`,
    `10m`); `checkpoint_steps` the step interval that ran (a duration turned
    into steps from the measured step time; None: at epoch ends only);
    `resumes` has one entry per resume from a checkpoint: the `attempt` that
    resumed, the global step it resumed at (`resumed_at_step`, steps counted
    from the run's start), the step the attempt before had reached
    (`reached_step`; None when no step of it was recorded), how it stopped
    (`how`: `preempted` after saving on the notice, `failed` otherwise) and
    the `steps_trained_twice` between the two; `steps_trained_twice` is
    their sum. Keras does not restore the input position: a resumed epoch
    takes its remaining steps from the start of a fresh pass over the shuffled
    input, not from where the stopped attempt had read to.
    """

    strategy: str
    num_replicas: int
    examples_per_second: float
    eval_accuracy: float | None
    model: str = ""
    dataset: str = ""
    dataset_version: str | None = None
    data_fingerprint: str | None = None
    replicas_in_sync: int | None = None
    workers: int = 1
    ps: int = 0
    gpus_per_machine: int = 1
    per_replica_batch_size: int | None = None
    global_batch_size: int | None = None
    epochs: int | None = None
    steps_per_epoch: int | None = None
    examples_per_epoch: int | None = None
    max_steps: int = 0
    warmup_steps: int = 0
    epoch_seconds: list[float] = field(default_factory=list)
    epoch_examples_per_second: list[float] = field(default_factory=list)
    wall_seconds: float | None = None
    elapsed_at_epoch_end: list[float] = field(default_factory=list)
    epoch_attempts: list[int] = field(default_factory=list)
    history: dict[str, list[float]] = field(default_factory=dict)
    task: str = "classification"
    eval_loss: float | None = None
    eval_metrics: dict[str, float] = field(default_factory=dict)
    model_module: str | None = None
    compile_settings: dict[str, Any] = field(default_factory=dict)
    adjustments: list[str] = field(default_factory=list)
    confusion_matrix: list[list[int]] | None = None
    eval_examples: int | None = None
    eval_points: list[list[float]] = field(default_factory=list)
    hardware: Hardware = field(default_factory=lambda: Hardware(detected=False))
    phase_seconds: dict[str, float | None] = field(default_factory=dict)
    restarts: int = 0
    weights_sha256: str | None = None
    variable_placement: dict[str, int] = field(default_factory=dict)
    parameters: int | None = None
    precision: str = "float32"
    jit_compile: bool = False
    xla_scope: str | None = None
    steps_per_execution: int = 1
    all_reduce: str | None = None
    run_config: dict[str, Any] = field(default_factory=dict)
    # Added by the launcher that ran the cluster.
    launcher_wall_seconds: float | None = None
    worker_restarts: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    sidecar_evaluations: list[dict[str, Any]] = field(default_factory=list)
    stalls: list[dict[str, Any]] = field(default_factory=list)
    optimizer_steps: int | None = None
    checkpoint_every: str = "epoch"
    checkpoint_steps: int | None = None
    resumes: list[dict[str, Any]] = field(default_factory=list)
    steps_trained_twice: int = 0
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_launcher(
        self,
        wall_seconds: float,
        worker_restarts: int,
        failures: list[dict[str, Any]],
        sidecar_evaluations: list[dict[str, Any]] | None = None,
        stalls: list[dict[str, Any]] | None = None,
    ) -> RunMetrics:
        """This record with what the launcher measured, and the evaluator's results, added."""
        return dataclasses.replace(
            self,
            launcher_wall_seconds=wall_seconds,
            worker_restarts=worker_restarts,
            failures=list(failures),
            sidecar_evaluations=list(sidecar_evaluations or []),
            stalls=list(stalls or []),
        )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "metrics") -> RunMetrics:
        """Parses a record of any known version.

        Args:
            raw: the JSON object.
            source: what to name in an error (a path).

        Raises:
            ConfigError: not a run record, a missing or invalid field, or a
                version newer than this Strategist knows.
        """
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{source}: not a run record (expected a JSON object)")
        version = raw.get("schema_version", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ConfigError(
                f"{source}: run record schema version {version!r} is newer than this "
                f"Strategist reads ({SCHEMA_VERSION}): upgrade Strategist"
            )
        if "devices_per_worker" in raw:  # its name in records written before (CHANGELOG.md)
            raw = {"gpus_per_machine": raw["devices_per_worker"], **raw}
        _check_required(raw, source)
        _check_shape(raw, source)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {key: value for key, value in raw.items() if key in known}
        if values.get("precision") in PRECISION_ALIASES:
            values["precision"] = PRECISION_ALIASES[values["precision"]]
        values["hardware"] = _hardware(raw.get("hardware"), assumed=version < 2)
        values["schema_version"] = SCHEMA_VERSION
        return cls(**values)

    @classmethod
    def from_json(cls, text: str, source: str = "metrics") -> RunMetrics:
        raw = json_input.parse(text, source, "pass a metrics.json Strategist wrote")
        return cls.from_dict(raw, source)


# The fields every record has, and what they must be.
_REQUIRED = {
    "strategy": str,
    "num_replicas": int,
    "examples_per_second": float,
    "eval_accuracy": float,
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _label(raw: Mapping[str, Any], source: str) -> str:
    """The record as a message names it: its source and strategy."""
    strategy = raw.get("strategy")
    return f"{source} {strategy}" if isinstance(strategy, str) else source


def _check_required(raw: Mapping[str, Any], source: str) -> None:
    """Refuses a record without the fields every reader needs.

    Raises:
        ConfigError: naming the record and the missing or invalid field.
    """
    label = _label(raw, source)
    for key, kind in _REQUIRED.items():
        value = raw.get(key)
        if key == "eval_accuracy" and raw.get("task") == "regression" and value is None:
            continue  # a regression has no accuracy
        if value is None:
            raise ConfigError(f"{label}: missing {key!r} (is this a metrics.json record?)")
        if not (isinstance(value, str) if kind is str else _is_number(value)):
            raise ConfigError(f"{label}: {key!r} must be a {kind.__name__}, got {value!r}")
    # json.loads reads NaN and Infinity: neither is a measured speed.
    eps = raw["examples_per_second"]
    if not math.isfinite(eps) or eps < 0:
        raise ConfigError(
            f"{label}: 'examples_per_second' must be a finite number of at least 0, got "
            f"{eps!r}; {_FIX}"
        )


# Counts a record may state, and their least value; absent or null is the default.
_COUNTS = {
    "num_replicas": 1,
    "workers": 1,
    "ps": 0,
    "gpus_per_machine": 1,
    "per_replica_batch_size": 1,
    "parameters": 1,
    "max_steps": 0,
    "warmup_steps": 0,
}
_HARDWARE_COUNTS = {"machines": 1, "processes": 1, "gpus_per_machine": 0}
# The selector's name of full precision, written by hand in records: the policy it means.
PRECISION_ALIASES = {"fp32": FLOAT32}
_FIX = "correct the record or remove it from the file"


def _check_shape(raw: Mapping[str, Any], source: str) -> None:
    """Refuses counts that are not whole numbers and precisions no run config has.

    Readers compare these fields (`select --history` matches a candidate's
    workers, devices, batch and precision), so a record that states one wrongly
    must not match by accident, or crash a reader.

    Raises:
        ConfigError: naming the record, the field and what to do.
    """
    label = _label(raw, source)
    hardware = raw.get("hardware")
    counts = [(key, raw.get(key), least) for key, least in _COUNTS.items()]
    if isinstance(hardware, Mapping):
        counts += [
            (f"hardware.{key}", hardware.get(key), least) for key, least in _HARDWARE_COUNTS.items()
        ]
    for key, value, least in counts:
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not (whole and value >= least):
            raise ConfigError(
                f"{label}: {key!r} must be a whole number of at least {least}, got {value!r}; "
                f"{_FIX}"
            )
    precision = raw.get("precision")
    if precision is not None and precision not in (*PRECISIONS, *PRECISION_ALIASES):
        raise ConfigError(
            f"{label}: unknown 'precision' {precision!r}; a run's precision is one of "
            f"{', '.join(PRECISIONS)}: {_FIX}"
        )


def _hardware(raw: Any, assumed: bool) -> Hardware:
    if not isinstance(raw, Mapping):
        return Hardware(detected=False)
    known = {f.name for f in dataclasses.fields(Hardware)}
    hardware = Hardware(**{k: v for k, v in raw.items() if k in known})
    return dataclasses.replace(hardware, detected=False) if assumed else hardware


def read(path: str) -> RunMetrics:
    """Reads a `metrics.json` file.

    Raises:
        ConfigError: unreadable, or not a run record this version knows.
    """
    from components.core import storage

    try:
        text = storage.read_text(path)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read it ({err.strerror or err})") from None
    return RunMetrics.from_json(text, path)


def write(path: str, metrics: RunMetrics) -> None:
    """Writes `metrics.json` atomically (the only writer)."""
    from components.core import storage

    storage.write_json(path, metrics.to_dict())


# -- detection -------------------------------------------------------------------


def detect_hardware(cluster, gpus_seen: list[str]) -> Hardware:
    """The hardware of the run this process belongs to.

    Args:
        cluster: the run's `ClusterConfig`.
        gpus_seen: device names of the GPUs TensorFlow sees in this process.

    Returns:
        The platform and the gradient machines from the job's spec where a
        cloud backend passed it (`PLATFORM_ENV` and friends), else this
        machine's; the CPU, cores and memory of this machine.
    """
    spec = cluster.spec
    platform = os.environ.get(PLATFORM_ENV, "local")
    if platform not in PLATFORMS:
        platform = "local"
    job_gpu = os.environ.get(ACCELERATOR_ENV) or None
    if job_gpu:
        gpu, gpus = job_gpu, int(os.environ.get(ACCELERATORS_ENV) or 0)
    elif gpus_seen:
        gpu, gpus = gpus_seen[0], len(gpus_seen)
    else:
        gpu, gpus = None, 0
    devices = spec.devices_per_machine(cluster)
    logical = devices if not gpus and devices > 1 and spec.cpu_rehearsal else 0
    local = Hardware(platform=platform).is_local
    return Hardware(
        platform=platform,
        machines=1 if local else spec.training_machines(cluster),
        processes=spec.num_processes(cluster),
        machine_type=os.environ.get(MACHINE_TYPE_ENV) or None,
        gpu=gpu,
        gpus_per_machine=gpus,
        logical_devices_per_machine=logical,
        cpu_model=_cpu_model(),
        cpu_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        memory_gb=_memory_gb(),
        spot=not local and os.environ.get(SPOT_ENV) == "1",
    )


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or None


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None
