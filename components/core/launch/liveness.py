"""Liveness: a local run that makes no progress is failed, naming the task that stalls it."""

from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass

from components.core.launch.local_tasks import Task, signal_group
from components.core.trainer import TENSORFLOW_UP

# The chief's line at the end of each epoch (epoch_records.EpochRecorder), with its seconds.
_EPOCH_LINE = re.compile(r"^epoch (\d+)/\d+: .*?(\d+(?:\.\d+)?)s ")


@dataclass(frozen=True)
class Liveness:
    """When a run that makes no progress is failed, naming the task that stalls it.

    Progress is a line from the chief (each epoch ends with one, which also
    gives the epoch's seconds). The clock of each attempt starts when the
    chief's TensorFlow is up (its `trainer.TENSORFLOW_UP` line): importing
    TensorFlow may take up to `import_s`, however small `startup_s` is, unless
    a task is stopped meanwhile. Until the first epoch ends the run has
    `startup_s` (cluster start, the first epoch); after that a gap of
    `epoch_factor` times the slowest epoch measured so far (at least
    `floor_s`, which covers export and evaluation) is a stall. The stalled
    task is the one the kernel shows stopped (SIGSTOP, a debugger), else the
    chief; it is killed, and the restart policy decides what follows, as for
    a crash.

    Attributes:
        startup_s: seconds allowed before the first epoch ends, counted from
            the chief's TensorFlow up; 0 turns the check off.
        epoch_factor: allowed gap, in slowest epochs.
        floor_s: the smallest allowed gap, seconds.
        import_s: seconds a running (not stopped) chief may take to import
            TensorFlow before the clock starts anyway.
    """

    startup_s: float = 3600.0
    epoch_factor: float = 10.0
    floor_s: float = 120.0
    import_s: float = 600.0

    def allowed_gap(self, slowest_epoch_s: float | None) -> float:
        """Seconds without progress allowed now (infinite when `startup_s` is 0: off)."""
        if self.startup_s <= 0:
            return float("inf")
        if slowest_epoch_s is None:
            return self.startup_s
        return max(self.floor_s, self.epoch_factor * slowest_epoch_s)


class StallWatch:
    """`LocalCluster`'s watch on its tasks' progress and stalls.

    Uses the cluster's `tasks`, `log`, `liveness`, `stalls`, `_started`,
    `_last_progress`, `_tensorflow_up` (the attempt's chief has imported
    TensorFlow), `_slowest_epoch_s`, `_stalled_s` and `_epochs_done`.
    """

    def _check_liveness(self) -> None:
        """Kills the task that stalls the run once the allowed gap has passed."""
        gap = time.monotonic() - self._last_progress
        if gap <= self.liveness.allowed_gap(self._slowest_epoch_s):
            return
        running = [t for t in self.tasks if t.process and t.process.poll() is None]
        stopped = [t for t in running if _process_state(t.process.pid) == "T"]
        if not stopped and not self._tensorflow_up and gap <= self.liveness.import_s:
            return  # the chief still imports TensorFlow: the clock has not started
        culprit = (stopped or [t for t in running if t.task_type == "chief"] or running)[0]
        how = "stopped (SIGSTOP or a debugger)" if stopped else "making no progress"
        self.log(
            f"[launcher] no epoch for {gap:.0f} s (allowed: "
            f"{self.liveness.allowed_gap(self._slowest_epoch_s):.0f} s); {culprit.name} is "
            f"{how}: killing it"
        )
        culprit.stalled = True
        self._stalled_s = gap
        if culprit.stopped_since is None:  # not seen stopped: the whole gap is the stall
            culprit.stopped_since = time.monotonic() - gap
        self._end_stall(culprit, "killed")
        signal_group(culprit.process, signal.SIGKILL)
        self._last_progress = time.monotonic()  # the restart policy takes it from here

    def _note_progress(self, task: Task, line: str) -> None:
        """Any line of the chief is progress; its epoch lines also time the epochs, and its
        TensorFlow-up line starts the clock."""
        if task.task_type != "chief":
            return
        self._last_progress = time.monotonic()
        if line.startswith(TENSORFLOW_UP):
            self._tensorflow_up = True
        epoch = _EPOCH_LINE.match(line)
        if epoch:
            self._epochs_done = int(epoch.group(1))
            seconds = float(epoch.group(2))
            self._slowest_epoch_s = max(self._slowest_epoch_s or 0.0, seconds)

    def _watch_stopped(self) -> None:
        """Times every stretch a task spends stopped (state `T`); each one is a stall.

        A stopped parameter server or worker holds the whole run up (the
        coordinator waits for it); the stretch is recorded when the task runs
        again or ends, so a benchmark sees it even when it was too short for the
        liveness check.
        """
        now = time.monotonic()
        for task in self.tasks:
            if task.process is None:
                continue
            stopped = task.process.poll() is None and _process_state(task.process.pid) == "T"
            if stopped and task.stopped_since is None:
                task.stopped_since = now
            elif not stopped and task.stopped_since is not None:
                self._end_stall(task, "resumed" if task.process.poll() is None else "ended")

    def _end_stall(self, task: Task, how: str) -> None:
        """Records the stall of `task` that started at `task.stopped_since`."""
        seconds = time.monotonic() - task.stopped_since
        task.stopped_since = None
        self.stalls.append(
            {
                "task": task.name,
                "epoch": self._epochs_done + 1,
                "seconds": round(seconds, 3),
                "how": how,
                "at_s": round(time.monotonic() - self._started - seconds, 3),
            }
        )
        self.log(
            f"[launcher] {task.name} stalled the run for {seconds:.1f} s in epoch "
            f"{self._epochs_done + 1} ({how})"
        )


def _process_state(pid: int) -> str:
    """The kernel's one-letter state of a process (`T`: stopped), or "" if gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
