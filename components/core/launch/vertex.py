"""Vertex AI backend: a run as an `aiplatform_v1.CustomJob`, submitted and watched.

Worker pools follow Vertex AI's positions: 0 chief (one replica), 1 workers,
2 parameter servers or Reduction Server, 3 evaluator. Vertex AI sets `TF_CONFIG`
in every replica from these pools, so every replica runs the same trainer
command and learns its role from it. Pools a layout does not use but that come
before a used one are sent empty, as Vertex AI expects.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable
from typing import Any

from google.api_core.exceptions import NotFound
from google.cloud import aiplatform_v1

from components.core import cloud_ids
from components.core.config import ConfigError, RunConfig
from components.core.launch import cloud as cloudlib
from components.core.launch import cloud_checks, remote, staging
from components.core.launch.cloud import CloudConfig, JobFailed
from components.core.signals import sigterm_raises

_POOL_INDEX = {"chief": 0, "worker": 1, "ps": 2, "reduction_server": 2, "evaluator": 3}
# The resource type GCPC's custom-job launcher records in `gcp_resources`.
RESOURCE_TYPE = "CustomJob"
# How far this machine's clock may run ahead of Vertex AI's when looking for a
# job an earlier create attempt made.
_CLOCK_SKEW = datetime.timedelta(minutes=5)
_SUCCEEDED = aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
_JOB_NAME = re.compile(r"projects/[^/]+/locations/([a-z0-9-]+)/customJobs/[0-9]+")
_TERMINAL = {
    aiplatform_v1.JobState.JOB_STATE_SUCCEEDED,
    aiplatform_v1.JobState.JOB_STATE_FAILED,
    aiplatform_v1.JobState.JOB_STATE_CANCELLED,
    aiplatform_v1.JobState.JOB_STATE_EXPIRED,
    aiplatform_v1.JobState.JOB_STATE_PARTIALLY_SUCCEEDED,
}


def build_custom_job(run: RunConfig, cloud: CloudConfig) -> aiplatform_v1.CustomJob:
    """The CustomJob that runs `run` on Vertex AI (validated; nothing is sent).

    Args:
        run: the run; its strategy and cluster shape choose the worker pools.
        cloud: machines, image, project and scheduling.

    Returns:
        An `aiplatform_v1.CustomJob` ready for `JobServiceClient.create_custom_job`.

    Raises:
        ConfigError: for a combination Vertex AI cannot run.
    """
    if cloud.target != "vertex":
        raise ConfigError(f"build_custom_job needs --target vertex, got {cloud.target!r}")
    cloud_checks.validate_cloud(run, cloud)
    args = cloudlib.trainer_args(run, cloud)
    env = [
        aiplatform_v1.EnvVar(name=k, value=v) for k, v in cloudlib.trainer_env(run, cloud).items()
    ]
    specs: list[aiplatform_v1.WorkerPoolSpec] = []
    for pool in cloudlib.layout(run, cloud):
        index = _POOL_INDEX[pool.role]
        while len(specs) < index:
            specs.append(aiplatform_v1.WorkerPoolSpec())  # an unused position
        machine = aiplatform_v1.MachineSpec(machine_type=pool.machine_type)
        if pool.gpus:
            machine.accelerator_type = cloud.accelerator.vertex_accelerator
            machine.accelerator_count = pool.gpus
        if pool.role == "reduction_server":
            container = aiplatform_v1.ContainerSpec(image_uri=cloudlib.REDUCTION_SERVER_IMAGE)
        else:
            container = aiplatform_v1.ContainerSpec(
                image_uri=cloud.image,
                command=list(cloudlib.TRAINER_COMMAND),
                args=args,
                env=env,
            )
        specs.append(
            aiplatform_v1.WorkerPoolSpec(
                replica_count=pool.replicas, machine_spec=machine, container_spec=container
            )
        )
    # A Spot VM taken back ends its replica; its trainer saved on the notice and exited
    # PREEMPTED_EXIT_CODE (components.core.preemption). A synchronous job resumes only if
    # every replica restarts with it, so --spot asks for that; parameter_server keeps
    # its lost workers' restarts to themselves (the coordinator retries their steps).
    # max_wait_duration is left unset: aiplatform 2.7's Scheduling applies it only to
    # the DWS_FLEX_START strategy, not to SPOT.
    restart_whole_job = cloud.restart_job_on_worker_restart or (
        cloud.spot and not run.cluster.spec.uses_ps
    )
    scheduling = aiplatform_v1.Scheduling(restart_job_on_worker_restart=restart_whole_job)
    if cloud.timeout_s:
        scheduling.timeout = datetime.timedelta(seconds=cloud.timeout_s)
    if cloud.spot:
        scheduling.strategy = aiplatform_v1.Scheduling.Strategy.SPOT
    spec = aiplatform_v1.CustomJobSpec(
        worker_pool_specs=specs,
        scheduling=scheduling,
        base_output_directory=aiplatform_v1.GcsDestination(
            output_uri_prefix=staging.output_uri(run, cloud)
        ),
    )
    if cloud.service_account:
        spec.service_account = cloud.service_account
    if cloud.network:
        spec.network = cloud.network
    if cloud.tensorboard:
        spec.tensorboard = cloud.tensorboard
    return aiplatform_v1.CustomJob(
        display_name=cloudlib.job_name(run, cloud),
        job_spec=spec,
        labels={
            "app": "strategist",
            "strategy": run.cluster.strategy,
            "gpu": (cloud.gpu or "cpu").replace(".", "-"),
        },
    )


def to_json(job: aiplatform_v1.CustomJob) -> str:
    """The job as the REST body Vertex AI receives (aiplatform_v1 JSON field names)."""
    return type(job).to_json(
        job,
        use_integers_for_enums=False,
        always_print_fields_with_no_presence=False,
        sort_keys=True,  # map fields (labels) would otherwise come in hash order
    )


def parent(cloud: CloudConfig) -> str:
    """`projects/P/locations/R`, where the job is created."""
    return f"projects/{cloud.project}/locations/{cloud.region}"


def console_url(job_name: str, cloud: CloudConfig) -> str:
    """The Cloud Console page of a created job (`projects/.../customJobs/ID`)."""
    job_id = job_name.rsplit("/", 1)[-1]
    return (
        f"https://console.cloud.google.com/vertex-ai/locations/{cloud.region}"
        f"/training/{job_id}?project={cloud.project}"
    )


def make_client(cloud: CloudConfig, credentials: Any = None) -> aiplatform_v1.JobServiceClient:
    """A JobServiceClient on the region's endpoint."""
    return aiplatform_v1.JobServiceClient(
        credentials=credentials,
        client_options={"api_endpoint": cloud_ids.vertex_endpoint(cloud.region)},
    )


