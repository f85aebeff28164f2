"""KFP component: choose a tf.distribute strategy and cluster layout, with reasons."""

from typing import NamedTuple

from kfp.dsl import Markdown, Output


def select_strategy(
    reasons: Output[Markdown],
    strategy: str = "auto",
    model_name: str = "mlp",
    batch_size: int = 32,
    machines: int = 1,
    gpus_per_machine: int = 2,
    gpu: str = "t4",
    interconnect: str = "",
    network_gbps: float = 10.0,
    workers: int = 2,
    ps: int = 1,
    preemptible: bool = False,
) -> NamedTuple("Choice", strategy=str, workers=int, ps=int, recommendation_json=str):
    """Chooses a tf.distribute strategy and cluster layout for the hardware and model.

    With `strategy` set to `auto` the cost model's recommendation is used;
    otherwise the given strategy is kept and the recommendation is reported
    beside it. The reasons, with predicted step times split into compute and
    communication, become a Markdown artifact.

    Args:
        reasons: the recommendation and its reasons, as Markdown.
        strategy: `auto`, or a strategy name to keep.
        model_name: model registry name, measured for parameters and FLOPs.
        batch_size: per-replica batch size.
        machines: machines available.
        gpus_per_machine: GPUs on each machine.
        gpu: GPU type (t4, l4, v100, a100, a100-80gb, h100, ...).
        interconnect: link between GPUs of a machine (nvlink or pcie; empty for the GPU's usual).
        network_gbps: network bandwidth between machines, Gbit/s.
        workers: workers when a strategy is given (multi-worker strategies).
        ps: parameter servers when parameter_server is given.
        preemptible: whether machines may be preempted (Spot).

    Returns:
        The strategy, its workers and parameter servers, and the recommendation as JSON.
    """
    from collections import namedtuple

    from components.strategy_choice import choose_for_pipeline

    choice = choose_for_pipeline(
        strategy=strategy,
        model_name=model_name,
        batch_size=batch_size,
        machines=machines,
        gpus_per_machine=gpus_per_machine,
        gpu=gpu,
        interconnect=interconnect or None,
        network_gbps=network_gbps,
        workers=workers,
        ps=ps,
        preemptible=preemptible,
    )
    with open(reasons.path, "w") as handle:
        handle.write(choice.markdown)
    Choice = namedtuple("Choice", ["strategy", "workers", "ps", "recommendation_json"])
    return Choice(choice.strategy, choice.workers, choice.ps, choice.recommendation_json)
