"""Runs a pipeline through `kfp.local` on this machine: a quiet console, a full log.

`kfp.local.SubprocessRunner(use_venv=False)` runs every component as a
subprocess in the current environment; a `train` task with the `local` backend
starts a real TensorFlow cluster on 127.0.0.1 from there.

What a person sees is one line per task with its place and name
(`[4/9] train parameter_server ... 22.3 s`) and the running training's epochs;
everything kfp.local and the tasks print (executor inputs, task outputs,
TensorFlow's own lines, kfp.local's warnings about its local runner) goes to a
log file, shown live only when asked.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from components.core.launch import reaper

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STARTED = re.compile(r"^Executing task '(?P<name>[^']+)'")
_FINISHED = re.compile(r"^Task '(?P<name>[^']+)' finished with status (?P<status>\w+)")
# kfp.local indents a task's output by 4 spaces; the executor logs its input as indented JSON.
_EXECUTOR_INPUT = re.compile(r"Got executor_input:\s*$")
_TASK_OUTPUT = re.compile(r"^ {4}(?P<line>.*)$")
# The chief's per-epoch line, as the local launcher prefixes it.
_EPOCH = re.compile(r"^\[chief(-0)?\] (?P<line>(resuming at )?epoch \d+/\d+.*)$")
# A train step's line for a strategy that did not finish (`launch.train_to_artifacts`).
_DID_NOT_FINISH = re.compile(r"^train: \S+ (?P<outcome>diverged|failed), recorded: ")
_TAIL_LINES = 25
# Off a terminal, the longest the console stays quiet while a task runs: a CI log that
# says nothing for minutes looks hung. Checked every `_HEARTBEAT_POLL` seconds.
HEARTBEAT_SECONDS = 8.0
_HEARTBEAT_POLL = 0.5


@dataclass
class TaskTiming:
    """One task's wall time as kfp.local ran it.

    Attributes:
        name: the task's name in the pipeline (`train`, the same for every loop item).
        seconds: wall time from kfp.local starting the task to its end.
        status: kfp.local's status, `SUCCESS` or `FAILURE`.
        label: what the console called it: the name and, for a task of a
            strategy's loop item, the strategy (`train parameter_server`).
    """

    name: str
    seconds: float
    status: str
    label: str = ""


@dataclass
class _Task:
    name: str
    place: int
    started: float
    strategy: str | None = None
    tail: collections.deque = None  # type: ignore[assignment]
    announced: bool = False
    last_epoch: str | None = None
    outcome: str | None = None  # `diverged` or `failed`: the step recorded a failed run

    def __post_init__(self):
        self.tail = collections.deque(maxlen=_TAIL_LINES)

    @property
    def label(self) -> str:
        return f"{self.name} {self.strategy}" if self.strategy else self.name


class TaskProgress(logging.Filter):
    """What a person sees of a kfp.local run: one line per task, the running training's epochs.

    A filter on the root logger, not a handler: kfp.local replaces the root
    logger's handlers while it runs, but keeps its filters. It sees kfp.local's
    "Executing task" and "finished with status" records, and through
    `on_output` every line kfp.local and the tasks print, from which it takes
    a train or evaluate task's strategy (the executor input's `cluster`, or the
    `strategy` of the model it evaluates) and the chief's epoch lines.

    On a terminal the running task is one line rewritten in place; elsewhere
    (CI logs, files) a task's start, each epoch and its end are lines of their
    own, and a heartbeat line says what runs whenever nothing was printed for
    `HEARTBEAT_SECONDS` (`start_heartbeat`).
    """

    def __init__(self, console: TextIO, total: int | None = None, *, rewrite: bool = False):
        """Creates the progress display.

        Args:
            console: where the person's lines go.
            total: how many tasks the run has, when known (`count_tasks`).
            rewrite: rewrite the running task's line in place (a terminal).
        """
        super().__init__()
        self.console = console
        self.total = total
        self.rewrite = rewrite
        self.lock = threading.RLock()
        self.timings: list[TaskTiming] = []
        self.current: _Task | None = None
        self.last_tail: list[str] = []  # the output of the last task that failed
        self._places = 0
        self._executor_input: list[str] | None = None
        self._status_shown = False
        self._last_line = time.perf_counter()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        with self.lock:
            self._observe(_ANSI.sub("", record.getMessage()))
        return True

    def _observe(self, message: str) -> None:
        if match := _STARTED.match(message):
            self._places += 1
            self.current = _Task(match["name"], self._places, time.perf_counter())
            self._status("...")
        elif (match := _FINISHED.match(message)) and self.current is not None:
            task, self.current = self.current, None
            seconds = time.perf_counter() - task.started
            status = match["status"]
            self._announce(task)
            self.timings.append(TaskTiming(task.name, seconds, status, task.label))
            if status == "SUCCESS" and task.outcome:
                self._line(
                    f"{self._place(task)} {task.label} ... {task.outcome} after {seconds:.1f} s"
                )
            elif status == "SUCCESS":
                self._line(f"{self._place(task)} {task.label} ... {seconds:.1f} s")
            else:
                self.last_tail = list(task.tail)
                self._line(
                    f"{self._place(task)} {task.label} ... {status.lower()} after {seconds:.1f} s"
                )
                for line in self.last_tail:
                    self._line(f"      {line}")

    def failure(self, err: Exception) -> str:
        """kfp.local's error, led by the failed task's own error line when its output has one:
        the launcher's `ClusterFailed` line (the task and its error), a trainer's refusal, or
        the last line that states an error."""
        from components.core.launch.cluster_failure import error_line

        own = next(
            (
                line.strip().split(": ", 1)[1] if "ClusterFailed: " in line else line.strip()
                for marker in ("ClusterFailed: ", "trainer: error: ")
                for line in reversed(self.last_tail)
                if marker in line
            ),
            None,
        ) or error_line(self.last_tail)
        own = own.removesuffix("; its last log lines:")  # they follow on the console
        return f"{own}\n{err}" if own else str(err)

    def on_output(self, line: str) -> None:
        """Reads one line that kfp.local or a task printed (ANSI colours removed)."""
        with self.lock:
            task = self.current
            match = _TASK_OUTPUT.match(line)
            if task is None or not match:
                return
            text = match["line"]
            task.tail.append(text)
            if self._executor_input is not None:
                self._executor_input.append(text)
                if text == "}":  # the JSON's closing brace, at the executor's own indent
                    task.strategy = _strategy_of("\n".join(self._executor_input))
                    self._executor_input = None
                    self._status("...")
                    self._announce(task)
            elif _EXECUTOR_INPUT.search(text):
                self._executor_input = []
            elif ended := _DID_NOT_FINISH.match(text):
                task.outcome = ended["outcome"]
            elif epoch := _EPOCH.match(text):
                task.last_epoch = epoch["line"].split(":")[0]
                if self.rewrite:
                    self._status(f"... {epoch['line']}")
                else:
                    self._line(f"      {task.strategy or task.name} {epoch['line']}")

    def _announce(self, task: _Task) -> None:
        """Off a terminal, the task's start line, once its strategy is known (or at its end)."""
        if not self.rewrite and not task.announced:
            task.announced = True
            self._line(f"{self._place(task)} {task.label} ... started")

    def start_heartbeat(self) -> None:
        """Off a terminal, prints what runs whenever the console was quiet too long."""
        if self.rewrite or self._heartbeat is not None:
            return
        self._heartbeat = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._heartbeat.start()

    def stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._stop.set()
            self._heartbeat.join()
            self._heartbeat = None

    def _beat(self) -> None:
        while not self._stop.wait(_HEARTBEAT_POLL):
            with self.lock:
                task = self.current
                now = time.perf_counter()
                if now - self._last_line < HEARTBEAT_SECONDS:
                    continue
                if task is None:  # kfp.local starts a task's process: seconds on a loaded machine
                    quiet = now - self._last_line
                    self._line(f"      kfp.local ... {quiet:.0f} s, starting a task")
                    continue
                doing = (
                    f"after {task.last_epoch}"
                    if task.last_epoch
                    else "starting the cluster"
                    if task.name == "train"
                    else "running"
                )
                self._line(f"      {task.label} ... {now - task.started:.0f} s, {doing}")

    def _place(self, task: _Task) -> str:
        return f"[{task.place}/{self.total}]" if self.total else f"[{task.place}]"

    def _status(self, text: str) -> None:
        if self.rewrite and self.current is not None:
            self.console.write(f"\r\x1b[K{self._place(self.current)} {self.current.label} {text}")
            self.console.flush()
            self._status_shown = True

    def _line(self, text: str) -> None:
        if self._status_shown:
            self.console.write("\r\x1b[K")
            self._status_shown = False
        self.console.write(text + "\n")
        self.console.flush()
        self._last_line = time.perf_counter()


