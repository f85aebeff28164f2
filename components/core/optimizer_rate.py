"""The chosen optimizer at the run's learning rate: replaced, scaled with the batch, warmed up.

`scaled_optimizer` takes the optimizer's own rate as the rate at
`training.base_batch_size`, puts `--learning-rate` in its place when given,
scales it linearly with the batch unless scaling is off, and warms it up; it
says in words what it changed.
"""

from __future__ import annotations

from typing import Any

from components.core.compile_choices import inner_optimizer
from components.core.config import ConfigError, RunConfig
from components.core.errors import first_line


def scaled_optimizer(
    optimizer: Any,
    config: RunConfig,
    batch: int | None,
    steps_per_epoch: int,
    *,
    given_rate: bool = False,
    scaled: bool = True,
):
    """The optimizer with its learning rate scaled to `batch` and warmed up; what changed.

    The optimizer's own rate is taken as the rate at `training.base_batch_size`
    and scaled linearly (Goyal et al., 2017, as `learning_rate.make_learning_rate`);
    a new optimizer of the same class and config carries the schedule. A rate
    that is already a schedule is the user's plan and is kept.

    Args:
        optimizer: the optimizer chosen (the module's, or the default).
        config: the run (base batch, warm-up, `--learning-rate`).
        batch: examples per update; None: the rate is neither scaled nor warmed up
            (an evaluation's copy).
        steps_per_epoch: steps of one epoch (for the warm-up).
        given_rate: `--learning-rate` replaces the module optimizer's own rate.
        scaled: False keeps the rate at any batch (`--no-scale-learning-rate`,
            or the module's `SCALE_LEARNING_RATE = False`); the warm-up stays.

    Returns:
        (optimizer, peak learning rate or None, adjustments).
    """
    import tf_keras as keras

    from components.core.learning_rate import make_learning_rate

    optimizer = inner_optimizer(optimizer)
    rate = getattr(optimizer, "learning_rate", None)
    t = config.training
    adjustments = []
    if isinstance(
        getattr(optimizer, "_learning_rate", None), keras.optimizers.schedules.LearningRateSchedule
    ):
        if given_rate:
            raise ConfigError(
                f"--learning-rate {t.base_learning_rate:g} cannot replace the "
                f"{type(optimizer).__name__} learning-rate schedule the model module chose: "
                "drop --learning-rate, or change the schedule in the module"
            )
        return optimizer, None, ["learning-rate schedule kept as given: not scaled"]
    try:
        base = float(rate.numpy() if hasattr(rate, "numpy") else rate)
    except (TypeError, ValueError):
        if given_rate:
            raise ConfigError(
                f"--learning-rate cannot be applied: the {type(optimizer).__name__} the model "
                "module chose has no readable rate; drop --learning-rate"
            ) from None
        return optimizer, None, ["learning rate not readable: kept as given, not scaled"]
    if given_rate and base != t.base_learning_rate:
        adjustments.append(
            f"learning rate {base:g} of the module's {type(optimizer).__name__} replaced by "
            f"--learning-rate {t.base_learning_rate:g}"
        )
        base = t.base_learning_rate
    if batch is None or not scaled:
        if batch is not None:
            adjustments.append(f"learning rate {base:g} kept at any batch: not scaled")
        if batch is None or not t.warmup_epochs:
            return _with_rate(optimizer, base, adjustments)
        batch = t.base_batch_size  # no scaling: the rate of one update is the base rate
    schedule = make_learning_rate(config, batch, steps_per_epoch, base_learning_rate=base)
    peak = base * batch / t.base_batch_size
    try:
        scaled_optimizer = type(optimizer).from_config(
            {**optimizer.get_config(), "learning_rate": schedule}
        )
    except (TypeError, ValueError, NotImplementedError) as err:
        if given_rate:
            raise ConfigError(
                f"--learning-rate cannot be applied: {type(optimizer).__name__} cannot be "
                f"rebuilt with another rate ({first_line(err)}); drop --learning-rate"
            ) from None
        return (
            optimizer,
            base,
            [
                f"learning rate {base:g} kept: {type(optimizer).__name__} "
                f"cannot be rebuilt with a scaled rate ({first_line(err)})"
            ],
        )
    if peak != base:
        adjustments.append(
            f"learning rate {base:g} -> {peak:g} (scaled linearly: batch {batch} per update / "
            f"base batch {t.base_batch_size})"
        )
    if t.warmup_epochs:
        adjustments.append(f"learning rate warmed up linearly over {t.warmup_epochs} epoch(s)")
    return scaled_optimizer, peak, adjustments


def _with_rate(optimizer: Any, rate: float, adjustments: list[str]):
    """The optimizer at `rate` (rebuilt from its config when the rate differs); its record."""
    current = getattr(optimizer, "learning_rate", None)
    try:
        same = float(current.numpy() if hasattr(current, "numpy") else current) == rate
    except (TypeError, ValueError):
        same = False
    if not same:
        optimizer = type(optimizer).from_config({**optimizer.get_config(), "learning_rate": rate})
    return optimizer, rate, adjustments
