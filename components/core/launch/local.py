"""A real TensorFlow cluster on 127.0.0.1: one process per task, `TF_CONFIG` as in the cloud.

The launcher starts the chief, workers and parameter servers as separate
processes (each in its own process group), prefixes their output with their
role, and waits. One failing process ends the run with the failing role's last
log lines, unless the restart policy allows a restart, as Vertex AI's
restart-on-worker-restart and the TFJob restart policy do in the cloud. On any
failure, Ctrl-C or SIGTERM every process it started is stopped: none is left
behind.

What each fault does (docs/faults.md has the measured recovery times):
- a `parameter_server` worker dies: the coordinator retries its steps on the
  other workers; the launcher restarts that worker alone, with the same
  `TF_CONFIG` and port, and the coordinator takes it back;
- any task of `mirrored` or `multi_worker_mirrored`, or the chief or a
  parameter server of `parameter_server`, dies: every process is stopped and,
  within `RestartPolicy.cluster_restarts`, the whole cluster is started again
  on fresh ports; `BackupAndRestore` resumes from the last checkpoint;
- a task exits with `CONFIG_ERROR_EXIT` (bad input it found) or `DIVERGED_EXIT`
  (a non-finite loss): no restart, since a restart would fail the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.core import run_folder, run_metrics, sidecar, storage
from components.core.config import ConfigError, RunConfig
from components.core.divergence import DIVERGED_EXIT
from components.core.launch import netns
from components.core.launch.cluster_failure import ClusterFailed
from components.core.launch.liveness import Liveness, StallWatch
from components.core.launch.local_tasks import (
    HOST,
    Task,
    plan_tasks,
    signal_group,
    task_environment,
)
from components.core.launch.preflight import check_rehearsal
from components.core.preemption import PREEMPTED_EXIT_CODE, check_backup_readable
from components.core.run_metrics import RunMetrics
from components.core.signals import signals_deferred, signals_ignored, sigterm_raises
from components.core.strategy_spec import EVALUATOR
from components.core.trainer import CONFIG_ERROR_EXIT
from components.core.training import METRICS_NAME

# Trainers run this launcher's own code: its folder is put on the isolated interpreter's path
# (last, so nothing there shadows an installed module), else an editable install of another
# checkout would provide `components`.
_CODE_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_RUN_TRAINER = (
    "import runpy, sys; sys.path.append(sys.argv[1]); module = sys.argv[2]; "
    "sys.argv[1:3] = []; runpy.run_module(module, run_name='__main__', alter_sys=True)"
)
_POLL_S = 0.1
# TensorFlow's start-up chatter (absl INFO/WARNING lines, the CUDA probe on a
# machine without GPUs): kept in a task's tail for failures, not printed.
_NOISE = re.compile(
    r"^([IW]\d{4} |E\d{4} .*cuInit|WARNING: All log messages before absl"
    # While a parameter_server worker is down the coordinator logs every RPC it
    # cannot send to it (four lines each, hundreds per second); the launcher
    # reports the failure and the restart in one line instead.
    r"|E\d{4} .*Failed to (register|remove) function remotely"
    r"|Additional GRPC error information from remote target"
    r"|:UNKNOWN:Error received from peer"
    r"|This could happen if the remote target has been disconnected)"
)
# Where a run's backup records which configuration it belongs to.
_BACKUP_CONFIG_NAME = "run_config.json"


@dataclass(frozen=True)
class RestartPolicy:
    """What the launcher restarts, mirroring what the cloud backends do.

    Attributes:
        cluster_restarts: whole-cluster restarts after a chief, PS or (under
            mirrored strategies) any worker failure; training resumes from the
            BackupAndRestore checkpoint.
        worker_restarts: restarts of a single parameter-server-strategy worker;
            its steps are retried on the other workers meanwhile.
        preempted_restarts: whole-cluster restarts after a task saved on the
            preemption notice and exited `preemption.PREEMPTED_EXIT_CODE`,
            beside `cluster_restarts`: a rehearsal of a Spot job restarts as
            Vertex AI (`restart_job_on_worker_restart`) or a TFJob's `ExitCode`
            policy (up to its backoff limit) would.
    """

    cluster_restarts: int = 0
    worker_restarts: int = 3
    preempted_restarts: int = 0


class LocalCluster(StallWatch):
    """Runs one training on a localhost cluster and returns its metrics.

    Args:
        config: the resolved run configuration.
        restart: what may be restarted on failure.
        log: where output lines go (already prefixed with the task name).
        on_line: called with (task, line) for every output line; tests use it
            to inject faults at a chosen moment.
        evaluator_in_cluster: give an evaluator the training operator's
            `TF_CONFIG` shape (evaluator inside `cluster`) instead of Vertex AI's.
        overwrite: replace a finished run (or a run of another configuration)
            in the output folder instead of refusing it.
        liveness: when a run without progress is failed.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        restart: RestartPolicy = RestartPolicy(),
        log: Callable[[str], None] = print,
        on_line: Callable[[Task, str], None] | None = None,
        evaluator_in_cluster: bool = False,
        overwrite: bool = False,
        liveness: Liveness = Liveness(),
    ):
        self.config = config
        self.overwrite = overwrite
        self.liveness = liveness
        self._last_progress = time.monotonic()
        self._tensorflow_up = False
        self._slowest_epoch_s: float | None = None
        self._stalled_s = 0.0
        self._epochs_done = 0
        # Every stall the launcher saw: a task stopped (SIGSTOP, a debugger) for a while,
        # or no progress until the allowed gap; reported in the run's record.
        self.stalls: list[dict[str, Any]] = []
        self.evaluator_in_cluster = evaluator_in_cluster
        self.restart = restart
        self.log = log
        self.on_line = on_line
        self.tasks: list[Task] = []
        # Where the tasks run: a loopback-only network namespace (multi-process clusters).
        self.namespace: netns.LoopbackNamespace | None = None
        self.cluster_restarts = 0  # every restart so far (the attempt's number)
        self.preempted_restarts = 0  # of which after a save on the preemption notice
        self.failures: list[dict[str, Any]] = []
        self._started = time.monotonic()
        self._lock = threading.Lock()

    # -- public -------------------------------------------------------------

    def run(self) -> RunMetrics:
        """Starts the cluster, waits for the chief's record, and stops every process.

        Returns:
            The chief's record with the launcher's wall time, restarts and
            failures added (also written to `metrics.json`).

        Raises:
            ClusterFailed: a task failed with no restart left.
            KeyboardInterrupt: on Ctrl-C or SIGTERM (after stopping every process).
            ConfigError: the output folder is not this run's to write, or is in
                use by another run (`run_folder.claim`), before anything starts.
        """
        folder = storage.local_view(self.config.output_dir)
        if storage.is_remote(folder):
            # A bucket has no lock to take: only a local folder (or a rehearsal's
            # local stand-in for the bucket) is claimed.
            storage.makedirs(folder)
            return self._run_claimed()
        with run_folder.claim(
            folder, self.config.to_json(), overwrite=self.overwrite, log=self.log
        ):
            return self._run_claimed()

    def _run_claimed(self) -> RunMetrics:
        counts = self.config.cluster.spec.task_counts(self.config.cluster)
        with netns.isolate(sum(counts.values())) as self.namespace:
            return self._run_isolated()

    def _run_isolated(self) -> RunMetrics:
        self._started = time.monotonic()
        self._status("running")
        try:
            with sigterm_raises():
                self._check_backup()
                metrics = self._run_with_restarts()
        except KeyboardInterrupt:
            self.stop()  # first: "interrupted" means nothing is left running
            self._status("interrupted")
            raise
        except BaseException as err:
            self.stop(grace_s=0)
            # The failing task's own error line (`ClusterFailed` puts it first), without the
            # heading of the log lines that follow it.
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            # A full disk that stopped the run refuses this write too: the failure is what
            # to report, and `strategist status` reads the unclaimed "running" as interrupted.
            with contextlib.suppress(OSError):
                self._status("failed", error=first.removesuffix("; its last log lines:"))
            raise
        finally:
            self.stop()
            run_folder.remove_partial_files(self.config.output_dir)
        metrics = metrics.with_launcher(
            wall_seconds=time.monotonic() - self._started,
            worker_restarts=sum(f["action"] == "worker restart" for f in self.failures),
            failures=self.failures,
            sidecar_evaluations=sidecar.read_evaluations(self.config.output_dir),
            stalls=self.stalls,
        )
        run_metrics.write(storage.join(self.config.output_dir, METRICS_NAME), metrics)
        self._status("succeeded")
        return metrics

    def pids(self) -> list[int]:
        return [t.process.pid for t in self.tasks if t.process is not None]

    def kill(self, task_name: str, sig: int = signal.SIGKILL) -> None:
        """Sends `sig` to one task's process group (fault injection)."""
        for task in self.tasks:
            if task.name == task_name and task.process and task.process.poll() is None:
                os.killpg(task.process.pid, sig)
                return
        raise KeyError(f"no running task {task_name!r}")

    def stop(self, grace_s: float = 1.0) -> None:
        """Stops every process: SIGTERM to each group, SIGKILL after `grace_s`.

        A second Ctrl-C or SIGTERM cannot cut this short. `grace_s=0` kills at
        once, which is what a failed cluster gets: MultiWorkerMirrored tasks
        catch SIGTERM (TensorFlow's preemption notifier) and would only wait
        for a peer that is gone. Nothing is lost by a kill: artifacts are
        written atomically and training state lives in the epoch checkpoints.
        """
        with signals_ignored():
            for task in self.tasks:
                if task.stopped_since is not None:
                    self._end_stall(task, "ended")
            running = [t for t in self.tasks if t.process and t.process.poll() is None]
            first = signal.SIGTERM if grace_s > 0 else signal.SIGKILL
            for task in running:
                signal_group(task.process, first)
            deadline = time.monotonic() + grace_s
            for task in running:
                try:
                    task.process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    signal_group(task.process, signal.SIGKILL)
                    task.process.wait()
            for task in self.tasks:
                if task.process and not task.reaped:
                    # Reap stragglers of the group (e.g. grandchildren) too, once:
                    # later the group's id may belong to someone else.
                    signal_group(task.process, signal.SIGKILL)
                    task.reaped = True
                if task.reader:
                    task.reader.join(timeout=2)

    @property
    def backup_dir(self) -> str:
        return self.config.backup_dir or storage.join(self.config.output_dir, "backup")

    # -- what runs: the two hooks a rehearsal of a cloud job overrides -------

    def plan(self) -> list[Task]:
        """The tasks of one attempt, on fresh 127.0.0.1 ports (`plan_tasks`)."""
        return plan_tasks(self.config.cluster, self.evaluator_in_cluster)

    def process(self, task: Task) -> tuple[list[str], dict[str, str], str | None]:
        """The command, environment and working folder (None: this one) that start `task`."""
        command = [
            sys.executable,
            "-I",  # isolated: the working directory cannot shadow a module of the trainer
            "-c",
            _RUN_TRAINER,
            _CODE_ROOT,
            "components.core.trainer",
            "--config-json",
            self.config.to_json(),
        ]
        return command, task_environment(task.tf_config, self.cluster_restarts), None

    # -- internals ----------------------------------------------------------

    def _run_with_restarts(self) -> RunMetrics:
        while True:
            failed = self._run_once()
            if failed is None:
                return run_metrics.read(storage.join(self.config.output_dir, METRICS_NAME))
            self.stop(grace_s=0)
            code = failed.process.returncode
            if code == PREEMPTED_EXIT_CODE and (
                self.preempted_restarts < self.restart.preempted_restarts
            ):
                self.cluster_restarts += 1
                self.preempted_restarts += 1
                self._record_failure(failed, "preempted restart")
                self.log(
                    f"[launcher] {failed.name} saved on the preemption notice (exit {code}); "
                    f"restarting the cluster as the platform would ({self.preempted_restarts}/"
                    f"{self.restart.preempted_restarts}), training resumes at that step"
                )
                continue
            failures = self.cluster_restarts - self.preempted_restarts
            # Bad input, or a divergence: a restart would end the same way.
            final = code in (CONFIG_ERROR_EXIT, DIVERGED_EXIT)
            if final or failures >= self.restart.cluster_restarts:
                self._record_failure(failed, "run failed")
                stalled_s = self._stalled_s if failed.stalled else 0.0
                raise ClusterFailed(failed.name, code, list(failed.tail), stalled_s)
            self.cluster_restarts += 1
            self._record_failure(failed, "cluster restart")
            self.log(
                f"[launcher] {failed.name} failed (exit {code}); restarting "
                f"the cluster ({failures + 1}/{self.restart.cluster_restarts}), "
                "training resumes from the last checkpoint"
            )

    def _run_once(self) -> Task | None:
        """Runs the cluster once; returns the task that failed, or None on success."""
        cluster = self.config.cluster
        self.tasks = self.plan()
        self._last_progress, self._tensorflow_up = time.monotonic(), False
        for task in self.tasks:
            self._start(task)
        shape = ", ".join(t.name for t in self.tasks)
        where = " in a loopback-only network namespace" if self.namespace else ""
        self.log(f"[launcher] started {len(self.tasks)} process(es) on {HOST}{where}: {shape}")
        while True:
            done = True
            for task in self.tasks:
                code = task.process.poll()
                primary = task.task_type in cluster.spec.primary_roles
                if code is None:
                    done = done and not primary
                    continue
                if code == 0 and primary:
                    continue
                if self._may_restart_alone(task):
                    task.restarts += 1
                    evaluator = task.task_type == EVALUATOR
                    self._record_failure(task, f"{task.task_type} restart")
                    self.log(
                        f"[launcher] {task.name} exited {code}; restarting it "
                        f"({task.restarts}/{self.restart.worker_restarts}), "
                        + (
                            "it first evaluates the checkpoints it missed"
                            if evaluator
                            else "its steps are retried on the other workers"
                        )
                    )
                    self._start(task)
                    done = False
                    continue
                return task
            if done:
                return None
            self._watch_stopped()
            self._check_liveness()
            time.sleep(_POLL_S)

    def _may_restart_alone(self, task: Task) -> bool:
        return (
            task.task_type in self.config.cluster.spec.restartable_alone
            and task.process.returncode not in (CONFIG_ERROR_EXIT, DIVERGED_EXIT)
            and task.restarts < self.restart.worker_restarts
        )

    def _record_failure(self, task: Task, action: str) -> None:
        self.failures.append(
            {
                "task": task.name,
                "returncode": task.process.returncode,
                "action": action,
                "at_s": round(time.monotonic() - self._started, 3),
            }
        )

    def _check_backup(self) -> None:
        """Resumes from a backup left by an earlier, interrupted run of this configuration.

        Running the same command again resumes from its last finished epoch. A
        backup of another configuration (other epochs, batch, strategy...) is
        refused, not deleted: restoring it would train something else, and it
        is not this run's to remove.

        Raises:
            ConfigError: the backup folder holds another run's backup, or a
                finished checkpoint that cannot be read back (before any task starts, so
                `--restarts` cannot repeat the failure).
        """
        marker = storage.join(self.backup_dir, _BACKUP_CONFIG_NAME)
        current = json.loads(self.config.to_json())
        if storage.isdir(self.backup_dir) and storage.listdir(self.backup_dir):
            try:
                previous = storage.read_json(marker)
            except (OSError, ValueError):
                previous = None
            if previous != current:
                raise ConfigError(
                    f"{self.backup_dir} holds the backup of another run: remove it, or "
                    "pass another --output"
                )
            unfinished = check_backup_readable(self.backup_dir)
            if unfinished:
                self.log(f"[launcher] {unfinished}")
            else:
                self.log(f"[launcher] resuming the interrupted run backed up in {self.backup_dir}")
        storage.write_json(marker, current)

    def _start(self, task: Task) -> None:
        if task.reader:
            task.reader.join(timeout=2)
        command, env, cwd = self.process(task)
        if self.namespace:
            command = self.namespace.wrap(command)
        task.tail.clear()
        task.reaped = False
        task.stalled = False
        if task.stopped_since is not None:  # it died stopped: its stall ends with it
            self._end_stall(task, "ended")
        # A Ctrl-C or SIGTERM between the fork and `task.process = ...` would leave a
        # task that `stop()` does not know: it waits until the task is recorded.
        with signals_deferred():
            task.process = subprocess.Popen(
                command,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() reaches its children
                text=True,
                errors="replace",
            )
            task.reader = threading.Thread(target=self._pump, args=(task,), daemon=True)
            task.reader.start()

    def _pump(self, task: Task) -> None:
        stream = task.process.stdout
        for raw in stream:
            line = raw.rstrip("\n")
            task.tail.append(line)
            if _NOISE.match(line):
                continue
            self._note_progress(task, line)
            with self._lock:
                self.log(f"[{task.name}] {line}")
            if self.on_line:
                self.on_line(task, line)
        stream.close()

    def _status(self, state: str, **extra: Any) -> None:
        run_folder.write_status(
            self.config.output_dir, state, restarts=self.cluster_restarts, **extra
        )


def run_local(config: RunConfig, **kwargs: Any) -> RunMetrics:
    """Runs `config` on a localhost cluster; see `LocalCluster`.

    Raises:
        ConfigError: a shape this machine cannot rehearse (before anything starts).
    """
    check_rehearsal(config)
    return LocalCluster(config, **kwargs).run()
