"""`--checkpoint-every`: how often a run checkpoints, and what a preemption then costs.

The value is `epoch` (the default: a checkpoint at each epoch's end), a number
of training steps (`20`), or a duration (`90s`, `10m`, `2h`) that the trainer
turns into steps once it has measured its step time. Pure Python: the CLI, the
config's validation, the selector and the comparison's pricing use it without
TensorFlow.

What a preemption costs is priced here once, for `select --preemptible` and a
comparison's price alike: the restart (`RESTART_S`) and the work trained again
since the last checkpoint (`work_lost_seconds`), at an expected rate of
`PREEMPTIONS_PER_MACHINE_HOUR` unless the user gives one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from components.core.errors import ConfigError

EPOCH = "epoch"
# At most a checkpoint a step; a billion steps is past any run's length.
MAX_STEPS = 1_000_000_000
# A checkpoint costs a save of every variable: more often than every second would
# spend most of a step saving; a week is past any Spot VM's life.
MIN_SECONDS = 1.0
MAX_SECONDS = 7 * 24 * 3600.0
# Preemptible (Spot) machines: Compute Engine ends a preemptible VM after at
# most 24 h, so each machine is preempted at least once a day (the default of
# `--preemptions-per-machine-hour`). Relaunching a synchronous cluster and
# restoring its checkpoint takes about RESTART_S (a replacement Spot VM is
# provisioned and the job's image pulled; the local rehearsal, which provisions
# nothing, takes 16-34 s, docs/faults.md).
PREEMPTIONS_PER_MACHINE_HOUR = 1 / 24
RESTART_S = 300.0
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smh])$")


@dataclass(frozen=True)
class CheckpointInterval:
    """When a run writes its `BackupAndRestore` checkpoint.

    Attributes:
        steps: every this many training steps (and at each epoch's end); None
            with `seconds` None: at each epoch's end only.
        seconds: every this many seconds of training, turned into steps from
            the measured step time (`steps_for`).
    """

    steps: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> CheckpointInterval:
        """`epoch`/empty, a step count, or a duration `Ns`/`Nm`/`Nh`.

        Raises:
            ConfigError: for anything else, or a value out of range.
        """
        value = (text or EPOCH).strip().lower()
        if value == EPOCH:
            return cls()
        if value.isdigit():
            steps = int(value)
            if not 1 <= steps <= MAX_STEPS:
                raise ConfigError(
                    f"--checkpoint-every takes 1 to {MAX_STEPS:,} steps, got {text!r}"
                )
            return cls(steps=steps)
        match = _DURATION.match(value)
        if not match:
            raise ConfigError(
                f"--checkpoint-every takes 'epoch', a number of steps (20) or a duration "
                f"(90s, 10m, 2h), got {text!r}"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
        if not MIN_SECONDS <= seconds <= MAX_SECONDS:
            raise ConfigError(f"--checkpoint-every takes a duration of 1s to 168h, got {text!r}")
        return cls(seconds=seconds)

    @property
    def per_epoch(self) -> bool:
        """Whether checkpoints are written at epoch ends only."""
        return self.steps is None and self.seconds is None

    def steps_for(self, step_seconds: float) -> int:
        """The step interval: `steps`, or `seconds` over the measured step time (at least 1)."""
        if self.steps is not None:
            return self.steps
        if self.seconds is None:
            raise ValueError("a per-epoch interval has no step count")
        return max(1, min(MAX_STEPS, int(self.seconds / max(step_seconds, 1e-9))))

    def describe(self) -> str:
        """`every epoch`, `every 20 steps`, `every 600 s of training`."""
        if self.steps is not None:
            return f"every {self.steps:,} steps and at each epoch's end"
        if self.seconds is not None:
            return f"every {self.seconds:g} s of training and at each epoch's end"
        return "at each epoch's end"


def work_lost_seconds(
    interval: CheckpointInterval, epoch_seconds: float, step_seconds: float
) -> float:
    """Expected training time a preemption throws away with this interval.

    A preemption lands at a uniformly random moment between two checkpoints,
    so half an interval is trained again on average; with the notice handled
    (`components.core.preemption`) a run saves at the step it stopped at and
    loses at most a step, but a kill without notice (a machine lost outright)
    still costs half an interval, which is what this prices.

    Args:
        interval: the run's `--checkpoint-every`.
        epoch_seconds: the time of one epoch.
        step_seconds: the time of one step.
    """
    if interval.per_epoch:
        seconds = epoch_seconds
    else:
        seconds = min(epoch_seconds, interval.steps_for(step_seconds) * step_seconds)
    return seconds / 2 if math.isfinite(seconds) else seconds


def preemption_loss_seconds(
    interval: CheckpointInterval, epoch_seconds: float, step_seconds: float
) -> float:
    """Expected seconds one preemption costs: the restart (`RESTART_S`) and, on
    average, half the checkpoint interval trained again (`work_lost_seconds`).

    Args:
        interval: the run's `--checkpoint-every`.
        epoch_seconds: the time of one epoch.
        step_seconds: the time of one step.
    """
    return RESTART_S + work_lost_seconds(interval, epoch_seconds, step_seconds)


def preemption_share(loss_seconds: float, machines: int, rate: float) -> float:
    """The share of each hour expected preemptions take (at most 1).

    Args:
        loss_seconds: what one preemption costs (`preemption_loss_seconds`).
        machines: machines whose preemption stops the run (all of a synchronous
            cluster's; one for parameter_server, whose other workers keep training).
        rate: expected preemptions of one machine per hour.
    """
    return min(1.0, machines * rate * loss_seconds / 3600)


def check_preemption_rate(rate: float | None, preemptible: bool) -> None:
    """Refuses a `--preemptions-per-machine-hour` that is not a number from 0 up, one
    without `--preemptible`, and one whose restarts fill every hour of a machine (no
    strategy trains at all there: a prediction or a price would be a made-up number).

    Raises:
        ConfigError: naming the flag, what the rate costs, and what to give instead.
    """
    if rate is None:
        return
    if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 <= rate < math.inf):
        raise ConfigError(
            f"--preemptions-per-machine-hour must be a number from 0 up, got {rate!r}"
        )
    if not preemptible:
        raise ConfigError(
            "--preemptions-per-machine-hour applies to preemptible machines: add "
            "--preemptible, or drop the rate"
        )
    if rate * RESTART_S < 3600:
        return
    raise ConfigError(
        f"--preemptions-per-machine-hour {rate:g}: each preemption costs a restart of "
        f"about {RESTART_S:.0f} s, so {3600 / RESTART_S:g} or more an hour leave "
        f"a machine no time to train ({rate:g} x {RESTART_S:.0f} s = "
        f"{rate * RESTART_S:,.0f} s of restarts an hour); give the rate the machines "
        "see (without it, one a day: Compute Engine stops a preemptible VM within 24 h), "
        "or train on machines that are not preemptible"
    )