def resource_uri(name: str, cloud: CloudConfig) -> str:
    """The REST URI of a job, as GCPC's launcher records it in `gcp_resources`."""
    return f"https://{cloud_ids.vertex_endpoint(cloud.region)}/v1/{name}"


def submit_and_wait(
    job: aiplatform_v1.CustomJob,
    cloud: CloudConfig,
    client: Any = None,
    poll_seconds: float = 30.0,
    log: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
    gcp_resources: str | None = None,
    backoff: remote.Backoff = remote.DEFAULT_BACKOFF,
    attach: str | None = None,
) -> aiplatform_v1.CustomJob:
    """Creates the job (or re-attaches to it), prints its link and state changes, waits.

    With `gcp_resources`, the created job is recorded there first; when the file
    already names a job that is still running (or succeeded), that job is
    followed instead of creating another: the step was retried or its pod
    restarted. With `attach`, the job it names is followed and nothing is
    created. Transient API errors are retried with `backoff`. Ctrl-C or
    SIGTERM (a cancelled pipeline run) cancels the job before re-raising.

    Args:
        job: from `build_custom_job`; ignored with `attach`.
        cloud: gives project and region.
        client: a `JobServiceClient` (or a fake with its `create_custom_job`,
            `get_custom_job`, `list_custom_jobs`, `cancel_custom_job`); default:
            one on the region.
        poll_seconds: seconds between state polls.
        log: where progress lines go.
        sleep: how to wait between polls and retries (tests pass a no-op).
        gcp_resources: the step's `gcp_resources` output file, or None.
        backoff: waits between retries of a call that failed transiently.
        attach: a job of `cloud`'s project and region to follow: its ID, or its
            name `projects/P/locations/R/customJobs/ID`.

    Returns:
        The succeeded job as Vertex AI last reported it.

    Raises:
        JobFailed: the job failed, was cancelled or expired; carries its error.
        RemoteCallFailed: an API call failed for good (permanent error, or
            transient ones past the backoff deadline).
        ConfigError: `attach` is not a job name of `cloud`'s region, or names no job.
        KeyboardInterrupt: on Ctrl-C or SIGTERM, after asking Vertex AI to cancel.
    """
    client = client or make_client(cloud)

    def retrying(call, what):
        return remote.call_with_retries(
            call, f"vertex: {what}", backoff=backoff, sleep=sleep, log=log
        )

    name = None
    with sigterm_raises():
        try:
            if attach:
                current = _attach(client, cloud, attach, retrying, log)
            else:
                current = _reattach(client, cloud, gcp_resources, retrying, log)
            if current is None:
                current = _create(client, job, cloud, retrying, log)
                remote.write_gcp_resources(
                    gcp_resources,
                    remote.JobRecord(RESOURCE_TYPE, resource_uri(current.name, cloud)),
                )
            name = current.name
            log(f"vertex: console {console_url(name, cloud)}")
            state = None
            while True:
                if current.state != state:
                    state = current.state
                    log(f"vertex: {aiplatform_v1.JobState(state).name}")
                if state in _TERMINAL:
                    break
                sleep(poll_seconds)
                current = retrying(lambda: client.get_custom_job(name=name), "get_custom_job")
        except KeyboardInterrupt:
            if name:
                log(f"vertex: interrupted, cancelling {name}")
                remote.cancel(lambda: client.cancel_custom_job(name=name), retrying, log)
            raise
    if state != _SUCCEEDED:
        detail = current.error.message if current.error and current.error.message else ""
        raise JobFailed(name, aiplatform_v1.JobState(state).name, detail)
    return current


