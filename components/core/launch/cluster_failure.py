"""A local cluster's failure: the task that failed, how it ended, and its own error line."""

from __future__ import annotations

import re

from components.core.divergence import DIVERGED_EXIT

# TensorFlow's start-up notices, which every task prints before it does anything (absl's
# banner, the CPU-instructions and oneDNN notices, the CUDA probe and factory lines on a
# machine without GPUs): a failure's last lines leave them out, so its own lines show.
_STARTUP_NOTICE = re.compile(
    r"All log messages before absl::InitializeLog|cpu_feature_guard|"
    r"To enable the following instructions|oneDNN custom operations|"
    r"Could not find cuda drivers|cuInit|Unable to register cu(DNN|FFT|BLAS) factory|"
    r"computation placer already registered"
)
# How a trainer's own error line starts (components/core/trainer.py).
_TASK_ERROR = "trainer: error: "


class ClusterFailed(RuntimeError):
    """A task of the local cluster failed and no restart was left.

    Attributes:
        task: the failing task's name (`worker-1`).
        returncode: its exit code (negative: killed by that signal).
        tail: its last log lines, without TensorFlow's start-up notices.
        summary: one line, the task and how it ended, with its own error line.
    """

    def __init__(self, task: str, returncode: int, tail: list[str], stalled_s: float = 0.0):
        tail = [line for line in tail if not _STARTUP_NOTICE.search(line)]
        self.task, self.returncode, self.tail = task, returncode, tail
        how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited {returncode}"
        if stalled_s:
            how = f"stalled the run (no progress for {stalled_s:.0f} s) and was killed"
        # The task's own error line leads (the status's `error` keeps the first line): a
        # refusal the trainer states, else the last line of its output that states an error.
        own = [line for line in tail if line.startswith(_TASK_ERROR)]
        if own:
            how = f"{how}: {own[-1].removeprefix(_TASK_ERROR)}"
        elif returncode > 0 and not stalled_s and error_line(tail):
            how = f"{how}: {error_line(tail)}"
        lines = "\n".join(f"  [{task}] {line}" for line in tail)
        self.summary = f"{task} {how}"  # one line: the task and its own error
        super().__init__(f"{self.summary}; its last log lines:\n{lines}")

    @property
    def diverged(self) -> bool:
        """The task stopped because training diverged (`divergence`)."""
        return self.returncode == DIVERGED_EXIT


# A line that states an error: `ValueError: ...`, `tensorflow...UnavailableError: ...`.
_ERROR_LINE = re.compile(r"^(\w+\.)*\w*(Error|Exception|Exit)\b[^:]*:")


def error_line(tail: list[str]) -> str:
    """The task's own error from its last log lines: the last line that states one.

    A Python traceback ends with the exception's line (TensorFlow's may follow it
    with RPC detail that states no error). Empty when no line states an error
    (a task killed by a signal).
    """
    for line in reversed(tail):
        text = line.strip()
        if text and _ERROR_LINE.search(text) and not text.startswith("File "):
            return text if len(text) <= 500 else text[:497] + "..."
    return ""
