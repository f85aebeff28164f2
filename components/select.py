"""KFP component: choose a tf.distribute strategy and cluster layout, with reasons."""

from typing import NamedTuple

from kfp.dsl import Dataset, Input, Markdown, Output


def select_strategy(
    shards: Input[Dataset],
    reasons: Output[Markdown],
    run_config: dict,
    machines: int = 1,
    gpus_per_machine: int = 2,
    gpu: str = "t4",
    interconnect: str = "",
    network_gbps: float = 10.0,
    network_path: str = "host",
    preemptible: bool = False,
    async_ok: bool = False,
    history: str = "",
    preemptions_per_machine_hour: float = 1 / 24,  # checkpoint_interval's default
) -> NamedTuple("Choice", strategy=str, cluster=dict, recommendation_json=str):
    """Chooses a tf.distribute strategy and cluster layout for the hardware and model.

    With the run config's strategy `auto` the step-time model's recommendation is
    used; otherwise the run config's cluster is kept and the recommendation is
    reported beside it. The reasons, with predicted step times split into
    compute and communication, become a Markdown artifact.

    Args:
        shards: the shards; the run's model (a built-in or the user's
            `run_config.model.module`) is built once for their examples and
            counted: its size, tensors and compiled metrics.
        run_config: the run's settings as RunConfig JSON (model, per-replica
            batch, and the cluster: strategy `auto` or one to keep).
        machines: machines available.
        gpus_per_machine: GPUs on each machine.
        gpu: GPU type (t4, l4, v100, a100, a100-80gb, h100, ...).
        interconnect: link between GPUs of a machine (nvlink or pcie; empty for the GPU's usual).
        network_gbps: network bandwidth between machines, Gbit/s.
        network_path: host (the machines' own network, or pods with hostNetwork) or
            overlay (a container overlay network such as kubenet, which delivers a
            fitted share of the NICs' rate).
        preemptible: whether machines may be preempted (Spot).
        async_ok: whether asynchronous updates are acceptable: lets a dense model
            train with parameter_server when it is predicted faster (stale
            gradients change how it learns, so the default keeps training synchronous).
        history: comma-separated comparison.json files or folders (a pilot's or a
            comparison's, local or gs://) whose measured runs replace predictions.
        preemptions_per_machine_hour: with preemptible, expected preemptions of
            one machine per hour (default 1/24: one a day).

    Returns:
        reasons: the recommendation and its reasons, as Markdown.
        strategy: the strategy the train step runs.
        cluster: the cluster (ClusterConfig JSON) the train step runs.
        recommendation_json: the recommendation, with its predictions, as JSON.
    """
    import dataclasses
    from collections import namedtuple

    from components.core.strategy_choice import choose_for_pipeline

    choice = choose_for_pipeline(
        run_config=run_config,
        machines=machines,
        gpus_per_machine=gpus_per_machine,
        gpu=gpu,
        interconnect=interconnect or None,
        network_gbps=network_gbps,
        network_path=network_path,
        preemptible=preemptible,
        async_ok=async_ok,
        history=history,
        shards_dir=shards.path,
        preemptions_per_machine_hour=preemptions_per_machine_hour,
    )
    from components.core import storage

    storage.write_text(reasons.path, choice.markdown)
    Choice = namedtuple("Choice", ["strategy", "cluster", "recommendation_json"])
    return Choice(
        choice.cluster.strategy, dataclasses.asdict(choice.cluster), choice.recommendation_json
    )
