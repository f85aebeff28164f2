"""Vertex AI backend: a run as an `aiplatform_v1.CustomJob`, submitted and watched.

Worker pools follow Vertex AI's positions: 0 chief (one replica), 1 workers,
2 parameter servers or Reduction Server, 3 evaluator. Vertex AI sets `TF_CONFIG`
in every replica from these pools, so every replica runs the same trainer
command and learns its role from it. Pools a layout does not use but that come
before a used one are sent empty, as Vertex AI expects.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from google.cloud import aiplatform_v1

from components.core.config import ConfigError, RunConfig
from components.core.launch import cloud as cloudlib
from components.core.launch.cloud import CloudConfig, JobFailed
from components.core.signals import sigterm_raises

_POOL_INDEX = {"chief": 0, "worker": 1, "ps": 2, "reduction_server": 2, "evaluator": 3}
_SUCCEEDED = aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
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
    cloudlib.validate_cloud(run, cloud)
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
    scheduling = aiplatform_v1.Scheduling(
        restart_job_on_worker_restart=cloud.restart_job_on_worker_restart
    )
    if cloud.timeout_s:
        scheduling.timeout = datetime.timedelta(seconds=cloud.timeout_s)
    if cloud.spot:
        scheduling.strategy = aiplatform_v1.Scheduling.Strategy.SPOT
    spec = aiplatform_v1.CustomJobSpec(
        worker_pool_specs=specs,
        scheduling=scheduling,
        base_output_directory=aiplatform_v1.GcsDestination(
            output_uri_prefix=cloudlib.output_uri(run, cloud)
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
        client_options={"api_endpoint": f"{cloud.region}-aiplatform.googleapis.com"},
    )


def submit_and_wait(
    job: aiplatform_v1.CustomJob,
    cloud: CloudConfig,
    client: Any = None,
    poll_seconds: float = 30.0,
    log: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
) -> aiplatform_v1.CustomJob:
    """Creates the job, prints its console link and state changes, waits for the end.

    Ctrl-C or SIGTERM (a cancelled pipeline run) cancels the job before re-raising.

    Args:
        job: from `build_custom_job`.
        cloud: gives project and region.
        client: a `JobServiceClient` (or a fake with `create_custom_job`,
            `get_custom_job`, `cancel_custom_job`); default: one on the region.
        poll_seconds: seconds between state polls.
        log: where progress lines go.
        sleep: how to wait between polls (tests pass a no-op).

    Returns:
        The succeeded job as Vertex AI last reported it.

    Raises:
        JobFailed: the job failed, was cancelled or expired; carries its error.
        KeyboardInterrupt: on Ctrl-C or SIGTERM, after asking Vertex AI to cancel.
    """
    client = client or make_client(cloud)
    created = client.create_custom_job(parent=parent(cloud), custom_job=job)
    name = created.name
    log(f"vertex: created {name}")
    log(f"vertex: console {console_url(name, cloud)}")
    state = None
    current = created
    with sigterm_raises():
        try:
            while True:
                if current.state != state:
                    state = current.state
                    log(f"vertex: {aiplatform_v1.JobState(state).name}")
                if state in _TERMINAL:
                    break
                sleep(poll_seconds)
                current = client.get_custom_job(name=name)
        except KeyboardInterrupt:
            log(f"vertex: interrupted, cancelling {name}")
            client.cancel_custom_job(name=name)
            raise
    if state != _SUCCEEDED:
        detail = current.error.message if current.error and current.error.message else ""
        raise JobFailed(name, aiplatform_v1.JobState(state).name, detail)
    return current
