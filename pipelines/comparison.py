"""The comparison pipeline: shard once -> train each strategy -> evaluate -> compare."""

import dataclasses
from typing import List, NamedTuple  # noqa: UP035  (KFP reads typing.List parameter types)

from kfp import dsl
from kfp.dsl import HTML, Artifact, Markdown

from components.core.checkpoint_interval import PREEMPTIONS_PER_MACHINE_HOUR
from components.core.config import RunConfig, cluster_for
from components.core.strategy_spec import COMPARED_BY_DEFAULT, spec_for
from components.image import DEFAULT_IMAGE
from components.registry import build_components
from pipelines.scheduling import LOCAL_DEVICES, GpuPlacement, place_training, spec_defaults

DEFAULT_STRATEGIES = list(COMPARED_BY_DEFAULT)
# The comparison's run without a cluster: each train step gets its own (`clusters`).
DEFAULT_RUN_CONFIG = {
    key: section for key, section in RunConfig().to_pipeline_parameter().items() if key != "cluster"
}


def default_clusters(devices: int = LOCAL_DEVICES) -> list[dict]:
    """The compared clusters: each strategy's default, `devices` per machine where it takes
    several (mirrored)."""
    return [
        dataclasses.asdict(
            cluster_for(name, devices=devices if spec_for(name).default_devices > 1 else None)
        )
        for name in DEFAULT_STRATEGIES
    ]


DEFAULT_CLUSTERS = default_clusters()


class ComparisonOutputs(NamedTuple):
    """What the comparison pipeline returns: the compare step's artifacts and its verdict
    (`winner`, "" when none is clear, and `speedup_over_runner_up`) as scalars."""

    comparison: Artifact
    report: HTML
    summary: Markdown
    plots: Artifact
    winner: str
    speedup_over_runner_up: float


