"""Where training processes run: `local` (a localhost cluster), `vertex` (a Vertex AI
CustomJob), `kubeflow` (a TFJob). Every backend runs the same trainer entry point
with `TF_CONFIG` set the same way.

`train_to_artifacts` is what the KFP `train` component calls.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from components.core import atomic
from components.core.config import (
    BACKENDS,
    ConfigError,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainingConfig,
    cluster_for,
    validate_run,
)


def train_to_artifacts(
    *,
    shards_dir: str,
    model_dir: str,
    metrics_path: str,
    strategy: str,
    workers: int,
    ps: int,
    devices_per_worker: int,
    model_name: str,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    backend: str = "local",
    cloud_config_json: str = "{}",
) -> dict[str, Any]:
    """Trains on `backend` and places the SavedModel and metrics.json at the given paths.

    Returns:
        The run's metrics.

    Raises:
        ConfigError: for an unknown backend or a configuration the strategy
            cannot run.
    """
    from components.core import models

    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    models.check_model_name(model_name)
    workdir = tempfile.mkdtemp(prefix="strategist-train-")
    try:
        config = RunConfig(
            data=DataConfig(shards_dir=shards_dir),
            model=ModelConfig(model_name),
            training=TrainingConfig(
                epochs=epochs, per_replica_batch_size=batch_size, base_learning_rate=learning_rate
            ),
            cluster=cluster_for(strategy, workers, ps, devices_per_worker),
            output_dir=workdir,
        )
        validate_run(config)
        if backend == "local":
            from components.core.launch.local import run_local

            metrics = run_local(config)
        else:
            raise ConfigError(f"the {backend} backend is not available in this build")
        if os.path.exists(model_dir):
            shutil.rmtree(model_dir)
        shutil.copytree(os.path.join(workdir, "model"), model_dir)
        atomic.write_json(metrics_path, metrics)
        return metrics
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def headline_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The numbers a KFP UI `Metrics` artifact shows for one run."""
    seconds = metrics["epoch_seconds"]
    return {
        "examples_per_second": float(metrics["examples_per_second"]),
        "mean_epoch_seconds": float(sum(seconds) / len(seconds)),
        "train_wall_seconds": float(metrics["wall_seconds"]),
        "eval_accuracy": float(metrics["eval_accuracy"]),
        "eval_loss": float(metrics["eval_loss"]),
        "num_replicas": float(metrics["num_replicas"]),
        "restarts": float(metrics.get("restarts", 0)),
    }


def load_metrics(path: str) -> dict[str, Any]:
    with open(path) as handle:
        return json.load(handle)
