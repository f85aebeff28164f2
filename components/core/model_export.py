"""Model export: the trained model saved as a SavedModel, atomically, with its run config."""

from __future__ import annotations

import os
from typing import Any

from components.core import storage
from components.core.config import RunConfig

MODEL_DIR_NAME = "model"
SAVED_RUN_CONFIG = os.path.join("assets.extra", "strategist_run_config.json")


def export_model(model, output_dir: str, config: RunConfig) -> None:
    """Saves the model as a SavedModel, atomically, with the run config in `assets.extra/`.

    Saved into a local folder first, then published by `storage.staged_tree`:
    renamed into place on a local disk, uploaded file by file with its marker
    last on Cloud Storage and gcsfuse (which refuses folder renames). The run
    config says which model module built it, so an evaluation elsewhere
    compiles it with the same loss and metrics (`saved_run_config`).
    """
    with storage.staged_tree(storage.join(output_dir, MODEL_DIR_NAME)) as staging:
        # The serving model needs no optimizer (nor its warm-up schedule class).
        model.save(staging, save_format="tf", include_optimizer=False)
        # assets.extra: the SavedModel folder's place for files its loaders ignore.
        storage.write_json(storage.join(staging, SAVED_RUN_CONFIG), config.to_dict())


def saved_run_config(model_dir: str) -> dict[str, Any] | None:
    """The run config exported beside a SavedModel (None for models exported without one)."""
    try:
        return storage.read_json(storage.join(model_dir, SAVED_RUN_CONFIG))
    except (OSError, ValueError):
        return None
