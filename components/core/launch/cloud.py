"""Where and how a run goes to the cloud: `CloudConfig` and what both cloud backends
(Vertex AI CustomJob, Kubeflow TFJob) share.

`cloud_checks` refuses every combination the cloud would refuse before any request.
The RunConfig each training process receives is rewritten here for the cloud: on
Vertex AI, `gs://bucket/x` becomes the gcsfuse path `/gcs/bucket/x`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import secrets
import string
from dataclasses import dataclass

from components.core import reduction_server
from components.core.config import (
    RunConfig,
)
from components.core.cpu_machine import DEFAULT_PS_MACHINE_TYPE
from components.core.hardware import Gpu, get_gpu
from components.core.launch.staging import output_uri, shards_uri, staged_module_uri
from components.core.storage_paths import to_gcsfuse
from components.core.strategy_spec import EVALUATOR

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


def trainer_run_config(run: RunConfig, cloud: CloudConfig) -> RunConfig:
    """The RunConfig every cloud training process receives.

    Paths become what the processes can open: on Vertex AI `gs://` turns into
    `/gcs/` (gcsfuse); on Kubeflow `gs://` stays (TensorFlow reads it directly).
    Local paths of this machine are dropped. Under `mirrored` on GPUs,
    `gpus_per_machine` becomes the GPU count, so replicas and batch agree.
    A model module file becomes its staged copy (`staged_module_uri`).
    """

    def remote(path: str | None) -> str | None:
        if not path or not path.startswith("gs://"):
            return None
        return to_gcsfuse(path) if cloud.target == "vertex" else path

    cluster = run.cluster
    gpus = resolved_gpus(run, cloud)
    if gpus:
        cluster = dataclasses.replace(cluster, gpus_per_machine=gpus)
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


def trainer_env(run: RunConfig, cloud: CloudConfig, pool: Pool | None = None) -> dict[str, str]:
    """The environment of the training processes of `pool` (default: of the machines
    that compute gradients).

    `TRAINER_ENV`, plus the job's platform and the pool's machine spec, so the run's
    record states the hardware it ran on (`run_metrics.detect_hardware`): a CPU
    pool's processes carry no accelerator.
    """
    from components.core import run_metrics

    if pool is None:
        pool = next(p for p in layout(run, cloud) if p.role in run.cluster.spec.gradient_roles)
    env = {
        **TRAINER_ENV,
        run_metrics.PLATFORM_ENV: cloud.target,
        run_metrics.MACHINE_TYPE_ENV: pool.machine_type,
    }
    if pool.gpus:
        env[run_metrics.ACCELERATOR_ENV] = cloud.accelerator.name
        env[run_metrics.ACCELERATORS_ENV] = str(pool.gpus)
    if cloud.spot:
        env[run_metrics.SPOT_ENV] = "1"
    if cloud.reduction_server:
        env[reduction_server.JOB_ENV] = "1"
    return env


def trainer_args(run: RunConfig, cloud: CloudConfig) -> list[str]:
    """Arguments of `python -m components.core.trainer` for every process of the job."""
    config = trainer_run_config(run, cloud)
    # RunConfig.to_json() content, on one line: readable in consoles and dry runs.
    return ["--config-json", json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":"))]


def job_name(run: RunConfig, cloud: CloudConfig, now: datetime.datetime | None = None) -> str:
    """`--job-name`, else `strategist-<strategy>-<yymmdd-HHMMSS>-<4 random characters>`.

    The random part keeps two submissions of the same second apart; the whole is a
    DNS-1035 label short enough for the TFJob's longest replica Service name.
    """
    if cloud.job_name:
        return cloud.job_name
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%y%m%d-%H%M%S")
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(4))
    return f"strategist-{run.cluster.strategy.replace('_', '-')}-{stamp}-{suffix}"
