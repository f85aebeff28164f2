"""Kubeflow backend: a run as a `kubeflow.org/v1` TFJob on GKE GPU node pools.

Replica types follow the same layout as Vertex AI's pools: `Chief` (one), `Worker`,
`PS`, `Evaluator`. The training operator sets `TF_CONFIG` in every pod, so every pod
runs the same trainer command. GPU pods ask for `nvidia.com/gpu`, select the node
pool by `cloud.google.com/gke-accelerator` and tolerate GKE's `nvidia.com/gpu`
taint; CPU pods (parameter servers, the parameter-server coordinator) do neither.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

from kubeflow.training import models as kf
from kubernetes import client as k8s

from components.core import preemption
from components.core.config import ConfigError, RunConfig
from components.core.launch import cloud as cloudlib
from components.core.launch import cloud_checks, remote
from components.core.launch.cloud import CloudConfig, JobFailed
from components.core.signals import sigterm_raises

GROUP_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
CONTAINER = "tensorflow"  # the container name the training operator looks for
GPU_RESOURCE = "nvidia.com/gpu"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
SPOT_LABEL = "cloud.google.com/gke-spot"
_REPLICA_TYPES = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}
_TAIL_LINES = 40


def tfjob_model(run: RunConfig, cloud: CloudConfig) -> kf.KubeflowOrgV1TFJob:
    """The TFJob that runs `run`, as the kubeflow-training SDK's model (validated).

    Raises:
        ConfigError: for a combination the cluster cannot run.
    """
    if cloud.target != "kubeflow":
        raise ConfigError(f"build_tfjob needs --target kubeflow, got {cloud.target!r}")
    cloud_checks.validate_cloud(run, cloud)
    args = cloudlib.trainer_args(run, cloud)
    replica_specs = {
        _REPLICA_TYPES[pool.role]: kf.KubeflowOrgV1ReplicaSpec(
            replicas=pool.replicas,
            restart_policy=cloud.restart_policy,
            template=_pod_template(run, cloud, pool, args),
        )
        for pool in cloudlib.layout(run, cloud)
    }
    return kf.KubeflowOrgV1TFJob(
        api_version=GROUP_VERSION,
        kind=KIND,
        metadata=k8s.V1ObjectMeta(
            name=cloudlib.job_name(run, cloud),
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


def from_dict(job: dict[str, Any]) -> kf.KubeflowOrgV1TFJob:
    """A TFJob manifest back as the SDK model (what `TrainingClient.create_job` takes)."""
    from kubeflow.training import ApiClient

    class _Response:
        data = json.dumps(job)

    return ApiClient().deserialize(_Response(), "KubeflowOrgV1TFJob")


def load_credentials(cloud: CloudConfig) -> k8s.Configuration:
    """Kubernetes credentials: in-cluster when running in a pod, else the kube-config.

    Raises:
        ConfigError: no usable kube-config, saying how to get one.
    """
    from kubernetes import config as kube_config

    configuration = k8s.Configuration()
    try:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not cloud.kubeconfig:
            kube_config.load_incluster_config(client_configuration=configuration)
        else:
            kube_config.load_kube_config(
                config_file=cloud.kubeconfig,
                context=cloud.kube_context,
                client_configuration=configuration,
            )
    except (kube_config.ConfigException, OSError) as err:
        raise ConfigError(
            f"no Kubernetes credentials ({err}): run `gcloud container clusters get-credentials "
            "CLUSTER --region REGION`, or pass --kubeconfig FILE / set KUBECONFIG"
        ) from None
    return configuration


def make_client(cloud: CloudConfig, configuration: k8s.Configuration | None = None) -> Any:
    """A `TrainingClient` for TFJobs in the run's namespace."""
    from kubeflow.training import TrainingClient

    return TrainingClient(
        client_configuration=configuration or load_credentials(cloud),
        namespace=cloud.namespace,
        job_kind=KIND,
    )


def resource_uri(client: Any, namespace: str, name: str) -> str:
    """The TFJob's REST URI on the cluster's API server, for `gcp_resources`."""
    configuration = getattr(
        getattr(getattr(client, "custom_api", None), "api_client", None), "configuration", None
    )
    host = getattr(configuration, "host", None) or "https://kubernetes.default.svc"
    return f"{host.rstrip('/')}/apis/{GROUP_VERSION}/namespaces/{namespace}/tfjobs/{name}"


