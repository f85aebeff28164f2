"""Builds every Strategist component on one container image.

The image is chosen at compile time (`strategist compile --image URI`), never
read from the environment: each pipeline build calls `build_components(image)`.
"""

from dataclasses import dataclass

from kfp import dsl

from components import compare, evaluate, plan, promote, select, shard, train
from components.image import DEFAULT_IMAGE


@dataclass(frozen=True)
class Components:
    """The components of one build, all on the same image."""

    shard_dataset: dsl.base_component.BaseComponent
    select_strategy: dsl.base_component.BaseComponent
    plan_runs: dsl.base_component.BaseComponent
    train: dsl.base_component.BaseComponent
    evaluate: dsl.base_component.BaseComponent
    promote: dsl.base_component.BaseComponent
    compare_strategies: dsl.base_component.BaseComponent


def build_components(image: str = DEFAULT_IMAGE) -> Components:
    """Every component on `image`, which already holds Strategist and KFP."""

    def make(func):
        return dsl.component(func, base_image=image, install_kfp_package=False)

    return Components(
        shard_dataset=make(shard.shard_dataset),
        select_strategy=make(select.select_strategy),
        plan_runs=make(plan.plan_runs),
        train=make(train.train),
        evaluate=make(evaluate.evaluate),
        promote=make(promote.promote),
        compare_strategies=make(compare.compare_strategies),
    )
