"""The model module's own fit callbacks, checked against what a run allows."""

from __future__ import annotations

from typing import Any

from components.core import model_module
from components.core.config import ConfigError
from components.core.input_spec import InputSpec
from components.core.model_module import ModelModule


def module_callbacks(module: ModelModule, spec: InputSpec, *, validates: bool = False) -> list[Any]:
    """The module's own `fit` callbacks (`callbacks(spec)`), checked; [] without the hook.

    Args:
        module: the model module.
        spec: the data's examples.
        validates: the run holds out a validation share (`--validation-fraction`),
            so `fit` logs `val_` quantities a callback may monitor.

    Raises:
        ConfigError: not a list of tf_keras callbacks; a `BackupAndRestore` (Strategist
            keeps its own, which resumes a restarted cluster: two would fight over the
            epoch to resume); a callback that monitors a `val_` quantity (a run
            without `--validation-fraction` validates on nothing during `fit`: the test split
            is scored after it).
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
        if isinstance(monitor, str) and monitor.startswith("val_") and not validates:
            raise ConfigError(
                f"{where}: {type(callback).__name__} monitors {monitor!r}, but fit has no "
                f"validation data (the test split is scored after training): monitor "
                f"{monitor.removeprefix('val_')!r}, or hold out a share with "
                "--validation-fraction"
            )
    return list(given)
