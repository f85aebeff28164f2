"""Cloud flags of `strategist train` and the glue that sends a run to Vertex AI or Kubeflow.

`train` adds these flags with `add_cloud_arguments(parser)` and, when `--target` is
given, hands its validated RunConfig to `run_cloud_training(args, run)`. With
`--dry-run` the exact request is printed (the CustomJob as aiplatform_v1 JSON, the
TFJob as YAML) and nothing is sent. With `--rehearse` every replica of that request
runs on this machine (`components/core/launch/rehearsal.py`) and nothing is sent.
Otherwise credentials are checked before anything is sent, then the job is submitted
and watched until it ends.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from components.core import cloud_ids
from components.core.config import ConfigError, RunConfig
from components.core.cpu_machine import DEFAULT_PS_MACHINE_TYPE
from components.core.launch.cloud import CloudConfig, JobFailed
from components.core.launch.remote import RemoteCallFailed
from components.core.launch.staging import files_to_stage, module_origin
from components.core.targets import add_target_argument
from pipelines.cli.arg_types import bounded_int, positive_int
from pipelines.cli.common import GPU_NAMES

_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """argparse type: `3600`, `90m`, `2h` or `1d` as seconds (>= 1)."""
    match = _DURATION.match(text.strip().lower())
    if not match or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: use seconds (3600) or 90m, 2h, 1d"
        )
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def add_cloud_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the Vertex AI / Kubeflow flags (none that `train` itself defines).

    `--shards-dir` is `train`'s own flag; with `--target` it must be a `gs://` folder.
    `--gpus-per-machine` too (the cluster shape): with `--gpu`, the job's GPUs per
    training machine.
    """
    group = parser.add_argument_group(
        "cloud (with --target: run on Vertex AI or a Kubeflow cluster instead of locally)"
    )
    add_target_argument(
        group, help="vertex (Vertex AI CustomJob) or kubeflow (TFJob; kfp is another name for it)"
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact request (CustomJob JSON or TFJob YAML) and send nothing",
    )
    group.add_argument(
        "--rehearse",
        action="store_true",
        help="run every replica of that exact request on this machine (127.0.0.1; gs:// in "
        "$STRATEGIST_GCS_LOCAL_ROOT, default runs/gcs) and send nothing",
    )
    group.add_argument("--image", help="trainer image URI (containers/Dockerfile)")
    group.add_argument("--gpu", help=f"GPU type: {GPU_NAMES} (default: CPU)")
    group.add_argument(
        "--machine-type", help="Vertex AI machine type of the training machines (override)"
    )
    group.add_argument(
        "--ps-machine-type",
        default=DEFAULT_PS_MACHINE_TYPE,
        help="CPU machine type of parameter servers and the PS coordinator; its network "
        "rate bounds the servers' transfers (strategist select --ps-machine-type) "
        f"(default: {DEFAULT_PS_MACHINE_TYPE})",
    )
    group.add_argument(
        "--base-output-dir",
        help="gs:// folder for model, metrics and checkpoints (default: --output if gs://)",
    )
    group.add_argument("--spot", action="store_true", help="run on Spot VMs / GKE Spot nodes")
    group.add_argument(
        "--timeout", type=duration_seconds, help="job time limit: seconds, or 90m, 2h, 1d"
    )
    group.add_argument("--job-name", help="job display name / TFJob name (default: generated)")
    group.add_argument(
        "--attach",
        metavar="JOB",
        help="follow the running job JOB until it ends, as if this command had submitted it, "
        "instead of submitting one: a TFJob name (in --namespace), or a Vertex AI job's ID "
        "or projects/P/locations/R/customJobs/ID",
    )
    vertex = parser.add_argument_group("Vertex AI")
    vertex.add_argument("--project", help="Google Cloud project ID")
    vertex.add_argument("--region", help="Vertex AI region, e.g. us-central1")
    vertex.add_argument("--service-account", help="service account email the job runs as")
    vertex.add_argument("--network", help="peered VPC: projects/NUMBER/global/networks/NAME")
    vertex.add_argument(
        "--tensorboard", help="projects/P/locations/R/tensorboards/ID to stream logs to"
    )
    vertex.add_argument(
        "--restart-on-worker-restart",
        action="store_true",
        help="restart the whole job when a worker restarts (resumes from the checkpoint)",
    )
    vertex.add_argument(
        "--reduction-server",
        action="store_true",
        help="add Reduction Server replicas (multi_worker_mirrored on GPUs)",
    )
    vertex.add_argument(
        "--reduction-server-replicas",
        type=positive_int,
        default=1,
        help="Reduction Server replicas (default: 1)",
    )
    kube = parser.add_argument_group("Kubeflow")
    kube.add_argument("--namespace", default="default", help="namespace (default: default)")
    kube.add_argument(
        "--kubeconfig", help="kube-config file (default: $KUBECONFIG, ~/.kube/config)"
    )
    kube.add_argument("--kube-context", help="kube-config context (default: the current one)")
    kube.add_argument(
        "--kube-service-account", help="pods' Kubernetes service account (Workload Identity)"
    )
    kube.add_argument(
        "--restart-policy",
        choices=("ExitCode", "OnFailure", "Never", "Always"),
        default="ExitCode",
        help="pod restart policy (default: ExitCode: restart when killed, fail fast on errors)",
    )
    kube.add_argument(
        "--backoff-limit",
        type=bounded_int(0, 100),
        default=3,
        help="pod restarts before the TFJob fails, 0 to 100 (default: 3)",
    )


