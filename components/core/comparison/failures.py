"""Strategies of a comparison that did not finish: which runs they are, and how the report
shows them.

A strategy any of whose runs failed or diverged (`failed_run`) is left out of the results,
the baseline and the verdict (its measurements are missing or incomplete), and is listed in
the report's `failed` with how it ended and the failing task's own error line; every form of
the report shows it in its table as `diverged` or `failed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.core import failed_run
from components.core.comparison.errors import ReportError
from components.core.config import ConfigError


def _shape(record: Mapping[str, Any]) -> tuple:
    """A run's strategy and cluster shape, as both a finished and a failed record state it."""
    return (
        record.get("strategy"),
        record.get("workers", 1),
        record.get("ps", 0),
        record.get("gpus_per_machine", 1),
    )


def split_runs(records: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The records of strategies that finished every run, and one entry per strategy that did
    not.

    Args:
        records: every run's record: `metrics.json`, or a `FailedRun`'s.

    Returns:
        `(finished, failed)`: the finished strategies' records as given, and per
        failed strategy (in order of its first failure) `name`, `strategy`,
        `workers`, `ps`, `gpus_per_machine`, `outcome` (`diverged` when any run
        diverged, else `failed`), `error` (the first failure's), `runs_failed` and
        `runs`.

    Raises:
        ReportError: a failed run's record that is not whole.
    """
    failed: dict[tuple, dict[str, Any]] = {}
    for index, record in enumerate(records):
        if not failed_run.is_failed_run(record):
            continue
        try:
            run = failed_run.from_dict(record, f"result #{index}")
        except ConfigError as err:
            raise ReportError(str(err)) from None
        entry = failed.setdefault(
            _shape(run.to_dict()),
            {"name": run.strategy, **run.to_dict(), "runs_failed": 0, "runs": 0},
        )
        entry["runs_failed"] += 1
        if run.outcome == failed_run.DIVERGED:
            entry["outcome"] = failed_run.DIVERGED
    finished = []
    for record in records:
        entry = failed.get(_shape(record)) if isinstance(record, Mapping) else None
        if entry is not None:
            entry["runs"] += 1
        else:
            finished.append(record)
    return finished, list(failed.values())


def failure_lines(report: Mapping[str, Any]) -> list[str]:
    """One sentence per strategy that did not finish: how, the task's error, what it means."""
    lines = []
    for entry in report.get("failed") or []:
        runs = (
            f" ({entry['runs_failed']} of {entry['runs']} runs)" if entry.get("runs", 1) > 1 else ""
        )
        lines.append(
            f"{entry['name']} {entry['outcome']}{runs}: {entry['error']}; it is not compared "
            "and cannot win."
        )
    return lines


def table_rows(report: Mapping[str, Any], columns: int) -> list[list[str]]:
    """A results table's rows of the strategies that did not finish: the name, then how it
    ended, then a dash in each of the other `columns`."""
    return [
        [entry["name"], entry["outcome"], *["–"] * (columns - 2)]
        for entry in report.get("failed") or []
    ]


def did_not_finish(report: Mapping[str, Any]) -> str:
    """One line naming the strategies whose training failed or diverged, or "" when every
    one finished (`strategist compare` then exits 1, the report of the others written)."""
    failed = report.get("failed") or []
    if not failed:
        return ""
    each = "; ".join(f"{f['name']} {f['outcome']} ({f['error']})" for f in failed)
    compared = len(report.get("results") or [])
    return (
        f"{len(failed)} of {len(failed) + compared} strategies did not finish: {each}; "
        f"the report compares the {compared} that finished"
    )