def _strategy_of(executor_input: str) -> str | None:
    """A task's strategy: its `cluster` input, or the `strategy` of an input artifact."""
    try:
        inputs = json.loads(executor_input).get("inputs", {})
    except json.JSONDecodeError:
        return None
    cluster = inputs.get("parameterValues", {}).get("cluster")
    if isinstance(cluster, dict) and cluster.get("strategy"):
        return cluster["strategy"]
    for artifacts in inputs.get("artifacts", {}).values():
        for artifact in artifacts.get("artifacts", []):
            if strategy := artifact.get("metadata", {}).get("strategy"):
                return strategy
    return None


class _LogStream(io.TextIOBase):
    """`sys.stdout` and `sys.stderr` while kfp.local runs.

    Everything goes to the log file (ANSI colours removed), and to `echo` when
    set (`--verbose`); every whole line goes to the progress display.
    """

    def __init__(self, log_file: TextIO, progress: TaskProgress, echo: TextIO | None):
        super().__init__()
        self.log_file = log_file
        self.progress = progress
        self.echo = echo
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self.progress.lock:
            self.log_file.write(_ANSI.sub("", text))
            if self.echo is not None:
                self.echo.write(text)
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self.progress.on_output(_ANSI.sub("", line))
        return len(text)

    def flush(self) -> None:
        with self.progress.lock:
            self.log_file.flush()
            if self.echo is not None:
                self.echo.flush()


