"""`strategist submit`: compile a pipeline and start one run on Vertex AI or KFP."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from components.core.targets import add_target_argument
from components.image import DEFAULT_IMAGE
from pipelines.cli import common


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `submit` and `schedule`: pipeline, target and where it goes."""
    add_target_argument(
        parser,
        required=True,
        help="vertex (Vertex AI Pipelines) or kubeflow (a KFP host; kfp is another name for it)",
    )
    parser.add_argument("--pipeline", required=True, choices=("training", "comparison"))
    parser.add_argument(
        "--name", help="run or schedule display name (default: strategist-PIPELINE)"
    )
    parser.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"container image of every step (default: {DEFAULT_IMAGE})",
    )
    parser.add_argument(
        "--gpu",
        help=f"GPU of the train step: {common.GPU_NAMES}, or none (default: t4 for kubeflow)",
    )
    common.add_train_step_gpus_argument(parser)
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="pipeline parameter, repeatable (e.g. --param run_config.training.epochs=10 "
        "--param promotion_margin=0.005); checked against the pipeline's parameters",
    )
    parser.add_argument(
        "--pipeline-root",
        help="gs:// folder for the run's artifacts (required for vertex; kfp: the "
        "deployment's default)",
    )
    parser.add_argument(
        "--service-account",
        help="vertex: service account email the run uses; kfp: Kubernetes service account",
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="reuse cached step results (default: off, so every run really retrains)",
    )
    vertex = parser.add_argument_group("Vertex AI")
    vertex.add_argument("--project", help="Google Cloud project ID")
    vertex.add_argument("--region", help="Vertex AI region, e.g. us-central1")
    kfp = parser.add_argument_group("Kubeflow Pipelines")
    kfp.add_argument("--host", help="KFP API URL, e.g. http://localhost:8080")
    kfp.add_argument("--namespace", help="KFP namespace (multi-user deployments)")
    kfp.add_argument("--experiment", help="KFP experiment (default: Default)")


def submission_from_args(args: argparse.Namespace):
    """The `Submission` the flags describe (parameters split, not yet typed)."""
    from pipelines.submission import Submission, parse_param

    return Submission(
        target=args.target,
        pipeline=args.pipeline,
        name=args.name,
        image=args.image,
        gpu=args.gpu,
        gpus=args.gpus_per_machine,
        params=dict(parse_param(text) for text in args.param),
        project=args.project,
        region=args.region,
        pipeline_root=args.pipeline_root,
        service_account=args.service_account,
        host=args.host,
        namespace=args.namespace,
        experiment=args.experiment,
        enable_caching=args.cache,
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "submit",
        help="compile a pipeline and start a run on Vertex AI or KFP",
        description=(
            "Compile the training or comparison pipeline to a temporary file and start one "
            "run on Vertex AI Pipelines (--project, --region, --pipeline-root) or a Kubeflow "
            "Pipelines deployment (--host). Prints the run's UI link. Missing settings or "
            "credentials exit 2 before anything is sent."
        ),
        epilog=(
            "examples:\n"
            "  strategist submit --pipeline training --target vertex --project P "
            "--region us-central1 --pipeline-root gs://BUCKET/root --image "
            "us-docker.pkg.dev/my-project/strategist/trainer:1.0\n"
            "  strategist submit --pipeline comparison --target kubeflow "
            "--host http://localhost:8080 --gpu a100 --gpus-per-machine 2 --wait"
        ),
    )
    add_target_arguments(parser)
    parser.add_argument("--wait", action="store_true", help="wait for the run to finish")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check and compile, print the run's parameters and, for a comparison pilot "
        "(--param max_steps=N) on a cloud backend, its estimated cost; send nothing",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        if args.wait:
            raise common.ConfigError("--dry-run sends nothing to wait for: pass one of them")
        return dry_run(submission_from_args(args))
    return submit(submission_from_args(args), wait=args.wait)


def dry_run(sub, log: Callable[[str], None] = print) -> int:
    """Checks and compiles `sub` as `submit` does, prints what it would send; sends nothing.

    A comparison with `max_steps` on a cloud backend also gets its pilot's
    estimated cost (`pipelines.pilot_cost`): machines x minutes x price.

    Raises:
        ConfigError: bad settings or parameters, as `submit` refuses them.
    """
    import json

    from pipelines import submission

    submission.check_target(sub)
    with submission.compiled(sub) as (_, spec):
        params = submission.typed_params(spec, sub.params)
        declared = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    values = {name: p.get("defaultValue") for name, p in declared.items()}
    values.update(params)
    log(f"dry run: would start the {sub.pipeline} pipeline on {sub.target}; nothing was sent")
    log(json.dumps(values, indent=2, sort_keys=True))
    steps = int(values.get("max_steps") or 0)
    if sub.pipeline == "comparison" and steps and values.get("backend") not in (None, "local"):
        from components.core.prices import load_prices
        from pipelines.pilot_cost import describe, pilot_costs

        prices = load_prices()
        costs = pilot_costs(
            values["run_config"],
            values["clusters"],
            values.get("cloud_config") or {},
            steps,
            prices,
        )
        for line in describe(costs, steps, prices.currency):
            log(line)
    return 0


def submit(
    sub,
    *,
    wait: bool = False,
    credentials: Any = None,
    client: Any = None,
    log: Callable[[str], None] = print,
) -> int:
    """Validates, compiles and submits one run.

    Args:
        sub: the `Submission`.
        wait: wait for the run to end.
        credentials: Google credentials for vertex (default: Application Default
            Credentials, checked before anything is sent).
        client: a `kfp.Client` for kfp (default: one for `sub.host`).
        log: where progress lines go.

    Returns:
        0 when submitted (or, with `wait`, succeeded), 1 when the run failed.

    Raises:
        ConfigError: bad settings, parameters or missing credentials; nothing was sent.
    """
    from pipelines import submission

    submission.check_target(sub)
    if sub.target == "vertex" and credentials is None:
        from components.core.launch.credentials import google_credentials

        credentials = google_credentials()
    with submission.compiled(sub) as (package, spec):
        params = submission.typed_params(spec, sub.params)
        if sub.target == "vertex":
            job = submission.submit_vertex(sub, package, params, credentials)
            log(f"submitted {job.resource_name}")
            log(f"run: {submission.vertex_console_link(sub, job.resource_name)}")
            if not wait:
                return 0
            try:
                job.wait()
            except RuntimeError as err:
                print(f"strategist submit: run failed: {err}", file=sys.stderr)
                return 1
            log(f"run {job.resource_name} succeeded")
            return 0
        client = client or submission.kfp_client(sub)
        result = submission.submit_kfp(sub, package, params, client)
    log(f"submitted run {result.run_id}")
    log(f"run: {submission.kfp_link(client, f'runs/details/{result.run_id}')}")
    if not wait:
        return 0
    state = result.wait_for_run_completion().state
    if state != "SUCCEEDED":
        print(f"strategist submit: run {result.run_id} ended {state}", file=sys.stderr)
        return 1
    log(f"run {result.run_id} succeeded")
    return 0
