"""Kubeflow backend: a run as a `kubeflow.org/v1` TFJob on GKE GPU node pools.

Replica types follow the same layout as Vertex AI's pools: `Chief` (one), `Worker`,
`PS`, `Evaluator`. The training operator sets `TF_CONFIG` in every pod, so every pod
runs the same trainer command. GPU pods ask for `nvidia.com/gpu`, select the node
pool by `cloud.google.com/gke-accelerator` and tolerate GKE's `nvidia.com/gpu`
taint; CPU pods (parameter servers, the parameter-server coordinator) do neither.
"""

from __future__ import annotations

import math
import re
from typing import Any

from kubeflow.training import models as kf
from kubernetes import client as k8s

from components.core import model_profile, preemption
from components.core.config import ConfigError, RunConfig
from components.core.cpu_machine import cpu_machine, holding
from components.core.launch import cloud as cloudlib
from components.core.launch import cloud_checks
from components.core.launch.cloud import CloudConfig
from components.core.launch.staging import shards_uri
from components.core.model_profile import ModelProfile
from components.core.selection.memory import (
    OPTIMIZER_STATE_FACTOR,
    server_state_bytes,
    servers_memory_gb,
)

GROUP_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
CONTAINER = "tensorflow"  # the container name the training operator looks for
GPU_RESOURCE = "nvidia.com/gpu"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
SPOT_LABEL = "cloud.google.com/gke-spot"
_REPLICA_TYPES = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}
_TAIL_LINES = 40
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_LABEL_MAX = 63
# Requests of a GPU pod, per GPU: every GPU machine type of `hardware` has at least
# 8 vCPUs and 30 GB per GPU, of which GKE keeps some for itself.
CPUS_PER_GPU, MEMORY_GIB_PER_GPU = 4, 12
# A CPU pod asks for this share of its machine type, leaving GKE's reserve.
CPU_MACHINE_SHARE = 0.75
# A parameter server's TensorFlow process before its variables: runtime and gRPC buffers.
PS_BASE_MEMORY_GB = 0.5


def tfjob_model(run: RunConfig, cloud: CloudConfig) -> kf.KubeflowOrgV1TFJob:
    """The TFJob that runs `run`, as the kubeflow-training SDK's model (validated).

    Raises:
        ConfigError: for a combination the cluster cannot run.
    """
    if cloud.target != "kubeflow":
        raise ConfigError(f"build_tfjob needs --target kubeflow, got {cloud.target!r}")
    cloud_checks.validate_cloud(run, cloud)
    args = cloudlib.trainer_args(run, cloud)
    pools = cloudlib.layout(run, cloud)
    name = cloudlib.job_name(run, cloud)
    check_job_name(name, pools)
    servers = sum(pool.replicas for pool in pools if pool.role == "ps")
    profile = _model_profile(run, cloud) if servers else None
    replica_specs = {
        _REPLICA_TYPES[pool.role]: kf.KubeflowOrgV1ReplicaSpec(
            replicas=pool.replicas,
            restart_policy=cloud.restart_policy,
            template=_pod_template(
                run,
                cloud,
                pool,
                args,
                pod_resources(
                    pool,
                    parameter_server_memory_gb(profile, servers, pool.machine_type)
                    if pool.role == "ps" and profile
                    else None,
                ),
            ),
        )
        for pool in pools
    }
    return kf.KubeflowOrgV1TFJob(
        api_version=GROUP_VERSION,
        kind=KIND,
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace=cloud.namespace,
            labels=_labels(run, cloud),
        ),
        spec=kf.KubeflowOrgV1TFJobSpec(
            tf_replica_specs=replica_specs,
            run_policy=kf.KubeflowOrgV1RunPolicy(
                clean_pod_policy=cloud.clean_pod_policy,
                backoff_limit=cloud.backoff_limit,
                active_deadline_seconds=cloud.timeout_s,
                ttl_seconds_after_finished=cloud.ttl_seconds_after_finished,
            ),
        ),
    )


