"""Runs a pipeline through `kfp.local` on this machine, printing each task's timing.

`kfp.local.SubprocessRunner(use_venv=False)` runs every component as a
subprocess in the current environment; a `train` task with the `local` backend
starts a real TensorFlow cluster on 127.0.0.1 from there.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STARTED = re.compile(r"^Executing task '(?P<name>[^']+)'")
_FINISHED = re.compile(r"^Task '(?P<name>[^']+)' finished with status (?P<status>\w+)")


@dataclass
class TaskTiming:
    """One task's wall time as kfp.local ran it."""

    name: str
    seconds: float
    status: str


class TaskProgress(logging.Filter):
    """Turns kfp.local's task log records into start/end lines with durations.

    A filter on the root logger, not a handler: kfp.local replaces the root
    logger's handlers while it runs, but keeps its filters.
    """

    def __init__(self, log: Callable[[str], None]):
        super().__init__()
        self.log = log
        self.started: dict[str, float] = {}
        self.timings: list[TaskTiming] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self._observe(record)
        return True

    def _observe(self, record: logging.LogRecord) -> None:
        message = _ANSI.sub("", record.getMessage())
        if match := _STARTED.match(message):
            name = match["name"]
            self.started[name] = time.perf_counter()
            self.log(f"[pipeline] {name}: started")
        elif match := _FINISHED.match(message):
            name = match["name"]
            seconds = time.perf_counter() - self.started.pop(name, time.perf_counter())
            self.timings.append(TaskTiming(name, seconds, match["status"]))
            self.log(f"[pipeline] {name}: {match['status'].lower()} in {seconds:.1f}s")


def run_locally(
    pipeline_func,
    arguments: dict[str, Any],
    pipeline_root: str,
    *,
    log: Callable[[str], None] = print,
) -> tuple[Any, list[TaskTiming]]:
    """Runs `pipeline_func(**arguments)` with kfp.local; returns its outputs and task timings.

    Raises:
        RuntimeError: when a task fails (kfp.local's error names the task).
    """
    from kfp import local

    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=pipeline_root,
        raise_on_error=True,
    )
    progress = TaskProgress(log)
    root = logging.getLogger()
    root.addFilter(progress)
    try:
        result = pipeline_func(**arguments)
    finally:
        root.removeFilter(progress)
    return result, progress.timings
