"""TFJobs through the Kubernetes API: create, read, watch and delete one, and read its chief's log.

Every call has a client-side timeout (a frozen API server ends the call instead of hanging
the command), and urllib3's own retries are off, so `remote.call_with_retries` alone decides
what is retried, with a line for each retry. Errors are the Kubernetes client's own
(`ApiException` keeps the server's JSON `Status`, whose `message` `remote.describe` prints).
The methods match kubeflow's `TrainingClient` where they overlap, so either can be used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from kubernetes import client as k8s

from components.core.config import ConfigError
from components.core.launch.cloud import CloudConfig

GROUP, VERSION, PLURAL, KIND = "kubeflow.org", "v1", "tfjobs", "TFJob"
CONTAINER = "tensorflow"  # the container name the training operator looks for
# Labels the training operator v1.9 puts on a job's pods (kubeflow.training constants).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
CONNECT_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 30.0
# Deleting runs on SIGTERM, inside the pod's grace period: short calls, several tries.
DELETE_TIMEOUT_S = 5.0
TAIL_LINES = 40


def from_dict(job: dict[str, Any]) -> Any:
    """A TFJob manifest as the kubeflow-training SDK's model (`KubeflowOrgV1TFJob`)."""
    import json

    from kubeflow.training import ApiClient

    class _Response:
        data = json.dumps(job)

    return ApiClient().deserialize(_Response(), "KubeflowOrgV1TFJob")


class TFJobClient:
    """One cluster's TFJob API, with a timeout on every call.

    Args:
        configuration: credentials and address (`load_credentials`).
        call_timeout_s: longest wait for one reply.
    """

    def __init__(self, configuration: k8s.Configuration, call_timeout_s: float = CALL_TIMEOUT_S):
        configuration.retries = False  # retried by remote.call_with_retries, with a line each
        api = k8s.ApiClient(configuration)
        self.host = configuration.host
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)
        self.call_timeout_s = call_timeout_s

    def _timeout(self, seconds: float | None = None) -> tuple[float, float]:
        return (
            min(CONNECT_TIMEOUT_S, seconds or self.call_timeout_s),
            seconds or self.call_timeout_s,
        )

    def create_job(self, job: Any, namespace: str) -> None:
        body = job if isinstance(job, dict) else k8s.ApiClient().sanitize_for_serialization(job)
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body, _request_timeout=self._timeout()
        )

    def get_job(self, name: str, namespace: str, job_kind: str = KIND) -> Any:
        job = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self._timeout()
        )
        return from_dict(job)

    def watch_job(
        self, name: str, namespace: str, resource_version: str | None, timeout_s: float
    ) -> Iterator[Any]:
        """The job each time it changes after `resource_version`, for up to `timeout_s`;
        None once when it is deleted."""
        from kubernetes import watch

        stream = watch.Watch().stream(
            self.custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            field_selector=f"metadata.name={name}",
            resource_version=resource_version,
            timeout_seconds=max(1, int(timeout_s)),
            _request_timeout=self._timeout(timeout_s + self.call_timeout_s),
        )
        for event in stream:
            if event["type"] == "DELETED":
                yield None
                return
            if event["type"] == "ERROR":  # e.g. 410 Gone: the caller reads the job again
                return
            yield from_dict(event["object"])

    def delete_job(self, name: str, namespace: str, job_kind: str = KIND) -> None:
        self.custom.delete_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            propagation_policy="Background",  # the operator's pods go with it
            _request_timeout=self._timeout(DELETE_TIMEOUT_S),
        )

    def get_job_logs(
        self, name: str, namespace: str, job_kind: str = KIND, is_master: bool = True
    ) -> tuple[dict[str, str], dict]:
        """The last `TAIL_LINES` lines of the chief's (`is_master`) or every pod's log."""
        selector = f"{JOB_NAME_LABEL}={name}" + (f",{JOB_ROLE_LABEL}=master" if is_master else "")
        pods = self.core.list_namespaced_pod(
            namespace, label_selector=selector, _request_timeout=self._timeout()
        )
        logs = {}
        for pod in pods.items:
            if pod.status and pod.status.phase == "Pending":
                continue
            logs[pod.metadata.name] = self.core.read_namespaced_pod_log(
                pod.metadata.name,
                namespace,
                container=CONTAINER,
                tail_lines=TAIL_LINES,
                _request_timeout=self._timeout(),
            )
        return logs, {}


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


def make_client(cloud: CloudConfig, configuration: k8s.Configuration | None = None) -> TFJobClient:
    """A `TFJobClient` (timeouts on every call) for the run's cluster."""
    return TFJobClient(configuration or load_credentials(cloud))