def check_job_name(name: str, pools: list[cloudlib.Pool]) -> None:
    """Refuses a TFJob name the cluster would refuse, before anything is sent.

    The training operator v1.9's webhook takes DNS-1035 names only (a letter first),
    and the operator makes one headless Service `<job>-<replica type>-<index>` per
    replica, whose name is a DNS-1035 label of at most 63 characters
    (pkg/webhooks/tensorflow/tfjob_webhook.go; pkg/controller.v1/common/service.go).

    Raises:
        ConfigError: saying what the name must be.
    """
    if not _DNS_1035.match(name):
        raise ConfigError(
            f"--job-name {name!r}: a TFJob name starts with a lowercase letter, then lowercase "
            "letters, digits and '-', ending with a letter or digit"
        )
    longest = max((f"{name}-{pool.role}-{pool.replicas - 1}" for pool in pools), key=len)
    if len(longest) > DNS_LABEL_MAX:
        room = DNS_LABEL_MAX - (len(longest) - len(name))
        raise ConfigError(
            f"--job-name {name!r} is too long: the operator names a Service {longest!r} "
            f"({len(longest)} characters, at most {DNS_LABEL_MAX}): give at most {room} characters"
        )


def build_tfjob(run: RunConfig, cloud: CloudConfig) -> dict[str, Any]:
    """The TFJob manifest that runs `run` (what `kubectl apply` would take).

    Args:
        run: the run; its strategy and cluster shape choose the replica types.
        cloud: image, GPUs, namespace and run policy.

    Returns:
        The TFJob as a JSON-ready dict (kubernetes `sanitize_for_serialization`).

    Raises:
        ConfigError: for a combination the cluster cannot run.
    """
    return k8s.ApiClient().sanitize_for_serialization(tfjob_model(run, cloud))


def to_yaml(job: dict[str, Any]) -> str:
    """The manifest as YAML, in the order Kubernetes manifests are read."""
    import yaml

    return yaml.safe_dump(job, sort_keys=False, width=100)


def _pod_template(
    run: RunConfig,
    cloud: CloudConfig,
    pool: cloudlib.Pool,
    args: list[str],
    resources: k8s.V1ResourceRequirements,
) -> k8s.V1PodTemplateSpec:
    env = cloudlib.trainer_env(run, cloud, pool)
    container = k8s.V1Container(
        name=CONTAINER,
        image=cloud.image,
        command=list(cloudlib.TRAINER_COMMAND),
        args=args,
        env=[k8s.V1EnvVar(name=k, value=v) for k, v in env.items()],
        resources=resources,
    )
    node_selector: dict[str, str] = {}
    tolerations: list[k8s.V1Toleration] = []
    if pool.gpus:
        node_selector[ACCELERATOR_LABEL] = cloud.accelerator.gke_accelerator
        tolerations.append(
            k8s.V1Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")
        )
    if cloud.spot:
        node_selector[SPOT_LABEL] = "true"
        tolerations.append(
            k8s.V1Toleration(key=SPOT_LABEL, operator="Equal", value="true", effect="NoSchedule")
        )
    return k8s.V1PodTemplateSpec(
        metadata=k8s.V1ObjectMeta(labels=_labels(run, cloud)),
        spec=k8s.V1PodSpec(
            containers=[container],
            node_selector=node_selector or None,
            tolerations=tolerations or None,
            service_account_name=cloud.kube_service_account,
            # From SIGTERM to the kill: the trainer saves its checkpoint (core.preemption).
            termination_grace_period_seconds=preemption.TERMINATION_GRACE_S,
        ),
    )


