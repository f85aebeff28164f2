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
import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Any

from components.core import adapt_once, model_module
from components.core.config import ConfigError, RunConfig
from components.core.input_spec import CLASSIFICATION, REGRESSION, InputSpec
from components.core.model_module import ModelModule
from components.core.strategy_spec import XLA_MODEL, XLA_TRAIN_STEP

DEFAULTS = "defaults"
# How `Built.compile["defaults"]` names the settings Strategist chose, not the module.
STRATEGISTS = "Strategist's"
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
            for a user's schedule), `loss`, `metrics` (names), `from`
            (where the module's settings came from) and `defaults` (the keys
            Strategist chose because the module did not: an optimizer-only
            compile gets Strategist's loss and metrics, said as Strategist's).
        adjustments: what Strategist changed of the user's choices, one
            sentence each (the learning rate it scaled, its warm-up).
        adapted: the states of the preprocessing layers `build_model` adapted on
            the training split (`adapt_once`; only where the spec carried it).
    """

    model: Any
    compile: dict[str, Any]
    adjustments: list[str]
    adapted: list[dict[str, Any]] = field(default_factory=list)


def default_settings(
    task: str, base_learning_rate: float, one_hot_labels: bool = False
) -> dict[str, Any]:
    """What a model is compiled with when its module chooses nothing.

    Classification: Adam, categorical cross-entropy from logits (sparse for
    class ids, plain for one-hot labels a `preprocess` made), accuracy.
    Regression: Adam, mean squared error, MAE and RMSE.
    """
    import tf_keras as keras

    if task != REGRESSION and one_hot_labels:
        return {
            "optimizer": keras.optimizers.Adam(base_learning_rate),
            "loss": keras.losses.CategoricalCrossentropy(from_logits=True),
            "metrics": ["accuracy"],
        }
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
    example = example_spec(spec, module)
    scope = strategy.scope() if trains else contextlib.nullcontext()
    adapted: list[dict[str, Any]] = []
    with scope, _adapting(config, spec, module, example, adapted) as spec:
        model = build_model(module, spec, example)
        if trains and xla_scope == XLA_MODEL:
            compile_model_with_xla(model)
        settings, source, defaulted = _settings(
            module, model, spec, config.training.base_learning_rate, example
        )
        module_optimizer = "optimizer" not in defaulted
        optimizer, learning_rate, adjustments = _scaled_optimizer(
            settings["optimizer"],
            config,
            batch_per_update,
            steps_per_epoch,
            given_rate=module_optimizer and config.training.learning_rate_given,
            scaled=config.training.scale_learning_rate and module.scale_learning_rate,
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
        "defaults": defaulted,
    }
    return Built(model, record, adjustments, adapted)


@contextlib.contextmanager
def _adapting(config: RunConfig, spec: InputSpec, module: ModelModule, example, adapted: list):
    """Where `build_model` adapts its preprocessing layers: on the real training split when
    `spec` carries it (`adapted` receives the states), else from the run's recorded states
    on an empty split of the same structure (`adapt_once`)."""
    if spec.training_data_fn is not None:
        with adapt_once.record() as states:
            yield spec
        adapted.extend(states)
        return
    states = adapt_once.read(config.output_dir) if config.output_dir else None
    empty = _empty_split(example)
    with adapt_once.replay(states or [], module.where()):
        yield dataclasses.replace(spec, training_data_fn=empty)


def _empty_split(example):
    """A function giving an empty batched dataset of `example`'s structure (None: no data)."""
    if example is None:
        return None

    def empty():
        import tensorflow as tf

        zeros = tf.nest.map_structure(
            lambda t: tf.zeros([d or 1 for d in t.shape], t.dtype), tuple(example)
        )
        return tf.data.Dataset.from_tensors(zeros).take(0).batch(1)

    return empty


