"""The strategy and cluster a pipeline trains with: the selector's recommendation, or the run's own.

The `select_strategy` component (`components/select.py`) calls `choose_for_pipeline`
at run time (KFP builds a component from its function's source alone). It turns
the run config and the target hardware into a `Topology`, asks
`selection.recommend`, and returns the cluster the train step runs with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from components.core.checkpoint_interval import EPOCH, PREEMPTIONS_PER_MACHINE_HOUR
from components.core.config import (
    ClusterConfig,
    ConfigError,
    cluster_for,
    validate_cluster,
    validate_pipeline_run,
)
from components.core.model_profile import profile_for
from components.core.selection import Topology, load_history, recommend
from components.core.selection.summary import as_markdown
from components.core.selection.topology import precision_of_policy


@dataclass(frozen=True)
class PipelineChoice:
    """What the `select_strategy` component returns.

    Attributes:
        cluster: the strategy and cluster shape the train step runs.
        markdown: the recommendation and reasons, for a KFP Markdown artifact.
        recommendation_json: `Recommendation.to_dict()` as JSON.
    """

    cluster: ClusterConfig
    markdown: str
    recommendation_json: str


def choose_for_pipeline(
    *,
    run_config: dict,
    machines: int,
    gpus_per_machine: int,
    gpu: str,
    interconnect: str | None,
    network_gbps: float,
    preemptible: bool = False,
    network_path: str = "host",
    shards_dir: str | None = None,
    async_ok: bool = False,
    history: str = "",
    preemptions_per_machine_hour: float = PREEMPTIONS_PER_MACHINE_HOUR,
) -> PipelineChoice:
    """The strategy and cluster a pipeline trains with.

    The recommendation when the run config's strategy is `auto`; otherwise the
    run config's own cluster, with the recommendation reported beside it.
    `history` (comma-separated `comparison.json` files or folders: a pilot's or
    a comparison's, local or `gs://`) replaces predictions with what matching
    runs measured, as `strategist select --history` does. With `preemptible`,
    `preemptions_per_machine_hour` is the expected rate (the default is said to
    be assumed, as `select` says it).

    Raises:
        ConfigError: a run config that cannot run, unknown hardware; `auto` for
            a model that needs model parallelism, which Strategist does not train.
    """
    config = validate_pipeline_run(run_config)
    strategy = config.cluster.strategy
    profile = profile_for(
        config.model, shards_dir, validation_fraction=config.training.validation_fraction
    )
    topology = Topology(
        machines=machines,
        gpus_per_machine=gpus_per_machine,
        gpu=gpu,
        interconnect=interconnect,
        network_gbps=network_gbps,
        network_path=network_path,
        precision=precision_of_policy(config.training.precision),
        jit_compile=config.training.jit_compile,
        preemptible=preemptible,
        preemptions_per_machine_hour=(
            preemptions_per_machine_hour
            if preemptible and preemptions_per_machine_hour != PREEMPTIONS_PER_MACHINE_HOUR
            else None
        ),
        # what a preemption loses is priced only on preemptible machines
        checkpoint_every=config.training.checkpoint_every if preemptible else EPOCH,
        all_reduce_pack_mb=config.cluster.all_reduce_pack_mb,
    )
    model_name = config.model.name
    rec = recommend(
        topology,
        profile,
        batch_size=config.training.per_replica_batch_size,
        async_ok=async_ok,
        history=load_history(history_paths(history)) if history_paths(history) else (),
    )
    markdown = as_markdown(rec)
    if strategy == "auto":
        if not rec.supported or rec.layout is None:
            raise ConfigError(
                f"{model_name} does not fit one {gpu} GPU and needs model parallelism, which "
                "Strategist does not train: choose more GPU memory (--gpu) or a smaller model"
            )
        layout = rec.layout
        cluster = cluster_for(
            rec.strategy,
            layout.workers,
            layout.ps,
            layout.gpus_per_machine,
            evaluator=config.cluster.evaluator,
            all_reduce=config.cluster.all_reduce,
            all_reduce_pack_mb=config.cluster.all_reduce_pack_mb,
        )
        markdown = f"**Training with the recommendation: `{rec.strategy}`.**\n\n{markdown}"
    else:
        cluster = config.cluster
        markdown = (
            f"**Training with `{strategy}` as asked; the recommendation was "
            f"`{rec.strategy}`.**\n\n{markdown}"
        )
    validate_cluster(cluster)
    return PipelineChoice(cluster, markdown, json.dumps(rec.to_dict()))


def history_paths(history: str) -> list[str]:
    """The files or folders of a comma-separated `history` parameter ("" for none)."""
    return [path.strip() for path in history.split(",") if path.strip()]
