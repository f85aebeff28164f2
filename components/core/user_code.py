"""A user's module (`--model-module`, `--dataset-module`) is first run in a child process.

The command's own process never imports it first: the child imports it (and,
for a model with its data, builds it and runs one batch, `model_preflight.preflight`)
under a time limit, and reports back on a pipe. Any other way the child ends is
the module's doing and is refused in one line (exit 2) naming the module's file
and line where it can be known:

- `sys.exit(N)`, `KeyboardInterrupt`, `GeneratorExit` or any `BaseException`
  raised by the module: caught in the child, with the module's frame;
- `os._exit(N)` or a signal (the module killed its own process): the exit code
  or the signal, and the phase (import, build) it was in;
- no answer within the time limit (`STRATEGIST_MODULE_CHECK_TIMEOUT_S`, default
  600 s): the child and everything it started are killed;
- a non-daemon thread the module started and left running (a process holding
  one never exits): its name and the function's file and line.

Every process the child started, even one detached with `setsid`, carries the
check's marker in its environment and is killed when the check ends
(`reaper.kill_marked`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from typing import Any

from components.core.errors import ConfigError

TIMEOUT_ENV = "STRATEGIST_MODULE_CHECK_TIMEOUT_S"
_DEFAULT_TIMEOUT_S = 600.0
_MARKER_ENV = "STRATEGIST_MODULE_CHECK"
_CODE_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The child: isolated (no working directory or PYTHONPATH on its path), Strategist's
# code root first, then the work; the answer goes to the inherited descriptor argv[2].
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from components.core import user_code; user_code.child_main()"
)


def _timeout_s() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV, _DEFAULT_TIMEOUT_S))
    except ValueError:
        return _DEFAULT_TIMEOUT_S


def check(kind: str, source: str, config_json: str | None = None) -> dict[str, Any]:
    """Runs the check of `source` in a child process; returns what it found.

    Args:
        kind: `model` (import; with `config_json` also build and run one batch)
            or `dataset` (import, registering its TFDS builders).
        source: the module's file or name, as the flag gave it.
        config_json: the run's configuration, for a model's pre-flight on its data.

    Returns:
        `{"name": ...}` for a model module (plus `"seconds"` of a pre-flight).

    Raises:
        ConfigError: the module failed, or ended the child any other way.
    """
    flag = "--model-module" if kind == "model" else "--dataset-module"
    read_end, write_end = os.pipe()
    marker = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    env = {**os.environ, _MARKER_ENV: marker, "TF_USE_LEGACY_KERAS": "1"}
    request = json.dumps({"kind": kind, "source": source, "config": config_json})
    timeout_s = _timeout_s()
    # Output to a file, the answer on a pipe read without blocking: a process the module
    # detached may hold both open; the check never waits on it.
    with tempfile.TemporaryFile() as output_file:
        try:
            child = subprocess.Popen(
                [sys.executable, "-I", "-c", _CHILD, _CODE_ROOT, str(write_end)],
                stdin=subprocess.PIPE,
                stdout=output_file,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(write_end,),
                start_new_session=True,  # its group is killed whole on a timeout
            )
        finally:
            os.close(write_end)
        try:
            with contextlib.suppress(BrokenPipeError):
                child.stdin.write(request.encode())
                child.stdin.close()
            try:
                child.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                timed_out = True
        finally:
            from components.core.launch import reaper

            reaper.kill_marked(f"{_MARKER_ENV}={marker}")
    answer = _read_available(read_end)
    result = _parse(answer)
    if result is not None and "error" in result:
        raise ConfigError(f"{flag} {source}: {result['error']}")
    if timed_out:
        raise ConfigError(
            f"{flag} {source}: no answer within {timeout_s:g} s while importing and building "
            f"it ({_phase(result)}): the module hangs (a loop, a blocking call at import, a "
            "stuck download); fix it, or raise the limit with "
            f"{TIMEOUT_ENV}=SECONDS"
        )
    if result is not None and result.get("done"):
        return result
    code = child.returncode
    how = (
        f"was killed by signal {signal.Signals(-code).name}"
        if code < 0 and -code in signal.valid_signals()
        else f"exited with code {code}"
    )
    raise ConfigError(
        f"{flag} {source}: the process checking it {how} during {_phase(result)} (os._exit, "
        "a signal or a crash in the module's code, never raised as an error)"
    )


def _read_available(fd: int) -> bytes:
    """What the pipe holds now, without waiting for writers that may never close it."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def _parse(answer: bytes) -> dict[str, Any] | None:
    """The child's last report (one JSON object per line: phases, then the end)."""
    lines = [line for line in answer.decode(errors="replace").splitlines() if line.strip()]
    merged: dict[str, Any] = {}
    for line in lines:
        try:
            merged.update(json.loads(line))
        except ValueError:
            continue
    return merged or None


def _phase(result: dict[str, Any] | None) -> str:
    return (result or {}).get("phase", "its start")


# -- the child ------------------------------------------------------------------------


def child_main() -> None:
    """The child's work: the request on stdin, reports on the descriptor in argv[2]."""
    out = os.fdopen(int(sys.argv[2]), "w", buffering=1)

    def report(**fields: Any) -> None:
        out.write(json.dumps(fields) + "\n")
        out.flush()

    request = json.loads(sys.stdin.read())
    source = request["source"]
    result: dict[str, Any] = {}
    try:
        report(phase=f"the import of {source}")
        if request["kind"] == "dataset":
            from components.core import tfds_source

            tfds_source.import_dataset_module(source)
        else:
            from components.core import model_module

            module = model_module.load(source)
            result["name"] = module.name
            if request["config"]:
                report(phase=f"the build and first batch of {source}")
                from components.core import datasets, model_preflight
                from components.core.config import RunConfig

                config = RunConfig.from_json(request["config"])
                manifest = datasets.load_manifest(config.data.shards_dir)
                result["seconds"] = model_preflight.preflight(config, manifest)
        stray = _stray_threads()
        if stray:
            report(
                error=f"it leaves a running thread ({stray}) that is not a daemon: a process "
                "holding one never exits; make it a daemon (daemon=True) or join it"
            )
        else:
            report(done=True, **result)
    except ConfigError as err:
        # The parent names the flag and file once: a message that already does is not doubled.
        flag = "--model-module" if request["kind"] == "model" else "--dataset-module"
        report(error=str(err).removeprefix(f"{flag} {source}: "))
    except BaseException as err:  # noqa: BLE001 - sys.exit, KeyboardInterrupt...: the module's
        from components.core.model_module import user_error

        where = _file_of(source) if request["kind"] == "dataset" else _model_file(source)
        report(error=f"it raised {user_error(err, where)}, which ends a process")
    out.close()
    os._exit(0)  # no interpreter exit: a stray thread would hold it forever


def _file_of(source: str) -> str | None:
    return os.path.abspath(source) if source.endswith(".py") or "/" in source else None


def _model_file(source: str) -> str | None:
    from components.core import storage

    local = storage.local_view(source)
    return os.path.abspath(local) if _file_of(source) else None


def _stray_threads() -> str:
    """The non-daemon threads still running, each with its function's file and line."""
    import threading

    found = []
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon or not thread.is_alive():
            continue
        target = getattr(thread, "_target", None) or type(thread).run
        code = getattr(target, "__code__", None)
        place = f" at {code.co_filename}:{code.co_firstlineno}" if code else ""
        found.append(f"{thread.name!r}{place}")
    return ", ".join(found)
