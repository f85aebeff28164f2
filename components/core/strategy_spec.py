"""The one strategy spec: what each `tf.distribute` strategy needs of a cluster.

Every backend derives its cluster from `spec_for(name)`: the local launcher's
`TF_CONFIG`, Vertex AI's worker pools and the TFJob's replica specs all come
from `StrategySpec.task_counts`, so a local rehearsal has the same task types,
counts and roles as the cloud job. Replica counts, input pipelines, who
serves, who exports and who may be restarted alone are answered here and
nowhere else.

The task types are TensorFlow's (`TF_CONFIG`'s `cluster` keys): `chief`,
`worker`, `ps`. Vertex AI names its pools after the same roles (pool 0 is the
chief), and the training operator's `Chief`/`Worker`/`PS` replica types map
one to one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from components.core.errors import ConfigError

CHIEF = "chief"
WORKER = "worker"
PS = "ps"
EVALUATOR = "evaluator"

# All-reduce choices (`--all-reduce`). `auto` is resolved per strategy and machine
# by `StrategySpec.resolve_all_reduce`; the others are what each strategy offers.
AUTO = "auto"
NCCL = "nccl"
RING = "ring"
HIERARCHICAL_COPY = "hierarchical_copy"
REDUCTION_TO_ONE_DEVICE = "reduction_to_one_device"
ALL_REDUCE = (AUTO, NCCL, RING, HIERARCHICAL_COPY, REDUCTION_TO_ONE_DEVICE)
# Choices that run on GPUs only.
GPU_ONLY_ALL_REDUCE = (NCCL, HIERARCHICAL_COPY)
# parameter_server splits a variable into shards of at least this size, at most one
# per server (`MinSizePartitioner`): the trainer builds it so and `select` costs it so.
PS_MIN_SHARD_BYTES = 256 << 10

# What `--jit-compile` compiles with XLA (`StrategySpec.xla_scope`): the whole
# train step (forward, backward, all-reduce, optimizer update: Keras's
# `compile(jit_compile=True)`), or the model's forward and backward passes
# only, with the all-reduce and the update outside XLA.
XLA_TRAIN_STEP = "train_step"
XLA_MODEL = "model"


class ClusterShape(Protocol):
    """What the spec reads of a cluster (`config.ClusterConfig` is one)."""

    workers: int
    ps: int
    gpus_per_machine: int
    evaluator: bool
    all_reduce: str
    all_reduce_pack_mb: float


@dataclass(frozen=True)
class StrategySpec:
    """What one strategy needs: tasks, replicas, input pipelines and roles.

    Attributes:
        name: the name users type (`--strategy`).
        tf_class: the `tf.distribute` class it builds.
        multi_machine: trains across several machines (`--workers` > 1 allowed).
        uses_ps: has parameter-server tasks; the chief only coordinates and the
            workers and parameter servers run a server each.
        devices_apply: devices per machine multiply the replicas (all but
            `one_device`).
        cpu_rehearsal: on a machine without GPUs, logical CPU devices stand in
            for several GPUs per machine. Only `MirroredStrategy` takes devices
            by name; in a multi-worker cluster TensorFlow 2.21 gives each worker
            its GPUs or one CPU (`CollectiveAllReduceExtended.
            _initialize_local_devices`), and `ParameterServerStrategy` replicates
            a worker's steps over its GPUs only, so both rehearse one device per
            worker.
        default_devices: devices per machine when the user gives none (the
            local `mirrored` rehearsal uses two, so its all-reduce really runs).
        all_reduce_choices: the all-reduce implementations the strategy offers
            besides `auto` (none: it has no all-reduce to choose).
        auto_all_reduce: what `auto` means on a machine (with GPUs, without);
            None: TensorFlow's own default (`MirroredStrategy`'s collective
            all-reduce, NCCL on GPUs and ring over CPU devices).
        all_reduce_via: how `tf.distribute` takes the choice:
            `communication_options` (a `CommunicationImplementation`),
            `cross_device_ops` (a `CrossDeviceOps`), or None.
        xla_without_gpus: what `--jit-compile` compiles on a machine without
            GPUs (None: refused). TensorFlow 2.21's XLA compiles no collectives
            on CPU devices ("Collectives are not yet implemented for CPU devices
            when compiling with XLA", b/194942685), so a strategy that
            all-reduces compiles the model's forward and backward passes
            (`XLA_MODEL`) and all-reduces outside XLA; parameter servers are
            refused, their variables live on other tasks.
    """

    name: str
    tf_class: str
    multi_machine: bool
    uses_ps: bool
    devices_apply: bool
    cpu_rehearsal: bool
    default_devices: int
    all_reduce_choices: tuple[str, ...] = ()
    auto_all_reduce: tuple[str, str] | None = None
    all_reduce_via: str | None = None
    xla_without_gpus: str | None = None

    # -- the cluster -----------------------------------------------------------

    def task_counts(self, cluster: ClusterShape) -> dict[str, int]:
        """Task type -> count, the same for Vertex pools, TFJob replicas and local tasks.

        Every strategy has one chief. Under `multi_worker_mirrored` the chief is
        the first of `workers` machines that train alike; under
        `parameter_server` it is a separate coordinator beside `workers` workers
        and `ps` parameter servers. An evaluator comes on top when asked for.
        """
        counts = self.training_task_counts(cluster)
        if cluster.evaluator:
            counts[EVALUATOR] = 1
        return counts

    def training_task_counts(self, cluster: ClusterShape) -> dict[str, int]:
        """The tasks that train (the `cluster` of Vertex AI's `TF_CONFIG`: no evaluator)."""
        if self.uses_ps:
            return {CHIEF: 1, WORKER: cluster.workers, PS: cluster.ps}
        if self.multi_machine and cluster.workers > 1:
            return {CHIEF: 1, WORKER: cluster.workers - 1}
        return {CHIEF: 1}

    def num_processes(self, cluster: ClusterShape) -> int:
        """TensorFlow processes (one per task) the cluster runs."""
        return sum(self.task_counts(cluster).values())

    def training_machines(self, cluster: ClusterShape) -> int:
        """Machines that compute gradients (each with `gpus_per_machine` devices)."""
        return cluster.workers if self.multi_machine else 1

    def devices_per_machine(self, cluster: ClusterShape) -> int:
        """Devices of one training machine that hold a replica."""
        return cluster.gpus_per_machine if self.devices_apply else 1

    def num_replicas(self, cluster: ClusterShape) -> int:
        """Replicas that compute gradients for one global batch."""
        return self.training_machines(cluster) * self.devices_per_machine(cluster)

    def replicas_in_sync(self, cluster: ClusterShape) -> int:
        """`strategy.num_replicas_in_sync`: a parameter-server step runs on one worker."""
        if self.uses_ps:
            return self.devices_per_machine(cluster)
        return self.num_replicas(cluster)

    def input_pipelines(self, cluster: ClusterShape) -> int:
        """Input pipelines that read the shards: one per training machine."""
        return self.training_machines(cluster)

    def shard_files_needed(self, cluster: ClusterShape) -> int:
        """Shard files the training split needs: one per input pipeline that reads its own.

        Parameter-server workers each read the whole split in their own order
        (`datasets.make_dataset_fn`), so one file feeds them all.
        """
        return 1 if self.uses_ps else self.input_pipelines(cluster)

    # -- roles -------------------------------------------------------------------

    @property
    def gradient_roles(self) -> tuple[str, ...]:
        """Task types whose machines compute gradients (and carry the GPUs)."""
        return (WORKER,) if self.uses_ps else (CHIEF, WORKER)

    @property
    def serving_roles(self) -> tuple[str, ...]:
        """Task types that only run a gRPC server for the chief to drive."""
        return (WORKER, PS) if self.uses_ps else ()

    @property
    def primary_roles(self) -> tuple[str, ...]:
        """Task types whose exit 0 means the run is finished (servers never exit)."""
        return (CHIEF, EVALUATOR) if self.uses_ps else (CHIEF, WORKER, EVALUATOR)

    @property
    def restartable_alone(self) -> tuple[str, ...]:
        """Task types a launcher may restart alone.

        A parameter-server worker (the coordinator retries its steps on the
        others) and the evaluator (it resumes at the newest checkpoint).
        """
        return (WORKER, EVALUATOR) if self.uses_ps else (EVALUATOR,)

    exporter_role = CHIEF  # the chief exports the model and writes the run's record

    @property
    def single_device(self) -> bool:
        """Trains on one device: the baseline speed-ups are measured against."""
        return not self.multi_machine and not self.devices_apply

    @property
    def all_reduces_across_machines(self) -> bool:
        """Gradients are all-reduced between machines (what Reduction Server speeds up)."""
        return self.multi_machine and not self.uses_ps

    @property
    def takes_all_reduce_pack(self) -> bool:
        """Its all-reduce can be split into packs of a size
        (`CommunicationOptions(bytes_per_pack=...)`), so it can overlap back-propagation."""
        return self.all_reduce_via == "communication_options"

    # -- all-reduce -------------------------------------------------------------

    def resolve_all_reduce(self, all_reduce: str, gpus: int) -> str:
        """The all-reduce that runs on a machine with `gpus` GPUs: `auto` made explicit.

        `multi_worker_mirrored` resolves `auto` to NCCL with GPUs and to ring
        without: TensorFlow 2.21 lowers its own `AUTO` to the collective hint
        `auto`, which does not choose NCCL across machines.
        """
        if all_reduce != AUTO or self.auto_all_reduce is None:
            return all_reduce
        with_gpus, without_gpus = self.auto_all_reduce
        return with_gpus if gpus else without_gpus

    def xla_scope(self, gpus: int) -> str | None:
        """What `--jit-compile` compiles on machines with `gpus` GPUs (None: it cannot run).

        With GPUs, the whole train step, the all-reduce included (XLA lowers it
        to NCCL). Without, `xla_without_gpus`.
        """
        return XLA_TRAIN_STEP if gpus else self.xla_without_gpus

    def machine_errors(self, all_reduce: str, gpus: int, jit_compile: bool) -> list[str]:
        """What cannot run on machines with `gpus` GPUs each: the all-reduce, XLA."""
        resolved = self.resolve_all_reduce(all_reduce, gpus)
        errors = []
        if not gpus and resolved in GPU_ONLY_ALL_REDUCE:
            others = [c for c in (AUTO, *self.all_reduce_choices) if c not in GPU_ONLY_ALL_REDUCE]
            errors.append(
                f"--all-reduce {resolved} needs GPUs and this machine has none: use "
                f"{' or '.join(others)} to rehearse {self.name} on CPU (the cloud job with "
                f"--gpu takes {resolved})"
            )
        scope = self.xla_scope(gpus)
        if jit_compile and scope is None:
            errors.append(
                f"--jit-compile cannot run {self.name} on a machine without GPUs: TensorFlow "
                "2.21's XLA compiles no variables that live on other tasks (the parameter "
                "servers); rehearse --jit-compile with multi_worker_mirrored, mirrored or "
                "one_device (the cloud job with --gpu takes it)"
            )
        if jit_compile and scope == XLA_TRAIN_STEP and resolved == RING:
            errors.append(
                "--jit-compile compiles only NCCL or auto collectives (XLA), not ring: drop "
                "--all-reduce ring or --jit-compile"
            )
        return errors

    # -- the shape a user asks for -----------------------------------------------

    def default_workers(self) -> int:
        return 2 if self.multi_machine else 1

    def default_ps(self) -> int:
        return 1 if self.uses_ps else 0

    def shape_errors(self, cluster: ClusterShape) -> list[str]:
        """What is wrong with `cluster` for this strategy, each saying which flag to change."""
        errors = []
        if cluster.workers < 1:
            errors.append(f"--workers must be at least 1, got {cluster.workers}")
        if cluster.ps < 0:
            errors.append(f"--ps must be 0 or more, got {cluster.ps}")
        if cluster.gpus_per_machine < 1:
            errors.append(f"--gpus-per-machine must be at least 1, got {cluster.gpus_per_machine}")
        if not self.multi_machine and cluster.workers != 1:
            errors.append(
                f"{self.name} runs on one machine: use --workers 1, or choose "
                "multi_worker_mirrored or parameter_server for several workers"
            )
        if not self.uses_ps and cluster.ps:
            errors.append(
                f"{self.name} has no parameter servers: drop --ps, or choose parameter_server"
            )
        if self.uses_ps and cluster.ps < 1:
            errors.append(
                "parameter_server needs at least one parameter server: pass --ps 1 or more"
            )
        if not self.devices_apply and cluster.gpus_per_machine != 1:
            errors.append(
                f"{self.name} trains on one device, not {cluster.gpus_per_machine}: "
                "use --gpus-per-machine 1, or choose mirrored for every device of the machine"
            )
        pack = cluster.all_reduce_pack_mb
        if not (isinstance(pack, (int, float)) and math.isfinite(pack) and pack >= 0):
            errors.append(f"--all-reduce-pack-mb must be 0 or a positive number, got {pack!r}")
        elif pack and not self.takes_all_reduce_pack:
            errors.append(
                f"--all-reduce-pack-mb splits the all-reduce of multi_worker_mirrored, not "
                f"{self.name}: drop it, or choose multi_worker_mirrored"
            )
        if cluster.all_reduce not in (AUTO, *self.all_reduce_choices):
            if self.all_reduce_choices:
                choices = ", ".join((AUTO, *self.all_reduce_choices))
                errors.append(
                    f"--all-reduce {cluster.all_reduce} does not apply to {self.name}: "
                    f"choose {choices}"
                )
            else:
                errors.append(
                    f"{self.name} has no all-reduce to choose: drop --all-reduce "
                    f"{cluster.all_reduce}"
                )
        return errors


SPECS: dict[str, StrategySpec] = {
    spec.name: spec
    for spec in (
        StrategySpec(
            "one_device",
            "the default strategy (one device)",
            multi_machine=False,
            uses_ps=False,
            devices_apply=False,
            cpu_rehearsal=False,
            default_devices=1,
            xla_without_gpus=XLA_TRAIN_STEP,
        ),
        StrategySpec(
            "mirrored",
            "MirroredStrategy",
            multi_machine=False,
            uses_ps=False,
            devices_apply=True,
            cpu_rehearsal=True,
            default_devices=2,
            all_reduce_choices=(NCCL, HIERARCHICAL_COPY, REDUCTION_TO_ONE_DEVICE),
            all_reduce_via="cross_device_ops",
            xla_without_gpus=XLA_MODEL,
        ),
        StrategySpec(
            "multi_worker_mirrored",
            "MultiWorkerMirroredStrategy",
            multi_machine=True,
            uses_ps=False,
            devices_apply=True,
            cpu_rehearsal=False,
            default_devices=1,
            all_reduce_choices=(NCCL, RING),
            auto_all_reduce=(NCCL, RING),
            all_reduce_via="communication_options",
            xla_without_gpus=XLA_MODEL,
        ),
        StrategySpec(
            "parameter_server",
            "ParameterServerStrategy",
            multi_machine=True,
            uses_ps=True,
            devices_apply=True,
            cpu_rehearsal=False,
            default_devices=1,
        ),
    )
}
STRATEGIES = tuple(SPECS)
# What `strategist compare` and the comparison pipeline run unless told otherwise.
COMPARED_BY_DEFAULT = ("mirrored", "multi_worker_mirrored", "parameter_server")


def spec_for(name: str) -> StrategySpec:
    """The spec of strategy `name`.

    Raises:
        ConfigError: for an unknown name, listing the known ones.
    """
    try:
        return SPECS[name]
    except KeyError:
        raise ConfigError(
            f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)} "
            "(or 'auto' to let `strategist select` choose)"
        ) from None
