"""`strategist schedule`: run a pipeline on a cron schedule on Vertex AI or KFP."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pipelines.cli.submit import add_target_arguments, submission_from_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "schedule",
        help="run a pipeline on a cron schedule (Vertex AI schedule or KFP recurring run)",
        description=(
            "Create a Vertex AI pipeline schedule or a KFP recurring run of the training "
            "(scheduled retraining: a run promotes its model only when it beats the promoted "
            "one) or comparison pipeline. The cron expression is checked before anything is "
            "compiled or sent; for KFP a 5-field expression becomes KFP's 6-field form with "
            "seconds ('0 ' prefixed). At most one scheduled run at a time, no catch-up."
        ),
        epilog=(
            "examples:\n"
            "  strategist schedule --pipeline training --target vertex --cron '0 3 * * 1' "
            "--project P --region us-central1 --pipeline-root gs://BUCKET/root\n"
            "  strategist schedule --pipeline training --target kubeflow --cron '0 3 * * *' "
            "--host http://localhost:8080 --param promotion_margin=0.005"
        ),
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--cron",
        required=True,
        metavar="EXPR",
        help="when to run: 'MIN HOUR DAY MONTH WEEKDAY', e.g. '0 3 * * 1' (03:00 on Mondays); "
        "vertex takes a 'TZ=Europe/Berlin ' prefix; kfp also takes 6 fields, seconds first",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return schedule(submission_from_args(args), args.cron)


def schedule(
    sub,
    cron: str,
    *,
    credentials: Any = None,
    client: Any = None,
    log: Callable[[str], None] = print,
) -> int:
    """Validates the cron and settings, compiles, and creates the schedule.

    Args:
        sub: the `Submission`.
        cron: the cron expression as given.
        credentials: Google credentials for vertex (default: Application Default
            Credentials, checked before anything is sent).
        client: a `kfp.Client` for kfp (default: one for `sub.host`).
        log: where progress lines go.

    Returns:
        0 when the schedule was created.

    Raises:
        ConfigError: bad cron, settings, parameters or missing credentials; nothing was sent.
    """
    from pipelines import submission

    target_cron = submission.validate_cron(cron, sub.target)
    submission.check_target(sub)
    if sub.target == "vertex" and credentials is None:
        from components.core.launch.credentials import google_credentials

        credentials = google_credentials()
    with submission.compiled(sub) as (package, spec):
        params = submission.typed_params(spec, sub.params)
        if sub.target == "vertex":
            created = submission.schedule_vertex(sub, package, params, target_cron, credentials)
            log(f"scheduled {created.resource_name} on cron {target_cron!r}")
            log(
                "schedule: "
                + submission.vertex_console_link(sub, created.resource_name, kind="schedules")
            )
            return 0
        client = client or submission.kfp_client(sub)
        created = submission.schedule_kfp(sub, package, params, target_cron, client)
    log(f"scheduled recurring run {created.recurring_run_id} on cron {target_cron!r}")
    log(
        "recurring run: "
        + submission.kfp_link(client, f"recurringrun/details/{created.recurring_run_id}")
    )
    return 0
