"""The comparison pipeline: shard once -> train each strategy -> evaluate -> compare."""

from typing import List, NamedTuple  # noqa: UP035  (KFP reads typing.List parameter types)

from kfp import dsl
from kfp.dsl import HTML, Artifact, Markdown

from components.image import DEFAULT_IMAGE
from components.registry import build_components
from pipelines.scheduling import GpuPlacement, place_training

DEFAULT_STRATEGIES = ["mirrored", "multi_worker_mirrored", "parameter_server"]


class ComparisonOutputs(NamedTuple):
    """What the comparison pipeline returns: the compare step's artifacts."""

    comparison: Artifact
    report: HTML
    summary: Markdown
    plots: Artifact


def build_comparison_pipeline(image: str = DEFAULT_IMAGE, placement: GpuPlacement | None = None):
    """The comparison pipeline with every component on `image`.

    Strategies run one after another (`parallelism=1`) so that each is timed on
    the same, otherwise idle hardware.

    Args:
        image: the one container image of every step.
        placement: GPU scheduling of the train steps for a compile target, or
            None (local runs).
    """
    c = build_components(image)

    @dsl.pipeline(
        name="strategist-comparison",
        description="Train the same model on the same data with several tf.distribute "
        "strategies and compare wall-clock per epoch, throughput, scaling efficiency, time to "
        "accuracy, final quality and cost.",
    )
    def comparison(
        dataset: str = "digits",
        data_dir: str = "",
        num_shards: int = 8,
        strategies: List[str] = DEFAULT_STRATEGIES,  # noqa: UP006
        model_name: str = "mlp",
        epochs: int = 5,
        batch_size: int = 32,
        learning_rate: float = 0.001,
        workers: int = 2,
        ps: int = 1,
        devices_per_worker: int = 0,
        machines: int = 1,
        gpus_per_machine: int = 2,
        gpu: str = "t4",
        network_gbps: float = 10.0,
        target_accuracy: float = 0.9,
        backend: str = "local",
        cloud_config_json: str = "{}",
    ) -> NamedTuple("Outputs", comparison=Artifact, report=HTML, summary=Markdown, plots=Artifact):
        shard = c.shard_dataset(dataset=dataset, num_shards=num_shards, data_dir=data_dir)
        shard.set_display_name("shard")
        recommendation = c.select_strategy(
            strategy="auto",
            model_name=model_name,
            batch_size=batch_size,
            machines=machines,
            gpus_per_machine=gpus_per_machine,
            gpu=gpu,
            network_gbps=network_gbps,
        )
        recommendation.set_display_name("select strategy")
        with dsl.ParallelFor(strategies, parallelism=1) as strategy:
            trained = c.train(
                shards=shard.outputs["shards"],
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
            trained.set_display_name("train")
            place_training(trained, placement)
            evaluated = c.evaluate(model=trained.outputs["model"], shards=shard.outputs["shards"])
            evaluated.set_display_name("evaluate")
        compared = c.compare_strategies(
            runs=dsl.Collected(trained.outputs["metrics_json"]),
            recommendation_json=recommendation.outputs["recommendation_json"],
            target_accuracy=target_accuracy,
        )
        compared.set_display_name("compare strategies")
        compared.after(evaluated)
        return ComparisonOutputs(
            comparison=compared.outputs["comparison"],
            report=compared.outputs["report"],
            summary=compared.outputs["summary"],
            plots=compared.outputs["plots"],
        )

    return comparison
