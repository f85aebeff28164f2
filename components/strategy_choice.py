"""What the `select_strategy` component computes, without kfp.

KFP builds the component from `select.select_strategy`'s source alone, so the
component imports this module at run time. It turns the component's flat
parameters into a `Topology`, asks `selection.recommend`, and returns the
strategy and cluster the train step runs with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from components.core.config import STRATEGIES, ConfigError, cluster_for, validate_cluster
from components.core.model_profile import profile_model
from components.core.selection import Topology, recommend


@dataclass(frozen=True)
class PipelineChoice:
    """What the `select_strategy` component returns.

    Attributes:
        strategy: the strategy the train step runs.
        workers: its workers (ClusterConfig meaning).
        ps: its parameter servers.
        markdown: the recommendation and reasons, for a KFP Markdown artifact.
        recommendation_json: `Recommendation.to_dict()` as JSON.
    """

    strategy: str
    workers: int
    ps: int
    markdown: str
    recommendation_json: str


def choose_for_pipeline(
    *,
    strategy: str,
    model_name: str,
    batch_size: int,
    machines: int,
    gpus_per_machine: int,
    gpu: str,
    interconnect: str | None,
    network_gbps: float,
    workers: int,
    ps: int,
    preemptible: bool = False,
) -> PipelineChoice:
    """The strategy and layout a pipeline trains with.

    The recommendation for `auto`; otherwise the given strategy, with the
    recommendation reported beside it.

    Raises:
        ConfigError: unknown strategy or hardware; `auto` for a model that needs
            model parallelism, which Strategist does not train.
    """
    if strategy != "auto" and strategy not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {strategy!r}; choose auto or one of {', '.join(STRATEGIES)}"
        )
    topology = Topology(
        machines=machines,
        gpus_per_machine=gpus_per_machine,
        gpu=gpu,
        interconnect=interconnect,
        network_gbps=network_gbps,
        preemptible=preemptible,
    )
    rec = recommend(topology, profile_model(model_name), batch_size=batch_size)
    markdown = rec.to_markdown()
    if strategy == "auto":
        if not rec.supported or rec.layout is None:
            raise ConfigError(
                f"{model_name} does not fit one {gpu} GPU and needs model parallelism, which "
                "Strategist does not train: choose more GPU memory (--gpu) or a smaller model"
            )
        cluster = cluster_for(rec.strategy, rec.layout.workers, max(rec.layout.ps, 1))
        markdown = f"**Training with the recommendation: `{rec.strategy}`.**\n\n{markdown}"
    else:
        cluster = cluster_for(strategy, workers, ps)
        markdown = (
            f"**Training with `{strategy}` as asked; the recommendation was "
            f"`{rec.strategy}`.**\n\n{markdown}"
        )
    validate_cluster(cluster)
    return PipelineChoice(
        cluster.strategy, cluster.workers, cluster.ps, markdown, json.dumps(rec.to_dict())
    )
