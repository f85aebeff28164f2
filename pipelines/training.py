"""The training pipeline: shard -> select -> train -> evaluate -> promote (when blessed)."""

from kfp import dsl

from components.image import DEFAULT_IMAGE
from components.registry import build_components
from pipelines.scheduling import GpuPlacement, place_training


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
        dataset: str = "digits",
        data_dir: str = "",
        num_shards: int = 8,
        strategy: str = "auto",
        model_name: str = "mlp",
        epochs: int = 5,
        batch_size: int = 32,
        learning_rate: float = 0.001,
        machines: int = 1,
        gpus_per_machine: int = 2,
        gpu: str = "t4",
        network_gbps: float = 10.0,
        workers: int = 2,
        ps: int = 1,
        backend: str = "local",
        cloud_config_json: str = "{}",
        promotion_target: str = "pointer",
        promotion_root: str = "",
        promotion_metric: str = "test_accuracy",
        promotion_margin: float = 0.0,
        model_display_name: str = "strategist-model",
    ) -> float:
        shard = c.shard_dataset(dataset=dataset, num_shards=num_shards, data_dir=data_dir)
        shard.set_display_name("shard")
        choice = c.select_strategy(
            strategy=strategy,
            model_name=model_name,
            batch_size=batch_size,
            machines=machines,
            gpus_per_machine=gpus_per_machine,
            gpu=gpu,
            network_gbps=network_gbps,
            workers=workers,
            ps=ps,
        )
        choice.set_display_name("select strategy")
        trained = c.train(
            shards=shard.outputs["shards"],
            strategy=choice.outputs["strategy"],
            workers=choice.outputs["workers"],
            ps=choice.outputs["ps"],
            devices_per_worker=gpus_per_machine,
            model_name=model_name,
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            backend=backend,
            cloud_config_json=cloud_config_json,
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
