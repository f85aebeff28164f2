"""Shares written as percentages in the selector's sentences."""

from __future__ import annotations


def pct(x: float) -> str:
    """`x` as a whole percentage, e.g. `42%`."""
    return f"{x:.0%}"


def pct_shown(x: float) -> str:
    """`x` as a percentage that shows it is not 0: whole from 1% on, else two
    significant digits (`0.31%`)."""
    if x == 0 or abs(x) >= 0.01:
        return pct(x)
    return f"{x * 100:.2g}%"


def pct_against(x: float, threshold: float) -> str:
    """`x` as a percentage with the fewest decimals that keep it on its side of
    `threshold`: 0.4978 against 0.5 is `49.8%`, never `50%`."""
    decimals = 0
    while decimals < 6 and (round(x * 100, decimals) < threshold * 100) != (x < threshold):
        decimals += 1
    return f"{x:.{decimals}%}"
