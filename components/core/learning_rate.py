"""Learning rate: the linear scaling rule with warm-up, computed where the step counter lives."""

from __future__ import annotations

import contextlib
from typing import Any

from components.core.config import RunConfig


def make_learning_rate(
    config: RunConfig,
    batch_per_update: int,
    steps_per_epoch: int,
    base_learning_rate: float | None = None,
):
    """Linear scaling rule with linear warm-up (Goyal et al., 2017).

    Args:
        config: the run (base batch size, warm-up epochs).
        batch_per_update: examples per optimizer update.
        steps_per_epoch: steps of one epoch.
        base_learning_rate: the rate at `training.base_batch_size` (a user's
            optimizer's own rate); None: `training.base_learning_rate`.
    """
    import tf_keras as keras

    t = config.training
    base = t.base_learning_rate if base_learning_rate is None else base_learning_rate
    peak = base * batch_per_update / t.base_batch_size
    warmup_steps = t.warmup_epochs * steps_per_epoch
    if warmup_steps == 0:
        return peak

    @keras.saving.register_keras_serializable(package="strategist")
    class WarmUp(keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self, peak: float, warmup_steps: int):
            self.peak, self.warmup_steps = peak, warmup_steps

        def __call__(self, step):
            import tensorflow as tf

            with on_parameter_server_of(step):
                progress = tf.cast(step + 1, tf.float32) / float(self.warmup_steps)
                return self.peak * tf.minimum(1.0, progress)

        def get_config(self) -> dict[str, Any]:
            return {"peak": self.peak, "warmup_steps": self.warmup_steps}

    return WarmUp(peak, warmup_steps)


def on_parameter_server_of(step):
    """A device scope on the parameter server that holds `step`, else no scope.

    tf-keras computes a learning-rate schedule from the optimizer's step counter
    and assigns the result to a variable every step (`_compute_current_learning_rate`
    in tf_keras/src/optimizers/optimizer.py). Under parameter_server both
    variables live on a parameter server; computed on the worker, the schedule
    costs two transfers per step in series before the update (the counter read
    to the worker, the rate sent back), which the profile in docs/benchmarks.md
    measured. Computed where the counter lives, it costs none.
    """
    import tensorflow as tf

    device = getattr(step, "device", "") or ""
    if isinstance(step, tf.Variable) and "/job:ps/" in device:
        return tf.device(device)
    return contextlib.nullcontext()
