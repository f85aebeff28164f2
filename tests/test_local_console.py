"""What `strategist compare --local` shows a person: task lines, epochs, the rest to a log."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import pytest

from pipelines.comparison import DEFAULT_CLUSTERS, build_comparison_pipeline
from pipelines.local_run import TaskProgress, _LogStream, count_tasks
from pipelines.training import build_training_pipeline


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _record(message: str) -> logging.LogRecord:
    return logging.makeLogRecord({"msg": message})


def _executor_input(inputs: dict) -> list[str]:
    """The executor's input as kfp.local prints it: indented JSON, 4 more spaces per line."""
    text = "[KFP Executor 2026 INFO]: Got executor_input:\n" + json.dumps(
        {"inputs": inputs}, indent=4
    )
    return ["    " + line for line in text.split("\n")]


def _run_task(progress: TaskProgress, name: str, inputs: dict, lines=(), status="SUCCESS"):
    progress.filter(_record(f"Executing task \x1b[96m'{name}'\x1b[0m"))
    for line in [*_executor_input(inputs), *("    " + line for line in lines)]:
        progress.on_output(line)
    progress.filter(_record(f"Task '{name}' finished with status {status}"))


TRAIN_INPUTS = {
    "parameterValues": {
        "cluster": {"strategy": "parameter_server", "workers": 2, "ps": 1},
        "run_config": {"cluster": {"strategy": "mirrored"}},
    }
}
EVALUATE_INPUTS = {
    "artifacts": {"model": {"artifacts": [{"metadata": {"strategy": "parameter_server"}}]}}
}
EPOCHS = [
    "[launcher] started 4 process(es) on 127.0.0.1: chief-0, worker-0, worker-1, ps-0",
    "[chief-0] epoch 1/2: loss 2.1  accuracy 0.31  1.69s  831 examples/s",
    "[chief-0] epoch 2/2: loss 1.1  accuracy 0.84  0.35s  4033 examples/s",
]


def test_task_lines_name_the_place_and_the_strategy_of_the_loop_item():
    console = io.StringIO()
    progress = TaskProgress(console, total=3)
    _run_task(progress, "shard-dataset", {})
    _run_task(progress, "train", TRAIN_INPUTS, EPOCHS)
    _run_task(progress, "evaluate", EVALUATE_INPUTS)
    lines = console.getvalue().splitlines()
    assert lines[0] == "[1/3] shard-dataset ... started"
    assert lines[1].startswith("[1/3] shard-dataset ... ") and lines[1].endswith(" s")
    assert lines[2:5] == [
        "[2/3] train parameter_server ... started",  # named at its start, before its epochs
        "      parameter_server epoch 1/2: loss 2.1  accuracy 0.31  1.69s  831 examples/s",
        "      parameter_server epoch 2/2: loss 1.1  accuracy 0.84  0.35s  4033 examples/s",
    ]
    assert lines[5].startswith("[2/3] train parameter_server ... ")
    assert lines[6] == "[3/3] evaluate parameter_server ... started"
    assert lines[7].startswith("[3/3] evaluate parameter_server ... ")
    assert len(lines) == 8  # no executor input, no launcher line
    labels = [(t.name, t.label, t.status) for t in progress.timings]
    assert labels == [
        ("shard-dataset", "shard-dataset", "SUCCESS"),
        ("train", "train parameter_server", "SUCCESS"),
        ("evaluate", "evaluate parameter_server", "SUCCESS"),
    ]


def test_a_terminal_sees_the_running_task_rewritten_in_place():
    console = Terminal()
    progress = TaskProgress(console, total=None, rewrite=True)
    _run_task(progress, "train", TRAIN_INPUTS, EPOCHS)
    text = console.getvalue()
    assert "\r\x1b[K[1] train parameter_server ... epoch 2/2: loss 1.1" in text
    last = text.rsplit("\r\x1b[K", 1)[1]  # what stays on the screen
    assert last.startswith("[1] train parameter_server ... ") and last.endswith(" s\n")
    assert text.count("\n") == 1  # one line stays: the finished task's


def test_a_failed_task_shows_the_end_of_its_output():
    console = io.StringIO()
    progress = TaskProgress(console, total=9)
    _run_task(progress, "train", TRAIN_INPUTS, ["trainer: error: out of memory"], "FAILURE")
    text = console.getvalue()
    assert "[1/9] train parameter_server ... failure after" in text
    assert "      trainer: error: out of memory" in text
    assert progress.last_tail[-1] == "trainer: error: out of memory"
    # compare's error and status.json's `error` (its first line) lead with the task's own.
    failure = progress.failure(RuntimeError("Task 'train' finished with status FAILURE"))
    assert failure.splitlines() == [
        "trainer: error: out of memory",
        "Task 'train' finished with status FAILURE",
    ]
    # A train task's traceback ends with the launcher's ClusterFailed: its line names the task.
    progress = TaskProgress(io.StringIO(), total=9)
    cluster_failed = (
        "components.core.launch.cluster_failure.ClusterFailed: chief-0 exited 2: "
        "build_model of cnn failed: expected min_ndim=4; its last log lines:"
    )
    tail = [cluster_failed, "  [chief-0] trainer: error: build_model of cnn failed: ..."]
    _run_task(progress, "train", TRAIN_INPUTS, tail, "FAILURE")
    assert progress.failure(RuntimeError("kfp")).splitlines()[0] == (
        "chief-0 exited 2: build_model of cnn failed: expected min_ndim=4"
    )


