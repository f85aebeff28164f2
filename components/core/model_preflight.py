"""The pre-flight check: the run's model built once here and fed one batch of the real data.

`preflight` builds the model on this process's CPU, without a strategy, and
runs one small batch through the module's `preprocess`, the model and its
loss: a bad module is refused before any cluster starts.
"""

from __future__ import annotations

import time
from typing import Any

from components.core import adapt_once
from components.core.config import ConfigError, RunConfig
from components.core.errors import first_line
from components.core.model_build import build_compiled, check_outputs
from components.core.model_module import ModelModule
from components.core.module_callbacks import module_callbacks


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
    # What training reads: the validation share is not adapted on.
    spec = adapt_once.with_training_split(
        manifest, module.preprocess, config.training.validation_fraction
    )
    try:
        with tf.device("/cpu:0"):
            built = build_compiled(config, spec, module)
            module_callbacks(module, spec, validates=bool(config.training.validation_fraction))
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
                    f"({', '.join(spec.features)} -> {spec.label.name}): {first_line(err)}"
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
            f"preprocess of {module.where()} failed on the data: {first_line(err)}"
        ) from None
