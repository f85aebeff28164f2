"""`--checkpoint-every`: how often a run checkpoints, and what a preemption then costs.

The value is `epoch` (the default: a checkpoint at each epoch's end), a number
of training steps (`20`), or a duration (`90s`, `10m`, `2h`) that the trainer
turns into steps once it has measured its step time. Pure Python: the CLI, the
config's validation, the selector and the comparison's pricing use it without
TensorFlow.
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