_RESOURCE_PATH = re.compile(r"/apis/kubeflow\.org/v1/namespaces/([^/]+)/tfjobs/([^/]+)$")


def submit_and_wait(
    job: dict[str, Any] | kf.KubeflowOrgV1TFJob,
    cloud: CloudConfig,
    client: Any = None,
    poll_seconds: float = 15.0,
    log: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
    gcp_resources: str | None = None,
    backoff: remote.Backoff = remote.DEFAULT_BACKOFF,
) -> str:
    """Creates the TFJob (or re-attaches to it), prints its status changes, waits.

    With `gcp_resources`, the created TFJob is recorded there (as GCPC records
    a CustomJob); when the file already names a TFJob that is still running (or
    succeeded), that one is followed instead of creating another. Transient API
    errors (429, 5xx, dropped connections) are retried with `backoff`. Ctrl-C or
    SIGTERM (a cancelled pipeline run) deletes the job, and with it its pods,
    before re-raising.

    Args:
        job: from `build_tfjob` (or `tfjob_model`).
        cloud: gives namespace and credentials.
        client: a `TrainingClient` (or a fake with `create_job`, `get_job`,
            `get_job_logs`, `delete_job`); default: one from the kube-config.
        poll_seconds: seconds between status polls.
        log: where progress lines go.
        sleep: how to wait between polls and retries (tests pass a no-op).
        gcp_resources: the step's `gcp_resources` output file, or None.
        backoff: waits between retries of a call that failed transiently.

    Returns:
        `Succeeded`.

    Raises:
        JobFailed: the job failed; carries the chief's last log lines.
        RemoteCallFailed: an API call failed for good.
        KeyboardInterrupt: on Ctrl-C or SIGTERM, after deleting the job.
    """
    model = from_dict(job) if isinstance(job, dict) else job
    client = client or make_client(cloud)

    def retrying(call, what):
        return remote.call_with_retries(
            call, f"kubeflow: {what}", backoff=backoff, sleep=sleep, log=log
        )

    def get(namespace, name):
        return retrying(
            lambda: client.get_job(name=name, namespace=namespace, job_kind=KIND), "get TFJob"
        )

    created = False
    with sigterm_raises():
        try:
            found = _reattach(gcp_resources, get, log)
            if found:
                namespace, name = found
            else:
                namespace, name = model.metadata.namespace or cloud.namespace, model.metadata.name
                _create(client, model, namespace, retrying, log)
                remote.write_gcp_resources(
                    gcp_resources, remote.JobRecord(KIND, resource_uri(client, namespace, name))
                )
            created = True
            log(
                f"kubeflow: kubectl -n {namespace} get tfjob {name}; logs: kubectl -n {namespace} "
                f"logs -l training.kubeflow.org/job-name={name},"
                "training.kubeflow.org/replica-type=chief -f"
            )
            last = None
            while True:
                state, reason, message, replicas = _status(get(namespace, name))
                line = f"{state}" + (f" ({reason})" if reason else "") + replicas
                if line != last:
                    log(f"kubeflow: {line}")
                    last = line
                if state == "Succeeded":
                    return state
                if state == "Failed":
                    tail = _chief_log_tail(client, name, namespace)
                    detail = message or reason or ""
                    if tail:
                        detail = f"{detail}\nchief's last log lines:\n{tail}".strip()
                    raise JobFailed(f"{namespace}/{name}", state, detail)
                sleep(poll_seconds)
        except KeyboardInterrupt:
            if created:
                log(f"kubeflow: interrupted, deleting TFJob {namespace}/{name}")
                remote.cancel(
                    lambda: client.delete_job(name=name, namespace=namespace, job_kind=KIND),
                    retrying,
                    log,
                )
            raise


