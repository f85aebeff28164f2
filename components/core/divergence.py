"""A run that diverges fails: a non-finite loss or metric stops training at once.

`DivergenceStop` is a Keras callback, placed first so it runs before the epoch
record and the checkpoint (a diverged epoch is neither recorded nor saved). It
raises `Diverged`, which the trainer turns into `DIVERGED_EXIT`: the launchers
do not restart such a task (a restart would diverge again from the same
checkpoint), nothing is exported or promoted, and the run's status says failed.

How it sees the loss under each strategy (tf_keras `Model.fit`):
- one_device, mirrored, multi_worker_mirrored: `on_train_batch_end` gets the
  step's logs as tensors (the loss already all-reduced, so every worker of a
  multi-worker cluster stops at the same step); reading the loss is one scalar
  copy per step (per execution with `steps_per_execution`).
- parameter_server: the coordinator's logs are a `RemoteValue` of the step a
  worker runs (Keras refuses batch callbacks that do not say they take them,
  `_supports_tf_logs`); `fetch()` blocks until that step is done, so each is
  fetched `_REMOTE_LAG` steps later, when it has almost always finished, and
  the coordinator keeps steps queued as before. Keras' own `TerminateOnNaN`
  fetches every step at once (serialising the workers) and only sets
  `stop_training`, after which `fit` returns normally and the model would be
  exported.
- every strategy: the epoch's logs (every compiled metric), synchronised by
  Keras, are checked before anything is written.
"""

from __future__ import annotations

import collections
import math
from typing import Any

# Exit code of a task whose training diverged: no restart, the run fails (exit 1).
DIVERGED_EXIT = 3
# How many steps after it is scheduled a parameter-server step's loss is fetched.
_REMOTE_LAG = 8


class Diverged(RuntimeError):
    """Training produced a non-finite loss or metric.

    Attributes:
        epoch: 1-based epoch.
        step: steps done in that epoch when it was seen (None: at the epoch's end).
        name: the loss or metric (`loss`, `accuracy`, ...).
        value: what it was (nan, inf, -inf).
    """

    def __init__(
        self, epoch: int, step: int | None, name: str, value: float, cause: str, where: str = ""
    ):
        self.epoch, self.step, self.name, self.value = epoch, step, name, value
        # Raised in `fit` (no `where`), it stops training before the model is exported.
        during_fit = not where
        if during_fit:
            where = f"the end of epoch {epoch}" if step is None else f"epoch {epoch}, step {step}"
        super().__init__(
            f"training diverged: {name} is {value} at {where}; likely cause: {cause}"
            + (". Nothing was exported" if during_fit else "")
        )


def likely_cause(epoch: int, step: int | None, learning_rate: float | None) -> str:
    """What most likely made the loss non-finite, from where it happened.

    At the first step nothing was learnt yet: the data (a non-finite feature or
    label) or the model (its initial weights or a layer's arithmetic). Later,
    after finite steps, the updates grew: the learning rate.
    """
    if epoch == 1 and step is not None and step <= 1:
        return (
            "the data or the model: the first step's loss is already non-finite (check the "
            "features and labels for NaN or infinite values, and the model module's weights "
            "and layers)"
        )
    rate = f" ({learning_rate:g})" if learning_rate is not None else ""
    return (
        f"the learning rate{rate}: finite steps came first, then the updates blew up; pass "
        "a lower --learning-rate (if it persists, check the data and the model)"
    )


def _non_finite(value: Any) -> float | None:
    """`value` as a float when it is a non-finite number, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isfinite(number) else number


def check_evaluation(metrics: dict[str, Any], epochs: int) -> None:
    """Refuses a test evaluation holding a non-finite value (weights finite, outputs not).

    Raises:
        Diverged: naming the metric; the run is not exported or recorded.
    """
    for name in sorted(metrics):
        value = _non_finite(metrics[name])
        if value is not None:
            cause = (
                "the model: its weights are finite but its test outputs are not (an overflow "
                "in a layer, or a non-finite test feature)"
            )
            raise Diverged(epochs, None, f"test {name}", value, cause, "the test evaluation")


def stop_callback(learning_rate: float | None):
    """A Keras callback that raises `Diverged` at the first non-finite loss or metric.

    Args:
        learning_rate: the run's learning rate, named in the message.
    """
    import tf_keras as keras

    class DivergenceStop(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self._supports_tf_logs = True  # takes parameter-server RemoteValues (above)
            self._epoch = 1
            self._pending: collections.deque = collections.deque()

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch = epoch + 1
            self._pending.clear()

        def on_train_batch_end(self, batch, logs=None):
            # `batch`: 0-based index of the execution's last step; `step` counts from 1.
            step = batch + 1
            if logs is None:
                return
            if hasattr(logs, "fetch"):  # a parameter-server step, still running
                self._pending.append((step, logs))
                while len(self._pending) > _REMOTE_LAG:
                    step, remote = self._pending.popleft()
                    self._check(remote.fetch(), step, ("loss",))
                return
            self._check(logs, step, ("loss",))

        def on_epoch_end(self, epoch, logs=None):
            while self._pending:
                step, remote = self._pending.popleft()
                self._check(remote.fetch(), step, ("loss",))
            self._check(logs or {}, None, None)

        def _check(self, logs, step, names) -> None:
            if not isinstance(logs, dict):
                return
            for name in names or sorted(logs):
                value = _non_finite(logs.get(name))
                if value is not None:
                    cause = likely_cause(self._epoch, step, learning_rate)
                    raise Diverged(self._epoch, step, name, value, cause)

    return DivergenceStop()
