"""What a model is compiled with: the module's choices, Strategist's defaults filling the gaps.

The optimizer, loss and metrics come from the module's `compile_settings`,
else from a compile in its `build_model`, else from the task's defaults
(`default_settings`); the record names where they came from and which keys
Strategist chose.
"""

from __future__ import annotations

from typing import Any

from components.core import model_module
from components.core.config import ConfigError
from components.core.input_spec import REGRESSION, InputSpec
from components.core.model_module import ModelModule

DEFAULTS = "defaults"
# How `Built.compile["defaults"]` names the settings Strategist chose, not the module.
STRATEGISTS = "Strategist's"
FROM_COMPILE_SETTINGS = "compile_settings"
FROM_MODEL = "build_model's compile"


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


def one_hot_labels(spec: InputSpec, example: tuple[Any, Any] | None) -> bool:
    """Whether the model is fed one-hot labels (a `preprocess` made them) rather than class ids."""
    if spec.task == REGRESSION or example is None:
        return False
    shape = example[1].shape
    return bool(shape.rank) and shape[-1] == spec.label.num_classes and spec.label.num_classes > 1


def chosen_settings(
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
            "optimizer": inner_optimizer(model.optimizer),
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


def plain_config(optimizer: Any) -> dict[str, Any]:
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


def inner_optimizer(optimizer: Any) -> Any:
    """The optimizer a mixed-precision `LossScaleOptimizer` wraps, else itself."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def name_of(thing: Any) -> str:
    if isinstance(thing, str):
        return thing
    if isinstance(thing, dict):
        return ", ".join(f"{k}: {name_of(v)}" for k, v in thing.items())
    return getattr(thing, "name", None) or getattr(thing, "__name__", type(thing).__name__)
