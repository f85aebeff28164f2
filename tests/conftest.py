"""Shared fixtures: real digits shards built once per session, offline."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_configure(config):
    """Let the children the tests start see SIGINT as a terminal's Ctrl-C.

    A shell that starts pytest in the background makes it ignore SIGINT, and an ignored
    signal stays ignored across exec: the tests that send SIGINT to a command would then
    test nothing. A signal with a handler is reset to the default in the child instead.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def tfds_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tfds")


@pytest.fixture(scope="session")
def digits_shards(tfds_dir, tmp_path_factory) -> str:
    """The offline digits dataset as 4 TFRecord shards per split (real TFDS builder)."""
    from components.core import datasets

    shards = tmp_path_factory.mktemp("shards") / "digits"
    datasets.shard_dataset("digits", str(shards), num_shards=4, data_dir=str(tfds_dir))
    return str(shards)


def trainer_pids(marker: str = "") -> list[int]:
    """PIDs of live Strategist trainer processes whose command line holds `marker`.

    Tests pass their own output folder, which is in every task's --config-json.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"components.core.trainer" in cmdline and any(marker.encode() in a for a in cmdline):
            pids.append(int(entry.name))
    return pids


def pids_with_environ(entry: str) -> list[int]:
    """PIDs of live processes (not this one) whose environment holds `entry` (`NAME=value`).

    Every process a command starts inherits its environment, whatever its command line:
    a test sets a unique variable and finds every descendant by it.
    """
    wanted, pids = entry.encode(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if wanted in environ and state != b"Z":  # a zombie is dead, only not yet reaped
            pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory):
    """A real kube-apiserver 1.20 with etcd on loopback, the TFJob CRD and docs/cloud.md's Role.

    The first run builds the API server (tests/kube/build_apiserver.sh, 8-20 min).
    Where it cannot be built (no root or sudo to install Debian's packages) the tests
    that need it are skipped, except under CI, where that is a failure.
    """
    from tests.kube.cluster import ClusterUnavailable, KubeCluster

    try:
        cluster = KubeCluster.start(tmp_path_factory.mktemp("kube"))
    except ClusterUnavailable as err:
        if os.environ.get("CI"):
            pytest.fail(f"no Kubernetes API server under CI: {err}")
        pytest.skip(f"no Kubernetes API server: {err}")
    yield cluster
    cluster.stop()
