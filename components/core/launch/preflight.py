"""Local pre-flight: refuses a local cluster this machine cannot rehearse truthfully or hold."""

from __future__ import annotations

import os

from components.core.config import ConfigError, RunConfig, validate_for_machine


def machine_gpus() -> int:
    """NVIDIA GPUs this machine's processes may use, without loading TensorFlow.

    Counts the driver's `/proc/driver/nvidia/gpus` entries, limited by
    `CUDA_VISIBLE_DEVICES` when it is set (empty or `-1` hides them all).
    """
    try:
        gpus = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return gpus
    listed = [d for d in visible.split(",") if d.strip()]
    if not listed or listed[0].strip() == "-1":
        return 0
    return min(gpus, len(listed))


def check_rehearsal(config: RunConfig, gpus: int | None = None) -> None:
    """Refuses a run this machine cannot rehearse truthfully.

    Logical CPU devices stand in for GPUs only where the strategy replicates
    over them (`mirrored`); a multi-worker strategy's local workers would hold
    one replica each, fewer than counted. An all-reduce or a precision that
    needs GPUs is refused on a machine without (`validate_for_machine`).

    Args:
        config: the run.
        gpus: GPUs of this machine; None: `machine_gpus()`.

    Raises:
        ConfigError: saying which flag to change.
    """
    cluster = config.cluster
    spec = cluster.spec
    if spec.devices_per_machine(cluster) > 1 and not spec.cpu_rehearsal:
        raise ConfigError(
            f"a local {spec.name} rehearsal runs one device per worker "
            f"(on a machine without GPUs {spec.tf_class} gives each worker one CPU device): "
            "pass --gpus-per-machine 1 locally; the cloud job (--target, --gpu) takes more"
        )
    validate_for_machine(config, machine_gpus() if gpus is None else gpus)


# What one local task may take: TensorFlow's runtime and a small model (a trainer
# here peaks well under this; `docs/faults.md` has the measured figure), and how many
# TensorFlow processes may share a core before they only wait for each other.
TASK_MEMORY_BYTES = 1 << 30
TASKS_PER_CORE = 4


def check_machine_size(
    config: RunConfig, *, cores: int | None = None, memory_bytes: int | None = None
) -> None:
    """Refuses a local cluster larger than this machine's cores and memory hold.

    Args:
        config: the run.
        cores: usable cores; None: this process's CPU affinity.
        memory_bytes: the machine's memory; None: `MemTotal` of /proc/meminfo (not
            what is free now, which would make the bound change from run to run).

    Raises:
        ConfigError: with the numbers, and `--oversubscribe` to run anyway.
    """
    cluster = config.cluster
    processes = sum(cluster.spec.task_counts(cluster).values())
    replicas = cluster.spec.num_replicas(cluster)
    cores = cores or len(os.sched_getaffinity(0))
    memory_bytes = memory_bytes if memory_bytes is not None else _total_memory()
    gib = 1 << 30
    limits = [
        (processes, TASKS_PER_CORE * cores, f"processes ({TASKS_PER_CORE} per core x {cores})"),
        (replicas, TASKS_PER_CORE * cores, f"replicas ({TASKS_PER_CORE} per core x {cores})"),
    ]
    if memory_bytes:
        fit = max(1, memory_bytes // TASK_MEMORY_BYTES)
        memory = f"{memory_bytes / gib:.1f} GiB of memory"
        limits.append((processes, fit, f"processes at 1 GiB each ({memory})"))
    for wanted, most, what in limits:
        if wanted > most:
            raise ConfigError(
                f"a local {cluster.strategy} cluster of {wanted} {what.split(' ')[0]} is more "
                f"than this machine holds: at most {most} {what}; pass fewer --workers/--ps/"
                "--gpus-per-machine, or --oversubscribe to run it anyway"
            )


def _total_memory() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
