"""The built-in models: registry names that are model modules of the user's contract.

`mlp`, `cnn`, `resnet50` and `mobilenet_v2` are `ModelModule`s whose
`build_model(spec)` sizes the model from the `InputSpec` (one feature, its
shape; the label's classes, or one output for regression), like a user's
module (`components.core.model_module`); `resolve` gives the module a run
trains, built-in or the user's.

Models are built with tf-keras (Keras 2): Keras 3's `fit` fails under
MultiWorkerMirroredStrategy and ParameterServerStrategy.
Build functions are called inside `strategy.scope()` by the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from components.core import model_module
from components.core.config import ConfigError, ModelConfig
from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

if TYPE_CHECKING:
    import tf_keras

BuildFn = Callable[[tuple[int, ...], int], "tf_keras.Model"]


def _mlp(input_shape: tuple[int, ...], num_classes: int) -> tf_keras.Model:
    import tf_keras as keras

    return keras.Sequential(
        [
            keras.layers.Input(shape=input_shape),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(num_classes),
        ],
        name="mlp",
    )


def _cnn(input_shape: tuple[int, ...], num_classes: int) -> tf_keras.Model:
    import tf_keras as keras

    return keras.Sequential(
        [
            keras.layers.Input(shape=input_shape),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(num_classes),
        ],
        name="cnn",
    )


def _application(factory_name: str) -> BuildFn:
    """A Keras application with random weights: nothing is downloaded."""

    def build(input_shape: tuple[int, ...], num_classes: int) -> tf_keras.Model:
        import tf_keras as keras

        factory = getattr(keras.applications, factory_name)
        return factory(
            weights=None, input_shape=input_shape, classes=num_classes, classifier_activation=None
        )

    return build


MODELS: dict[str, BuildFn] = {
    "mlp": _mlp,
    "cnn": _cnn,
    "resnet50": _application("ResNet50"),
    "mobilenet_v2": _application("MobileNetV2"),
}

# Input shape used to size registry models when no dataset is at hand
# (the selector asks "how big is resnet50?" without data).
DEFAULT_INPUT_SHAPES: dict[str, tuple[int, ...]] = {
    "mlp": (8, 8, 1),
    "cnn": (8, 8, 1),
    "resnet50": (224, 224, 3),
    "mobilenet_v2": (224, 224, 3),
}
# Classes of the dataset each registry model is made for (digits; ImageNet): the classes
# the selector sizes it with when none are given.
DATASET_CLASSES: dict[str, int] = {"mlp": 10, "cnn": 10, "resnet50": 1000, "mobilenet_v2": 1000}


def check_model_name(name: str) -> None:
    """Raises ConfigError for a name the registry does not hold."""
    if name not in MODELS:
        raise ConfigError(
            f"unknown model {name!r}; choose one of {', '.join(MODELS)}, or give your own "
            "with --model-module"
        )


def check_model(model: ModelConfig) -> None:
    """Refuses an unknown registry name, or a user module that cannot be imported.

    Raises:
        ConfigError: naming the flag, or the user's file and line.
    """
    if model.module:
        model_module.load(model.module)
    else:
        check_model_name(model.name)


def resolve(model: ModelConfig) -> model_module.ModelModule:
    """The model module a run trains: the user's (`model.module`) or a built-in (`model.name`).

    Raises:
        ConfigError: see `check_model`.
    """
    if model.module:
        return model_module.load(model.module)
    return builtin(model.name)


def builtin(name: str) -> model_module.ModelModule:
    """Registry model `name` as a model module: `build_model(spec)`, default compile settings.

    Raises:
        ConfigError: for an unknown name.
    """
    check_model_name(name)

    def build(spec: InputSpec) -> tf_keras.Model:
        feature = spec.single_feature
        if feature is None or None in feature.shape:
            raise ConfigError(
                f"the built-in {name} takes one fixed-size feature; the data has "
                f"{', '.join(spec.features)}: give your own model with --model-module"
            )
        outputs = spec.label.num_classes or 1  # one value for regression
        return _float32_logits(MODELS[name](tuple(feature.shape), outputs))

    return model_module.ModelModule(source=name, name=name, file=None, build_model=build)


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> tf_keras.Model:
    """Builds registry model `name` for inputs of `input_shape` and `num_classes` outputs.

    The last layer emits logits, in float32 under any precision policy.

    Raises:
        ConfigError: for an unknown model name.
    """
    spec = InputSpec(
        features={"image": FeatureSpec(tuple(input_shape))},
        label=LabelSpec(num_classes=num_classes),
    )
    return builtin(name).build_model(spec)


def _float32_logits(model: tf_keras.Model) -> tf_keras.Model:
    """`model` with float32 logits under a mixed-precision global policy; else unchanged.

    Under `mixed_float16` or `mixed_bfloat16` the layers compute in 16 bits;
    a float32 linear activation after the last layer keeps the softmax and the
    loss in float32, as the tf-keras mixed-precision guide does. It has no
    weights: parameter counts and weights are the same under every policy.
    """
    import tf_keras as keras

    if keras.mixed_precision.global_policy().compute_dtype == "float32":
        return model
    logits = keras.layers.Activation("linear", dtype="float32", name="logits_float32")(model.output)
    return keras.Model(model.input, logits, name=model.name)
