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
  on fresh ports; `BackupAndRestore` resumes from the last finished epoch;
- a task exits with `CONFIG_ERROR_EXIT` (bad input it found): no restart, since
  a restart would fail the same way.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from components.core import atomic, run_metrics, sidecar
from components.core.config import ClusterConfig, ConfigError, RunConfig, validate_for_machine
from components.core.launch.cloud import TRAINER_ENV
from components.core.run_metrics import RunMetrics
from components.core.signals import signals_ignored, sigterm_raises
from components.core.trainer import CONFIG_ERROR_EXIT, LAUNCHER_PID_ENV, RESTARTS_ENV
from components.core.training import METRICS_NAME, MODEL_DIR_NAME

HOST = "127.0.0.1"  # local clusters never listen beyond this machine
STATUS_NAME = "status.json"
_TAIL_LINES = 40
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
# Names `atomic` gives files and folders while it writes them.
_PARTIAL = re.compile(rf"^\.(tmp-|{MODEL_DIR_NAME}-)")
# Where a run's backup records which configuration it belongs to.
_BACKUP_CONFIG_NAME = "run_config.json"


class ClusterFailed(RuntimeError):
    """A task of the local cluster failed and no restart was left.

    Attributes:
        task: the failing task's name (`worker-1`).
        returncode: its exit code (negative: killed by that signal).
        tail: its last log lines.
    """

    def __init__(self, task: str, returncode: int, tail: list[str]):
        self.task, self.returncode, self.tail = task, returncode, tail
        how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited {returncode}"
        lines = "\n".join(f"  [{task}] {line}" for line in tail)
        super().__init__(f"{task} {how}; its last log lines:\n{lines}")


@dataclass(frozen=True)
class RestartPolicy:
    """What the launcher restarts, mirroring what the cloud backends do.

    Attributes:
        cluster_restarts: whole-cluster restarts after a chief, PS or (under
            mirrored strategies) any worker failure; training resumes from the
            BackupAndRestore checkpoint.
        worker_restarts: restarts of a single parameter-server-strategy worker;
            its steps are retried on the other workers meanwhile.
    """

    cluster_restarts: int = 0
    worker_restarts: int = 3


@dataclass
class Task:
    """One process of the cluster."""

    task_type: str
    index: int
    tf_config: str | None
    process: subprocess.Popen | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=_TAIL_LINES))
    reader: threading.Thread | None = None
    restarts: int = 0
    reaped: bool = False

    @property
    def name(self) -> str:
        return f"{self.task_type}-{self.index}" if self.task_type else "local"


