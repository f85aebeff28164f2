"""Where training processes run: `local` (a localhost cluster), `vertex` (a Vertex AI
CustomJob), `kubeflow` (a TFJob). Every backend runs the same trainer entry point
with `TF_CONFIG` set the same way.

`train_to_artifacts` is what the KFP `train` component calls.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from typing import Any

from components.core import failed_run, run_metrics, storage, storage_trees
from components.core.config import BACKENDS, ConfigError, RunConfig, validate_run
from components.core.failed_run import FailedRun
from components.core.launch import remote
from components.core.launch.cloud import JobFailed
from components.core.launch.cluster_failure import ClusterFailed
from components.core.run_metrics import RunMetrics
from components.core.targets import canonical

# How a training that ran can fail: a local (or rehearsed) cluster, a cloud job.
_TRAINING_FAILED = (ClusterFailed, JobFailed)


def train_to_artifacts(
    *,
    run_config: dict[str, Any],
    cluster: dict[str, Any],
    shards_dir: str,
    model_dir: str,
    metrics_path: str,
    backend: str = "local",
    cloud_config: Mapping[str, Any] | None = None,
    gcp_resources_path: str | None = None,
    rehearse: bool = False,
    tensorboard_dir: str | None = None,
    max_steps: int = 0,
    record_failure: bool = False,
) -> RunMetrics | FailedRun:
    """Trains on `backend` and places the SavedModel and metrics.json at the given paths.

    Args:
        run_config: the pipeline's RunConfig (`RunConfig.to_pipeline_parameter`).
        cluster: the ClusterConfig this step trains with (a comparison's
            item, or the select step's choice); replaces the config's.
        shards_dir: the shards artifact.
        model_dir: where the SavedModel goes.
        metrics_path: where the run's record goes.
        backend: local, vertex or kubeflow (kfp is another name for it).
        cloud_config: the CloudConfig of the cloud backends, as a dict.
        gcp_resources_path: the step's `gcp_resources` output: the cloud job is
            recorded there (the KFP UI links to it, a cancelled run cancels it)
            and re-attached to when the step runs again; a local run records none.
        rehearse: with a cloud backend, run every replica of the job it would
            submit on this machine instead (`launch.rehearsal`); nothing is sent.
        tensorboard_dir: where the run's TensorBoard logs go (the step's
            artifact); None: they are not kept.
        max_steps: N > 0 makes the run a pilot of N steps after a warm-up
            (`training.max_steps`, replacing the run config's); 0 keeps it.
        record_failure: a training that fails (a task crashed or stalled with no
            restart left, training diverged, a cloud job failed) is recorded as a
            `FailedRun` at `metrics_path`, with an empty model, instead of raising:
            a comparison goes on with its other strategies. Bad input still raises.

    Returns:
        The run's record (a `FailedRun` when it failed and `record_failure`).

    Raises:
        ConfigError: for an unknown backend, `rehearse` without a cloud
            backend, or a configuration the strategy cannot run.
        ClusterFailed, JobFailed: training failed (without `record_failure`).
    """
    from components.core import models

    backend = canonical(backend)  # `kfp` is another name for `kubeflow`
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if rehearse and backend == "local":
        raise ConfigError("rehearse runs a cloud job here: use backend vertex or kubeflow")
    workdir = tempfile.mkdtemp(prefix="strategist-train-")
    try:
        config = RunConfig.from_dict({**run_config, "cluster": cluster})
        if max_steps:
            config = dataclasses.replace(
                config, training=dataclasses.replace(config.training, max_steps=max_steps)
            )
        config = dataclasses.replace(
            config,
            data=dataclasses.replace(config.data, shards_dir=shards_dir),
            output_dir=workdir,
        )
        validate_run(config)
        models.check_model(config.model)
        try:
            metrics, source = _train_on(config, backend, cloud_config, gcp_resources_path, rehearse)
        except _TRAINING_FAILED as failure:
            from components.core.trainer import CONFIG_ERROR_EXIT

            # A task that refused its input is bad input, never one strategy's failure.
            if not record_failure or getattr(failure, "returncode", None) == CONFIG_ERROR_EXIT:
                raise
            failed = failed_run.from_failure(config.cluster, failure)
            print(f"train: {failed.strategy} {failed.outcome}, recorded: {failed.error}")
            for folder in (model_dir, tensorboard_dir):  # the step's outputs exist, empty
                if folder:
                    storage.makedirs(folder)
            _record_no_remote_job(gcp_resources_path, backend, rehearse)
            storage.write_json(metrics_path, failed.to_dict())
            return failed
        _record_no_remote_job(gcp_resources_path, backend, rehearse)
        _copy_model(storage.join(source, "model"), model_dir)
        if tensorboard_dir:
            # TensorBoard names a run by its folder: the strategy's, where a comparison's
            # runs were told apart only by their loop iteration (`for-loop-1-iteration-0`).
            copy_tensorboard_logs(source, storage.join(tensorboard_dir, config.cluster.strategy))
        run_metrics.write(metrics_path, metrics)
        return metrics
    finally:
        storage.remove_tree(workdir)


def _record_no_remote_job(gcp_resources_path: str | None, backend: str, rehearse: bool) -> None:
    """A run without a remote job (local, rehearsed) records an empty `gcp_resources`, so
    the step's output exists for the UI."""
    if gcp_resources_path and (backend == "local" or rehearse):
        storage.write_text(gcp_resources_path, remote.gcp_resources_json([]))


def _train_on(
    config: RunConfig,
    backend: str,
    cloud_config: Mapping[str, Any] | None,
    gcp_resources_path: str | None,
    rehearse: bool,
) -> tuple[RunMetrics, str]:
    """Trains `config` on `backend`; returns its record and the folder holding its outputs.

    Raises:
        ClusterFailed: a local (or rehearsed) cluster failed with no restart left.
        JobFailed: the cloud job ended without success.
    """
    if backend == "local":
        from components.core.launch.local import run_local

        if config.model.module:  # a bad module is refused before the cluster starts
            from components.core import datasets, model_preflight

            model_preflight.preflight(config, datasets.load_manifest(config.data.shards_dir))
        metrics = run_local(config)
        source = config.output_dir
    elif rehearse:
        from components.core.launch import staging
        from components.core.launch.rehearsal import rehearse as rehearse_job

        run, cloud = _cloud_run(config, backend, cloud_config)
        metrics, local = rehearse_job(
            build_cloud_job(run, cloud),
            cloud.target,
            data_dir=run.data.data_dir,
            staged=staging.files_to_stage(run, cloud),
        )
        source = local.output_dir
    else:
        source = submit_cloud(
            *_cloud_run(config, backend, cloud_config), gcp_resources=gcp_resources_path
        )
        metrics = RunMetrics.from_json(
            storage.read_text(storage.join(source, "metrics.json")), source
        )
    return metrics, source


def _cloud_run(config: RunConfig, backend: str, cloud_config: Mapping[str, Any] | None):
    """The run and CloudConfig for a pipeline's cloud train step.

    Shards arrive as the pipeline's artifact path; on Vertex AI Pipelines that
    is the gcsfuse form `/gcs/BUCKET/...` of a `gs://` URI, which is what the
    job's processes are given.
    """
    from components.core.launch.cloud import CloudConfig
    from components.core.storage_paths import from_gcsfuse

    try:
        cloud = CloudConfig(**{**(cloud_config or {}), "target": backend})
    except (ValueError, TypeError) as err:
        raise ConfigError(f"cloud_config is not a CloudConfig: {err}") from None
    shards = from_gcsfuse(config.data.shards_dir or "")
    cloud = dataclasses.replace(cloud, shards_dir=cloud.shards_dir or shards)
    return config, cloud


def build_cloud_job(run: RunConfig, cloud) -> Any:
    """The job `run` becomes on `cloud.target`, validated once (nothing is sent).

    Returns:
        An `aiplatform_v1.CustomJob` (vertex) or a TFJob manifest (kubeflow).

    Raises:
        ConfigError: a combination the cloud cannot run, saying which flag to change.
    """
    if cloud.target == "vertex":
        from components.core.launch import vertex

        return vertex.build_custom_job(run, cloud)
    from components.core.launch import kubeflow

    return kubeflow.build_tfjob(run, cloud)


def submit_cloud(
    run: RunConfig,
    cloud,
    *,
    job: Any = None,
    client: Any = None,
    log=print,
    gcp_resources: str | None = None,
) -> str:
    """Submits `run` as a Vertex AI CustomJob or a TFJob and waits for it.

    Validation and credentials are checked before anything is sent.

    Args:
        run: the run.
        cloud: where and on which machines.
        job: the job `build_cloud_job` built for them (built here when None).
        client: a `JobServiceClient` or `TrainingClient` (made from the local
            credentials when None).
        log: where progress lines go.
        gcp_resources: the `gcp_resources` file that records the job and, when
            it names a running one, is re-attached to (`remote`).

    Returns:
        The `gs://` folder the job wrote its model and metrics.json to.

    Raises:
        ConfigError: impossible combination or missing credentials.
        JobFailed: the job failed or was cancelled.
        RemoteCallFailed: the cloud's API refused a call, or stayed unreachable.
    """
    from components.core.launch import cloud_checks, credentials, staging

    if job is None:
        job = build_cloud_job(run, cloud)
    if cloud.target == "vertex":
        from components.core.launch import vertex

        if client is None:
            client = vertex.make_client(cloud, credentials=credentials.google_credentials())
    else:
        from components.core.launch import tfjob_client, tfjob_submit

        if client is None:
            client = tfjob_client.make_client(cloud)
    # Before any replica starts: the module built once here, its adapted layers' state
    # written beside the job's outputs for every replica (the shards read at a Vertex AI
    # Pipelines step's /gcs/ mount when it has one).
    shards = staging.shards_uri(run, cloud) or ""
    output = staging.output_uri(run, cloud)
    staging.build_module_once(run, cloud_checks.readable_shards(shards) or shards, output, log)
    staged = staging.stage_module(run, cloud)
    if staged:
        log(f"model module staged at {staged}")
    if cloud.target == "vertex":
        vertex.submit_and_wait(job, cloud, client=client, log=log, gcp_resources=gcp_resources)
    else:
        tfjob_submit.submit_and_wait(
            job, cloud, client=client, log=log, gcp_resources=gcp_resources
        )
    return output


def _copy_model(source: str, destination: str) -> None:
    """Copies an exported model (local path or `gs://` URI) to the local artifact path.

    A local export is renamed into place whole; one in Cloud Storage (or gcsfuse)
    is uploaded file by file, so it counts only with its marker, written last.

    Raises:
        RuntimeError: when a Cloud Storage export is incomplete (no marker).
    """
    if storage.is_object_store(source) and not storage_trees.is_complete(source):
        raise RuntimeError(f"the model export in {source} is incomplete: the run did not finish")
    storage_trees.download_tree(source, destination)


def copy_tensorboard_logs(run_dir: str, destination: str) -> bool:
    """Copies a run's TensorBoard logs (`run_dir/tensorboard`) to a local folder.

    The folder is created either way, so a pipeline's artifact exists. A
    Vertex AI job given a TensorBoard instance wrote its logs to the instance
    (`AIP_TENSORBOARD_LOG_DIR`) instead, and then there is nothing to copy.

    Returns:
        Whether the run had logs to copy.
    """
    from components.core.epoch_records import TENSORBOARD_DIR_NAME

    logs = storage.join(run_dir, TENSORBOARD_DIR_NAME)
    if not storage.exists(logs):
        storage.makedirs(destination)
        return False
    storage_trees.download_tree(logs, destination)
    return True


def headline_metrics(metrics: RunMetrics) -> dict[str, float]:
    """The numbers a KFP UI `Metrics` artifact shows for one run."""
    seconds = metrics.epoch_seconds
    evaluated = {"accuracy": metrics.eval_accuracy, "loss": metrics.eval_loss}
    evaluated.update(metrics.eval_metrics)  # every test metric, the user's compiled ones too
    return {
        "examples_per_second": float(metrics.examples_per_second),
        "mean_epoch_seconds": float(sum(seconds) / len(seconds)),
        "train_wall_seconds": float(metrics.wall_seconds),
        **{f"eval_{name}": float(v) for name, v in evaluated.items() if v is not None},
        "num_replicas": float(metrics.num_replicas),
        "restarts": float(metrics.restarts),
    }
