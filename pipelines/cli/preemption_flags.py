"""`select`'s flags for preemptible machines: how often they are taken back, and what
each preemption loses with the run's checkpoint interval."""

from __future__ import annotations

import argparse

from components.core.checkpoint_interval import EPOCH, RESTART_S
from components.core.selection.topology import ASSUMED_EPOCH_S
from pipelines.cli import arg_types


def add_capacity_arguments(group: argparse._ArgumentGroup, preemptible_help: str) -> None:
    """`--preemptible` and `--preemptions-per-machine-hour`, as `select` and `compare`
    take them.

    Args:
        group: the parser group they belong to.
        preemptible_help: what `--preemptible` does in that command.
    """
    group.add_argument("--preemptible", action="store_true", help=preemptible_help)
    group.add_argument(
        "--preemptions-per-machine-hour",
        type=float,
        help="expected preemptions of one preemptible machine per hour, below "
        f"{3600 / RESTART_S:g} (each restart takes about {RESTART_S:.0f} s, so "
        f"{3600 / RESTART_S:g} an hour leave no time to train; default: 1/24, "
        "Compute Engine ends preemptible VMs within 24 h)",
    )


def add_preemption_arguments(group: argparse._ArgumentGroup) -> None:
    """`--preemptible`, `--preemptions-per-machine-hour`, `--checkpoint-every` (train's
    flag, same values) and `--examples-per-epoch`.

    Args:
        group: the hardware group of `select`'s parser.
    """
    add_capacity_arguments(group, "Spot/preemptible machines")
    group.add_argument(
        "--checkpoint-every",
        default=EPOCH,
        metavar="STEPS|DURATION",
        help="with --preemptible: how often the run writes its checkpoint, as train's flag "
        "(STEPS, or DURATION 90s/10m/2h); each preemption loses the restart and half this "
        "interval, from the predicted step time (default: epoch, at each epoch's end)",
    )
    group.add_argument(
        "--examples-per-epoch",
        type=arg_types.positive_int,
        help="with --preemptible: examples in one epoch, which time a per-epoch checkpoint "
        f"(default: an epoch assumed to take {ASSUMED_EPOCH_S:.0f} s)",
    )