def pod_resources(
    pool: cloudlib.Pool, memory_gb: float | None = None
) -> k8s.V1ResourceRequirements:
    """CPU and memory requests of one replica's pod (and its GPUs), from its role's machine.

    Without requests a pod is BestEffort, the first evicted under memory pressure.
    GPU pods ask `CPUS_PER_GPU` and `MEMORY_GIB_PER_GPU` per GPU; CPU pods (parameter
    servers, a parameter-server coordinator, CPU training machines) `CPU_MACHINE_SHARE`
    of their machine type's vCPUs, and as much of its memory unless `memory_gb` says
    what the pod needs (a parameter server: `parameter_server_memory_gb`).
    """
    if pool.gpus:
        return k8s.V1ResourceRequirements(
            requests={
                "cpu": str(CPUS_PER_GPU * pool.gpus),
                "memory": f"{MEMORY_GIB_PER_GPU * pool.gpus}Gi",
            },
            limits={GPU_RESOURCE: str(pool.gpus)},
        )
    cpus, machine_memory_gb = _machine(pool.machine_type)
    millicpus = max(500, int(cpus * CPU_MACHINE_SHARE * 1000))
    if memory_gb is None:
        memory_gb = max(1.0, machine_memory_gb * CPU_MACHINE_SHARE)
    return k8s.V1ResourceRequirements(
        requests={"cpu": f"{millicpus}m", "memory": f"{math.ceil(memory_gb * 1e9 / 2**20)}Mi"}
    )


def parameter_server_memory_gb(profile: ModelProfile, servers: int, machine_type: str) -> float:
    """Memory one of `servers` parameter servers asks for, GB: its share of the model's
    variables and their Adam state (at least the largest variable's, which one server
    holds whole), with `select`'s headroom, on top of `PS_BASE_MEMORY_GB`.

    Raises:
        ConfigError: when that is more than a pod gets on `machine_type`, naming
            `--ps-machine-type` and a shape that holds it.
    """
    largest = profile.largest_variable_bytes * (1 + OPTIMIZER_STATE_FACTOR)
    share = max(server_state_bytes(profile) / servers, largest)
    need_gb = PS_BASE_MEMORY_GB + servers_memory_gb(share)
    capacity_gb = _machine(machine_type)[1] * CPU_MACHINE_SHARE
    if need_gb > capacity_gb:
        try:
            bigger = holding(cpu_machine(machine_type), need_gb / CPU_MACHINE_SHARE)
            fits = bigger.memory_gb * CPU_MACHINE_SHARE >= need_gb
        except ConfigError:
            fits = False
        advice = f"--ps-machine-type {bigger.name}" if fits else "a larger --ps-machine-type"
        if PS_BASE_MEMORY_GB + servers_memory_gb(largest) <= capacity_gb:
            advice += " or more --ps"  # the largest variable alone fits one server
        raise ConfigError(
            f"--ps-machine-type {machine_type}: each of {servers} parameter servers of "
            f"{profile.name} needs {need_gb:.1f} GB (its share of the variables and their Adam "
            f"state), more than the {capacity_gb:.1f} GB a pod gets on it: pass {advice}"
        )
    return need_gb


def _model_profile(run: RunConfig, cloud: CloudConfig) -> ModelProfile | None:
    """The model's profile for sizing parameter servers: a built-in's bundled profile
    (its default input and 10 classes), a model module built for its shards when this
    machine can read them; None when it cannot (a module's servers ask for their
    machine's share instead)."""
    shards = cloud_checks.readable_shards(shards_uri(run, cloud))
    if run.model.module and shards is None:
        return None
    if not run.model.module:
        return model_profile.profile_for(run.model)
    return model_profile.profile_for(
        run.model, shards, validation_fraction=run.training.validation_fraction
    )


def _machine(machine_type: str) -> tuple[int, float]:
    """vCPUs and memory (GB) of a CPU machine type; outside N1/N2 (`--machine-type`),
    the smallest of them."""
    try:
        machine = cpu_machine(machine_type)
    except ConfigError:
        return 1, 3.75
    return machine.vcpus, machine.memory_gb


def _labels(run: RunConfig, cloud: CloudConfig) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "strategist",
        "strategist/strategy": run.cluster.strategy.replace("_", "-"),
        "strategist/gpu": cloud.gpu or "cpu",
    }