def free_ports(count: int) -> list[int]:
    """Ports the OS has just handed out on 127.0.0.1, held until all are chosen."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def plan_tasks(cluster: ClusterConfig, evaluator_in_cluster: bool = False) -> list[Task]:
    """The cluster's tasks with `TF_CONFIG` on fresh 127.0.0.1 ports.

    The task types and counts are the strategy spec's, the same Vertex AI and
    the training operator give the cloud job's replicas: even a single-process
    strategy runs as the one `chief` task of a cluster, as on Vertex AI.

    Args:
        cluster: the run's cluster.
        evaluator_in_cluster: put the evaluator in `TF_CONFIG`'s `cluster`, as
            the training operator does (v1.9 `genClusterSpec`); by default it
            stays out of it, as on Vertex AI, where only its `task` names it.
    """
    counts = cluster.spec.task_counts(cluster)
    in_cluster = counts if evaluator_in_cluster else cluster.spec.training_task_counts(cluster)
    ports = iter(free_ports(sum(counts.values())))
    hosts = {kind: [f"{HOST}:{next(ports)}" for _ in range(n)] for kind, n in counts.items()}
    spec = {kind: hosts[kind] for kind in in_cluster}
    return [
        Task(kind, i, json.dumps({"cluster": spec, "task": {"type": kind, "index": i}}))
        for kind, n in counts.items()
        for i in range(n)
    ]


class LocalCluster:
    """Runs one training on a localhost cluster and returns its metrics.

    Args:
        config: the resolved run configuration.
        restart: what may be restarted on failure.
        log: where output lines go (already prefixed with the task name).
        on_line: called with (task, line) for every output line; tests use it
            to inject faults at a chosen moment.
        evaluator_in_cluster: give an evaluator the training operator's
            `TF_CONFIG` shape (evaluator inside `cluster`) instead of Vertex AI's.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        restart: RestartPolicy = RestartPolicy(),
        log: Callable[[str], None] = print,
        on_line: Callable[[Task, str], None] | None = None,
        evaluator_in_cluster: bool = False,
    ):
        self.config = config
        self.evaluator_in_cluster = evaluator_in_cluster
        self.restart = restart
        self.log = log
        self.on_line = on_line
        self.tasks: list[Task] = []
        self.cluster_restarts = 0
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
        """
        os.makedirs(self.config.output_dir, exist_ok=True)
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
            self._status("failed", error=str(err).splitlines()[0])
            raise
        finally:
            self.stop()
            _remove_partial_files(self.config.output_dir)
        metrics = metrics.with_launcher(
            wall_seconds=time.monotonic() - self._started,
            worker_restarts=sum(f["action"] == "worker restart" for f in self.failures),
            failures=self.failures,
            sidecar_evaluations=sidecar.read_evaluations(self.config.output_dir),
        )
        run_metrics.write(os.path.join(self.config.output_dir, METRICS_NAME), metrics)
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
            running = [t for t in self.tasks if t.process and t.process.poll() is None]
            first = signal.SIGTERM if grace_s > 0 else signal.SIGKILL
            for task in running:
                _signal_group(task.process, first)
            deadline = time.monotonic() + grace_s
            for task in running:
                try:
                    task.process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _signal_group(task.process, signal.SIGKILL)
                    task.process.wait()
            for task in self.tasks:
                if task.process and not task.reaped:
                    # Reap stragglers of the group (e.g. grandchildren) too, once:
                    # later the group's id may belong to someone else.
                    _signal_group(task.process, signal.SIGKILL)
                    task.reaped = True
                if task.reader:
                    task.reader.join(timeout=2)

    @property
    def backup_dir(self) -> str:
        return self.config.backup_dir or os.path.join(self.config.output_dir, "backup")

    # -- internals ----------------------------------------------------------

    def _run_with_restarts(self) -> RunMetrics:
        while True:
            failed = self._run_once()
            if failed is None:
                return run_metrics.read(os.path.join(self.config.output_dir, METRICS_NAME))
            self.stop(grace_s=0)
            code = failed.process.returncode
            if code == CONFIG_ERROR_EXIT or self.cluster_restarts >= self.restart.cluster_restarts:
                self._record_failure(failed, "run failed")
                raise ClusterFailed(failed.name, code, list(failed.tail))
            self.cluster_restarts += 1
            self._record_failure(failed, "cluster restart")
            self.log(
                f"[launcher] {failed.name} failed (exit {code}); restarting "
                f"the cluster ({self.cluster_restarts}/{self.restart.cluster_restarts}), "
                "training resumes from the last finished epoch"
            )

    def _run_once(self) -> Task | None:
        """Runs the cluster once; returns the task that failed, or None on success."""
        cluster = self.config.cluster
        self.tasks = plan_tasks(cluster, self.evaluator_in_cluster)
        for task in self.tasks:
            self._start(task)
        shape = ", ".join(t.name for t in self.tasks)
        self.log(f"[launcher] started {len(self.tasks)} process(es) on {HOST}: {shape}")
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
                    self._record_failure(task, "worker restart")
                    self.log(
                        f"[launcher] {task.name} exited {code}; restarting it "
                        f"({task.restarts}/{self.restart.worker_restarts}), its steps "
                        "are retried on the other workers"
                    )
                    self._start(task)
                    done = False
                    continue
                return task
            if done:
                return None
            time.sleep(_POLL_S)

    def _may_restart_alone(self, task: Task) -> bool:
        return (
            task.task_type in self.config.cluster.spec.restartable_alone
            and task.process.returncode != CONFIG_ERROR_EXIT
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
        """Keeps a backup left by an earlier, interrupted run only if it is this run's.

        Running the same command again resumes from its last finished epoch; a
        backup of another configuration (other epochs, batch, strategy...) is
        removed, since restoring it would train something else.
        """
        marker = os.path.join(self.backup_dir, _BACKUP_CONFIG_NAME)
        current = json.loads(self.config.to_json())
        if os.path.isdir(self.backup_dir):
            try:
                with open(marker) as handle:
                    previous = json.load(handle)
            except (OSError, ValueError):
                previous = None
            if previous == current:
                self.log(f"[launcher] resuming the interrupted run backed up in {self.backup_dir}")
            else:
                self.log(f"[launcher] removing {self.backup_dir}: it belongs to another run")
                shutil.rmtree(self.backup_dir)
        atomic.write_json(marker, current)

    def _start(self, task: Task) -> None:
        if task.reader:
            task.reader.join(timeout=2)
        env = task_environment(task.tf_config, self.cluster_restarts)
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
        task.tail.clear()
        task.reaped = False
        task.process = subprocess.Popen(
            command,
            env=env,
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
            with self._lock:
                self.log(f"[{task.name}] {line}")
            if self.on_line:
                self.on_line(task, line)
        stream.close()

    def _status(self, state: str, **extra: Any) -> None:
        atomic.write_json(
            os.path.join(self.config.output_dir, STATUS_NAME),
            {"state": state, "restarts": self.cluster_restarts, **extra},
        )


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def _remove_partial_files(folder: str) -> None:
    """Removes what a killed task was writing (atomic temporaries) below `folder`."""
    for root, dirs, files in os.walk(folder):
        for name in [d for d in dirs if _PARTIAL.match(d)]:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            dirs.remove(name)
        for name in files:
            if _PARTIAL.match(name):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(root, name))


def task_environment(tf_config: str | None, restarts: int = 0) -> dict[str, str]:
    """The environment of one local training process.

    This process's environment without its own `TF_CONFIG`, plus the task's
    `TF_CONFIG`, what every cloud training process gets (`TRAINER_ENV`: Keras 2,
    gRPC calls to dead peers failing at once) and the local-only settings.

    Args:
        tf_config: the task's `TF_CONFIG` JSON (None: a single process).
        restarts: whole-cluster restarts so far (the trainer reports them).
    """
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = tf_config
    env.update(TRAINER_ENV)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"  # several tasks may share one GPU
    env[RESTARTS_ENV] = str(restarts)
    env[LAUNCHER_PID_ENV] = str(os.getpid())  # the task dies with this launcher
    return env


def machine_gpus() -> int:
    """NVIDIA GPUs this machine's processes may use, without loading TensorFlow.

    Counts the driver's `/proc/driver/nvidia/gpus` entries, limited by
    `CUDA_VISIBLE_DEVICES` when it is set (empty or `-1` hides them all).
    """
    try:
        gpus = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return gpus
    listed = [d for d in visible.split(",") if d.strip()]
    if not listed or listed[0].strip() == "-1":
        return 0
    return min(gpus, len(listed))


def check_rehearsal(config: RunConfig, gpus: int | None = None) -> None:
    """Refuses a run this machine cannot rehearse truthfully.

    Logical CPU devices stand in for GPUs only where the strategy replicates
    over them (`mirrored`); a multi-worker strategy's local workers would hold
    one replica each, fewer than counted. An all-reduce or a precision that
    needs GPUs is refused on a machine without (`validate_for_machine`).

    Args:
        config: the run.
        gpus: GPUs of this machine; None: `machine_gpus()`.

    Raises:
        ConfigError: saying which flag to change.
    """
    cluster = config.cluster
    spec = cluster.spec
    if spec.devices_per_machine(cluster) > 1 and not spec.cpu_rehearsal:
        raise ConfigError(
            f"a local {spec.name} rehearsal runs one device per worker "
            f"(on a machine without GPUs {spec.tf_class} gives each worker one CPU device): "
            "pass --devices 1 locally; the cloud job takes GPUs per machine"
        )
    validate_for_machine(config, machine_gpus() if gpus is None else gpus)


def run_local(config: RunConfig, **kwargs: Any) -> RunMetrics:
    """Runs `config` on a localhost cluster; see `LocalCluster`.

    Raises:
        ConfigError: a shape this machine cannot rehearse (before anything starts).
    """
    check_rehearsal(config)
    return LocalCluster(config, **kwargs).run()