def build_comparison_pipeline(
    image: str = DEFAULT_IMAGE,
    placement: GpuPlacement | None = None,
    target: str | None = None,
    gpus_per_machine: int = 1,
):
    """The comparison pipeline with every component on `image`.

    Strategies run one after another (`parallelism=1`) so that each is timed on
    the same, otherwise idle hardware; with `repeats` each runs that many
    times, interleaved (`plan_runs`).

    Args:
        image: the one container image of every step.
        placement: GPU scheduling of the train steps for a compile target, or
            None (no GPU on the step).
        target: the compile target (`vertex`, `kubeflow`), whose defaults the
            parameters take (`scheduling.spec_defaults`); None for kfp.local.
        gpus_per_machine: the `gpus_per_machine` default of a spec that trains
            as the target's cloud job (without `placement`).
    """
    c = build_components(image)
    defaults = spec_defaults(target, placement, gpus_per_machine)
    clusters_default = default_clusters(defaults.devices)

    @dsl.pipeline(
        name="strategist-comparison",
        display_name="Strategist comparison",
        description="Train the same model on the same data with several tf.distribute "
        "strategies and compare wall-clock per epoch, throughput, scaling efficiency, time to "
        "accuracy, final quality and cost.",
    )
    def comparison(
        run_config: dict = DEFAULT_RUN_CONFIG,
        clusters: List[dict] = clusters_default,  # noqa: UP006
        machines: int = 1,
        gpus_per_machine: int = defaults.devices,
        gpu: str = "t4",
        network_gbps: float = 10.0,
        network_path: str = "host",
        preemptible: bool = False,
        preemptions_per_machine_hour: float = PREEMPTIONS_PER_MACHINE_HOUR,
        prices: dict = {},  # noqa: B006  (KFP takes a literal default)
        async_ok: bool = False,
        target_value: float = 0.9,
        target_metric: str = "accuracy",
        backend: str = defaults.backend,
        cloud_config: dict = {},  # noqa: B006  (KFP takes a literal default)
        rehearse: bool = False,
        repeats: int = 1,
        max_steps: int = 0,
    ) -> NamedTuple(
        "Outputs",
        comparison=Artifact,
        report=HTML,
        summary=Markdown,
        plots=Artifact,
        winner=str,
        speedup_over_runner_up=float,
    ):
        """Trains the same model on the same data with each cluster and compares them.

        Args:
            run_config: the run's settings as RunConfig JSON (data, model,
                training); every train step receives it whole. See docs/design.md.
            clusters: the strategies to compare, each a cluster: {"strategy",
                "workers", "ps", "gpus_per_machine"}.
            machines: target machines, for the recorded recommendation.
            gpus_per_machine: target GPUs per machine, for the recommendation.
            gpu: target GPU type, for the recommendation.
            network_gbps: target network between machines (Gbit/s).
            network_path: target network path, host or overlay (for the recommendation).
            preemptible: target machines are Spot/preemptible: the recommendation
                charges their preemptions, and each run's cost is at the price table's Spot
                prices with the work expected preemptions throw away (a restart
                and half its checkpoint interval).
            preemptions_per_machine_hour: with preemptible, expected preemptions
                of one machine per hour (default 1/24: one a day), for the
                recommendation and the price alike.
            prices: the price table, in the layout of
                components/core/data/prices.json ({}: that bundled one).
            async_ok: asynchronous updates are acceptable (for the recommendation).
            target_value: the training value of target_metric that time-to-target
                is measured to (an accuracy, or a loss or error to get below).
            target_metric: accuracy, loss, or any metric the runs record per epoch.
            backend: where training runs: local (on the train step's machine),
                vertex (a Vertex AI CustomJob) or kubeflow (a TFJob).
            cloud_config: the CloudConfig of the vertex and kubeflow backends
                (project, region, base_output_dir, ...; docs/cloud.md).
            rehearse: with vertex or kubeflow, the train step runs every replica
                of its cloud job on its own machine instead (docs/cloud.md).
            repeats: how many times each strategy trains, interleaved (s1, s2,
                s1, s2); the report shows the median and spread of each.
            max_steps: 0 trains whole epochs; N > 0 is a pilot: each strategy
                trains N steps (a multiple of 5) after a warm-up of N / 5, on
                whichever backend, and its steady throughput is the median of
                5 windows after the warm-up, with their spread.

        Returns:
            comparison: comparison.json, every run and the verdict.
            report: the HTML report.
            summary: the Markdown summary.
            plots: the PNG plots.
            winner: the winning strategy, or "" when no winner is clear.
            speedup_over_runner_up: the leader's steady-state throughput over the
                runner-up's.
        """
        shard = c.shard_dataset(run_config=run_config)
        shard.set_display_name("shard data")
        recommendation = c.select_strategy(
            shards=shard.outputs["shards"],
            run_config=run_config,
            machines=machines,
            gpus_per_machine=gpus_per_machine,
            gpu=gpu,
            network_gbps=network_gbps,
            network_path=network_path,
            preemptible=preemptible,
            preemptions_per_machine_hour=preemptions_per_machine_hour,
            async_ok=async_ok,
        )
        recommendation.set_display_name("select strategy")
        runs = c.plan_runs(clusters=clusters, repeats=repeats)
        runs.set_display_name("plan runs")
        with dsl.ParallelFor(runs.output, parallelism=1, name="each strategy") as cluster:
            trained = c.train(
                shards=shard.outputs["shards"],
                run_config=run_config,
                cluster=cluster,
                backend=backend,
                cloud_config=cloud_config,
                rehearse=rehearse,
                max_steps=max_steps,
                # A strategy that fails or diverges is recorded; the others still train.
                record_failure=True,
            )
            trained.set_display_name("train")
            place_training(trained, placement)
            evaluated = c.evaluate(
                model=trained.outputs["model"], run=trained.outputs["metrics_json"]
            )
            evaluated.set_display_name("evaluate")
        compared = c.compare_strategies(
            runs=dsl.Collected(trained.outputs["metrics_json"]),
            recommendation_json=recommendation.outputs["recommendation_json"],
            target_value=target_value,
            target_metric=target_metric,
            preemptible=preemptible,
            preemptions_per_machine_hour=preemptions_per_machine_hour,
            prices=prices,
        )
        compared.set_display_name("compare strategies")
        compared.after(evaluated)
        return ComparisonOutputs(
            comparison=compared.outputs["comparison"],
            report=compared.outputs["report"],
            summary=compared.outputs["summary"],
            plots=compared.outputs["plots"],
            winner=compared.outputs["winner"],
            speedup_over_runner_up=compared.outputs["speedup_over_runner_up"],
        )

    return comparison