def example_spec(spec: InputSpec, module: ModelModule) -> tuple[Any, Any] | None:
    """What the model receives, as `tf.TensorSpec`s of one example: `(inputs, label)`.

    The data's examples (`spec`: one tensor for one feature, else a dict by
    name) traced through the module's `preprocess`, as `tf.data` maps it; no
    example is computed. None when `preprocess` cannot be traced without the
    data (the pre-flight then shows it on a real batch).
    """
    import tensorflow as tf

    features = {
        name: tf.TensorSpec(feature.shape, tf.as_dtype(feature.dtype))
        for name, feature in spec.features.items()
    }
    inputs = next(iter(features.values())) if len(features) == 1 else features
    label = tf.TensorSpec((), tf.as_dtype(spec.label.dtype))
    if module.preprocess is None:
        return inputs, label
    try:
        traced = tf.function(module.preprocess).get_concrete_function(inputs, label)
    except Exception:  # noqa: BLE001 - the user's code; the pre-flight reports it on real data
        return None
    outputs = traced.structured_outputs
    if not (isinstance(outputs, (tuple, list)) and len(outputs) == 2):
        return None
    return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), tuple(outputs))


def build_model(module: ModelModule, spec: InputSpec, example: tuple[Any, Any] | None = None):
    """The module's model, built: its variables exist and its outputs are checked.

    A model without an `Input` layer (a `Sequential` built on its first call,
    a subclassed `keras.Model`) is built here by calling it on symbolic inputs
    of the example's shapes: nothing is computed, so no variable is read (a
    BatchNormalization statistic read under a multi-worker strategy is a
    collective). Call it inside `strategy.scope()` so its variables are the
    strategy's.

    Args:
        module: the model module.
        spec: the data's examples.
        example: `example_spec(spec, module)` (None: computed here).

    Raises:
        ConfigError: the module raised, returned no tf_keras model, or an
            output that does not fit the task.
    """
    import tensorflow as tf
    import tf_keras as keras

    model = model_module.call(module, "build_model", spec)
    check_model(model, spec, module)
    if getattr(model, "outputs", None):
        return model
    example = example or example_spec(spec, module)
    if example is None:
        return model
    inputs = tf.nest.map_structure(lambda t: keras.Input(shape=t.shape, dtype=t.dtype), example[0])
    try:
        outputs = model(inputs, training=False)
    except Exception:  # noqa: BLE001 - a call that needs real values: the pre-flight shows it
        return model
    shapes = [output.shape for output in tf.nest.flatten(outputs)]
    check_outputs(shapes, spec, f"build_model of {module.where()}")
    return model


def one_hot_labels(spec: InputSpec, example: tuple[Any, Any] | None) -> bool:
    """Whether the model is fed one-hot labels (a `preprocess` made them) rather than class ids."""
    if spec.task == REGRESSION or example is None:
        return False
    shape = example[1].shape
    return bool(shape.rank) and shape[-1] == spec.label.num_classes and spec.label.num_classes > 1


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
    settings, _, _ = _settings(module, model, spec, 1e-3, example_spec(spec, module))
    return len(settings["metrics"])


def module_callbacks(module: ModelModule, spec: InputSpec) -> list[Any]:
    """The module's own `fit` callbacks (`callbacks(spec)`), checked; [] without the hook.

    Raises:
        ConfigError: not a list of tf_keras callbacks; a `BackupAndRestore` (Strategist
            keeps its own, which resumes a restarted cluster: two would fight over the
            epoch to resume); a callback that monitors a `val_` quantity (a run
            validates on nothing during `fit`: the test split is scored after it).
    """
    import tf_keras as keras

    if module.callbacks is None:
        return []
    given = model_module.call(module, "callbacks", spec)
    where = f"callbacks of {module.where()}"
    if not isinstance(given, (list, tuple)):
        raise ConfigError(f"{where} returned {type(given).__name__}: return a list of callbacks")
    for callback in given:
        if not isinstance(callback, keras.callbacks.Callback):
            raise ConfigError(
                f"{where} returned {type(callback).__module__}.{type(callback).__name__}, not "
                "a tf_keras callback: use tf_keras.callbacks (Keras 2)"
            )
        if isinstance(callback, keras.callbacks.BackupAndRestore):
            raise ConfigError(
                f"{where} returned a BackupAndRestore: Strategist backs up every epoch itself "
                "and resumes from it after a restart (--restarts); remove yours"
            )
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str) and monitor.startswith("val_"):
            raise ConfigError(
                f"{where}: {type(callback).__name__} monitors {monitor!r}, but fit has no "
                f"validation data (the test split is scored after training): monitor "
                f"{monitor.removeprefix('val_')!r}"
            )
    return list(given)


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
    # Read back as every task reads it (its features in the stored order), so the module
    # adapts its layers in the order the tasks' builds replay them.
    manifest = datasets.load_manifest(manifest.root)
    spec = manifest.input_spec
    try:
        with tf.device("/cpu:0"):
            spec = dataclasses.replace(
                spec,
                training_data_fn=lambda: datasets.eval_dataset(
                    manifest, "train", preprocess=module.preprocess
                ),
            )
            built = build_compiled(config, spec, module)
            module_callbacks(module, spec)
            adapt_once.write(config.output_dir, built.adapted)
            by_name = datasets.inputs_by_name(manifest, built.model)
            batch = datasets.eval_dataset(
                manifest, "train", 2, preprocess=module.preprocess, by_name=by_name
            )
            features, labels = _first(batch, module)
            _check_not_scaled_twice(manifest, module, features)
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


