"""KFP component: train with a tf.distribute strategy on the chosen backend."""

from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output


def train(
    shards: Input[Dataset],
    model: Output[Model],
    metrics: Output[Metrics],
    metrics_json: Output[Artifact],
    strategy: str = "mirrored",
    workers: int = 2,
    ps: int = 1,
    devices_per_worker: int = 2,
    model_name: str = "mlp",
    epochs: int = 5,
    batch_size: int = 32,
    learning_rate: float = 0.001,
    backend: str = "local",
    cloud_config_json: str = "{}",
):
    """Trains a Keras model with a tf.distribute strategy and exports it.

    The `local` backend runs the chief, workers and parameter servers as real
    TensorFlow processes on this task's machine; `vertex` and `kubeflow` submit
    a Vertex AI CustomJob or a Kubeflow TFJob running the same trainer image and
    wait for it. Single-machine strategies ignore `workers` and `ps`; only
    `parameter_server` uses `ps`.

    Args:
        shards: shards written by shard_dataset.
        model: the exported SavedModel.
        metrics: throughput, epoch times and test accuracy, for the KFP UI.
        metrics_json: the run's full metrics.json.
        strategy: one_device, mirrored, multi_worker_mirrored or parameter_server.
        workers: processes computing gradients (multi-worker strategies).
        ps: parameter servers (parameter_server only).
        devices_per_worker: devices (GPUs, or logical CPU devices standing in for
            them) per machine that computes gradients; 0 takes the strategy's default.
        model_name: model registry name (mlp, cnn, resnet50, mobilenet_v2).
        epochs: training epochs.
        batch_size: per-replica batch size; the global batch is this times the replicas.
        learning_rate: learning rate at batch 32, scaled linearly with the batch.
        backend: local, vertex or kubeflow.
        cloud_config_json: CloudConfig JSON for the vertex and kubeflow backends.
    """
    from components.core import launch

    result = launch.train_to_artifacts(
        shards_dir=shards.path,
        model_dir=model.path,
        metrics_path=metrics_json.path,
        strategy=strategy,
        workers=workers,
        ps=ps,
        devices_per_worker=devices_per_worker,
        model_name=model_name,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        backend=backend,
        cloud_config_json=cloud_config_json,
    )
    for name, value in launch.headline_metrics(result).items():
        metrics.log_metric(name, value)
    model.metadata.update({"strategy": strategy, "framework": "tensorflow"})
