"""A cloud run checked before any request: every combination the cloud would refuse or waste.

Each refusal is a `ConfigError` that says which flag to change.
"""

from __future__ import annotations

import re

from components.core import cloud_ids, reduction_server, storage
from components.core.config import ConfigError, RunConfig, validate_for_machine, validate_run
from components.core.hardware import get_gpu
from components.core.launch.cloud import (
    CLEAN_POD_POLICIES,
    KUBE_RESTART_POLICIES,
    CloudConfig,
    resolved_gpus,
    trainer_run_config,
)
from components.core.launch.staging import output_uri, shards_uri
from components.core.storage_paths import to_gcsfuse
from components.core.strategy_spec import NCCL
from components.core.targets import TARGETS

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TENSORBOARD = re.compile(
    r"^projects/[a-z0-9-]{1,30}/locations/([a-z0-9-]{1,40})/tensorboards/[0-9a-z-]{1,128}$"
)


def validate_cloud(run: RunConfig, cloud: CloudConfig) -> None:
    """Refuses a run the cloud cannot (or should not) take, before any request.

    Raises:
        ConfigError: with a message that says which flag to change.
    """
    validate_run(run)
    strategy = run.cluster.strategy
    if cloud.target not in TARGETS:
        raise ConfigError(f"unknown target {cloud.target!r}: use --target vertex or kubeflow")
    if not cloud.image:
        raise ConfigError(
            "no trainer image: pass --image REGISTRY/strategist-trainer:TAG "
            "(build and push it with containers/cloudbuild.yaml or `make image`)"
        )
    if cloud.target == "vertex":
        if not cloud.project:
            raise ConfigError("Vertex AI needs a project: pass --project PROJECT_ID")
        if not cloud.region:
            raise ConfigError("Vertex AI needs a region: pass --region, e.g. us-central1")
    validate_identifiers(cloud)
    _validate_gpus(run, cloud)
    validate_for_machine(run, resolved_gpus(run, cloud))
    if cloud.reduction_server:
        if cloud.target != "vertex":
            raise ConfigError(
                "Reduction Server exists on Vertex AI only: drop --reduction-server "
                "or use --target vertex"
            )
        if not run.cluster.spec.all_reduces_across_machines:
            raise ConfigError(
                f"Reduction Server speeds up all-reduce of multi_worker_mirrored, not {strategy}: "
                "drop --reduction-server or use --strategy multi_worker_mirrored"
            )
        if not cloud.gpu:
            raise ConfigError(
                "Reduction Server works through NCCL on GPU workers: pass --gpu "
                "or drop --reduction-server"
            )
        all_reduce = run.cluster.spec.resolve_all_reduce(
            run.cluster.all_reduce, resolved_gpus(run, cloud)
        )
        if all_reduce != NCCL:
            raise ConfigError(
                f"Reduction Server works through NCCL, not the {all_reduce} all-reduce: drop "
                f"--all-reduce {run.cluster.all_reduce} (auto is NCCL on GPUs) or "
                "--reduction-server"
            )
        if cloud.reduction_server_replicas < 1:
            raise ConfigError(
                "--reduction-server-replicas must be at least 1, "
                f"got {cloud.reduction_server_replicas}"
            )
        for error in reduction_server.image_errors(cloud.image):
            raise ConfigError(error)
    if cloud.timeout_s is not None and cloud.timeout_s < 1:
        raise ConfigError(f"--timeout must be at least 1 second, got {cloud.timeout_s}")
    _validate_paths(run, cloud)
    if cloud.target == "vertex":
        _validate_vertex(cloud)
    else:
        _validate_kubeflow(cloud)
    _validate_shards(run, cloud)


def readable_shards(uri: str) -> str | None:
    """Where this machine reads the job's `gs://` shards folder, or None when it cannot.

    A Vertex AI Pipelines step sees every bucket at its gcsfuse mount (`/gcs/`);
    under a rehearsal (`STRATEGIST_GCS_LOCAL_ROOT`) the storage layer serves it
    from the mapped folder. `gs://` itself is not tried: without credentials
    here, Google's auth chain and retries would stall every dry run.
    """
    local = to_gcsfuse(uri)
    return local if storage.isdir(local) else None


def _validate_shards(run: RunConfig, cloud: CloudConfig) -> None:
    """The local launcher's shard checks (`batching.check_fits`: files against the
    job's input pipelines, the global batch against the training split), on the
    run the job's processes receive, when its shards can be read from here."""
    folder = readable_shards(shards_uri(run, cloud))
    if folder is None:
        return
    from components.core import batching, datasets

    batching.check_fits(trainer_run_config(run, cloud), datasets.load_manifest(folder))


