"""The model a run trains: built from its model module, compiled with the user's settings.

`build_compiled` builds a module's model (in a strategy's scope when given),
checks that it is a tf_keras model whose output fits the task, and compiles it
with what the module chose (`compile_choices`), the learning rate scaled
linearly with the batch (`optimizer_rate`). `Built.adjustments` says, in
words, what Strategist changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from components.core import adapt_once, compile_choices, model_module, optimizer_rate
from components.core.config import ConfigError, RunConfig
from components.core.errors import first_line
from components.core.input_spec import CLASSIFICATION, REGRESSION, InputSpec
from components.core.model_module import ModelModule
from components.core.strategy_spec import XLA_MODEL, XLA_TRAIN_STEP


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
        settings, source, defaulted = compile_choices.chosen_settings(
            module, model, spec, config.training.base_learning_rate, example
        )
        module_optimizer = "optimizer" not in defaulted
        optimizer, learning_rate, adjustments = optimizer_rate.scaled_optimizer(
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
                f"{module.where()}: Keras refuses the compile settings: {first_line(err)}"
            ) from None
    inner = compile_choices.inner_optimizer(optimizer)
    record = {
        "optimizer": type(inner).__name__,
        "optimizer_config": compile_choices.plain_config(inner),
        "learning_rate": learning_rate,
        "loss": compile_choices.name_of(settings["loss"]),
        "metrics": [compile_choices.name_of(m) for m in settings["metrics"] or []],
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
    settings, _, _ = compile_choices.chosen_settings(
        module, model, spec, 1e-3, example_spec(spec, module)
    )
    return len(settings["metrics"])
