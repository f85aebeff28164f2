"""A network namespace that has only loopback, for the processes of a local cluster.

TensorFlow's gRPC server binds every interface (`0.0.0.0:PORT`, whatever
address `TF_CONFIG` gives the task; tensorflow/core/distributed_runtime/rpc/
grpc_server_lib.cc builds its listening address from the port alone), so a
local parameter-server or multi-worker cluster would be an unauthenticated
TensorFlow server open to the network. No TensorFlow option binds loopback
only; a network namespace with nothing but `lo` does: the tasks reach each
other on 127.0.0.1 inside it, and nothing outside reaches them.

The namespace is held by a small process started with `unshare --net`
(`unshare --user --map-root-user --net` when not root: an unprivileged user
namespace, where the kernel allows it); each task is started inside it with
`nsenter`, which execs the task (same PID, same parent: the task still dies
with its launcher). See https://man7.org/linux/man-pages/man7/network_namespaces.7.html,
https://man7.org/linux/man-pages/man1/unshare.1.html and
https://man7.org/linux/man-pages/man1/nsenter.1.html.

Where no namespace can be made (no util-linux, user namespaces disabled, a
container without the capability), a multi-process cluster is refused unless
the user names the exposure (`--allow-network-exposure`, which sets
`ALLOW_EXPOSURE_ENV` for every process below the command, kfp.local's task
processes included).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

from components.core.errors import ConfigError
from components.core.signals import signals_deferred

ALLOW_EXPOSURE_ENV = "STRATEGIST_ALLOW_NETWORK_EXPOSURE"
_READY = "ready"
# Runs inside the new namespace: dies with the launcher, brings `lo` up (the
# SIOCGIFFLAGS/SIOCSIFFLAGS ioctls, netdevice(7): no `ip` binary needed), says
# it is ready and holds the namespace until its stdin closes.
_HOLDER = r"""
import ctypes, fcntl, socket, struct, sys
ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
request = struct.pack("16sH14s", b"lo", 0, b"")
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    flags = struct.unpack("16sH14s", fcntl.ioctl(sock, 0x8913, request))[1]
    fcntl.ioctl(sock, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))
print("ready", flush=True)
sys.stdin.read()
"""


class LoopbackNamespace:
    """A held network namespace with only `lo` (up); `wrap` starts a command inside it.

    Use as a context manager: the namespace exists from `__enter__` to `__exit__`.

    Raises (from `__enter__`):
        OSError: the namespace could not be made, with the reason.
    """

    def __init__(self) -> None:
        self._holder: subprocess.Popen | None = None
        self._rootless = os.geteuid() != 0
        # The launcher's own handles on the namespaces: tasks enter through them, so a
        # restart still finds the namespace if the holder was killed meanwhile.
        self._fds: dict[str, int] = {}

    def __enter__(self) -> LoopbackNamespace:
        for tool in ("unshare", "nsenter"):
            if shutil.which(tool) is None:
                raise OSError(f"{tool} (util-linux) is not installed")
        flags = ["--user", "--map-root-user", "--net"] if self._rootless else ["--net"]
        try:
            with signals_deferred():  # no Ctrl-C between the fork and `self._holder = ...`
                self._holder = subprocess.Popen(
                    ["unshare", *flags, sys.executable, "-I", "-c", _HOLDER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,  # a Ctrl-C meant for the command is the launcher's
                )
            ready = self._holder.stdout.readline().strip() == _READY
        except BaseException:  # interrupted while it starts (a deferred signal too): it goes
            self.__exit__()
            raise
        if not ready:
            self._holder.kill()
            reason = self._holder.communicate()[1].strip().splitlines()
            self._holder = None
            raise OSError(reason[-1] if reason else "unshare failed")
        kinds = ("user", "net") if self._rootless else ("net",)
        try:
            for kind in kinds:
                self._fds[kind] = os.open(f"/proc/{self.pid}/ns/{kind}", os.O_RDONLY)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}
        holder, self._holder = self._holder, None
        if holder is None:
            return
        with contextlib.suppress(OSError):
            holder.stdin.close()
        try:
            holder.wait(timeout=2)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
        holder.stdout.close()
        holder.stderr.close()

    @property
    def pid(self) -> int:
        """The PID of the process holding the namespace (its `/proc/PID/ns/net`)."""
        assert self._holder is not None, "the namespace is not held"
        return self._holder.pid

    def wrap(self, command: list[str]) -> list[str]:
        """`command` run inside the namespace (`nsenter` execs it: same PID).

        `nsenter` opens the namespaces through this process's handles
        (`/proc/SELF/fd/N`), which keep them alive whatever becomes of the holder.
        """
        opened = {kind: f"/proc/{os.getpid()}/fd/{fd}" for kind, fd in self._fds.items()}
        if self._rootless:
            enter = [f"--user={opened['user']}", f"--net={opened['net']}", "--preserve-credentials"]
        else:
            enter = [f"--net={opened['net']}"]
        return ["nsenter", *enter, "--", *command]


def exposure_allowed() -> bool:
    """The user named the exposure (`--allow-network-exposure`)."""
    return os.environ.get(ALLOW_EXPOSURE_ENV) == "1"


@contextlib.contextmanager
def isolate(processes: int) -> Iterator[LoopbackNamespace | None]:
    """Holds a loopback-only namespace for a cluster of `processes` (None: none needed).

    A single process serves nobody: it runs as it is. A multi-process cluster
    gets a namespace, or runs exposed only if the user allowed it.

    Raises:
        ConfigError: no namespace can be made and the exposure was not allowed.
    """
    if processes <= 1:
        yield None
        return
    namespace = LoopbackNamespace()
    try:
        namespace.__enter__()
    except OSError as err:
        if not exposure_allowed():
            raise _refusal(err) from None
        yield None
        return
    try:
        yield namespace
    finally:
        namespace.__exit__()


def _refusal(err: OSError) -> ConfigError:
    return ConfigError(
        f"cannot give the local cluster a loopback-only network namespace ({err}); "
        "TensorFlow's servers would listen on every interface of this machine: run as "
        "root or where user namespaces are allowed, or pass --allow-network-exposure"
    )