def _check_not_scaled_twice(manifest, module: ModelModule, inputs) -> None:
    """Refuses a `preprocess` that divides images Strategist gives in [0, 1] by 255 again.

    Strategist's image features are float32 in [0, 1]; a tutorial's own
    `x / 255` kept in `preprocess` leaves the model inputs of at most 1/255,
    on which it trains to a fraction of its accuracy.

    Raises:
        ConfigError: the images reach the model at most 1/255 where the data has
            brighter pixels.
    """
    import numpy as np

    from components.core.data_sources import IMAGE, RAW_UINT8

    if module.preprocess is None or not any(
        f.encoding in (IMAGE, RAW_UINT8) for f in manifest.features
    ):
        return
    values = [np.asarray(t) for t in _flat_tensors(inputs) if t.dtype.is_floating]
    peak = max((float(v.max()) for v in values if v.size), default=0.0)
    if not 0.0 < peak <= 1.0 / 255 + 1e-6:
        return
    raw, _ = next(iter(_raw_examples(manifest)))
    if max(float(np.asarray(t).max(initial=0.0)) for t in _flat_tensors(raw)) > 0.5:
        raise ConfigError(
            f"preprocess of {module.where()} scales the images to at most 1/255: Strategist "
            "gives images as float32 in [0, 1] already (pixel / 255); drop your own / 255"
        )


def _flat_tensors(structure) -> list[Any]:
    import tensorflow as tf

    return tf.nest.flatten(structure)


def _raw_examples(manifest):
    """Two raw training examples (no `preprocess`)."""
    from components.core import datasets

    return datasets.eval_dataset(manifest, "train", 2)


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
    module: ModelModule,
    model: Any,
    spec: InputSpec,
    base_learning_rate: float,
    example: tuple[Any, Any] | None = None,
) -> tuple[dict[str, Any], str, list[str]]:
    """The optimizer, loss and metrics the module chose, with the task's defaults filling gaps.

    Returns:
        (settings, where the module's came from, the keys Strategist's defaults filled).
    """
    defaults = default_settings(spec.task, base_learning_rate, one_hot_labels(spec, example))
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
        return defaults, DEFAULTS, list(model_module.COMPILE_KEYS)
    settings = {key: chosen.get(key) or defaults[key] for key in model_module.COMPILE_KEYS}
    defaulted = [key for key in model_module.COMPILE_KEYS if not chosen.get(key)]
    if isinstance(settings["optimizer"], str):
        import tf_keras as keras

        settings["optimizer"] = keras.optimizers.get(settings["optimizer"])
    if not isinstance(settings["metrics"], (list, tuple)):
        settings["metrics"] = [settings["metrics"]]
    return settings, source, defaulted


def _scaled_optimizer(
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

    optimizer = _inner(optimizer)
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
                f"rebuilt with another rate ({_first_line(err)}); drop --learning-rate"
            ) from None
        return (
            optimizer,
            base,
            [
                f"learning rate {base:g} kept: {type(optimizer).__name__} "
                f"cannot be rebuilt with a scaled rate ({_first_line(err)})"
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
