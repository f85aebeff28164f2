"""A cloud job's replicas as the platform would start them, read from the exact request."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from components.core.config import ConfigError

# Vertex AI's replica address, `cmle-training-workerpool<P>-<ID>-<I>:2222` in its
# CLUSTER_SPEC example (https://cloud.google.com/vertex-ai/docs/training/distributed-training).
VERTEX_PORT = 2222
# TF_CONFIG task types of Vertex AI's worker pools 0..3 (same page): primary, workers,
# parameter servers, evaluators.
VERTEX_POOL_TYPES = ("chief", "worker", "ps", "evaluator")
# Training operator v1.9: the container it sets TF_CONFIG in, and its port
# (pkg/apis/kubeflow.org/v1: TFJobDefaultContainerName, TFJobDefaultPortName, TFJobDefaultPort).
TFJOB_CONTAINER = "tensorflow"
TFJOB_PORT_NAME = "tfjob-port"
TFJOB_DEFAULT_PORT = 2222


@dataclass(frozen=True)
class Replica:
    """One replica of a cloud job, as the platform would start it.

    Attributes:
        pool: its worker pool (`workerpool1`) or TFJob replica type (`Worker`).
        task_type: its TensorFlow task type (`chief`, `worker`, `ps`, `evaluator`).
        index: its index in the pool.
        command: the container's command.
        args: the container's args.
        env: the container's env from the request, then what the platform sets.
    """

    pool: str
    task_type: str
    index: int
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str]

    @property
    def name(self) -> str:
        return f"{self.task_type}-{self.index}"


# -- Vertex AI ------------------------------------------------------------------------


def vertex_replicas(job: Any, job_id: str = "rehearsal") -> list[Replica]:
    """Every replica of a CustomJob, with the environment Vertex AI gives it.

    Source: https://cloud.google.com/vertex-ai/docs/training/distributed-training
    ("Environment variables for your cluster"):
    - `CLUSTER_SPEC` on every replica: `cluster` maps `workerpool0..3` (the pools the
      job uses) to replica addresses, `environment` is `cloud`, `task` is
      `{type: workerpoolN, index, trial}` (`trial` names a hyperparameter-tuning trial;
      a plain job's is empty), `job` is the CustomJobSpec as a dictionary;
    - `TF_CONFIG` only when the job has more than one replica ("not set for
      single-replica training jobs"): `cluster` maps `chief`, `worker`, `ps` (pools
      0-2) and "never contains evaluator", `task` is `{type, index}` (`trial` only in
      hyperparameter tuning), plus the same `job` and `environment: cloud`.
    And, with `baseOutputDirectory` set (the CustomJobSpec reference,
    https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec):
    `AIP_MODEL_DIR`, `AIP_CHECKPOINT_DIR`, `AIP_TENSORBOARD_LOG_DIR` =
    `<base>/model/`, `<base>/checkpoints/`, `<base>/logs/`.

    Args:
        job: an `aiplatform_v1.CustomJob` (`vertex.build_custom_job`).
        job_id: stands for the job's ID in the replica hostnames.

    Raises:
        ConfigError: a pool whose container has no command to rehearse
            (Reduction Server runs Google's image).
    """
    from google.cloud import aiplatform_v1

    spec = job.job_spec
    pools = list(spec.worker_pool_specs)
    hosts = {
        f"workerpool{p}": [
            f"cmle-training-workerpool{p}-{job_id}-{i}:{VERTEX_PORT}"
            for i in range(pool.replica_count)
        ]
        for p, pool in enumerate(pools)
        if pool.replica_count
    }
    tf_cluster = {
        VERTEX_POOL_TYPES[p]: hosts[f"workerpool{p}"] for p in range(3) if f"workerpool{p}" in hosts
    }
    job_dict = json.loads(
        aiplatform_v1.CustomJobSpec.to_json(
            spec,
            preserving_proto_field_name=True,
            use_integers_for_enums=False,
            always_print_fields_with_no_presence=False,
        )
    )
    distributed = sum(pool.replica_count for pool in pools) > 1
    base = spec.base_output_directory.output_uri_prefix.rstrip("/")
    aip = (
        {
            "AIP_MODEL_DIR": f"{base}/model/",
            "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
            "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
        }
        if base
        else {}
    )
    replicas = []
    for p, pool in enumerate(pools):
        container = pool.container_spec
        if pool.replica_count and not container.command:
            raise ConfigError(
                f"worker pool {p} runs {container.image_uri}, which cannot run on this "
                "machine: drop --reduction-server to rehearse the job"
            )
        request_env = {e.name: e.value for e in container.env}
        for i in range(pool.replica_count):
            env = {
                **request_env,
                **aip,
                "CLUSTER_SPEC": json.dumps(
                    {
                        "cluster": hosts,
                        "environment": "cloud",
                        "task": {"type": f"workerpool{p}", "index": i, "trial": ""},
                        "job": job_dict,
                    }
                ),
            }
            if distributed:
                env["TF_CONFIG"] = json.dumps(
                    {
                        "cluster": tf_cluster,
                        "environment": "cloud",
                        "task": {"type": VERTEX_POOL_TYPES[p], "index": i},
                        "job": job_dict,
                    }
                )
            replicas.append(
                Replica(
                    f"workerpool{p}",
                    VERTEX_POOL_TYPES[p],
                    i,
                    tuple(container.command),
                    tuple(container.args),
                    env,
                )
            )
    return replicas


# -- Kubeflow training operator -------------------------------------------------------


def tfjob_replicas(manifest: dict[str, Any]) -> list[Replica]:
    """Every replica (pod) of a TFJob, with the `TF_CONFIG` training operator v1.9 sets.

    Source: kubeflow/training-operator v1.9.0, pkg/controller.v1/tensorflow:
    `SetClusterSpec` sets `TF_CONFIG` in the `tensorflow` container unless the job
    has a single replica (`isDistributed`); `genTFConfigJSONStr` writes
    `{"cluster": ..., "task": {"type", "index"}, "environment": "cloud"}` with Go's
    `json.Marshal` (no spaces, map keys sorted); `genClusterSpec` lists every
    replica type, the evaluator included, lowercased, as
    `<job>-<type>-<i>.<namespace>.svc:<port>` (`GenGeneralName`; the port of the
    container port named `tfjob-port`, else 2222).

    Args:
        manifest: the TFJob as `kubeflow.build_tfjob` returns it.
    """
    name = manifest["metadata"]["name"]
    namespace = manifest["metadata"].get("namespace") or "default"
    specs = manifest["spec"]["tfReplicaSpecs"]
    containers = {rtype: _tf_container(spec) for rtype, spec in specs.items()}
    cluster: dict[str, list[str]] = {}
    for rtype, spec in specs.items():
        kind = rtype.lower()
        port = next(
            (
                p["containerPort"]
                for p in containers[rtype].get("ports") or []
                if p.get("name") == TFJOB_PORT_NAME
            ),
            TFJOB_DEFAULT_PORT,
        )
        cluster[kind] = [
            f"{name}-{kind}-{i}.{namespace}.svc:{port}" for i in range(_replica_count(spec))
        ]
    distributed = sum(_replica_count(spec) for spec in specs.values()) != 1
    replicas = []
    for rtype, spec in specs.items():
        container = containers[rtype]
        request_env = {e["name"]: e.get("value", "") for e in container.get("env") or []}
        for i in range(_replica_count(spec)):
            env = dict(request_env)
            if distributed:
                env["TF_CONFIG"] = json.dumps(
                    {
                        "cluster": dict(sorted(cluster.items())),
                        "task": {"type": rtype.lower(), "index": i},
                        "environment": "cloud",
                    },
                    separators=(",", ":"),
                )
            replicas.append(
                Replica(
                    rtype,
                    rtype.lower(),
                    i,
                    tuple(container.get("command") or ()),
                    tuple(container.get("args") or ()),
                    env,
                )
            )
    return replicas


def _tf_container(replica_spec: dict[str, Any]) -> dict[str, Any]:
    containers = replica_spec["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == TFJOB_CONTAINER)


def _replica_count(replica_spec: dict[str, Any]) -> int:
    # The operator's default for a replica spec without `replicas` is 1.
    return int(replica_spec.get("replicas", 1))


def replicas_of(job: Any, target: str) -> list[Replica]:
    """The replicas of a `build_cloud_job` result for `target`."""
    return vertex_replicas(job) if target == "vertex" else tfjob_replicas(job)
