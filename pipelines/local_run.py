"""Runs a pipeline through `kfp.local` on this machine, printing each task's timing.

`kfp.local.SubprocessRunner(use_venv=False)` runs every component as a
subprocess in the current environment; a `train` task with the `local` backend
starts a real TensorFlow cluster on 127.0.0.1 from there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
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
        with signals_forwarded_to_tasks():
            result = pipeline_func(**arguments)
    finally:
        root.removeFilter(progress)
    return result, progress.timings


def task_pids() -> list[int]:
    """This process's descendants in its own process group: the kfp.local task processes.

    A task is `sh -ec ...` running the component's executor as its child, so the
    children alone are not enough. Training processes run in sessions of their own
    and are left to the launcher that started them.
    """
    parents: dict[int, int] = {}
    groups: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat.rsplit(")", 1)[-1].split()
        parents[int(entry)], groups[int(entry)] = int(fields[1]), int(fields[2])
    own_group, descendants, frontier = os.getpgrp(), [], [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                frontier.append(pid)
                if groups[pid] == own_group:
                    descendants.append(pid)
    return descendants


@contextlib.contextmanager
def signals_forwarded_to_tasks() -> Iterator[None]:
    """Ctrl-C or SIGTERM stops the running kfp.local task, then unwinds as an interruption.

    kfp.local runs each task as a child process from a worker thread and, when
    interrupted, waits for that thread: a signal sent to this process alone would wait
    for the task (and its training cluster) to finish. The task's processes get
    SIGTERM, on which a train task's launcher stops its cluster; then
    `Interrupted(signum)` is raised here. Further signals are ignored meanwhile, so a
    second Ctrl-C cannot cut the stopping short. Main thread only (signal handlers).
    """
    from components.core.signals import Interrupted

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handled = (signal.SIGINT, signal.SIGTERM)

    def handler(signum, frame):
        for sig in handled:
            signal.signal(sig, signal.SIG_IGN)
        for pid in task_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in handled}
    try:
        yield
    finally:
        for sig, action in previous.items():
            signal.signal(sig, action)
