"""A real Kubernetes API server on loopback for the Kubeflow tests, and a stand-in operator.

`KubeCluster.start(folder)` runs Debian's etcd and a kube-apiserver 1.20 built from
Debian's source package (`tests/kube/build_apiserver.sh`) on 127.0.0.1 with free ports:
a throw-away CA and serving certificate, a static token file, RBAC, the training
operator v1.9.0 TFJob CRD, the `strategist` namespace and the Role of docs/cloud.md.
It hands out kubeconfigs for an admin, a user bound to that Role, a user with no role
and a token the server does not know. `Operator` plays the training operator's part.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tests" / "kube" / "build_apiserver.sh"
CRD = REPO / "tests" / "data" / "kubeflow.org_tfjobs-v1.9.0.yaml"
DOCS = REPO / "docs" / "cloud.md"
NAMESPACE = "strategist"
NODE = "stand-in-node"
USERS = {"admin": "system:masters", "submitter": "", "nobody": ""}
_READY_TIMEOUT_S = 120.0  # 10-17 s on an idle machine; the cores are shared


class ClusterUnavailable(RuntimeError):
    """No API server binary (or etcd), and it could not be built here."""


def apiserver_binary() -> str:
    """The kube-apiserver to run: `STRATEGIST_KUBE_APISERVER`, the cached build, or a build.

    Raises:
        ClusterUnavailable: the build script failed (its output says why).
    """
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
    if result.returncode != 0:
        raise ClusterUnavailable(
            f"{BUILD_SCRIPT.relative_to(REPO)} failed:\n{result.stderr[-3000:]}"
        )
    binary = result.stdout.strip().splitlines()[-1]
    if not shutil.which("etcd"):
        raise ClusterUnavailable("no etcd on PATH (Debian: apt-get install etcd-server)")
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: killed when the test process dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Certificates:
    """A throw-away CA, a serving certificate for 127.0.0.1 and a service-account key."""

    ca: Path
    server_cert: Path
    server_key: Path
    sa_key: Path
    other_ca: Path  # a CA that signed nothing of this server's

    @classmethod
    def write(cls, folder: Path) -> Certificates:
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        def key():
            return rsa.generate_private_key(public_exponent=65537, key_size=2048)

        def pem_key(k):
            return k.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )

        now = datetime.datetime.now(datetime.timezone.utc)

        def certificate(subject, issuer, public_key, signing_key, ca, sans=None):
            builder = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                .public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=2))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            )
            if sans:
                builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
            return builder.sign(signing_key, hashes.SHA256()).public_bytes(
                serialization.Encoding.PEM
            )

        ca_key, server_key, other_key = key(), key(), key()
        paths = cls(
            *(folder / n for n in ("ca.crt", "server.crt", "server.key", "sa.key", "other-ca.crt"))
        )
        paths.ca.write_bytes(
            certificate(
                "strategist-test-ca", "strategist-test-ca", ca_key.public_key(), ca_key, True
            )
        )
        paths.other_ca.write_bytes(
            certificate("another-ca", "another-ca", other_key.public_key(), other_key, True)
        )
        sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        paths.server_cert.write_bytes(
            certificate(
                "kube-apiserver", "strategist-test-ca", server_key.public_key(), ca_key, False, sans
            )
        )
        paths.server_key.write_bytes(pem_key(server_key))
        paths.sa_key.write_bytes(pem_key(key()))
        return paths


@dataclass
class KubeCluster:
    """etcd and kube-apiserver on loopback; stop() ends both."""

    folder: Path
    url: str
    certs: Certificates
    tokens: dict[str, str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    kubelet: FakeKubelet | None = None
    apiserver_args: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, folder: Path) -> KubeCluster:
        binary = apiserver_binary()
        folder.mkdir(parents=True, exist_ok=True)
        certs = Certificates.write(folder)
        tokens = {user: os.urandom(16).hex() for user in USERS}
        with open(folder / "tokens.csv", "w") as out:
            for user, group in USERS.items():
                out.write(f"{tokens[user]},{user},{user}" + (f',"{group}"' if group else "") + "\n")
        client_port, peer_port, secure_port = _free_port(), _free_port(), _free_port()
        cluster = cls(folder, f"https://127.0.0.1:{secure_port}", certs, tokens)
        try:
            cluster._spawn(
                "etcd",
                [
                    "etcd",
                    "--name",
                    "test",
                    "--data-dir",
                    str(folder / "etcd"),
                    "--listen-client-urls",
                    f"http://127.0.0.1:{client_port}",
                    "--advertise-client-urls",
                    f"http://127.0.0.1:{client_port}",
                    "--listen-peer-urls",
                    f"http://127.0.0.1:{peer_port}",
                    "--initial-advertise-peer-urls",
                    f"http://127.0.0.1:{peer_port}",
                    "--initial-cluster",
                    f"test=http://127.0.0.1:{peer_port}",
                ],
            )
            cluster.apiserver_args = [
                binary,
                f"--etcd-servers=http://127.0.0.1:{client_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={secure_port}",
                "--insecure-port=0",
                f"--cert-dir={folder / 'apiserver-certs'}",
                f"--tls-cert-file={certs.server_cert}",
                f"--tls-private-key-file={certs.server_key}",
                f"--token-auth-file={folder / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={certs.sa_key}",
                f"--service-account-signing-key-file={certs.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--disable-admission-plugins=ServiceAccount",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                "--kubelet-preferred-address-types=InternalIP",
            ]
            cluster._start_apiserver()
            cluster._set_up()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the process holds it
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        log.close()
        self.processes.append(process)
        return process

    def _start_apiserver(self) -> None:
        process = self._spawn("kube-apiserver", self.apiserver_args)
        self.apiserver = process
        self.wait_ready()

    def wait_ready(self, timeout_s: float = _READY_TIMEOUT_S) -> None:
        context = ssl.create_default_context(cafile=str(self.certs.ca))
        deadline = time.monotonic() + timeout_s
        import urllib.request

        while True:
            if self.apiserver.poll() is not None:
                tail = (self.folder / "kube-apiserver.log").read_text()[-3000:]
                raise ClusterUnavailable(
                    f"kube-apiserver exited {self.apiserver.returncode}:\n{tail}"
                )
            try:
                request = urllib.request.Request(
                    f"{self.url}/readyz",
                    headers={"Authorization": f"Bearer {self.tokens['admin']}"},
                )
                with urllib.request.urlopen(request, context=context, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ClusterUnavailable(f"kube-apiserver not ready after {timeout_s:.0f} s")
            time.sleep(0.5)

    def relay(self) -> Relay:
        """A relay to this API server that a test can cut, as if the server stopped."""
        return Relay(int(self.url.rsplit(":", 1)[1]))

    @contextlib.contextmanager
    def frozen(self):
        """The API server stopped with SIGSTOP: connections open, no reply."""
        self.apiserver.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.apiserver.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)
                process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        if self.kubelet:
            self.kubelet.stop()

    # ---- clients and kubeconfigs

    def kubeconfig(
        self,
        user: str,
        *,
        token: str | None = None,
        ca: Path | None = None,
        relay: Relay | None = None,
    ) -> str:
        """A kubeconfig file for `user` (or a `token` the server does not know, or another CA,
        or the server reached through `relay`)."""
        suffix = (f"-{ca.stem}" if ca else "") + (f"-relay{relay.port}" if relay else "")
        path = self.folder / f"kubeconfig-{user}{suffix}"
        server = f"https://127.0.0.1:{relay.port}" if relay else self.url
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": server,
                        "certificate-authority": str(ca or self.certs.ca),
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token or self.tokens[user]}}],
            "contexts": [
                {"name": user, "context": {"cluster": "test", "user": user, "namespace": NAMESPACE}}
            ],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(config))
        return str(path)

    def api_client(self, user: str = "admin"):
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(
            config_file=self.kubeconfig(user), client_configuration=configuration
        )
        return client.ApiClient(configuration)

    # ---- what a cluster admin sets up

    def _set_up(self) -> None:
        from kubernetes import client, utils

        api = self.api_client()
        crd = yaml.safe_load(CRD.read_text())
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        deadline = time.monotonic() + 60
        while True:
            got = client.ApiextensionsV1Api(api).read_custom_resource_definition(
                crd["metadata"]["name"]
            )
            if any(
                c.type == "Established" and c.status == "True" for c in got.status.conditions or []
            ):
                break
            if time.monotonic() > deadline:
                raise ClusterUnavailable("the TFJob CRD was not established")
            time.sleep(0.2)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        for document in documented_role("submitter"):
            utils.create_from_dict(api, document)
        self.kubelet = FakeKubelet()
        client.CoreV1Api(api).create_node(
            {"metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}
        )
        client.CoreV1Api(api).patch_node_status(
            NODE,
            {
                "status": {
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet.port}},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "StandIn"}],
                }
            },
        )
        # The custom resource endpoint may lag the Established condition by a moment.
        custom = client.CustomObjectsApi(api)
        deadline = time.monotonic() + 30
        while True:
            try:
                custom.list_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "tfjobs")
                break
            except client.ApiException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


class Relay:
    """A TCP relay on loopback in front of the API server: `cut()` closes it (every
    connection, and new ones refused), as a stopped API server would, `restore()` reopens
    it on the same port. The server itself keeps running, so its authorizer's caches
    are warm when the relay comes back (a restarted kube-apiserver answers 403 for a
    moment before they are)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = _free_port()
        self.connections: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self.listener = self.listener, None
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for connection in self.connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()
        self.connections.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self.connections += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def documented_role(user: str) -> list[dict[str, Any]]:
    """The Role and RoleBinding of docs/cloud.md, bound to `user`."""
    text = DOCS.read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "kind: Role\n" in b]
    documents = list(yaml.safe_load_all(block))
    for document in documents:
        if document["kind"] == "RoleBinding":
            document["subjects"] = [
                {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
            ]
    return documents


class FakeKubelet:
    """The stand-in node's log endpoint: the API server proxies `pods/log` to it.

    The API server fetches `/containerLogs/NS/POD/CONTAINER` from the node's
    kubelet over HTTPS; with no `--kubelet-certificate-authority` it does not
    check the kubelet's certificate.
    """

    def __init__(self) -> None:
        self.logs: dict[tuple[str, str], str] = {}
        kubelet = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server interface
                parts = self.path.split("?")[0].strip("/").split("/")
                text = None
                if len(parts) >= 3 and parts[0] == "containerLogs":
                    text = kubelet.logs.get((parts[1], parts[2]))
                body = (text or "").encode()
                self.send_response(200 if text is not None else 404)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        folder = Path(os.environ.get("TMPDIR", "/tmp"))
        cert_dir = folder / f"strategist-kubelet-{os.getpid()}"
        cert_dir.mkdir(exist_ok=True)
        certs = Certificates.write(cert_dir)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certs.server_cert, certs.server_key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        shutil.rmtree(cert_dir, ignore_errors=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


REASONS = {  # training-operator v1.9: commonutil.NewReason(TFJobKind, ...)
    "Created": "TFJobCreated",
    "Running": "TFJobRunning",
    "Restarting": "TFJobRestarting",
    "Succeeded": "TFJobSucceeded",
    "Failed": "TFJobFailed",
}


class Operator:
    """A stand-in for the Kubeflow training operator v1.9, which cannot run here.

    It does by hand, when a test tells it to, what the operator's TFJob controller
    does (pkg/controller.v1/tensorflow/tfjob_controller.go at v1.9.0): one headless
    Service and one Pod per replica, named `<job>-<type>-<index>` and labelled as the
    operator labels them (the chief `job-role: master`), the Pods bound to the
    stand-in node; and the status conditions, with the operator's reasons and
    messages, written to the TFJob's `/status`. Nothing in it runs TensorFlow: the
    chief's log is whatever the test gives. What it creates is checked by the real
    API server's validation, as the operator's own requests are.
    """

    def __init__(self, cluster: KubeCluster):
        from kubernetes import client

        self.cluster = cluster
        api = cluster.api_client("admin")
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def job(self, name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(
            "kubeflow.org", "v1", namespace, "tfjobs", name
        )

    def exists(self, name: str, namespace: str = NAMESPACE) -> bool:
        from kubernetes.client import ApiException

        try:
            self.job(name, namespace)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def wait_for_job(
        self,
        name: str,
        timeout_s: float = 60,
        namespace: str = NAMESPACE,
        replacing: str | None = None,
    ) -> dict[str, Any]:
        """The TFJob once it exists (another than the one of uid `replacing`)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(Exception):
                job = self.job(name, namespace)
                if job["metadata"]["uid"] != replacing:
                    return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"no TFJob {namespace}/{name} after {timeout_s} s")
            time.sleep(0.1)

    def make_replicas(
        self, name: str, chief_log: str = "", namespace: str = NAMESPACE
    ) -> list[str]:
        """Creates the Services and Pods the operator makes; returns the pods' names."""
        job = self.job(name, namespace)
        owner = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": name,
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        self._collect_garbage(name, job["metadata"]["uid"], namespace)
        specs = job["spec"]["tfReplicaSpecs"]
        chief_type = "Chief" if "Chief" in specs else None
        pods = []
        for replica_type, spec in specs.items():
            rtype = replica_type.lower()
            for index in range(spec.get("replicas", 1)):
                pod_name = f"{name}-{rtype}-{index}"
                labels = {
                    "training.kubeflow.org/job-name": name,
                    "training.kubeflow.org/operator-name": "tfjob-controller",
                    "training.kubeflow.org/replica-type": rtype,
                    "training.kubeflow.org/replica-index": str(index),
                }
                master = replica_type == chief_type or (
                    chief_type is None and rtype == "worker" and index == 0
                )
                if master:
                    labels["training.kubeflow.org/job-role"] = "master"
                self.core.create_namespaced_service(
                    namespace,
                    {
                        "metadata": {
                            "name": pod_name,
                            "labels": labels,
                            "ownerReferences": [owner],
                        },
                        "spec": {
                            "clusterIP": "None",
                            "selector": labels,
                            "ports": [{"name": "tfjob-port", "port": 2222}],
                        },
                    },
                )
                template = json.loads(json.dumps(spec["template"]))
                metadata = template.get("metadata") or {}
                metadata.update(
                    name=pod_name,
                    labels={**(metadata.get("labels") or {}), **labels},
                    ownerReferences=[owner],
                )
                pod_spec = template["spec"]
                pod_spec["nodeName"] = NODE
                pod_spec["restartPolicy"] = (
                    "Never"
                    if spec.get("restartPolicy") in ("ExitCode", "Never")
                    else spec.get("restartPolicy", "Never")
                )
                for container in pod_spec["containers"]:
                    if container["name"] == "tensorflow":
                        container.setdefault("ports", []).append(
                            {"name": "tfjob-port", "containerPort": 2222}
                        )
                self.core.create_namespaced_pod(namespace, {"metadata": metadata, "spec": pod_spec})
                if master:
                    self.cluster.kubelet.logs[(namespace, pod_name)] = chief_log
                pods.append(pod_name)
        return pods

    def _collect_garbage(self, name: str, uid: str, namespace: str) -> None:
        """Deletes the Pods and Services of an earlier TFJob of the same name, as Kubernetes'
        garbage collector (in kube-controller-manager, not run here) does once it is gone."""
        selector = f"training.kubeflow.org/job-name={name}"
        for kind in ("service", "pod"):
            listed = getattr(self.core, f"list_namespaced_{kind}")(
                namespace, label_selector=selector
            )
            for item in listed.items:
                owners = item.metadata.owner_references or []
                if all(owner.uid != uid for owner in owners):
                    getattr(self.core, f"delete_namespaced_{kind}")(
                        item.metadata.name, namespace, grace_period_seconds=0
                    )

    def set_pods_phase(
        self,
        name: str,
        phase: str,
        exit_code: int = 0,
        namespace: str = NAMESPACE,
        role: str | None = None,
    ) -> None:
        selector = f"training.kubeflow.org/job-name={name}"
        if role:
            selector += f",training.kubeflow.org/replica-type={role}"
        for pod in self.core.list_namespaced_pod(namespace, label_selector=selector).items:
            state = (
                {"running": {"startedAt": _now()}}
                if phase == "Running"
                else {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "startedAt": _now(),
                        "finishedAt": _now(),
                    }
                }
            )
            self.core.patch_namespaced_pod_status(
                pod.metadata.name,
                namespace,
                {
                    "status": {
                        "phase": phase,
                        "containerStatuses": [
                            {
                                "name": "tensorflow",
                                "ready": phase == "Running",
                                "restartCount": 0,
                                "image": "stand-in",
                                "imageID": "",
                                "state": state,
                            }
                        ],
                    }
                },
            )

    def condition(
        self, name: str, kind: str, namespace: str = NAMESPACE, **replica_statuses
    ) -> None:
        """Appends the operator's condition `kind` (Created, Running, Succeeded, Failed)."""
        messages = {
            "Created": f"TFJob {name} is created.",
            "Running": f"TFJob {namespace}/{name} is running.",
            "Restarting": f"TFJob {name} is restarting because 1 Worker replica(s) failed.",
            "Succeeded": f"TFJob {namespace}/{name} successfully completed.",
            "Failed": f"TFJob {namespace}/{name} has failed because 1 Chief replica(s) failed.",
        }
        job = self.job(name, namespace)
        status = job.get("status") or {}
        conditions = status.get("conditions") or []
        # The operator flips the earlier Running condition to False when the job ends.
        for cond in conditions:
            if kind in ("Succeeded", "Failed", "Restarting") and cond["type"] == "Running":
                cond["status"] = "False"
        conditions.append(
            {
                "type": kind,
                "status": "True",
                "reason": REASONS[kind],
                "message": messages[kind],
                "lastUpdateTime": _now(),
                "lastTransitionTime": _now(),
            }
        )
        status["conditions"] = conditions
        status["replicaStatuses"] = (
            {
                rtype: dict(zip(("active", "succeeded", "failed"), counts, strict=True))
                for rtype, counts in replica_statuses.items()
            }
            or status.get("replicaStatuses")
            or {}
        )
        status.setdefault("startTime", _now())
        if kind in ("Succeeded", "Failed"):
            status["completionTime"] = _now()
        job["status"] = status
        self.custom.replace_namespaced_custom_object_status(
            "kubeflow.org", "v1", namespace, "tfjobs", name, job
        )

    def play(
        self,
        name: str,
        outcome: str = "Succeeded",
        chief_log: str = "",
        running_s: float = 0.5,
        namespace: str = NAMESPACE,
        replacing: str | None = None,
    ) -> None:
        """The operator's whole course for one job: replicas, Created, Running, then `outcome`
        (or stays Running when `outcome` is None); `replacing`: the uid of a job of the same
        name this one replaces."""
        self.wait_for_job(name, namespace=namespace, replacing=replacing)
        self.make_replicas(name, chief_log, namespace)
        self.condition(name, "Created", namespace)
        self.set_pods_phase(name, "Running", namespace=namespace)
        self.condition(name, "Running", namespace, Chief=(1, 0, 0))
        if outcome is None:
            return
        time.sleep(running_s)
        if outcome == "Succeeded":
            self.set_pods_phase(name, "Succeeded", namespace=namespace)
            self.condition(name, "Succeeded", namespace, Chief=(0, 1, 0))
        else:
            self.set_pods_phase(name, "Failed", exit_code=1, namespace=namespace, role="chief")
            self.condition(name, "Failed", namespace, Chief=(0, 0, 1))

    def in_background(self, *args, **kwargs) -> threading.Thread:
        errors: list[BaseException] = []

        def run():
            try:
                self.play(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001 - surfaced by join()
                errors.append(err)

        thread = threading.Thread(target=run, daemon=True)
        thread.errors = errors  # type: ignore[attr-defined]
        thread.start()
        return thread


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
