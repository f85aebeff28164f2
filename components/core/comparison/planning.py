"""A comparison's plan: the order it trains its clusters in, each repeated."""

from __future__ import annotations

from components.core.errors import ConfigError


def interleaved_runs(clusters: list, repeats: int) -> list:
    """Every cluster `repeats` times, interleaved (s1, s2, s1, s2): a comparison's run order.

    Raises:
        ConfigError: `repeats` below 1, or no clusters.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError(f"repeats {repeats!r}: pass a whole number of runs, 1 or more")
    if not clusters:
        raise ConfigError("no clusters to compare: name at least one strategy")
    return [dict(cluster) for _ in range(repeats) for cluster in clusters]
