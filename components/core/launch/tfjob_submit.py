"""Submitting a TFJob and following it until it ends, from the command line or a train step.

Creates the TFJob (or re-attaches to the one the step's `gcp_resources` records, or
attaches to a named one), prints each state as it happens (a watch between reads),
deletes the job on Ctrl-C, SIGTERM or an API error that ends the wait, and on failure
prints the chief's last log lines. Every call goes through `remote.call_with_retries`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from kubeflow.training import models as kf

from components.core.config import ConfigError
from components.core.launch import remote
from components.core.launch.cloud import CloudConfig, JobFailed
from components.core.launch.tfjob_client import KIND, TAIL_LINES, from_dict, make_client
from components.core.signals import sigterm_raises

GROUP_VERSION = "kubeflow.org/v1"


def resource_uri(client: Any, namespace: str, name: str) -> str:
    """The TFJob's REST URI on the cluster's API server, for `gcp_resources`."""
    configuration = getattr(
        getattr(getattr(client, "custom_api", None), "api_client", None), "configuration", None
    )
    host = (
        getattr(client, "host", None)
        or getattr(configuration, "host", None)
        or "https://kubernetes.default.svc"
    )
    return f"{host.rstrip('/')}/apis/{GROUP_VERSION}/namespaces/{namespace}/tfjobs/{name}"


_RESOURCE_PATH = re.compile(r"/apis/kubeflow\.org/v1/namespaces/([^/]+)/tfjobs/([^/]+)$")
# Kubernetes gives a pod 30 s between SIGTERM and SIGKILL by default
# (terminationGracePeriodSeconds): deleting the job on SIGTERM must end within it.
CANCEL_BUDGET_S = 20.0  # no retry of the deletion starts later; each call takes at most 5 s
CANCEL_BACKOFF = remote.Backoff(initial_s=1.0, multiplier=2.0, maximum_s=4.0, deadline_s=60.0)
# A line when one call has had no reply this long (its own timeout ends it).
SLOW_CALL_NOTICE_S = 10.0


def submit_and_wait(
    job: dict[str, Any] | kf.KubeflowOrgV1TFJob,
    cloud: CloudConfig,
    client: Any = None,
    poll_seconds: float = 15.0,
    log: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
    gcp_resources: str | None = None,
    backoff: remote.Backoff = remote.DEFAULT_BACKOFF,
    attach: str | None = None,
) -> str:
    """Creates the TFJob (or re-attaches to it), prints each status change, waits.

    With `gcp_resources`, the created TFJob is recorded there (as GCPC records
    a CustomJob); when the file already names a TFJob that is still running (or
    succeeded), that one is followed instead of creating another; one that failed
    is replaced, after being deleted when the new one takes its name. With
    `attach`, the running TFJob of that name is followed and nothing is created.
    Transient API errors (429, 5xx, dropped connections, timeouts) are retried with
    `backoff`. Ctrl-C or SIGTERM (a cancelled pipeline run) deletes the job, and
    with it its pods, within `CANCEL_BUDGET_S`, before re-raising; so does an API
    error that ends the wait, or the error says how to delete it.

    Args:
        job: from `build_tfjob` (or `tfjob_model`); ignored with `attach`.
        cloud: gives namespace and credentials.
        client: a `TFJobClient` (or kubeflow's `TrainingClient`, or a fake with
            `create_job`, `get_job`, `get_job_logs`, `delete_job`); default: one
            from the kube-config. With `watch_job`, changes are watched between
            reads; without, read every `poll_seconds`.
        poll_seconds: longest time between two reads of the job.
        log: where progress lines go.
        sleep: how to wait between polls and retries (tests pass a no-op).
        gcp_resources: the step's `gcp_resources` output file, or None.
        backoff: waits between retries of a call that failed transiently.
        attach: name of a TFJob in `cloud.namespace` to follow.

    Returns:
        `Succeeded`.

    Raises:
        JobFailed: the job failed; carries the chief's last log lines.
        RemoteCallFailed: an API call failed for good.
        ConfigError: `attach` names no TFJob, or the job's name is taken.
        KeyboardInterrupt: on Ctrl-C or SIGTERM, after deleting the job.
    """
    client = client or make_client(cloud)

    def retrying(call, what):
        return remote.call_with_retries(
            call,
            f"kubeflow: {what}",
            backoff=backoff,
            sleep=sleep,
            log=log,
            notice_after_s=SLOW_CALL_NOTICE_S,
        )

    def get(namespace, name):
        return retrying(
            lambda: client.get_job(name=name, namespace=namespace, job_kind=KIND), "get TFJob"
        )

    def delete(namespace, name, what="delete TFJob"):
        """Deletes the job within the cancel budget; whether it went through."""

        return remote.cancel(
            lambda: client.delete_job(name=name, namespace=namespace, job_kind=KIND),
            lambda call, _: remote.call_with_retries(
                call,
                f"kubeflow: {what}",
                backoff=CANCEL_BACKOFF,
                sleep=sleep,
                log=log,
                budget_s=CANCEL_BUDGET_S,
            ),
            log,
        )

    created = False
    namespace, name = cloud.namespace, attach
    with sigterm_raises():
        try:
            if attach:
                _attach(namespace, attach, get, log)
            else:
                model = from_dict(job) if isinstance(job, dict) else job
                namespace = model.metadata.namespace or cloud.namespace
                name = model.metadata.name
                found = _reattach(gcp_resources, name, get, delete, log)
                if found:
                    namespace, name = found
                else:
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
            return _follow(client, namespace, name, get, poll_seconds, sleep, log)
        except KeyboardInterrupt:
            if created:
                log(f"kubeflow: interrupted, deleting TFJob {namespace}/{name}")
                delete(namespace, name)
            raise
        except remote.RemoteCallFailed as err:
            if not created:
                raise
            log(f"kubeflow: {err}; giving up on TFJob {namespace}/{name}, deleting it")
            if delete(namespace, name):
                raise remote.RemoteCallFailed(f"{err} (TFJob {namespace}/{name} deleted)") from err
            raise remote.RemoteCallFailed(
                f"{err}; TFJob {namespace}/{name} may still be running: delete it with "
                f"`kubectl -n {namespace} delete tfjob {name}`"
            ) from err


def _follow(client, namespace, name, get, poll_seconds, sleep, log) -> str:
    """Prints each state of the job until it ends; `Succeeded`, or JobFailed."""
    last = None
    for current in _snapshots(client, namespace, name, get, poll_seconds, sleep):
        state, reason, message, replicas = _status(current)
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
    raise AssertionError("unreachable: _snapshots never ends")  # pragma: no cover


def _snapshots(client, namespace, name, get, poll_seconds, sleep):
    """The job as read, then as each change arrives: by a watch when the client has
    one (every state printed when it happens), else by reading every `poll_seconds`."""
    watch = getattr(client, "watch_job", None)
    while True:
        current = get(namespace, name)
        yield current
        if watch is None:
            sleep(poll_seconds)
            continue
        version = getattr(getattr(current, "metadata", None), "resource_version", None)
        try:
            for changed in watch(name, namespace, version, poll_seconds):
                if changed is None:
                    break  # deleted: the next read says so
                yield changed
        except Exception as err:  # the next read retries, with a line, or fails for good
            if not remote.is_transient(err):
                raise remote.RemoteCallFailed(
                    f"kubeflow: watch TFJob failed (error): {remote.describe(err)}"
                ) from err
            sleep(1.0)


def _attach(namespace: str, name: str, get, log) -> None:
    """Checks that the TFJob to follow exists.

    Raises:
        ConfigError: there is none of that name.
    """
    try:
        get(namespace, name)
    except remote.RemoteCallFailed as err:
        if remote.api_status(err) != 404:
            raise
        raise ConfigError(
            f"no TFJob {namespace}/{name} to attach to: check --namespace and the name "
            f"(kubectl -n {namespace} get tfjobs)"
        ) from None
    log(f"kubeflow: attached to TFJob {namespace}/{name}")


def _reattach(gcp_resources: str | None, new_name: str, get, delete, log) -> tuple[str, str] | None:
    """(namespace, name) of the TFJob an earlier run of the step recorded, when it
    is still worth following (running, or succeeded). A recorded job that failed
    under the name the new one takes is deleted first."""
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
        if name != new_name:
            log(f"kubeflow: the recorded TFJob {namespace}/{name} failed; creating a new one")
            return None
        log(f"kubeflow: the recorded TFJob {namespace}/{name} failed; deleting it to replace it")
        if not delete(namespace, name):
            raise remote.RemoteCallFailed(
                f"kubeflow: the failed TFJob {namespace}/{name} could not be deleted: delete it "
                f"with `kubectl -n {namespace} delete tfjob {name}` and run the step again"
            )
        _wait_until_gone(namespace, name, get)
        return None
    log(f"kubeflow: re-attached to TFJob {namespace}/{name}, recorded in {gcp_resources}")
    return namespace, name


def _wait_until_gone(namespace: str, name: str, get, timeout_s: float = 60.0) -> None:
    """Waits until a deleted TFJob can no longer be read (its name is free again)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            get(namespace, name)
        except remote.RemoteCallFailed as err:
            if remote.api_status(err) == 404:
                return
            raise
        time.sleep(0.5)
    raise remote.RemoteCallFailed(
        f"kubeflow: TFJob {namespace}/{name} still exists {timeout_s:g}s after its deletion"
    )


def _create(client: Any, model: kf.KubeflowOrgV1TFJob, namespace: str, retrying, log) -> None:
    """Creates the TFJob; a conflict after a transient error is the job an earlier
    attempt created (its reply lost), since the name identifies it.

    Raises:
        ConfigError: the name is taken by another job (a conflict on the first attempt).
        RemoteCallFailed: another permanent error.
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
                    f"TFJob {namespace}/{name} already exists: pass another --job-name, follow "
                    f"it with --attach {name}, or delete it (kubectl -n {namespace} delete "
                    f"tfjob {name})"
                ) from None
            raise

    retrying(create, "create TFJob")
    log(f"kubeflow: created TFJob {namespace}/{name}")


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
        lines += [f"  [{pod}] {line}" for line in text.splitlines()[-TAIL_LINES:]]
    return "\n".join(lines)
