"""Small helpers on report values: number checks, JSON-safe floats and display formats."""

from __future__ import annotations

import math
from typing import Any


def is_number(value: Any) -> bool:
    """Whether `value` is a finite int or float (booleans are not numbers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def round_or_none(value: float | None, digits: int) -> float | None:
    """`value` rounded to `digits` decimals as a float; None stays None."""
    return None if value is None else round(float(value), digits)


def finite(value: Any) -> Any:
    """Replaces NaN and infinities with None, so the report is valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def pct(value: float) -> str:
    """A fraction as a percentage with one decimal (0.953 -> `95.3%`)."""
    return f"{100 * value:.1f}%"


def usd(value: float) -> str:
    """A dollar amount: six decimals below $1, cents with thousands separators above."""
    return f"${value:.6f}" if value < 1 else f"${value:,.2f}"