def count_tasks(pipeline_func, arguments: dict[str, Any]) -> int | None:
    """How many tasks kfp.local will run for `pipeline_func(**arguments)`.

    A loop counts its tasks once per item of the pipeline parameter it iterates
    over (the argument, else the parameter's default), or, for the comparison's
    run plan, once per cluster and repeat. None when that cannot be known
    before the run: a loop over another task's output, or a task under a
    condition that may skip it.
    """
    spec = getattr(pipeline_func, "pipeline_spec", None)
    if spec is None:
        return None

    def count(dag, at_root: bool) -> int | None:
        total = 0
        for task in dag.tasks.values():
            if task.trigger_policy.condition:
                return None
            component = spec.components[task.component_ref.name]
            tasks = count(component.dag, False) if component.HasField("dag") else 1
            if task.HasField("parameter_iterator"):
                items = _loop_items(task, spec.root, arguments) if at_root else None
                tasks = None if tasks is None or items is None else tasks * items
            if tasks is None:
                return None
            total += tasks
        return total

    return count(spec.root.dag, True)


def _loop_items(task, root, arguments: dict[str, Any]) -> int | None:
    """How many items a loop of the root DAG iterates over: raw, an argument or its default."""
    items = task.parameter_iterator.items
    if items.raw:
        return len(json.loads(items.raw))
    loop_input = task.inputs.parameters[items.input_parameter]
    if loop_input.task_output_parameter.producer_task == "plan-runs":
        # The comparison's run plan: every cluster `repeats` times (`plan_runs`).
        clusters, repeats = (_argument(root, arguments, k) for k in ("clusters", "repeats"))
        return len(clusters) * int(repeats) if clusters is not None and repeats else None
    value = _argument(root, arguments, loop_input.component_input_parameter)
    return len(value) if isinstance(value, list) else None


def _argument(root, arguments: dict[str, Any], name: str) -> Any:
    """A pipeline parameter's value: the argument, else its default (None when neither)."""
    if name in arguments:
        return arguments[name]
    parameter = root.input_definitions.parameters.get(name)
    if parameter is None or not parameter.HasField("default_value"):
        return None
    from google.protobuf import json_format

    return json_format.MessageToDict(parameter.default_value)


def run_locally(
    pipeline_func,
    arguments: dict[str, Any],
    pipeline_root: str,
    *,
    log_path: str | None = None,
    verbose: bool = False,
    console: TextIO | None = None,
) -> tuple[Any, list[TaskTiming]]:
    """Runs `pipeline_func(**arguments)` with kfp.local; returns its outputs and task timings.

    The console gets one line per task and the running training's epochs;
    everything else that kfp.local and the tasks print goes to `log_path`.

    Args:
        pipeline_func: a compiled-in-memory pipeline (`@dsl.pipeline`).
        arguments: its parameters.
        pipeline_root: kfp.local's folder for the tasks' artifacts.
        log_path: file for everything printed while the pipeline runs (appended
            to); None discards it.
        verbose: also show everything on the console as it is printed.
        console: where the person's lines go (default: `sys.stdout`).

    Raises:
        RuntimeError: when a task fails (kfp.local's error names the task; the
            console shows the end of its output).
    """
    from kfp import local

    console = console or sys.stdout
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=pipeline_root,
        raise_on_error=True,
    )
    progress = TaskProgress(
        console,
        count_tasks(pipeline_func, arguments),
        rewrite=not verbose and console.isatty(),
    )
    root = logging.getLogger()
    root.addFilter(progress)
    progress.start_heartbeat()
    try:
        with (
            open(log_path or os.devnull, "a") as log_file,
            _everything_to(_LogStream(log_file, progress, console if verbose else None)),
            # A SIGKILL of this command runs no handler: its tasks die with it anyway.
            reaper.descendants_die_with_this_process(),
            signals_forwarded_to_tasks(),
        ):
            result = pipeline_func(**arguments)
    except RuntimeError as err:
        raise RuntimeError(progress.failure(err)) from err
    finally:
        progress.stop_heartbeat()
        root.removeFilter(progress)
    return result, progress.timings


@contextlib.contextmanager
def _everything_to(stream: TextIO) -> Iterator[None]:
    """Sends `sys.stdout` and `sys.stderr` (prints, logging, warnings) to `stream`."""
    with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        try:
            yield
        finally:
            stream.flush()


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
