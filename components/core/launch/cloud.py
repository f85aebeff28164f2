"""Where and how a run goes to the cloud: `CloudConfig`, its validation, and what both
cloud backends (Vertex AI CustomJob, Kubeflow TFJob) share.

Validation refuses every combination the cloud would refuse (or silently waste money
on) before any request is sent, with a `ConfigError` that says which flag to change.
The RunConfig each training process receives is rewritten here for the cloud: on
Vertex AI, `gs://bucket/x` becomes the gcsfuse path `/gcs/bucket/x`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from dataclasses import dataclass

from components.core import cloud_ids, reduction_server, storage
from components.core.config import (
    ConfigError,
    RunConfig,
    validate_for_machine,
    validate_run,
)
from components.core.cpu_machine import DEFAULT_PS_MACHINE_TYPE
from components.core.hardware import Gpu, get_gpu
from components.core.launch.staging import output_uri, shards_uri, staged_module_uri
from components.core.storage_paths import to_gcsfuse
from components.core.strategy_spec import EVALUATOR, NCCL
from components.core.targets import TARGETS

# The command every training process runs, on every backend: one trainer entry point.
TRAINER_COMMAND = ("python", "-m", "components.core.trainer")
# Environment of every training process: Keras 2 for fit under every strategy, and
# gRPC calls that fail fast to the caller so the PS coordinator can retry them.
TRAINER_ENV = {"TF_USE_LEGACY_KERAS": "1", "GRPC_FAIL_FAST": "use_caller"}
# Vertex AI's Reduction Server (pool 2 of a multi-worker GPU job).
REDUCTION_SERVER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
CPU_MACHINE_TYPE = "n1-standard-8"
KUBE_RESTART_POLICIES = ("ExitCode", "OnFailure", "Never", "Always")
CLEAN_POD_POLICIES = ("Running", "All", "None")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TENSORBOARD = re.compile(
    r"^projects/[a-z0-9-]{1,30}/locations/([a-z0-9-]{1,40})/tensorboards/[0-9a-z-]{1,128}$"
)


class JobFailed(RuntimeError):
    """A cloud training job ended without success.

    Attributes:
        job: the job's resource name (Vertex AI) or `namespace/name` (TFJob).
        state: the final state (`JOB_STATE_FAILED`, `Failed`, ...).
        detail: the job's error message, or the chief's last log lines.
    """

    def __init__(self, job: str, state: str, detail: str = ""):
        self.job, self.state, self.detail = job, state, detail
        message = f"job {job} ended {state}"
        super().__init__(f"{message}: {detail}" if detail else message)


@dataclass(frozen=True)
class CloudConfig:
    """Where a run's training processes run, and on which machines.

    Attributes:
        target: `vertex` (Vertex AI CustomJob) or `kubeflow` (TFJob on a cluster
            with the Kubeflow training operator).
        image: the trainer image URI (`containers/Dockerfile`).
        project: Google Cloud project (Vertex AI).
        region: Vertex AI region, e.g. `us-central1`.
        gpu: GPU name from `components.core.hardware` (`t4`, `a100`, ...), or
            None for CPU machines.
        gpus_per_machine: GPUs on each GPU machine; default: the run's
            devices per machine (`strategist train` sets both from its one
            `--gpus-per-machine`).
        machine_type: Vertex AI machine type of the GPU (or CPU) training
            machines; default: the one `hardware` names for the GPU count.
        ps_machine_type: CPU machine type of parameter servers and of the
            `parameter_server` coordinator (chief).
        service_account: service account email the job runs as.
        network: VPC peered with Vertex AI, `projects/NUMBER/global/networks/NAME`.
        tensorboard: `projects/P/locations/R/tensorboards/ID` to stream logs to.
        base_output_dir: `gs://` folder for the model, metrics and checkpoints;
            the trainer's `output_dir`.
        shards_dir: `gs://` folder of prepared TFRecord shards (`manifest.json`);
            default: the run's `data.shards_dir`.
        spot: run on Spot VMs (Vertex `scheduling.strategy = SPOT`; GKE Spot nodes).
        timeout_s: wall-clock limit of the job in seconds.
        restart_job_on_worker_restart: Vertex AI restarts the whole job when a
            worker restarts (training resumes from BackupAndRestore).
        reduction_server: add Vertex AI Reduction Server replicas (pool 2) to a
            `multi_worker_mirrored` GPU job.
        reduction_server_replicas: how many.
        reduction_server_machine_type: their CPU machine type.
        job_name: display name (Vertex) or TFJob name; default
            `strategist-<strategy>-<timestamp>`.
        namespace: Kubernetes namespace of the TFJob.
        kube_service_account: Kubernetes service account of the pods (on GKE,
            bound to a Google service account by Workload Identity for `gs://`).
        kubeconfig: kube-config file; default `$KUBECONFIG` or `~/.kube/config`.
        kube_context: kube-config context; default the current one.
        restart_policy: TFJob pod restart policy; `ExitCode` restarts on
            retryable exit codes (killed, preempted) and fails fast on errors.
        backoff_limit: TFJob restarts before the job is marked failed.
        clean_pod_policy: which pods the operator deletes when the job ends
            (`Running` stops parameter servers and keeps failed pods' logs).
        ttl_seconds_after_finished: TFJob deleted this long after it ends.
    """

    target: str = "vertex"
    image: str | None = None
    project: str | None = None
    region: str | None = None
    gpu: str | None = None
    gpus_per_machine: int | None = None
    machine_type: str | None = None
    ps_machine_type: str = DEFAULT_PS_MACHINE_TYPE
    service_account: str | None = None
    network: str | None = None
    tensorboard: str | None = None
    base_output_dir: str | None = None
    shards_dir: str | None = None
    spot: bool = False
    timeout_s: int | None = None
    restart_job_on_worker_restart: bool = False
    reduction_server: bool = False
    reduction_server_replicas: int = 1
    reduction_server_machine_type: str = "n1-highcpu-16"
    job_name: str | None = None
    namespace: str = "default"
    kube_service_account: str | None = None
    kubeconfig: str | None = None
    kube_context: str | None = None
    restart_policy: str = "ExitCode"
    backoff_limit: int = 3
    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: int | None = 86400

    @property
    def accelerator(self) -> Gpu | None:
        """The GPU model, or None for CPU machines."""
        return get_gpu(self.gpu) if self.gpu else None


@dataclass(frozen=True)
class Pool:
    """One group of identical replicas (a Vertex worker pool, a TFJob replica type).

    Attributes:
        role: `chief`, `worker`, `ps`, `evaluator` or `reduction_server`.
        replicas: how many.
        gpus: GPUs per replica (0: a CPU machine).
        machine_type: Vertex AI machine type.
    """

    role: str
    replicas: int
    gpus: int
    machine_type: str


def resolved_gpus(run: RunConfig, cloud: CloudConfig) -> int:
    """GPUs on each machine that computes gradients (0 without `gpu`).

    `--gpus-per-machine`, else the run's devices per machine: every device of
    the run is a GPU in the cloud.
    """
    if not cloud.gpu:
        return 0
    if cloud.gpus_per_machine is not None:
        return cloud.gpus_per_machine
    return run.cluster.spec.devices_per_machine(run.cluster)


def layout(run: RunConfig, cloud: CloudConfig) -> list[Pool]:
    """The replica groups of a run, in Vertex AI pool order (chief, workers, ps, evaluator).

    The task types and counts are the strategy spec's (the same the local
    rehearsal's TF_CONFIG has); the roles that compute gradients get the GPU
    machines, the others (a parameter-server coordinator, parameter servers)
    CPU machines. Reduction Server replicas and an evaluator come on top.
    """
    spec = run.cluster.spec
    gpus = resolved_gpus(run, cloud)
    gpu = cloud.accelerator
    train_machine = cloud.machine_type or (gpu.machine_type(gpus) if gpu else CPU_MACHINE_TYPE)
    pools: list[Pool] = []
    for role, replicas in spec.training_task_counts(run.cluster).items():
        if role in spec.gradient_roles:
            pools.append(Pool(role, replicas, gpus, train_machine))
        else:
            pools.append(Pool(role, replicas, 0, cloud.ps_machine_type))
    if cloud.reduction_server:
        pools.append(
            Pool(
                "reduction_server",
                cloud.reduction_server_replicas,
                0,
                cloud.reduction_server_machine_type,
            )
        )
    if run.cluster.evaluator:  # evaluates on the training machines' kind
        pools.append(Pool(EVALUATOR, 1, gpus, train_machine))
    return pools


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
        match = _TENSORBOARD.match(cloud.tensorboard)
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


def _validate_kubeflow(cloud: CloudConfig) -> None:
    if not _DNS_LABEL.match(cloud.namespace) or len(cloud.namespace) > 63:
        raise ConfigError(
            f"--namespace {cloud.namespace!r} is not a Kubernetes namespace name "
            "(lowercase letters, digits and '-')"
        )
    if cloud.job_name and (not _DNS_LABEL.match(cloud.job_name) or len(cloud.job_name) > 63):
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


def trainer_run_config(run: RunConfig, cloud: CloudConfig) -> RunConfig:
    """The RunConfig every cloud training process receives.

    Paths become what the processes can open: on Vertex AI `gs://` turns into
    `/gcs/` (gcsfuse); on Kubeflow `gs://` stays (TensorFlow reads it directly).
    Local paths of this machine are dropped. Under `mirrored` on GPUs,
    `devices_per_worker` becomes the GPU count, so replicas and batch agree.
    A model module file becomes its staged copy (`staged_module_uri`).
    """

    def remote(path: str | None) -> str | None:
        if not path or not path.startswith("gs://"):
            return None
        return to_gcsfuse(path) if cloud.target == "vertex" else path

    cluster = run.cluster
    gpus = resolved_gpus(run, cloud)
    if gpus:
        cluster = dataclasses.replace(cluster, devices_per_worker=gpus)
    data = dataclasses.replace(
        run.data, shards_dir=remote(shards_uri(run, cloud)), data_dir=remote(run.data.data_dir)
    )
    model = run.model
    staged = staged_module_uri(run, cloud)
    if staged:
        model = dataclasses.replace(model, module=remote(staged))
    return dataclasses.replace(
        run,
        data=data,
        model=model,
        cluster=cluster,
        output_dir=remote(output_uri(run, cloud)) or run.output_dir,
        backup_dir=remote(run.backup_dir),
    )


def trainer_env(run: RunConfig, cloud: CloudConfig) -> dict[str, str]:
    """The environment of every training process of the job.

    `TRAINER_ENV`, plus the job's platform and the machine spec of the machines
    that compute gradients, so the run's record states the hardware it ran on
    (`run_metrics.detect_hardware`).
    """
    from components.core import run_metrics

    gradient_pool = next(p for p in layout(run, cloud) if p.role in run.cluster.spec.gradient_roles)
    env = {
        **TRAINER_ENV,
        run_metrics.PLATFORM_ENV: cloud.target,
        run_metrics.MACHINE_TYPE_ENV: gradient_pool.machine_type,
    }
    if gradient_pool.gpus:
        env[run_metrics.ACCELERATOR_ENV] = cloud.accelerator.name
        env[run_metrics.ACCELERATORS_ENV] = str(gradient_pool.gpus)
    if cloud.reduction_server:
        env[reduction_server.JOB_ENV] = "1"
    return env


def trainer_args(run: RunConfig, cloud: CloudConfig) -> list[str]:
    """Arguments of `python -m components.core.trainer` for every process of the job."""
    config = trainer_run_config(run, cloud)
    # RunConfig.to_json() content, on one line: readable in consoles and dry runs.
    return ["--config-json", json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":"))]


def job_name(run: RunConfig, cloud: CloudConfig, now: datetime.datetime | None = None) -> str:
    """`--job-name`, else `strategist-<strategy>-<YYYYmmdd-HHMMSS>` (a valid DNS label)."""
    if cloud.job_name:
        return cloud.job_name
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"strategist-{run.cluster.strategy.replace('_', '-')}-{stamp}"
