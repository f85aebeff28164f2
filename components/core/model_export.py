"""Model export: the trained model saved as a SavedModel, atomically, with its run config.

A model module's `preprocess` is part of what the model serves: its
`serving_default` signature takes the raw features, as the data gives them
(strings included), and applies `preprocess` to each example before the model
(`raw_serving`); loaded with `keras.models.load_model`, the model itself takes
what `preprocess` returns.
"""

from __future__ import annotations

import os
from typing import Any

from components.core import storage, storage_trees
from components.core.config import RunConfig

MODEL_DIR_NAME = "model"
SAVED_RUN_CONFIG = os.path.join("assets.extra", "strategist_run_config.json")


def raw_serving(model, preprocess, spec):
    """A serving function of the raw features: `preprocess`, example by example, then the model.

    Args:
        model: the trained model.
        preprocess: the module's `preprocess(features, label) -> (inputs, label)`, or None.
        spec: the data's `InputSpec` (the raw features by name).

    Returns:
        A `tf.function` taking each raw feature by name (a batch of it) and
        returning `{"outputs": ...}`; None without `preprocess`.
    """
    if preprocess is None:
        return None
    import tensorflow as tf

    from components.core.model_build import example_spec
    from components.core.model_module import ModelModule

    traced = example_spec(spec, ModelModule("", "", None, lambda s: None, preprocess=preprocess))
    if traced is None:
        return None
    names = list(spec.features)
    label_dtype = tf.as_dtype(spec.label.dtype)

    # A function with its input signature, not a concrete function: under a multi-worker
    # strategy a concrete function over distributed variables cannot be saved
    # (tf.saved_model.save says so and asks for this form).
    signature = [
        tf.TensorSpec((None, *f.shape), tf.as_dtype(f.dtype), name=name)
        for name, f in spec.features.items()
    ]

    @tf.function(input_signature=signature)
    def serve(*tensors):
        features = dict(zip(names, tensors, strict=True))
        raw = features[names[0]] if len(names) == 1 else features
        examples = tf.shape(tf.nest.flatten(raw)[0])[0]
        labels = tf.zeros([examples], label_dtype)
        inputs = tf.map_fn(
            lambda example: preprocess(*example)[0],
            (raw, labels),
            fn_output_signature=traced[0],
        )
        return {"outputs": model(inputs, training=False)}

    return serve


def export_model(model, output_dir: str, config: RunConfig, serving=None) -> None:
    """Saves the model as a SavedModel, atomically, with the run config in `assets.extra/`.

    Saved into a local folder first, then published by `storage_trees.staged_tree`:
    renamed into place on a local disk, uploaded file by file with its marker
    last on Cloud Storage and gcsfuse (which refuses folder renames). The run
    config says which model module built it, so an evaluation elsewhere
    compiles it with the same loss and metrics (`saved_run_config`).

    Args:
        model: the trained model.
        output_dir: the folder `model/` is written into.
        config: the run, saved beside the model.
        serving: `raw_serving(...)`: the model's `serving_default` then takes the
            raw features (`keras.models.load_model` still gives the model itself,
            which takes what `preprocess` returns).
    """
    signatures = None if serving is None else {"serving_default": serving}
    with storage_trees.staged_tree(storage.join(output_dir, MODEL_DIR_NAME)) as staging:
        # The serving model needs no optimizer (nor its warm-up schedule class).
        model.save(staging, save_format="tf", include_optimizer=False, signatures=signatures)
        # assets.extra: the SavedModel folder's place for files its loaders ignore.
        storage.write_json(storage.join(staging, SAVED_RUN_CONFIG), config.to_dict())


def saved_run_config(model_dir: str) -> dict[str, Any] | None:
    """The run config exported beside a SavedModel (None for models exported without one)."""
    try:
        return storage.read_json(storage.join(model_dir, SAVED_RUN_CONFIG))
    except (OSError, ValueError):
        return None