def cloud_config(args: argparse.Namespace) -> CloudConfig:
    """The CloudConfig the flags describe (not yet validated).

    The GPUs per machine are the run's devices per machine: `train` has one
    `--gpus-per-machine` for its local cluster and its cloud job.
    """
    output = getattr(args, "output", None)
    base_output_dir = args.base_output_dir or (
        output if output and output.startswith("gs://") else None
    )
    return CloudConfig(
        target=args.target,
        image=args.image,
        project=args.project,
        region=args.region,
        gpu=args.gpu,
        # No gpus_per_machine: `--gpus-per-machine` set the run's devices per machine,
        # which the job's GPUs follow (`resolved_gpus`); without --gpu, CPU machines
        # with that many logical CPU devices, as locally.
        machine_type=args.machine_type,
        ps_machine_type=args.ps_machine_type,
        service_account=args.service_account,
        network=args.network,
        tensorboard=args.tensorboard,
        base_output_dir=base_output_dir,
        shards_dir=args.shards_dir,
        spot=args.spot,
        timeout_s=args.timeout,
        restart_job_on_worker_restart=args.restart_on_worker_restart,
        reduction_server=args.reduction_server,
        reduction_server_replicas=args.reduction_server_replicas,
        job_name=args.job_name,
        namespace=args.namespace,
        kube_service_account=args.kube_service_account,
        kubeconfig=args.kubeconfig,
        kube_context=args.kube_context,
        restart_policy=args.restart_policy,
        backoff_limit=args.backoff_limit,
    )


def run_cloud_training(args: argparse.Namespace, run: RunConfig, *, client: Any = None) -> int:
    """Validates the run for the cloud, then prints it (`--dry-run`) or submits and waits.

    Args:
        args: parsed flags (`add_cloud_arguments` plus `train`'s).
        run: the validated run `train` built from its flags.
        client: a `JobServiceClient` or `TrainingClient` to use instead of one made
            from the local credentials (tests pass a fake).

    Returns:
        0 when the job succeeded (or the dry run printed), 1 when it failed or
        the cloud's API refused a call (or stayed unreachable past the retries).

    Raises:
        ConfigError: impossible combination or missing credentials; nothing was sent.
    """
    from components.core.launch import build_cloud_job

    if not args.target:
        raise ConfigError("no cloud target: pass --target vertex or --target kubeflow")
    if args.dry_run and args.rehearse:
        raise ConfigError("--dry-run prints the request, --rehearse runs it: pass one of them")
    cloud = cloud_config(args)
    if args.attach:
        return _attach(args, cloud, client)
    job = build_cloud_job(run, cloud)  # validates, once
    if args.dry_run:
        _print_dry_run(job, cloud)
        origin = module_origin(run, cloud)
        if origin:
            print(f"dry run: {origin}", file=sys.stderr)
        return 0
    if args.rehearse:
        return _rehearse(job, cloud, run, restarts=getattr(args, "restarts", 0))
    from components.core.launch import submit_cloud

    try:
        outputs = submit_cloud(run, cloud, job=job, client=client)
    except (JobFailed, RemoteCallFailed) as err:
        return _job_error(cloud, err)
    print(f"train: done; outputs in {outputs}")
    return 0


def _job_error(cloud: CloudConfig, err: Exception) -> int:
    """Prints why the job (or the API) failed; returns 1."""
    what = "Vertex AI " if cloud.target == "vertex" else "Kubeflow "
    prefix = what if isinstance(err, JobFailed) else ""
    print(f"strategist train: error: {prefix}{err}", file=sys.stderr)
    return 1


