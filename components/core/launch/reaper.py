"""Every process a command starts dies with the command, even when it is SIGKILLed.

kfp.local runs each pipeline task as `sh` -> the component's executor -> (in a
train task) a launcher -> trainers. A SIGKILLed `strategist compare` runs no
handler, and the parent-death signal only covers a process's direct children
(the trainers die with their launcher, `trainer.die_with_launcher`), not the
executor, whose parent `sh` lives on. So the command starts a reaper: a small
process of its own session that holds the read end of a pipe from the command.
When the command ends, however it ends, the kernel closes the write end; the
reaper then SIGKILLs every process whose environment carries this command's
marker (`MARKER_ENV`, inherited by everything started below it) and exits.
A process's `/proc/PID/environ` is the environment it was started with, so the
marker finds descendants whatever their command line or process group:
https://man7.org/linux/man-pages/man5/proc_pid_environ.5.html.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

from components.core.signals import signals_deferred

MARKER_ENV = "STRATEGIST_COMMAND"
# Waits for the end of the command (EOF on stdin), then kills the marked processes
# until none is left (a process may fork while it is being killed; a few rounds).
_REAPER = r"""
import os, signal, sys, time
wanted = sys.argv[1].encode()
sys.stdin.buffer.read()

def marked():
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if wanted in handle.read().split(b"\0"):
                    yield int(entry)
        except OSError:
            pass

for _ in range(50):
    pids = list(marked())
    if not pids:
        break
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.1)
"""


def kill_marked(entry: str, rounds: int = 50) -> None:
    """SIGKILLs every process (this one excepted) whose environment holds `entry`
    (`NAME=value`), a few rounds until none is left: what the reaper does, now."""
    import signal
    import time

    wanted = entry.encode()
    for _ in range(rounds):
        pids = []
        for name in os.listdir("/proc") if sys.platform.startswith("linux") else []:
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if wanted in handle.read().split(b"\0"):
                        pids.append(int(name))
            except OSError:
                continue
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


# How often the command checks that its reaper still runs (a killed one is replaced).
WATCH_INTERVAL_S = 0.5


@contextlib.contextmanager
def descendants_die_with_this_process() -> Iterator[None]:
    """Processes started in the block (and theirs) are killed when this process ends.

    On leaving the block normally nothing should be left, and the reaper finds
    nothing; a SIGKILL of this process leaves the reaper to kill them. A reaper
    that dies first (killed on its own) is replaced within `WATCH_INTERVAL_S`,
    so a later SIGKILL of this process still finds one. Linux only (`/proc`);
    elsewhere this does nothing.
    """
    if not sys.platform.startswith("linux"):
        yield
        return
    entry = f"{MARKER_ENV}={os.getpid()}-{uuid.uuid4().hex[:12]}"
    watch = _ReaperWatch(entry)
    previous = os.environ.get(MARKER_ENV)
    os.environ[MARKER_ENV] = entry.split("=", 1)[1]
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(MARKER_ENV, None)
        else:
            os.environ[MARKER_ENV] = previous
        watch.sweep()


def _start_reaper(entry: str, env: dict[str, str]) -> subprocess.Popen:
    """A reaper for the processes marked `entry`, waiting on its stdin.

    A signal deferred over the fork is raised before the caller stores the
    reaper; the dropped pipe then closes and the reaper sweeps and exits.
    """
    with signals_deferred():
        return subprocess.Popen(
            [sys.executable, "-I", "-c", _REAPER, entry],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,  # unmarked: it does not kill itself, and dies after its sweep
            start_new_session=True,  # a Ctrl-C or a kill of this command's group spares it
        )


class _ReaperWatch:
    """The command's reaper, replaced by a watching thread whenever it dies early."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        # Read once: the command changes os.environ while the thread may replace a reaper.
        self.env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
        self.reaper = _start_reaper(entry, self.env)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="reaper-watch")
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            if self.reaper.poll() is None:
                continue
            try:
                replacement = _start_reaper(self.entry, self.env)
            except OSError:
                continue  # no fork now (out of processes or memory): try again next tick
            self.reaper.stdin.close()
            self.reaper = replacement

    def sweep(self) -> None:
        """Stops watching and lets the reaper sweep now: stragglers of a normal end go too."""
        self._stop.set()
        self._thread.join()
        self.reaper.stdin.close()
        try:
            self.reaper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.reaper.kill()
            self.reaper.wait()
