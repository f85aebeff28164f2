"""Preprocessing layers adapted once, on the training split, before the cluster starts.

A model module's `build_model(spec)` may adapt Keras preprocessing layers
(`Normalization`, `StringLookup`, `TextVectorization`, `Discretization`...) on
`spec.training_data()`, as TensorFlow's preprocessing-layer tutorials do. The
launcher builds the model once with the real training split (`record`), and
keeps each adapted layer's state, in the order the module adapted them, in a
JSON file beside the run's outputs (`state_path`). Every task, and the chief's
evaluation copy, builds the model again with an empty split of the same
structure: each `adapt` call then takes the recorded state instead of reading
data (`replay`), so every replica and the export hold the same vocabularies
and statistics, and the training data is read once.

A layer's state is its vocabulary (`StringLookup`, `IntegerLookup`,
`TextVectorization`) or its weights after `finalize_state` (the rest:
`Normalization`'s mean and variance, `Discretization`'s summary).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from components.core import storage
from components.core.errors import ConfigError

# Beside the staged model module (`run_folder.STAGED_MODULE_DIR`): a folder a run
# replacing this one keeps, as it keeps the module.
STATE_DIR = "model_module"
STATE_NAME = "adapted_layers.json"


def state_path(output_dir: str) -> str:
    """Where a run's adapted-layer states are kept."""
    return storage.join(output_dir, STATE_DIR, STATE_NAME)


def with_training_split(manifest, preprocess=None, validation_fraction: float = 0.0):
    """The shards' `InputSpec` whose `training_data()` is their training split.

    One pass over the split, batched, through the module's `preprocess`, without
    the validation share (what training reads); the shards are read through their
    own paths, local or `gs://`.
    """
    import dataclasses

    def split():
        from components.core import datasets

        return datasets.eval_dataset(
            manifest, "train", preprocess=preprocess, validation_fraction=validation_fraction
        )

    return dataclasses.replace(manifest.input_spec, training_data_fn=split)


def _preprocessing_layer_class():
    from tf_keras.src.engine.base_preprocessing_layer import PreprocessingLayer

    return PreprocessingLayer


@contextlib.contextmanager
def record() -> Iterator[list[dict[str, Any]]]:
    """Within it, every `adapt` reads its data as usual; its resulting state is appended."""
    layer_class = _preprocessing_layer_class()
    original = layer_class.adapt
    states: list[dict[str, Any]] = []

    def adapt(layer, data, batch_size=None, steps=None):
        original(layer, data, batch_size=batch_size, steps=steps)
        states.append(state_of(layer))

    layer_class.adapt = adapt
    try:
        yield states
    finally:
        layer_class.adapt = original


@contextlib.contextmanager
def replay(states: list[dict[str, Any]], where: str) -> Iterator[None]:
    """Within it, the i-th `adapt` call takes `states[i]` and reads no data.

    Raises:
        ConfigError: the module adapts more layers, or others, than when recorded.
    """
    layer_class = _preprocessing_layer_class()
    original = layer_class.adapt
    calls = iter(range(len(states) + 1))

    def adapt(layer, data, batch_size=None, steps=None):
        index = next(calls)
        if index >= len(states) or states[index]["layer"] != type(layer).__name__:
            recorded = ", ".join(s["layer"] for s in states) or "none"
            raise ConfigError(
                f"build_model of {where} adapts {type(layer).__name__} as its adapt call "
                f"{index + 1}, where the launcher's build adapted {recorded}: adapt the same "
                "layers in the same order on every build"
            )
        apply_state(layer, states[index])

    layer_class.adapt = adapt
    try:
        yield
    finally:
        layer_class.adapt = original


def state_of(layer) -> dict[str, Any]:
    """An adapted layer's state as JSON values.

    Raises:
        ConfigError: a TF-IDF lookup (its weights are not kept).
    """
    lookup = getattr(layer, "_lookup_layer", layer)
    if hasattr(layer, "get_vocabulary") and hasattr(layer, "set_vocabulary"):
        if getattr(lookup, "output_mode", None) == "tf_idf":
            raise ConfigError(
                f"{type(layer).__name__} with output_mode='tf_idf' cannot be adapted once for "
                "every task: pass its vocabulary and idf_weights to the layer instead"
            )
        vocabulary = layer.get_vocabulary(include_special_tokens=False)
        return {"layer": type(layer).__name__, "vocabulary": [_plain(v) for v in vocabulary]}
    shape = getattr(layer, "_build_input_shape", None)
    return {
        "layer": type(layer).__name__,
        "input_shape": None if shape is None else _shape_list(shape),
        "weights": [w.tolist() for w in layer.get_weights()],
    }


def apply_state(layer, state: dict[str, Any]) -> None:
    """Gives `layer` a recorded state, as if it had adapted."""
    import numpy as np
    import tensorflow as tf

    if "vocabulary" in state:
        layer.set_vocabulary(state["vocabulary"])
        return
    if not layer.built:
        shape = state["input_shape"]
        layer.build(None if shape is None else tf.TensorShape(shape))
        layer.built = True
    current = layer.get_weights()
    layer.set_weights(
        [np.asarray(w, dtype=c.dtype) for w, c in zip(state["weights"], current, strict=True)]
    )
    layer.finalize_state()


def write(output_dir: str, states: list[dict[str, Any]]) -> None:
    """Keeps the states for the tasks (none: an earlier run's states there are removed)."""
    if states:
        storage.makedirs(storage.join(output_dir, STATE_DIR))
        storage.write_json(state_path(output_dir), states)
    else:
        storage.remove_file(state_path(output_dir))


def read(output_dir: str) -> list[dict[str, Any]] | None:
    """The run's recorded states, or None when its module adapted nothing."""
    path = state_path(output_dir)
    return storage.read_json(path) if storage.exists(path) else None


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if hasattr(value, "item"):
        return value.item()
    return value


def _shape_list(shape) -> list[int | None] | None:
    try:
        return [None if d is None else int(d) for d in shape]
    except TypeError:
        return None
