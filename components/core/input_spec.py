"""What one training example looks like: its features and its label.

The single description of a dataset's examples shared by the data side (shards,
manifests, `tf.data` parsing) and the model side (built-in models and users'
`build_model` functions), so neither has to know how the other stores it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CLASSIFICATION = "classification"
REGRESSION = "regression"


@dataclass(frozen=True)
class FeatureSpec:
    """One input feature.

    Attributes:
        shape: shape of one example's value; `None` marks a variable dimension.
        dtype: TensorFlow dtype name the model receives (`float32`, `int64`, `string`).
    """

    shape: tuple[int | None, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class LabelSpec:
    """The label.

    Attributes:
        name: the feature or column it comes from.
        dtype: TensorFlow dtype name (`int64` for class ids, `float32` for values).
        num_classes: number of classes for classification, `None` for regression.
    """

    name: str = "label"
    dtype: str = "int64"
    num_classes: int | None = None


@dataclass(frozen=True)
class InputSpec:
    """Features by name, and the label.

    A dataset with one feature hands the model a single tensor; with several,
    a dict keyed by feature name (what `tf.data` and Keras functional models with
    named inputs use).
    """

    features: dict[str, FeatureSpec]
    label: LabelSpec
    # Set where the model is built for adapting (see `training_data`).
    training_data_fn: Callable[[], Any] | None = field(default=None, compare=False, repr=False)

    def training_data(self):
        """The training split as a batched `tf.data.Dataset` of `(inputs, label)`, one pass,
        as the model receives it (after the module's `preprocess`): for adapting
        preprocessing layers in `build_model`.

        Strategist hands the real split to the one build it makes before the cluster
        starts and records what each layer's `adapt` learned; every other build gets an
        empty split of the same structure, and each `adapt` takes the recorded state
        (`components.core.adapt_once`).

        Raises:
            ConfigError: where no training split is at hand.
        """
        if self.training_data_fn is None:
            from components.core.errors import ConfigError

            raise ConfigError(
                "spec.training_data() has no data here: the model is built without the run's "
                "training split"
            )
        return self.training_data_fn()

    @property
    def task(self) -> str:
        """`classification` when the label has classes, else `regression`."""
        return CLASSIFICATION if self.label.num_classes else REGRESSION

    @property
    def single_feature(self) -> FeatureSpec | None:
        """The only feature when there is exactly one, else `None`."""
        return next(iter(self.features.values())) if len(self.features) == 1 else None
