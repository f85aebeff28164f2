"""The training pipeline: shard -> select -> train -> evaluate -> promote (when blessed)."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Model

from components.core.config import ClusterConfig, RunConfig
from components.image import DEFAULT_IMAGE
from components.registry import build_components
from pipelines.scheduling import GpuPlacement, place_training, spec_defaults

# `auto`: the select step chooses the strategy and cluster for the hardware.
DEFAULT_RUN_CONFIG = RunConfig(cluster=ClusterConfig("auto")).to_pipeline_parameter()


class TrainingOutputs(NamedTuple):
    """What the training pipeline returns: the evaluate step's answers."""

    test_accuracy: float
    promotion_metric_value: float
    blessed: bool


def build_training_pipeline(
    image: str = DEFAULT_IMAGE,
    placement: GpuPlacement | None = None,
    target: str | None = None,
    gpus_per_machine: int = 1,
):
    """The training pipeline with every component on `image`.

    Args:
        image: the one container image of every step.
        placement: GPU scheduling of the train step for a compile target, or
            None (no GPU on the step).
        target: the compile target (`vertex`, `kubeflow`), whose defaults the
            parameters take (`scheduling.spec_defaults`); None for kfp.local.
        gpus_per_machine: the `gpus_per_machine` default of a spec that trains
            as the target's cloud job (without `placement`).
    """
    c = build_components(image)
    defaults = spec_defaults(target, placement, gpus_per_machine)

    @dsl.pipeline(name="promote-if-blessed", display_name="promote if blessed")
    def promote_if_blessed(
        blessed: bool,
        model: Model,
        metric_value: float,
        promotion_target: str,
        promotion_root: str,
        promotion_metric: str,
        model_display_name: str,
        cloud_config: dict,
    ):
        """Promotes the model only when the evaluate step blessed it.

        A pipeline of its own so that the condition reads one of its inputs:
        kfp.local 2.17 resolves a `dsl.If` on another task's output only when
        that output is named `Output`, and the evaluate step's is `blessed`.

        Args:
            blessed: the evaluate step's decision.
            model: the model to promote.
            metric_value: its value of promotion_metric.
            promotion_target: pointer or vertex.
            promotion_root: folder of promoted.json (pointer).
            promotion_metric: the metric the model was blessed on.
            model_display_name: the Model Registry display name (vertex).
            cloud_config: the CloudConfig (project and region of the registry).
        """
        with dsl.If(blessed == True, name="blessed"):  # noqa: E712
            promoted = c.promote(
                model=model,
                metric_value=metric_value,
                promotion_target=promotion_target,
                promotion_root=promotion_root,
                promotion_metric=promotion_metric,
                model_display_name=model_display_name,
                cloud_config=cloud_config,
                pipeline_root=dsl.PIPELINE_ROOT_PLACEHOLDER,
                run_id=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
            )
            promoted.set_display_name("promote")
            promoted.set_caching_options(False)

    @dsl.pipeline(
        name="strategist-training",
        display_name="Strategist training",
        description="Shard a TFDS dataset, choose a tf.distribute strategy (or keep the one "
        "given), train with it, evaluate the exported model and promote it only when it beats "
        "the promoted one.",
    )
    def training(
        run_config: dict = DEFAULT_RUN_CONFIG,
        machines: int = 1,
        gpus_per_machine: int = defaults.devices,
        gpu: str = "t4",
        network_gbps: float = 10.0,
        network_path: str = "host",
        preemptible: bool = False,
        async_ok: bool = False,
        history: str = "",
        backend: str = defaults.backend,
        cloud_config: dict = {},  # noqa: B006  (KFP takes a literal default)
        rehearse: bool = False,
        promotion_target: str = "pointer",
        promotion_root: str = "",
        promotion_metric: str = "test_accuracy",
        promotion_margin: float = 0.0,
        model_display_name: str = "strategist-model",
    ) -> TrainingOutputs:
        """Shards, selects a strategy, trains, evaluates and promotes a better model.

        Args:
            run_config: the run's settings as RunConfig JSON (data, model,
                training, cluster); cluster.strategy `auto` lets the select
                step choose for the hardware below. Every step receives it
                whole. See docs/design.md.
            machines: machines available to training.
            gpus_per_machine: GPUs (devices) on each machine.
            gpu: GPU type (t4, l4, v100, a100, a100-80gb, h100).
            network_gbps: network between machines (Gbit/s).
            network_path: host, or overlay for a container overlay network
                (Kubernetes pods on kubenet or flannel; the select step costs it).
            preemptible: the machines are Spot/preemptible: the select step weighs
                restarts (a synchronous job loses every replica's step to one preemption).
            async_ok: asynchronous updates are acceptable, so the select step may
                choose parameter_server for a dense model when it is predicted faster.
            history: comma-separated comparison.json files or folders (a pilot's,
                `strategist compare --max-steps`, or a comparison's; gs:// or local)
                whose measured runs replace the select step's predictions.
            backend: where training runs: local (on the train step's machine),
                vertex (a Vertex AI CustomJob) or kubeflow (a TFJob).
            cloud_config: the CloudConfig of the vertex and kubeflow backends
                (project, region, base_output_dir, ...; docs/cloud.md).
            rehearse: with vertex or kubeflow, the train step runs every replica
                of its cloud job on its own machine instead (docs/cloud.md).
            promotion_target: pointer, vertex (Model Registry) or none.
            promotion_root: folder of promoted.json (pointer); empty: beside the
                pipeline root.
            promotion_metric: test_<metric> of any evaluated metric (test_accuracy,
                test_loss, test_mae, test_rmse or one the model compiles).
            promotion_margin: how much better than the promoted model a new one must be.
            model_display_name: the Model Registry display name (vertex).

        Returns:
            test_accuracy: the trained model's test accuracy (NaN for regression).
            promotion_metric_value: its value of promotion_metric.
            blessed: whether it was blessed (and so promoted).
        """
        shard = c.shard_dataset(run_config=run_config)
        shard.set_display_name("shard data")
        choice = c.select_strategy(
            shards=shard.outputs["shards"],
            run_config=run_config,
            machines=machines,
            gpus_per_machine=gpus_per_machine,
            gpu=gpu,
            network_gbps=network_gbps,
            network_path=network_path,
            preemptible=preemptible,
            async_ok=async_ok,
            history=history,
        )
        choice.set_display_name("select strategy")
        trained = c.train(
            shards=shard.outputs["shards"],
            run_config=run_config,
            cluster=choice.outputs["cluster"],
            backend=backend,
            cloud_config=cloud_config,
            rehearse=rehearse,
        )
        trained.set_display_name("train")
        place_training(trained, placement)
        promotion = {
            "promotion_target": promotion_target,
            "promotion_root": promotion_root,
            "promotion_metric": promotion_metric,
            "model_display_name": model_display_name,
            "cloud_config": cloud_config,
        }
        evaluated = c.evaluate(
            model=trained.outputs["model"],
            run=trained.outputs["metrics_json"],
            promotion_margin=promotion_margin,
            pipeline_root=dsl.PIPELINE_ROOT_PLACEHOLDER,
            **promotion,
        )
        evaluated.set_display_name("evaluate and bless")
        evaluated.set_caching_options(False)  # the decision depends on what is promoted now
        gate = promote_if_blessed(
            blessed=evaluated.outputs["blessed"],
            model=trained.outputs["model"],
            metric_value=evaluated.outputs["metric_value"],
            **promotion,
        )
        gate.set_display_name("promote if blessed")
        return TrainingOutputs(
            test_accuracy=evaluated.outputs["test_accuracy"],
            promotion_metric_value=evaluated.outputs["metric_value"],
            blessed=evaluated.outputs["blessed"],
        )

    return training
