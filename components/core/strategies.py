"""The one strategy factory: a strategy name and `TF_CONFIG` -> `tf.distribute.Strategy`.

Every process of every backend learns its role from `TF_CONFIG`, exactly as
Vertex AI and the Kubeflow training operator set it; the local launcher sets it
the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from components.core.config import ClusterConfig, ConfigError
from components.core.strategy_spec import EVALUATOR, spec_for


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
    devices (`mirrored`) gets `devices_per_worker` of them, so that the
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


def make_strategy(cluster: ClusterConfig, role: Role):
    """Builds the strategy `cluster.strategy` names, for the chief or a single process.

    Call `configure_devices` first. Parameter-server workers and parameter
    servers do not build a strategy: they run `run_server`.

    Raises:
        ConfigError: for an unknown strategy name, or a `TF_CONFIG` that does
            not fit the strategy.
    """
    import tensorflow as tf

    name = spec_for(cluster.strategy).name
    # Multi-worker strategies must be built before TensorFlow's context starts,
    # so devices are listed only on the single-process branches.
    if name == "one_device":
        # The default strategy places everything on one device (GPU 0 when there
        # is one); unlike OneDeviceStrategy, BackupAndRestore supports it.
        return tf.distribute.get_strategy()
    if name == "mirrored":
        if tf.config.list_physical_devices("GPU"):
            return tf.distribute.MirroredStrategy()
        # Over logical CPU devices TensorFlow picks collective all-reduce, as it
        # would across GPUs: the rehearsal exercises the same reduction path.
        return tf.distribute.MirroredStrategy(
            devices=[d.name for d in tf.config.list_logical_devices("CPU")]
        )
    if role.cluster is None:
        raise ConfigError(f"{name} needs TF_CONFIG with a cluster; run it through a launcher")
    if name == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=tf.distribute.experimental.CommunicationImplementation.AUTO
            )
        )
    resolver = training_cluster_resolver()
    num_ps = len(role.cluster.get("ps", []))
    if not num_ps:
        raise ConfigError("parameter_server needs `ps` tasks in TF_CONFIG")
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=256 << 10, max_shards=num_ps
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
