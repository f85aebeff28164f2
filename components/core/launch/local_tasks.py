"""A local cluster's tasks: their processes, 127.0.0.1 ports, `TF_CONFIG` and environment."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import socket
import subprocess
import threading
from dataclasses import dataclass, field

from components.core.config import ClusterConfig
from components.core.launch.cloud import TRAINER_ENV
from components.core.trainer import LAUNCHER_PID_ENV, RESTARTS_ENV

HOST = "127.0.0.1"  # local clusters never listen beyond this machine
_TAIL_LINES = 40


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
    stalled: bool = False
    stopped_since: float | None = None  # when the kernel was first seen showing it stopped

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


def signal_group(process: subprocess.Popen, sig: int) -> None:
    """Sends `sig` to the process group of a task's process, if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