def _reattach(gcp_resources: str | None, get, log) -> tuple[str, str] | None:
    """(namespace, name) of the TFJob an earlier run of the step recorded, when it
    is still worth following (running, or succeeded)."""
    record = remote.read_gcp_resources(gcp_resources, KIND)
    if record is None:
        return None
    match = _RESOURCE_PATH.search(record.resource_uri)
    if not match:
        raise ConfigError(
            f"gcp_resources {gcp_resources} names {record.resource_uri}, not a TFJob: "
            "delete it to launch a new job"
        )
    namespace, name = match.groups()
    try:
        state = _status(get(namespace, name))[0]
    except remote.RemoteCallFailed as err:
        if remote.api_status(err) != 404:
            raise
        log(f"kubeflow: the recorded TFJob {namespace}/{name} no longer exists; creating a new one")
        return None
    if state == "Failed":
        log(f"kubeflow: the recorded TFJob {namespace}/{name} failed; creating a new one")
        return None
    log(f"kubeflow: re-attached to TFJob {namespace}/{name}, recorded in {gcp_resources}")
    return namespace, name


def _create(client: Any, model: kf.KubeflowOrgV1TFJob, namespace: str, retrying, log) -> None:
    """Creates the TFJob; a conflict after a transient error is the job an earlier
    attempt created (its reply lost), since the name identifies it.

    Raises:
        RemoteCallFailed: the name is taken by another job (a conflict on the
            first attempt), or another permanent error.
    """
    name = model.metadata.name
    attempts = 0

    def create() -> None:
        nonlocal attempts
        attempts += 1
        try:
            client.create_job(job=model, namespace=namespace)
        except Exception as err:
            if attempts > 1 and remote.api_status(err) == 409:
                log(f"kubeflow: TFJob {namespace}/{name} exists: created by an earlier attempt")
                return
            if remote.api_status(err) == 409:
                raise ConfigError(
                    f"TFJob {namespace}/{name} already exists: pass another --job-name, or "
                    f"delete it (kubectl -n {namespace} delete tfjob {name})"
                ) from None
            raise

    retrying(create, "create TFJob")
    log(f"kubeflow: created TFJob {namespace}/{name}")


def _pod_template(
    run: RunConfig, cloud: CloudConfig, pool: cloudlib.Pool, args: list[str]
) -> k8s.V1PodTemplateSpec:
    container = k8s.V1Container(
        name=CONTAINER,
        image=cloud.image,
        command=list(cloudlib.TRAINER_COMMAND),
        args=args,
        env=[k8s.V1EnvVar(name=k, value=v) for k, v in cloudlib.trainer_env(run, cloud).items()],
    )
    node_selector: dict[str, str] = {}
    tolerations: list[k8s.V1Toleration] = []
    if pool.gpus:
        container.resources = k8s.V1ResourceRequirements(limits={GPU_RESOURCE: str(pool.gpus)})
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


def _labels(run: RunConfig, cloud: CloudConfig) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "strategist",
        "strategist/strategy": run.cluster.strategy.replace("_", "-"),
        "strategist/gpu": cloud.gpu or "cpu",
    }


def _status(job: Any) -> tuple[str, str, str, str]:
    """(state, reason, message, replica summary) of a TFJob model."""
    status = getattr(job, "status", None)
    conditions = [c for c in (getattr(status, "conditions", None) or []) if c.status == "True"]
    if not conditions:
        return "Submitted", "", "", ""
    latest = conditions[-1]
    counts = []
    for replica_type, replica in sorted((getattr(status, "replica_statuses", None) or {}).items()):
        parts = [
            f"{value} {label}"
            for label, value in (
                ("active", replica.active),
                ("succeeded", replica.succeeded),
                ("failed", replica.failed),
            )
            if value
        ]
        if parts:
            counts.append(f"{replica_type}: {', '.join(parts)}")
    replicas = f" [{'; '.join(counts)}]" if counts else ""
    return latest.type, latest.reason or "", latest.message or "", replicas


def _chief_log_tail(client: Any, name: str, namespace: str) -> str:
    try:
        logs, _ = client.get_job_logs(name=name, namespace=namespace, job_kind=KIND, is_master=True)
    except Exception as err:  # logs are a courtesy: the failure itself is reported
        return f"(chief logs unavailable: {err})"
    lines = []
    for pod, text in sorted(logs.items()):
        lines += [f"  [{pod}] {line}" for line in text.splitlines()[-_TAIL_LINES:]]
    return "\n".join(lines)
