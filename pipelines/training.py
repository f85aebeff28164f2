"""The training pipeline: shard -> select -> train -> evaluate -> promote (when blessed)."""

from kfp import dsl

from components.core.config import ClusterConfig, RunConfig
from components.image import DEFAULT_IMAGE
from components.registry import build_components
from pipelines.scheduling import GpuPlacement, place_training

# `auto`: the select step chooses the strategy and cluster for the hardware.
DEFAULT_RUN_CONFIG = RunConfig(cluster=ClusterConfig("auto")).to_pipeline_parameter()


def build_training_pipeline(image: str = DEFAULT_IMAGE, placement: GpuPlacement | None = None):
    """The training pipeline with every component on `image`.

    Args:
        image: the one container image of every step.
        placement: GPU scheduling of the train step for a compile target, or
            None (local runs).
    """
    c = build_components(image)

    @dsl.pipeline(
        name="strategist-training",
        description="Shard a TFDS dataset, choose a tf.distribute strategy (or keep the one "
        "given), train with it, evaluate the exported model and promote it only when it beats "
        "the promoted one.",
    )
    def training(
        run_config: dict = DEFAULT_RUN_CONFIG,
        machines: int = 1,
        gpus_per_machine: int = 2,
        gpu: str = "t4",
        network_gbps: float = 10.0,
        backend: str = "local",
        cloud_config_json: str = "{}",
        rehearse: bool = False,
        promotion_target: str = "pointer",
        promotion_root: str = "",
        promotion_metric: str = "test_accuracy",
        promotion_margin: float = 0.0,
        model_display_name: str = "strategist-model",
    ) -> float:
        """Shards, selects a strategy, trains, evaluates and promotes a better model.

        Args:
            run_config: the run's settings as RunConfig JSON (data, model,
                training, cluster); cluster.strategy `auto` lets the select
                step choose for the hardware below. Every step receives it
                whole. See docs/design.md.
            machines: machines available to training.
            gpus_per_machine: GPUs on each machine.
            gpu: GPU type (t4, l4, v100, a100, a100-80gb, h100).
            network_gbps: network between machines (Gbit/s).
            backend: where training runs: local, vertex or kubeflow.
            cloud_config_json: CloudConfig JSON for the vertex and kubeflow backends.
            rehearse: with vertex or kubeflow, the train step runs every replica
                of its cloud job on its own machine instead (docs/cloud.md).
            promotion_target: pointer, vertex (Model Registry) or none.
            promotion_root: folder of promoted.json (pointer); empty: beside the
                pipeline root.
            promotion_metric: test_<metric> of any evaluated metric (test_accuracy,
                test_loss, test_mae, test_rmse or one the model compiles).
            promotion_margin: how much better than the promoted model a new one must be.
            model_display_name: the Model Registry display name (vertex).
        """
        shard = c.shard_dataset(run_config=run_config)
        shard.set_display_name("shard")
        choice = c.select_strategy(
            shards=shard.outputs["shards"],
            run_config=run_config,
            machines=machines,
            gpus_per_machine=gpus_per_machine,
            gpu=gpu,
            network_gbps=network_gbps,
        )
        choice.set_display_name("select strategy")
        trained = c.train(
            shards=shard.outputs["shards"],
            run_config=run_config,
            cluster=choice.outputs["cluster"],
            backend=backend,
            cloud_config_json=cloud_config_json,
            rehearse=rehearse,
        )
        trained.set_display_name("train")
        place_training(trained, placement)
        promotion = {
            "promotion_target": promotion_target,
            "promotion_root": promotion_root,
            "promotion_metric": promotion_metric,
            "model_display_name": model_display_name,
            "cloud_config_json": cloud_config_json,
            "pipeline_root": dsl.PIPELINE_ROOT_PLACEHOLDER,
        }
        evaluated = c.evaluate(
            model=trained.outputs["model"],
            shards=shard.outputs["shards"],
            promotion_margin=promotion_margin,
            **promotion,
        )
        evaluated.set_display_name("evaluate")
        evaluated.set_caching_options(False)  # the decision depends on what is promoted now
        # evaluate's `Output` is its blessing (the one output name kfp.local's dsl.If resolves).
        with dsl.If(evaluated.outputs["Output"] == True, name="blessed"):  # noqa: E712
            promoted = c.promote(
                model=trained.outputs["model"],
                metric_value=evaluated.outputs["metric_value"],
                run_id=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
                **promotion,
            )
            promoted.set_display_name("promote")
            promoted.set_caching_options(False)
        return evaluated.outputs["test_accuracy"]

    return training
