"""The model a run trains: built from its model module, compiled with the user's settings.

`build_compiled` builds a module's model (in a strategy's scope when given),
checks that it is a tf_keras model whose output fits the task, and compiles it
with what the module chose (`compile_settings`, or the model's own `compile`,
else the task's defaults), the learning rate scaled linearly with the batch.
`Built.adjustments` says, in words, what Strategist changed.

`preflight` builds the model once on this process's CPU, without a strategy,
and runs one small batch of the real data through it and its loss: a bad
module is refused before any cluster starts.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from typing import Any

from components.core import model_module
from components.core.config import ConfigError, RunConfig
from components.core.input_spec import CLASSIFICATION, REGRESSION, InputSpec
from components.core.model_module import ModelModule
from components.core.strategy_spec import XLA_MODEL, XLA_TRAIN_STEP

DEFAULTS = "defaults"
FROM_COMPILE_SETTINGS = "compile_settings"
FROM_MODEL = "build_model's compile"
_ERROR_LINE = re.compile(r"^\w+(Error|Exception): ")


@dataclass
class Built:
    """A compiled model and what it was compiled with.

    Attributes:
        model: the compiled tf_keras model.
        compile: what the model is compiled with, for the record: `optimizer`
            (class name), `optimizer_config` (its other settings), `learning_rate`
            (the peak rate it trains with, None
            for a user's schedule), `loss`, `metrics` (names) and `from`
            (where the settings came from).
        adjustments: what Strategist changed of the user's choices, one
            sentence each (the learning rate it scaled, its warm-up).
    """

    model: Any
    compile: dict[str, Any]
    adjustments: list[str]


def default_settings(task: str, base_learning_rate: float) -> dict[str, Any]:
    """What a model is compiled with when its module chooses nothing.

    Classification: Adam, sparse categorical cross-entropy from logits,
    accuracy. Regression: Adam, mean squared error, MAE and RMSE.
    """
    import tf_keras as keras

    if task == REGRESSION:
        return {
            "optimizer": keras.optimizers.Adam(base_learning_rate),
            "loss": keras.losses.MeanSquaredError(),
            "metrics": [
                keras.metrics.MeanAbsoluteError(name="mae"),
                keras.metrics.RootMeanSquaredError(name="rmse"),
            ],
        }
    return {
        "optimizer": keras.optimizers.Adam(base_learning_rate),
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "metrics": ["accuracy"],
    }


def build_compiled(
    config: RunConfig,
    spec: InputSpec,
    module: ModelModule,
    *,
    strategy: Any = None,
    xla_scope: str | None = None,
    batch_per_update: int | None = None,
    steps_per_epoch: int = 1,
) -> Built:
    """Builds and compiles `module`'s model; in `strategy.scope()` when a strategy is given.

    Args:
        config: the run (precision, steps per execution, XLA, learning-rate settings).
        spec: the examples the model takes.
        module: the model module.
        strategy: the distribution strategy, or None (evaluation, the pre-flight
            check: compiled without the run's steps per execution and XLA).
        xla_scope: what XLA compiles (`training.xla_scope`: None without
            `--jit-compile`); unused without a strategy.
        batch_per_update: examples per optimizer update; the learning rate is
            scaled to it from `training.base_batch_size`. None: not scaled.
        steps_per_epoch: steps of one epoch (for the warm-up).

    Raises:
        ConfigError: the module raised, returned no tf_keras model, an output
            that does not fit the task, or compile settings Keras refuses.
    """
    import tf_keras as keras

    keras.mixed_precision.set_global_policy(config.training.precision)
    # The training options only where it trains: an evaluation over a dataset of
    # unknown length needs one step per execution.
    trains = strategy is not None
    scope = strategy.scope() if trains else contextlib.nullcontext()
    with scope:
        model = model_module.call(module, "build_model", spec)
        check_model(model, spec, module)
        if trains and xla_scope == XLA_MODEL:
            compile_model_with_xla(model)
        settings, source = _settings(module, model, spec, config.training.base_learning_rate)
        optimizer, learning_rate, adjustments = _scaled_optimizer(
            settings["optimizer"], config, batch_per_update, steps_per_epoch
        )
        try:
            model.compile(
                optimizer=optimizer,
                loss=settings["loss"],
                metrics=settings["metrics"],
                steps_per_execution=config.training.steps_per_execution if trains else 1,
                jit_compile=trains and xla_scope == XLA_TRAIN_STEP,
            )
        except (ValueError, TypeError) as err:
            raise ConfigError(
                f"{module.where()}: Keras refuses the compile settings: {_first_line(err)}"
            ) from None
    record = {
        "optimizer": type(_inner(optimizer)).__name__,
        "optimizer_config": _plain_config(_inner(optimizer)),
        "learning_rate": learning_rate,
        "loss": _name_of(settings["loss"]),
        "metrics": [_name_of(m) for m in settings["metrics"] or []],
        "from": source,
    }
    return Built(model, record, adjustments)


def compile_model_with_xla(model: Any) -> None:
    """Compiles `model`'s forward pass, and with it its backward pass, with XLA.

    The train step around it (the all-reduce, the optimizer update) stays
    outside XLA: what `--jit-compile` can compile where XLA has no collectives
    (`strategy_spec.XLA_MODEL`). TensorFlow compiles the gradient of a
    `jit_compile=True` function with XLA too.
    """
    import tensorflow as tf

    # An attribute of the instance, which Keras's `__call__` reads; the export
    # traces the model again from the class's own `call` (`uncompile_model_with_xla`).
    model.call = tf.function(model.call, jit_compile=True, reduce_retracing=True)


def uncompile_model_with_xla(model: Any) -> None:
    """Undoes `compile_model_with_xla`, so an exported model needs no XLA to serve."""
    model.__dict__.pop("call", None)


def check_model(model: Any, spec: InputSpec, module: ModelModule) -> None:
    """Refuses what is not a tf_keras model, or whose output does not fit the labels.

    Raises:
        ConfigError: naming the module and what to change.
    """
    import tf_keras as keras

    where = f"build_model of {module.where()}"
    if not isinstance(model, keras.Model):
        kind = f"{type(model).__module__}.{type(model).__name__}"
        hint = (
            ": import tf_keras (Keras 2), not keras or tf.keras (Keras 3's fit fails under "
            "multi-worker strategies)"
            if "keras" in kind
            else ": return a tf_keras.Model"
        )
        raise ConfigError(f"{where} returned {kind}, not a tf_keras model{hint}")
    if module.task and module.task != spec.task:
        raise ConfigError(
            f"{module.where()} declares TASK = {module.task!r}, but the data's label "
            f"{spec.label.name!r} makes it {spec.task}: change TASK or the label"
        )
    outputs = getattr(model, "outputs", None)
    if not outputs:
        # Not built yet (a Sequential without an Input layer, a subclassed model): the
        # pre-flight checks what it outputs for a real batch (`check_outputs`).
        return
    check_outputs([output.shape for output in outputs], spec, where)


def check_outputs(shapes: list[Any], spec: InputSpec, where: str) -> None:
    """Refuses a model whose outputs (their shapes) do not fit the labels.

    Args:
        shapes: the `TensorShape` of each output, symbolic or of a real batch.
        spec: the data's description.
        where: how the message names the model (`build_model of FILE`).

    Raises:
        ConfigError: several outputs, or a width that does not fit the label.
    """
    if len(shapes) != 1:
        raise ConfigError(f"{where} returns a model with {len(shapes)} outputs: return one")
    shape = shapes[0]
    width = shape[-1] if shape.rank and shape.rank > 1 else 1
    classes = spec.label.num_classes
    if spec.task == CLASSIFICATION and width not in (classes, 1 if classes == 2 else classes):
        raise ConfigError(
            f"{where} outputs {width} value(s) per example, but the label {spec.label.name!r} "
            f"has {classes} classes: end the model with Dense({classes})"
        )
    if spec.task == REGRESSION and width != 1:
        raise ConfigError(
            f"{where} outputs {width} values per example, but the label {spec.label.name!r} is "
            "one number (regression): end the model with Dense(1)"
        )


def compiled_metric_count(module: ModelModule, model: Any, spec: InputSpec) -> int:
    """Metrics the trainer compiles `model` with besides its loss.

    The module's own (`compile_settings`, or a compile in `build_model`), else
    the task's defaults, as `build_compiled` chooses them. The strategy
    selector charges each one's per-step all-reduces under
    `multi_worker_mirrored`.

    Raises:
        ConfigError: as `build_compiled`, for a `compile_settings` that fails.
    """
    settings, _ = _settings(module, model, spec, base_learning_rate=1e-3)
    return len(settings["metrics"])


def preflight(config: RunConfig, manifest) -> float:
    """Builds the run's model once here (CPU, no strategy) and runs one batch of real data.

    The batch goes through the module's `preprocess`, the model and its loss
    and metrics (`test_on_batch`), which catches inputs the model does not
    take and labels that do not fit the loss.

    Returns:
        Seconds the check took.

    Raises:
        ConfigError: anything wrong with the module, naming its file and line.
    """
    import tensorflow as tf
    import tf_keras as keras

    from components.core import datasets, models

    started = time.perf_counter()
    module = models.resolve(config.model)
    spec = manifest.input_spec
    try:
        with tf.device("/cpu:0"):
            built = build_compiled(config, spec, module)
            by_name = datasets.inputs_by_name(manifest, built.model)
            batch = datasets.eval_dataset(
                manifest, "train", 2, preprocess=module.preprocess, by_name=by_name
            )
            features, labels = _first(batch, module)
            try:
                # Called first: a model built only now (no Input layer) shows its outputs,
                # whose width is said plainly rather than as the loss's shape error.
                predictions = built.model(features, training=False)
                shapes = [p.shape for p in tf.nest.flatten(predictions)]
                check_outputs(shapes, spec, f"build_model of {module.where()}")
                built.model.test_on_batch(features, labels)
            except ConfigError:
                raise
            except Exception as err:  # noqa: BLE001 - Keras raises many kinds here
                raise ConfigError(
                    f"{module.where()}: the model does not take the data "
                    f"({', '.join(spec.features)} -> {spec.label.name}): {_first_line(err)}"
                ) from None
    finally:
        keras.mixed_precision.set_global_policy("float32")
        keras.backend.clear_session()
    return time.perf_counter() - started


def _first(batch, module: ModelModule):
    try:
        return next(iter(batch))
    except StopIteration:
        raise ConfigError("the training split is empty") from None
    except Exception as err:  # noqa: BLE001 - the user's preprocess runs here
        raise ConfigError(
            f"preprocess of {module.where()} failed on the data: {_first_line(err)}"
        ) from None


def _settings(
    module: ModelModule, model: Any, spec: InputSpec, base_learning_rate: float
) -> tuple[dict[str, Any], str]:
    """The optimizer, loss and metrics the module chose, with the task's defaults filling gaps."""
    defaults = default_settings(spec.task, base_learning_rate)
    if module.compile_settings is not None:
        chosen = model_module.call(module, "compile_settings", spec)
        if not isinstance(chosen, dict):
            raise ConfigError(
                f"compile_settings of {module.where()} returned {type(chosen).__name__}: "
                f"return a dict with any of {', '.join(model_module.COMPILE_KEYS)}"
            )
        unknown = set(chosen) - set(model_module.COMPILE_KEYS)
        if unknown:
            raise ConfigError(
                f"compile_settings of {module.where()} returned {', '.join(sorted(unknown))}; "
                f"it may set {', '.join(model_module.COMPILE_KEYS)}"
            )
        source = FROM_COMPILE_SETTINGS
    elif getattr(model, "optimizer", None) is not None:
        # The user compiled the model in build_model: keep what they chose.
        chosen = {
            "optimizer": _inner(model.optimizer),
            "loss": model.loss or None,
            "metrics": list(getattr(model.compiled_metrics, "_user_metrics", None) or []) or None,
        }
        source = FROM_MODEL
    else:
        return defaults, DEFAULTS
    settings = {key: chosen.get(key) or defaults[key] for key in model_module.COMPILE_KEYS}
    if isinstance(settings["optimizer"], str):
        import tf_keras as keras

        settings["optimizer"] = keras.optimizers.get(settings["optimizer"])
    if not isinstance(settings["metrics"], (list, tuple)):
        settings["metrics"] = [settings["metrics"]]
    return settings, source


def _scaled_optimizer(optimizer: Any, config: RunConfig, batch: int | None, steps_per_epoch: int):
    """The optimizer with its learning rate scaled to `batch` and warmed up; what changed.

    The optimizer's own rate is taken as the rate at `training.base_batch_size`
    and scaled linearly (Goyal et al., 2017, as `learning_rate.make_learning_rate`);
    a new optimizer of the same class and config carries the schedule. A rate
    that is already a schedule is the user's plan and is kept.

    Returns:
        (optimizer, peak learning rate or None, adjustments).
    """
    import tf_keras as keras

    from components.core.learning_rate import make_learning_rate

    optimizer = _inner(optimizer)
    rate = getattr(optimizer, "learning_rate", None)
    if isinstance(
        getattr(optimizer, "_learning_rate", None), keras.optimizers.schedules.LearningRateSchedule
    ):
        return optimizer, None, ["learning-rate schedule kept as given: not scaled"]
    try:
        base = float(rate.numpy() if hasattr(rate, "numpy") else rate)
    except (TypeError, ValueError):
        return optimizer, None, ["learning rate not readable: kept as given, not scaled"]
    if batch is None:
        return optimizer, base, []
    t = config.training
    schedule = make_learning_rate(config, batch, steps_per_epoch, base_learning_rate=base)
    peak = base * batch / t.base_batch_size
    try:
        scaled = type(optimizer).from_config({**optimizer.get_config(), "learning_rate": schedule})
    except (TypeError, ValueError, NotImplementedError) as err:
        return (
            optimizer,
            base,
            [
                f"learning rate {base:g} kept: {type(optimizer).__name__} "
                f"cannot be rebuilt with a scaled rate ({_first_line(err)})"
            ],
        )
    adjustments = []
    if peak != base:
        adjustments.append(
            f"learning rate {base:g} -> {peak:g} (scaled linearly: batch {batch} per update / "
            f"base batch {t.base_batch_size})"
        )
    if t.warmup_epochs:
        adjustments.append(f"learning rate warmed up linearly over {t.warmup_epochs} epoch(s)")
    return scaled, peak, adjustments


def _plain_config(optimizer: Any) -> dict[str, Any]:
    """The optimizer's settings a record can hold (numbers, flags, names; not its rate)."""
    try:
        config = optimizer.get_config()
    except (NotImplementedError, AttributeError, TypeError):
        return {}
    return {
        key: value
        for key, value in config.items()
        if key != "learning_rate" and isinstance(value, (bool, int, float, str, type(None)))
    }


def _inner(optimizer: Any) -> Any:
    """The optimizer a mixed-precision `LossScaleOptimizer` wraps, else itself."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def _name_of(thing: Any) -> str:
    if isinstance(thing, str):
        return thing
    if isinstance(thing, dict):
        return ", ".join(f"{k}: {_name_of(v)}" for k, v in thing.items())
    return getattr(thing, "name", None) or getattr(thing, "__name__", type(thing).__name__)


def _first_line(err: BaseException) -> str:
    """The line of an error a person needs: TensorFlow's traced errors end with it."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    line = (errors or lines or [type(err).__name__])[-1 if errors else 0]
    if "Exception encountered when calling layer" in line and line in lines[:-1]:
        line = f"{line} {lines[lines.index(line) + 1]}"  # what the layer said comes next
    return line if len(line) <= 300 else line[:297] + "..."