def job_resource_name(job: str, cloud: CloudConfig) -> str:
    """`projects/P/locations/R/customJobs/ID` of a job given by its ID or that name.

    Raises:
        ConfigError: neither, or a job of another region than `cloud`'s endpoint.
    """
    if job.isdigit():
        return f"{parent(cloud)}/customJobs/{job}"
    match = _JOB_NAME.fullmatch(job)
    if not match:
        raise ConfigError(
            f"--attach {job!r}: give the job's ID or its name "
            "projects/PROJECT/locations/REGION/customJobs/ID"
        )
    if match.group(1) != cloud.region:
        raise ConfigError(
            f"--attach {job}: the job is in {match.group(1)}: pass --region {match.group(1)}"
        )
    return job


def _attach(client, cloud, job, retrying, log) -> aiplatform_v1.CustomJob:
    """The job `--attach` names, as Vertex AI reports it now."""
    name = job_resource_name(job, cloud)
    try:
        current = retrying(lambda: client.get_custom_job(name=name), "get_custom_job")
    except remote.RemoteCallFailed as err:
        if isinstance(err.__cause__, NotFound):
            raise ConfigError(
                f"no Vertex AI job {name} to attach to: check --project, --region and the ID "
                "(gcloud ai custom-jobs list)"
            ) from None
        raise
    log(f"vertex: attached to {name}")
    return current


def _reattach(client, cloud, gcp_resources, retrying, log) -> aiplatform_v1.CustomJob | None:
    """The job an earlier run of the step recorded, when it is still worth following."""
    record = remote.read_gcp_resources(gcp_resources, RESOURCE_TYPE)
    if record is None:
        return None
    prefix = resource_uri("", cloud)
    if not record.resource_uri.startswith(prefix):
        raise ConfigError(
            f"gcp_resources {gcp_resources} names {record.resource_uri}, not a job of "
            f"{prefix}: delete it to launch a new job"
        )
    name = record.resource_uri[len(prefix) :]
    try:
        current = retrying(lambda: client.get_custom_job(name=name), "get_custom_job")
    except remote.RemoteCallFailed as err:
        if not isinstance(err.__cause__, NotFound):
            raise
        log(f"vertex: the recorded job {name} no longer exists; creating a new one")
        return None
    if current.state in _TERMINAL and current.state != _SUCCEEDED:
        state = aiplatform_v1.JobState(current.state).name
        log(f"vertex: the recorded job {name} ended {state}; creating a new one")
        return None
    log(f"vertex: re-attached to {name}, recorded in {gcp_resources}")
    return current


def _create(client, job, cloud, retrying, log) -> aiplatform_v1.CustomJob:
    """Creates the job; after a transient error, first looks for the job that
    error may have hidden (created, but its reply lost), so it is never made twice.

    Vertex AI takes no request ID for `create_custom_job`, so the job is found by
    its display name among the jobs created since the first attempt.
    """
    started = datetime.datetime.now(datetime.timezone.utc) - _CLOCK_SKEW
    attempts = 0

    def create() -> aiplatform_v1.CustomJob:
        nonlocal attempts
        if attempts:
            request = aiplatform_v1.ListCustomJobsRequest(
                parent=parent(cloud),
                filter=f'display_name="{job.display_name}" AND '
                f'create_time>="{started.strftime("%Y-%m-%dT%H:%M:%SZ")}"',
            )
            for existing in client.list_custom_jobs(request=request):
                log(f"vertex: found {existing.name}, created by an earlier attempt")
                return existing
        attempts += 1
        return client.create_custom_job(parent=parent(cloud), custom_job=job)

    created = retrying(create, "create_custom_job")
    log(f"vertex: created {created.name}")
    return created
