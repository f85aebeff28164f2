"""Where training processes run: `local` (a localhost cluster), `vertex` (a Vertex AI
CustomJob), `kubeflow` (a TFJob). Every backend runs the same trainer entry point
with `TF_CONFIG` set the same way.

`train_to_artifacts` is what the KFP `train` component calls.
"""

from __future__ import annotations

import dataclasses
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
from components.core.targets import canonical


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

    backend = canonical(backend)  # `kfp` is another name for `kubeflow`
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
            cluster=cluster_for(strategy, workers, ps, devices_per_worker or None),
            output_dir=workdir,
        )
        validate_run(config)
        if backend == "local":
            from components.core.launch.local import run_local

            metrics = run_local(config)
            source = workdir
        else:
            source = submit_cloud(*_cloud_run(config, backend, cloud_config_json))
            metrics = json.loads(_read_remote(f"{source}/metrics.json"))
        _copy_tree(f"{source}/model", model_dir)
        atomic.write_json(metrics_path, metrics)
        return metrics
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _cloud_run(config: RunConfig, backend: str, cloud_config_json: str):
    """The run and CloudConfig for a pipeline's cloud train step.

    Shards arrive as the pipeline's artifact path; on Vertex AI Pipelines that
    is the gcsfuse form `/gcs/BUCKET/...` of a `gs://` URI, which is what the
    job's processes are given.
    """
    from components.core.launch.cloud import CloudConfig
    from components.core.storage_paths import from_gcsfuse

    try:
        raw = json.loads(cloud_config_json or "{}")
        cloud = CloudConfig(**{**raw, "target": backend})
    except (ValueError, TypeError) as err:
        raise ConfigError(f"cloud_config_json is not a CloudConfig: {err}") from None
    shards = from_gcsfuse(config.data.shards_dir or "")
    cloud = dataclasses.replace(cloud, shards_dir=cloud.shards_dir or shards)
    return config, cloud


def submit_cloud(run: RunConfig, cloud, *, client: Any = None, log=print) -> str:
    """Submits `run` as a Vertex AI CustomJob or a TFJob and waits for it.

    Validation and credentials are checked before anything is sent.

    Returns:
        The `gs://` folder the job wrote its model and metrics.json to.

    Raises:
        ConfigError: impossible combination or missing credentials.
        JobFailed: the job failed or was cancelled.
    """
    from components.core.launch import cloud as cloud_lib

    cloud_lib.validate_cloud(run, cloud)
    if cloud.target == "vertex":
        from components.core.launch import vertex

        job = vertex.build_custom_job(run, cloud)
        if client is None:
            client = vertex.make_client(cloud, credentials=cloud_lib.google_credentials())
        vertex.submit_and_wait(job, cloud, client=client, log=log)
    else:
        from components.core.launch import kubeflow

        job = kubeflow.build_tfjob(run, cloud)
        if client is None:
            client = kubeflow.make_client(cloud, kubeflow.load_credentials(cloud))
        kubeflow.submit_and_wait(job, cloud, client=client, log=log)
    return cloud_lib.output_uri(run, cloud)


def _read_remote(path: str) -> str:
    import tensorflow as tf

    with tf.io.gfile.GFile(path) as handle:
        return handle.read()


def _copy_tree(source: str, destination: str) -> None:
    """Copies a folder from a local path or a `gs://` URI to a local path."""
    if os.path.exists(destination):
        shutil.rmtree(destination)
    if "://" not in source:
        # Importing TensorFlow costs seconds, and a local train step never needs it.
        shutil.copytree(source, destination)
        return
    import tensorflow as tf

    for folder, _, files in tf.io.gfile.walk(source):
        relative = os.path.relpath(folder, source) if folder != source else ""
        os.makedirs(os.path.join(destination, relative), exist_ok=True)
        for name in files:
            tf.io.gfile.copy(
                f"{folder.rstrip('/')}/{name}", os.path.join(destination, relative, name)
            )


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
