"""The one strategy factory: a strategy name and `TF_CONFIG` -> `tf.distribute.Strategy`.

Every process of every backend learns its role from `TF_CONFIG`, exactly as
Vertex AI and the Kubeflow training operator set it; the local launcher sets it
the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from components.core.config import ClusterConfig, ConfigError, RunConfig
from components.core.strategy_spec import (
    EVALUATOR,
    HIERARCHICAL_COPY,
    NCCL,
    PS_MIN_SHARD_BYTES,
    REDUCTION_TO_ONE_DEVICE,
    RING,
    spec_for,
)

# An all-reduce choice -> the `tf.distribute.experimental.CommunicationImplementation`
# member (strategies that take `communication_options`).
_IMPLEMENTATIONS = {NCCL: "NCCL", RING: "RING"}
# An all-reduce choice -> the `tf.distribute` `CrossDeviceOps` class (strategies
# that take `cross_device_ops`).
_CROSS_DEVICE_OPS = {
    NCCL: "NcclAllReduce",
    HIERARCHICAL_COPY: "HierarchicalCopyAllReduce",
    REDUCTION_TO_ONE_DEVICE: "ReductionToOneDevice",
}


@dataclass(frozen=True)
class Role:
    """This process's place in the cluster.

    Attributes:
        task_type: `chief`, `worker`, `ps`, `evaluator`, or `None` (no cluster).
        task_index: index within its task type.
        cluster: the cluster spec (`{"worker": ["host:port", ...], ...}`).
    """

    task_type: str | None = None
    task_index: int = 0
    cluster: dict[str, list[str]] | None = None

    @classmethod
    def from_tf_config(cls, tf_config: str | dict[str, Any] | None) -> Role:
        """Parses `TF_CONFIG` (a JSON string or dict; empty means a single process).

        Raises:
            ConfigError: for malformed `TF_CONFIG`.
        """
        if not tf_config:
            return cls()
        try:
            raw = json.loads(tf_config) if isinstance(tf_config, str) else tf_config
            task = raw.get("task") or {}
            cluster = raw.get("cluster") or None
            return cls(task.get("type"), int(task.get("index", 0)), cluster)
        except (ValueError, TypeError, AttributeError) as err:
            raise ConfigError(f"TF_CONFIG is not valid ({err}); it must be JSON") from None

    @property
    def is_chief(self) -> bool:
        """The chief exports the model and writes the metrics.

        Without a `chief` task, worker 0 is the chief (MultiWorkerMirrored's rule).
        """
        if self.task_type is None or self.task_type == "chief":
            return True
        has_chief = bool(self.cluster and self.cluster.get("chief"))
        return self.task_type == "worker" and self.task_index == 0 and not has_chief

    @property
    def name(self) -> str:
        return "local" if self.task_type is None else f"{self.task_type}-{self.task_index}"


def configure_devices(cluster: ClusterConfig) -> None:
    """Sets up devices before TensorFlow initialises its runtime.

    On a machine without GPUs, a strategy that can replicate over logical CPU
    devices (`mirrored`) gets `gpus_per_machine` of them, so that the
    rehearsal runs as many replicas, and the same all-reduce, as the GPU
    machine would.
    """
    import tensorflow as tf

    spec = spec_for(cluster.strategy)
    devices = spec.devices_per_machine(cluster)
    if devices == 1 or not spec.cpu_rehearsal or tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * devices
    )


@dataclass(frozen=True)
class Communication:
    """How a strategy all-reduces on a given machine: what `make_strategy` passes on.

    Attributes:
        all_reduce: the choice with `auto` resolved (recorded in the metrics).
        implementation: the `CommunicationImplementation` member name
            (`NCCL`, `RING`) for a strategy that takes `communication_options`.
        cross_device_ops: the `tf.distribute` `CrossDeviceOps` class name for a
            strategy that takes `cross_device_ops`; None: TensorFlow's default.
    """

    all_reduce: str
    implementation: str | None = None
    cross_device_ops: str | None = None


def communication(config: RunConfig, gpus: int) -> Communication:
    """The all-reduce of `config`'s cluster on a machine with `gpus` GPUs (0: CPU only).

    Pure: no TensorFlow, so a test can ask for "a machine that lists GPUs" on
    one without.

    Raises:
        ConfigError: a choice the strategy does not offer, one that needs
            GPUs on a machine without, or one XLA (`training.jit_compile`)
            cannot compile.
    """
    cluster = config.cluster
    spec = cluster.spec
    errors = spec.shape_errors(cluster)
    errors += spec.machine_errors(cluster.all_reduce, gpus, config.training.jit_compile)
    if errors:
        raise ConfigError(errors[0])
    resolved = spec.resolve_all_reduce(cluster.all_reduce, gpus)
    if spec.all_reduce_via == "communication_options":
        return Communication(resolved, implementation=_IMPLEMENTATIONS[resolved])
    if spec.all_reduce_via == "cross_device_ops":
        return Communication(resolved, cross_device_ops=_CROSS_DEVICE_OPS.get(resolved))
    return Communication(resolved)


def visible_gpus() -> int:
    """GPUs TensorFlow sees in this process (lists them without starting its runtime)."""
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU"))


def make_strategy(config: RunConfig, role: Role, gpus: int | None = None):
    """Builds the strategy `config.cluster.strategy` names, for the chief or a single process.

    Call `configure_devices` first. Parameter-server workers and parameter
    servers do not build a strategy: they run `run_server`.

    Args:
        config: the run (its cluster: strategy, shape, all-reduce; XLA).
        role: this process's role.
        gpus: GPUs of this machine; None: the GPUs TensorFlow sees. The
            all-reduce follows it (`communication`).

    Raises:
        ConfigError: for an unknown strategy name, an all-reduce this machine
            cannot run, or a `TF_CONFIG` that does not fit the strategy.
    """
    import tensorflow as tf

    name = spec_for(config.cluster.strategy).name
    gpus = visible_gpus() if gpus is None else gpus
    comm = communication(config, gpus)
    # Multi-worker strategies must be built before TensorFlow's context starts,
    # so devices are listed only on the single-process branches.
    if name == "one_device":
        # The default strategy places everything on one device (GPU 0 when there
        # is one); unlike OneDeviceStrategy, BackupAndRestore supports it.
        return tf.distribute.get_strategy()
    if name == "mirrored":
        # None: TensorFlow's collective all-reduce (NCCL across GPUs; ring over
        # logical CPU devices, so the rehearsal exercises the same reduction path).
        ops = getattr(tf.distribute, comm.cross_device_ops)() if comm.cross_device_ops else None
        if gpus:
            return tf.distribute.MirroredStrategy(cross_device_ops=ops)
        return tf.distribute.MirroredStrategy(
            devices=[d.name for d in tf.config.list_logical_devices("CPU")], cross_device_ops=ops
        )
    if role.cluster is None:
        raise ConfigError(f"{name} needs TF_CONFIG with a cluster; run it through a launcher")
    if name == "multi_worker_mirrored":
        # Explicit: TensorFlow 2.21 lowers AUTO to the hint "auto", which does not pick NCCL.
        implementation = tf.distribute.experimental.CommunicationImplementation[comm.implementation]
        # bytes_per_pack 0 puts every gradient into one pack, all-reduced after the last
        # one exists; a size gives packs that start while back-propagation still runs
        # (tensorflow/python/distribute/cross_device_utils.py `group_by_size`).
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                bytes_per_pack=int(config.cluster.all_reduce_pack_mb * 2**20),
                implementation=implementation,
            )
        )
    resolver = training_cluster_resolver()
    num_ps = len(role.cluster.get("ps", []))
    if not num_ps:
        raise ConfigError("parameter_server needs `ps` tasks in TF_CONFIG")
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=PS_MIN_SHARD_BYTES, max_shards=num_ps
    )
    return tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=partitioner
    )


def training_cluster_resolver():
    """`TF_CONFIG`'s cluster without an evaluator: the tasks a parameter-server cluster connects.

    The training operator puts the evaluator in `cluster` (v1.9 `genClusterSpec`),
    Vertex AI does not. The evaluator runs no server, so a coordinator that
    counted it would wait for it forever.
    """
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    jobs = resolver.cluster_spec().as_dict()
    jobs.pop(EVALUATOR, None)
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(jobs),
        task_type=resolver.task_type,
        task_id=resolver.task_id,
        rpc_layer=resolver.rpc_layer or "grpc",
    )


def is_server_role(cluster: ClusterConfig, role: Role) -> bool:
    """Whether this process only serves (parameter-server workers and parameter servers)."""
    return role.task_type in spec_for(cluster.strategy).serving_roles


def run_server(role: Role) -> None:
    """Runs a gRPC server for a parameter-server cluster's worker or PS task until killed."""
    import tensorflow as tf

    resolver = training_cluster_resolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=role.task_type,
        task_index=role.task_index,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    print(f"{role.name}: serving on {role.cluster[role.task_type][role.task_index]}", flush=True)
    server.join()