def _validate_gpus(run: RunConfig, cloud: CloudConfig) -> None:
    strategy = run.cluster.strategy
    if not cloud.gpu:
        if cloud.gpus_per_machine:
            raise ConfigError(
                "--gpus-per-machine needs a GPU type: pass --gpu "
                "(t4, l4, v100, p100, a100, a100-80gb, h100)"
            )
        return
    gpu = get_gpu(cloud.gpu)
    gpus = resolved_gpus(run, cloud)
    if gpus < 1:
        raise ConfigError(f"--gpus-per-machine must be at least 1, got {gpus}")
    if not run.cluster.spec.devices_apply and gpus != 1:
        raise ConfigError(
            f"{strategy} trains on one GPU, not {gpus}: pass --gpus-per-machine 1, "
            "or use --strategy mirrored for all GPUs of the machine"
        )
    if cloud.machine_type is None or cloud.target == "kubeflow":
        # GKE node pools take the same GPU counts as the Vertex machine types.
        try:
            gpu.machine_type(gpus)
        except ConfigError as err:
            *fewer, most = (str(count) for count in sorted(gpu.machine_types))
            choices = f"{', '.join(fewer)} or {most}" if fewer else most
            raise ConfigError(
                f"{err}: pass --gpus-per-machine {choices}, "
                "or spread the GPUs over more machines with --workers"
            ) from None


def _validate_paths(run: RunConfig, cloud: CloudConfig) -> None:
    output = output_uri(run, cloud)
    where = "Vertex AI" if cloud.target == "vertex" else "Kubeflow pods"
    if not output.startswith("gs://"):
        raise ConfigError(
            f"{where} cannot write to {output!r}: pass --output gs://BUCKET/PATH "
            "(or --base-output-dir), a Cloud Storage folder the job's service account can write"
        )
    shards = shards_uri(run, cloud)
    if not shards:
        raise ConfigError(
            "the cloud job needs prepared shards: shard the dataset (e.g. "
            "`strategist train --local ...` writes them), copy the folder to Cloud Storage "
            "and pass --shards-dir gs://BUCKET/PATH"
        )
    if not shards.startswith("gs://"):
        raise ConfigError(
            f"{where} cannot read shards from {shards!r}: copy them to Cloud Storage "
            "and pass --shards-dir gs://BUCKET/PATH"
        )


def validate_identifiers(cloud: CloudConfig) -> None:
    """Every identifier the request or pod spec carries, by its platform's rules (`cloud_ids`)."""
    for flag, value, check in (
        ("--image", cloud.image, cloud_ids.check_image),
        ("--project", cloud.project, cloud_ids.check_project),
        ("--region", cloud.region, cloud_ids.check_region),
        ("--service-account", cloud.service_account, cloud_ids.check_service_account),
        ("--network", cloud.network, cloud_ids.check_network),
        ("--machine-type", cloud.machine_type, cloud_ids.check_machine_type),
        ("--ps-machine-type", cloud.ps_machine_type, cloud_ids.check_machine_type),
        (
            "--reduction-server-machine-type",
            cloud.reduction_server_machine_type,
            cloud_ids.check_machine_type,
        ),
        (
            "--kube-service-account",
            cloud.kube_service_account,
            cloud_ids.check_kube_service_account,
        ),
    ):
        if value is not None:
            check(value, flag)


def _validate_vertex(cloud: CloudConfig) -> None:
    if cloud.tensorboard:
        match = _TENSORBOARD.fullmatch(cloud.tensorboard)
        if not match:
            raise ConfigError(
                f"--tensorboard {cloud.tensorboard!r}: pass "
                "projects/PROJECT/locations/REGION/tensorboards/ID"
            )
        if match.group(1) != cloud.region:
            raise ConfigError(
                f"TensorBoard {cloud.tensorboard} is in {match.group(1)}, the job in "
                f"{cloud.region}: use a TensorBoard of the job's region"
            )
        if not cloud.service_account:
            raise ConfigError(
                "Vertex AI TensorBoard needs a job service account: pass --service-account"
            )


def validate_namespace(namespace: str) -> None:
    """Refuses a name that cannot be a Kubernetes namespace (a DNS label)."""
    if not _DNS_LABEL.fullmatch(namespace) or len(namespace) > 63:
        raise ConfigError(
            f"--namespace {namespace!r} is not a Kubernetes namespace name "
            "(lowercase letters, digits and '-')"
        )


def _validate_kubeflow(cloud: CloudConfig) -> None:
    validate_namespace(cloud.namespace)
    if cloud.job_name and (not _DNS_LABEL.fullmatch(cloud.job_name) or len(cloud.job_name) > 63):
        raise ConfigError(
            f"--job-name {cloud.job_name!r}: a TFJob name is at most 63 lowercase "
            "letters, digits and '-'"
        )
    if cloud.restart_policy not in KUBE_RESTART_POLICIES:
        raise ConfigError(
            f"restart policy {cloud.restart_policy!r}: choose one of "
            f"{', '.join(KUBE_RESTART_POLICIES)}"
        )
    if cloud.clean_pod_policy not in CLEAN_POD_POLICIES:
        raise ConfigError(
            f"clean pod policy {cloud.clean_pod_policy!r}: choose one of "
            f"{', '.join(CLEAN_POD_POLICIES)}"
        )
    if cloud.backoff_limit < 0:
        raise ConfigError(f"--backoff-limit must be 0 or more, got {cloud.backoff_limit}")
    unsupported = [
        flag
        for flag, value in (
            ("--tensorboard", cloud.tensorboard),
            ("--network", cloud.network),
            ("--service-account", cloud.service_account),
        )
        if value
    ]
    if unsupported:
        raise ConfigError(
            f"{', '.join(unsupported)} apply to Vertex AI only: drop them for --target kubeflow "
            "(on GKE, bind the namespace's Kubernetes service account with Workload Identity)"
        )
