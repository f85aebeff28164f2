"""`strategist status`: what a local run's folder holds, told truthfully."""

from __future__ import annotations

import argparse
import json
import os

from components.core.config import ConfigError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "status",
        help="show the state of a local run's or comparison's output folder",
        description=(
            "Print OUTPUT/status.json of a `train` or `compare` as JSON. A run killed without "
            "a chance to say so (SIGKILL) left 'running' behind; as nobody holds the folder's "
            "lock any more, it is shown as 'interrupted' (with owner_died: true): the same "
            "command resumes a train run. Exits 2 when OUTPUT holds no run."
        ),
        epilog="examples:\n  strategist status runs/20261124-031500-train",
    )
    parser.add_argument("output", metavar="OUTPUT", help="the run's --output folder")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Prints the run's status; 0 when there is one.

    Raises:
        ConfigError: OUTPUT is no run folder (exit 2).
    """
    from components.core import run_folder

    status = run_folder.read_status(args.output)
    if status is None:
        what = "does not exist" if not os.path.isdir(args.output) else "holds no status.json"
        raise ConfigError(
            f"{args.output} {what}: pass the --output folder of a local train or compare"
        )
    print(json.dumps(status, indent=2, sort_keys=True))
    return 0
