"""The GPU-speed options a run trained with, in words: for the train summary and the reports.

A record (`metrics.json`, or a comparison report's result) carries
`precision`, `jit_compile`, `xla_scope`, `steps_per_execution` and the
`all_reduce` that ran; records older than those fields ran float32, without
XLA, one step per execution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.core.strategy_spec import SPECS, XLA_MODEL


def _xla_words(jit_compile: bool, xla_scope: str | None) -> str:
    """`off`, `on`, or what XLA compiled when it was not the whole train step."""
    if not jit_compile:
        return "off"
    if xla_scope == XLA_MODEL:
        return "on (forward and backward passes; all-reduce and update outside XLA)"
    return "on"


def training_options(record: Mapping[str, Any]) -> str:
    """Precision, XLA and steps per execution of one record, in words."""
    steps = record.get("steps_per_execution") or 1
    xla = _xla_words(bool(record.get("jit_compile")), record.get("xla_scope"))
    return (
        f"{record.get('precision') or 'float32'}, XLA {xla}, "
        f"{steps} step{'s' if steps != 1 else ''} per execution"
    )


def lines(records: list[Mapping[str, Any]]) -> list[str]:
    """`Speed options ...` sentences for a report's records (with `name` and `strategy`).

    One sentence per set of training options (one for a whole comparison,
    whose runs share them), each naming the all-reduce of every run that
    all-reduces.
    """
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(training_options(record), []).append(record)
    out = []
    for options, group in groups.items():
        reduces = [
            f"{r.get('all_reduce') or 'auto'} ({r['name']})"
            for r in group
            if r.get("strategy") in SPECS and SPECS[r["strategy"]].all_reduce_choices
        ]
        which = "every run" if len(groups) == 1 else ", ".join(r["name"] for r in group)
        sentence = f"Speed options ({which}): {options}"
        out.append(sentence + (f"; all-reduce {', '.join(reduces)}." if reduces else "."))
    return out
