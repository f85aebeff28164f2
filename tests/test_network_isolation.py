"""Local clusters are reachable from this machine only: their tasks live in a network
namespace that has nothing but loopback (TensorFlow binds 0.0.0.0 whatever TF_CONFIG says)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from components.core.config import ClusterConfig, ConfigError, DataConfig, RunConfig, TrainingConfig
from components.core.launch import netns
from components.core.launch.local import LocalCluster
from tests.conftest import trainer_pids


def machine_addresses() -> list[str]:
    """This machine's own non-loopback addresses (`hostname -I`)."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=True).stdout
    return [a for a in out.split() if not a.startswith("127.") and a != "::1"]


def reachable(address: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        return sock.connect_ex((address, port)) == 0


def reachable_inside(namespace: netns.LoopbackNamespace, ports: list[int]) -> list[bool]:
    """Whether each port answers on 127.0.0.1, asked from inside the namespace."""
    probe = (
        "import socket, sys\n"
        "for port in map(int, sys.argv[1:]):\n"
        "    s = socket.socket(); s.settimeout(2)\n"
        "    print(s.connect_ex(('127.0.0.1', port)) == 0)\n"
    )
    command = namespace.wrap([sys.executable, "-I", "-c", probe, *map(str, ports)])
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout
    return [line == "True" for line in out.split()]


@pytest.mark.cluster
def test_no_parameter_server_task_is_reachable_but_on_loopback_inside(digits_shards, tmp_path):
    """During a real parameter_server run: every task's port refuses connections on each of
    the machine's addresses (and on the machine's own loopback), and answers on 127.0.0.1
    inside the cluster's namespace. Fails where tasks run in the machine's namespace."""
    addresses = machine_addresses()
    assert addresses, "this test needs the machine's own non-loopback address"
    out = tmp_path / "run"
    config = RunConfig(
        data=DataConfig(shards_dir=digits_shards),
        cluster=ClusterConfig("parameter_server", workers=2, ps=1),
        training=TrainingConfig(epochs=3),
        output_dir=str(out),
    )
    training = threading.Event()
    cluster = LocalCluster(
        config,
        log=lambda _: None,
        on_line=lambda task, line: (
            task.name == "chief-0" and line.startswith("epoch 1/") and training.set()
        ),
    )
    seen: dict[str, object] = {}

    def probe() -> None:
        if not training.wait(timeout=180):
            return
        ports = {
            t.name: int(json.loads(t.tf_config)["cluster"][t.task_type][t.index].split(":")[1])
            for t in cluster.tasks
        }
        seen["ports"] = ports
        seen["outside"] = {
            (name, address): reachable(address, port)
            for name, port in ports.items()
            for address in [*addresses, "127.0.0.1"]
        }
        inside = reachable_inside(cluster.namespace, list(ports.values()))
        seen["inside"] = dict(zip(ports, inside, strict=True))

    prober = threading.Thread(target=probe)
    prober.start()
    metrics = cluster.run()
    prober.join()
    assert len(seen.get("ports", {})) == 4, seen  # chief, 2 workers, 1 PS
    assert not any(seen["outside"].values()), seen["outside"]
    # The servers were up: each answers inside (the chief serves too under parameter_server).
    assert all(seen["inside"].values()), seen["inside"]
    assert metrics.eval_accuracy >= 0.85
    assert not trainer_pids(str(out))


def test_a_namespace_has_only_loopback_and_it_is_up():
    interfaces = "import socket; print(socket.if_nameindex())"
    with netns.isolate(2) as namespace:
        shown = subprocess.run(
            namespace.wrap([sys.executable, "-I", "-c", interfaces]),
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        pid = namespace.pid
    assert shown.strip() == "[(1, 'lo')]"
    assert not os.path.exists(f"/proc/{pid}")  # the holder is gone with the cluster


@pytest.mark.parametrize("rootless", [False, True])
def test_tasks_still_enter_the_namespace_after_its_holder_was_killed(rootless):
    """The probe killed the holder mid-run: a parameter-server worker restarted after that
    failed (`nsenter: cannot open /proc/HOLDER/ns/net`). Tasks enter through the
    launcher's own handles on the namespace, which keep it alive."""
    namespace = netns.LoopbackNamespace()
    namespace._rootless = rootless
    with namespace:
        os.kill(namespace.pid, signal.SIGKILL)
        namespace._holder.wait()
        interfaces = "import socket; print(socket.if_nameindex())"
        shown = subprocess.run(
            namespace.wrap([sys.executable, "-I", "-c", interfaces]),
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    assert shown.strip() == "[(1, 'lo')]"


def test_a_user_namespace_works_for_an_unprivileged_launcher():
    """The rootless form (user + network namespace) gives the same loopback-only network."""
    namespace = netns.LoopbackNamespace()
    namespace._rootless = True  # the form a non-root user gets
    with namespace:
        probe = (
            "import socket; s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen();"
            "c = socket.create_connection(('127.0.0.1', s.getsockname()[1])); "
            "print(socket.if_nameindex())"
        )
        shown = subprocess.run(
            namespace.wrap([sys.executable, "-I", "-c", probe]),
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    assert shown.strip() == "[(1, 'lo')]"


def test_without_namespaces_a_cluster_is_refused_unless_the_exposure_is_named(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no unshare, no nsenter
    monkeypatch.delenv(netns.ALLOW_EXPOSURE_ENV, raising=False)
    with pytest.raises(ConfigError, match="pass --allow-network-exposure"), netns.isolate(2):
        pass
    with netns.isolate(1) as namespace:  # one process serves nobody
        assert namespace is None
    monkeypatch.setenv(netns.ALLOW_EXPOSURE_ENV, "1")
    with netns.isolate(3) as namespace:
        assert namespace is None