def test_the_log_stream_keeps_everything_and_feeds_whole_lines():
    log, console = io.StringIO(), io.StringIO()
    progress = TaskProgress(console, total=1)
    stream = _LogStream(log, progress, echo=None)
    progress.filter(_record("Executing task 'train'"))
    for line in _executor_input(TRAIN_INPUTS):
        stream.write(line[:10])  # lines arrive in pieces
        stream.write(line[10:] + "\n")
    stream.write("\x1b[92mcoloured\x1b[0m\n")
    progress.filter(_record("Task 'train' finished with status SUCCESS"))
    assert "Got executor_input" in log.getvalue() and "coloured\n" in log.getvalue()
    assert "\x1b" not in log.getvalue()
    assert console.getvalue().startswith("[1/1] train parameter_server ... ")


def test_tasks_are_counted_from_the_pipeline_and_its_loop_items():
    comparison = build_comparison_pipeline()
    assert count_tasks(comparison, {"clusters": DEFAULT_CLUSTERS[:2]}) == 8
    assert count_tasks(comparison, {}) == 4 + 2 * len(DEFAULT_CLUSTERS)  # the default
    # --repeats 2: shard, select, plan, 2 x 2 x (train, evaluate), compare.
    assert count_tasks(comparison, {"clusters": DEFAULT_CLUSTERS[:2], "repeats": 2}) == 12
    # A task under a condition may be skipped: no total rather than a wrong one.
    assert count_tasks(build_training_pipeline(), {}) is None


def test_verbose_shows_everything_live_as_well():
    log, console = io.StringIO(), io.StringIO()
    progress = TaskProgress(console, total=1)
    stream = _LogStream(log, progress, echo=console)
    progress.filter(_record("Executing task 'train'"))
    for line in [*_executor_input(TRAIN_INPUTS), "    " + EPOCHS[1]]:
        stream.write(line + "\n")
    progress.filter(_record("Task 'train' finished with status SUCCESS"))
    shown = console.getvalue()
    assert "Got executor_input" in shown and "[chief-0] epoch 1/2" in shown
    assert "[1/1] train parameter_server ... " in shown


def test_off_a_terminal_a_quiet_task_gets_a_heartbeat(monkeypatch):
    import time

    from pipelines import local_run

    monkeypatch.setattr(local_run, "HEARTBEAT_SECONDS", 0.3)
    monkeypatch.setattr(local_run, "_HEARTBEAT_POLL", 0.05)
    console = io.StringIO()
    progress = TaskProgress(console, total=1)
    progress.start_heartbeat()
    try:
        progress.filter(_record("Executing task 'train'"))
        for line in _executor_input(TRAIN_INPUTS):
            progress.on_output(line)
        time.sleep(1.0)  # the cluster starts, printing nothing
        progress.on_output("    " + EPOCHS[1])
        time.sleep(0.5)
        progress.filter(_record("Task 'train' finished with status SUCCESS"))
        time.sleep(0.6)  # no task runs
    finally:
        progress.stop_heartbeat()
    lines = console.getvalue().splitlines()
    assert lines[0] == "[1/1] train parameter_server ... started"
    assert (
        lines[1].startswith("      train parameter_server ... ")
        and "s, starting the cluster" in lines[1]
    )
    assert any(line.endswith("s, after epoch 1/2") for line in lines)
    # Between tasks, while kfp.local starts the next one, the console is not quiet either.
    assert re.fullmatch(r"      kfp\.local \.\.\. \d+ s, starting a task", lines[-1]), lines
    # A terminal rewrites its line instead: no heartbeat lines.
    terminal = TaskProgress(Terminal(), total=1, rewrite=True)
    terminal.start_heartbeat()
    assert terminal._heartbeat is None


@pytest.mark.cluster
def test_piped_compare_names_every_task_at_its_start_and_is_never_quiet_long(tmp_path):
    """As CI sees it: a pipe, no terminal. parameter_server's cluster (4 processes) is the
    slowest to start."""
    import subprocess
    import sys
    import threading
    import time

    argv = [
        str(Path(sys.executable).parent / "strategist"), "compare",
        "--strategies", "parameter_server", "--epochs", "1", "--output", str(tmp_path / "out"),
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[tuple[float, str]] = []

    def read() -> None:
        for line in process.stdout:
            seen.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read)
    started = time.monotonic()
    reader.start()
    assert process.wait(timeout=600) == 0, "\n".join(line for _, line in seen)
    reader.join()
    lines = [line for _, line in seen]
    text = "\n".join(lines)
    for task in ("plan-runs", "shard-dataset", "select-strategy", "train parameter_server",
                 "evaluate parameter_server", "compare-strategies"):  # fmt: skip
        start = next(i for i, line in enumerate(lines) if line.endswith(f"{task} ... started"))
        end = next(
            i for i, line in enumerate(lines) if re.search(rf"{task} \.\.\. [\d.]+ s$", line)
        )
        assert start < end, text
    times = [started] + [t for t, _ in seen]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) <= 10.0, (max(gaps), text)
    assert max(len(line) for line in lines if str(tmp_path) not in line) <= 100, text
    assert re.search(r"train parameter_server \.\.\. \d+ s, starting the cluster", text), text