def _attach(args: argparse.Namespace, cloud: CloudConfig, client: Any) -> int:
    """Follows the running job `--attach` names until it ends (nothing is submitted).

    Raises:
        ConfigError: flags that would change a submission, no credentials, or no
            such job.
    """
    if args.dry_run or args.rehearse or args.job_name:
        raise ConfigError(
            "--attach follows a job that exists: drop --dry-run, --rehearse and --job-name"
        )
    try:
        if cloud.target == "vertex":
            name = _attach_vertex(args.attach, cloud, client)
        else:
            name = _attach_kubeflow(args.attach, cloud, client)
    except (JobFailed, RemoteCallFailed) as err:
        return _job_error(cloud, err)
    print(f"train: {name} succeeded")
    return 0


def _attach_vertex(job: str, cloud: CloudConfig, client: Any) -> str:
    from components.core.launch import credentials, vertex

    if not cloud.project or not cloud.region:
        raise ConfigError("--attach with --target vertex needs --project and --region")
    name = vertex.job_resource_name(job, cloud)  # refused before credentials are asked for
    client = client or vertex.make_client(cloud, credentials=credentials.google_credentials())
    vertex.submit_and_wait(None, cloud, client=client, attach=name)
    return f"Vertex AI job {name}"


def _attach_kubeflow(job: str, cloud: CloudConfig, client: Any) -> str:
    from components.core.launch import tfjob_client, tfjob_submit
    from components.core.launch.cloud_checks import validate_namespace

    validate_namespace(cloud.namespace)
    client = client or tfjob_client.make_client(cloud)
    tfjob_submit.submit_and_wait(None, cloud, client=client, attach=job)
    return f"TFJob {cloud.namespace}/{job}"


# A rehearsal's bound on Vertex AI's restarts of a Spot job whose replica was taken back
# (Vertex AI states none): enough for any rehearsal, finite so a task that exits 143 every
# time still ends.
VERTEX_SPOT_RESTARTS = 10


def preempted_restarts(cloud: CloudConfig) -> int:
    """Whole-job restarts the platform gives a job whose replica saved on the preemption
    notice and exited `preemption.PREEMPTED_EXIT_CODE`, which a rehearsal of it gives too.

    A TFJob's `ExitCode` (and `OnFailure`, `Always`) policy restarts the pod up to its
    backoff limit; Vertex AI restarts a Spot job's replica (the whole job under
    `restart_job_on_worker_restart`); an on-demand Vertex AI job is not preempted.
    """
    if cloud.target == "kubeflow":
        return cloud.backoff_limit if cloud.restart_policy != "Never" else 0
    return VERTEX_SPOT_RESTARTS if cloud.spot else 0


def _rehearse(job: Any, cloud: CloudConfig, run: RunConfig, restarts: int = 0) -> int:
    """Runs every replica of `job` on this machine; reports as `train --local` does.

    `--restarts` applies as in a local run: whole-cluster restarts after a failure;
    a replica that saved on the preemption notice restarts as the platform would
    restart it (`preempted_restarts`).

    Returns:
        0 on success, 1 when a replica failed, 130/143 on Ctrl-C/SIGTERM (every
        process stopped).

    Raises:
        ConfigError: a job this machine cannot rehearse, before any process starts.
    """
    from components.core.launch.cluster_failure import ClusterFailed
    from components.core.launch.local import RestartPolicy
    from components.core.launch.rehearsal import rehearse
    from components.core.signals import exit_code, signal_name, sigterm_raises
    from pipelines.cli.train_summary import print_summary

    try:
        with sigterm_raises():
            metrics, config = rehearse(
                job,
                cloud.target,
                data_dir=run.data.data_dir,
                staged=files_to_stage(run, cloud),
                restart=RestartPolicy(
                    cluster_restarts=restarts, preempted_restarts=preempted_restarts(cloud)
                ),
            )
    except ClusterFailed as err:
        print(f"strategist train: error: rehearsal of {cloud.target}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        print(
            f"strategist train: rehearsal interrupted ({signal_name(interrupt)}); every "
            "process was stopped",
            file=sys.stderr,
        )
        return exit_code(interrupt)
    print_summary(metrics, config.output_dir)
    return 0


def _print_dry_run(job: Any, cloud: CloudConfig) -> None:
    """Prints the request a run would send, and says that nothing was sent."""
    if cloud.target == "vertex":
        from components.core.launch import vertex

        print(vertex.to_json(job))
        print(
            f"dry run: would create this CustomJob in {vertex.parent(cloud)} "
            f"({cloud_ids.vertex_endpoint(cloud.region)}); nothing was sent",
            file=sys.stderr,
        )
        return
    from components.core.launch import kubeflow

    print(kubeflow.to_yaml(job), end="")
    print(
        f"dry run: would create this TFJob in namespace {cloud.namespace}; nothing was sent",
        file=sys.stderr,
    )
