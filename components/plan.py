"""KFP component: the order a comparison trains its clusters in, each repeated."""

from typing import List  # noqa: UP035  (KFP reads typing.List parameter types)


def plan_runs(clusters: List[dict], repeats: int = 1) -> List[dict]:  # noqa: UP006
    """Every cluster `repeats` times, interleaved: s1, s2, s3, s1, s2, s3, ...

    Interleaving spreads slow drift of the machine (heat, other load) over
    every strategy alike, so the spread of a strategy's repeats measures
    run-to-run noise rather than when it happened to run.

    Args:
        clusters: the strategies to compare, each a cluster dict.
        repeats: how many times each strategy trains (at least 1).

    Returns:
        Output: the clusters in the order they train. (Named `Output` because
            kfp.local 2.17 runs a dsl.ParallelFor over a task's output only
            when the output has that name.)
    """
    from components.core.comparison.planning import interleaved_runs

    return interleaved_runs(clusters, repeats)
