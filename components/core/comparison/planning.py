"""A comparison's plan: the order it trains its clusters in, each repeated."""

from __future__ import annotations

from components.core.errors import ConfigError

# Runs of each strategy: a median and spread need a few; each costs a whole training.
MAX_REPEATS = 100


def check_plan(clusters: list, repeats: int) -> None:
    """Refuses a comparison plan (the CLI, `submit` and the pipeline's step all ask this).

    Raises:
        ConfigError: `repeats` not 1 to `MAX_REPEATS`, no clusters, a cluster
            that is not an object, or the same cluster twice.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise ConfigError(f"repeats {repeats!r}: pass a whole number of runs, 1 to {MAX_REPEATS}")
    if not isinstance(clusters, list) or not clusters:
        raise ConfigError("no clusters to compare: name at least one strategy")
    seen = []
    for cluster in clusters:
        if not isinstance(cluster, dict):
            raise ConfigError(
                f'clusters: {cluster!r} is not a cluster object ({{"strategy": ...}})'
            )
        if cluster in seen:
            raise ConfigError(
                f"clusters names {cluster} twice: compare each cluster once (use repeats "
                "to run it more often)"
            )
        seen.append(cluster)


def interleaved_runs(clusters: list, repeats: int) -> list:
    """Every cluster `repeats` times, interleaved (s1, s2, s1, s2): a comparison's run order.

    Raises:
        ConfigError: what `check_plan` refuses.
    """
    check_plan(clusters, repeats)
    return [dict(cluster) for _ in range(repeats) for cluster in clusters]
