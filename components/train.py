"""KFP component: train with a tf.distribute strategy on the chosen backend."""

from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output, OutputPath


def train(
    shards: Input[Dataset],
    model: Output[Model],
    metrics: Output[Metrics],
    metrics_json: Output[Artifact],
    tensorboard_logs: Output[Artifact],
    gcp_resources: OutputPath(str),
    run_config: dict,
    cluster: dict,
    backend: str = "local",
    cloud_config: dict = {},  # noqa: B006  (KFP takes a literal default)
    rehearse: bool = False,
    max_steps: int = 0,
    record_failure: bool = False,
):
    """Trains a Keras model with a tf.distribute strategy and exports it.

    The `local` backend runs the chief, workers and parameter servers as real
    TensorFlow processes on this task's machine, with TF_CONFIG as Vertex AI
    and the training operator set it; `vertex` and `kubeflow` submit a Vertex
    AI CustomJob or a Kubeflow TFJob running the same trainer image and wait
    for it. Every training process receives the run config whole.

    Args:
        shards: shards written by shard_dataset.
        run_config: the run's settings (data, model, training), as
            RunConfig JSON; see docs/design.md.
        cluster: the strategy and cluster shape to train with, e.g.
            {"strategy": "multi_worker_mirrored", "workers": 2, "ps": 0,
            "gpus_per_machine": 1}; replaces the run config's.
        backend: local, vertex or kubeflow (kfp is another name for kubeflow).
        cloud_config: the CloudConfig of the vertex and kubeflow backends
            (project, region, bucket, ...; docs/cloud.md).
        rehearse: with vertex or kubeflow, run every replica of the job this
            step would submit on the step's machine instead (nothing is sent;
            gs:// paths are served from $STRATEGIST_GCS_LOCAL_ROOT, default
            runs/gcs; see docs/cloud.md).
        max_steps: N > 0 trains a pilot instead of whole epochs: N steps
            after a warm-up of N / 5, measured in 5 windows (a multiple of 5;
            it replaces run_config.training.max_steps); 0 keeps the run config's.
        record_failure: a training that fails or diverges is recorded in
            metrics_json (its outcome and the failing task's error line) and the
            step succeeds with an empty model, so a comparison goes on with its
            other strategies; bad input still fails the step.

    Returns:
        model: the exported SavedModel.
        metrics: throughput, epoch times and test accuracy, for the KFP UI.
        metrics_json: the run's full record (metrics.json: what ran, on which
            hardware, epoch by epoch, and the test-split evaluation).
        tensorboard_logs: the chief's TensorBoard logs (epoch scalars, and a
            profiler trace with profile_steps): `tensorboard --logdir` on it;
            empty when a Vertex AI TensorBoard instance received them.
        gcp_resources: the cloud job, in Google Cloud Pipeline Components'
            GcpResources JSON: the KFP UI links to it, a cancelled run cancels
            it, and a retried step re-attaches to it instead of launching
            another (empty resources for the local backend).
    """
    from components.core import launch
    from components.core.failed_run import FailedRun

    result = launch.train_to_artifacts(
        run_config=run_config,
        cluster=cluster,
        shards_dir=shards.path,
        model_dir=model.path,
        metrics_path=metrics_json.path,
        backend=backend,
        cloud_config=cloud_config,
        gcp_resources_path=gcp_resources,
        rehearse=rehearse,
        tensorboard_dir=tensorboard_logs.path,
        max_steps=max_steps,
        record_failure=record_failure,
    )
    model.metadata.update({"strategy": result.strategy, "framework": "tensorflow"})
    if isinstance(result, FailedRun):
        metrics.metadata["outcome"] = result.outcome  # nothing measured to log
        return
    for name, value in launch.headline_metrics(result).items():
        metrics.log_metric(name, value)
