"""The user's module runs in a child process, never the command's (`components/core/user_code.py`):
real `strategist train` commands with modules that end their process in every way a process
ends, each refused in one line (exit 2) with the module's file (and line where Python knows it),
and no process of theirs left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.test_model_module import GOOD_MODEL

STRATEGIST = str(Path(sys.executable).parent / "strategist")


def with_line(code: str, at: str = "top") -> str:
    """GOOD_MODEL with `code` at the top (line 3) or as build_model's first line."""
    if at == "top":
        return GOOD_MODEL.replace(
            "import tf_keras as keras\n", f"import tf_keras as keras\n{code}\n"
        )
    return GOOD_MODEL.replace("def build_model(spec):\n", f"def build_model(spec):\n    {code}\n")


CASES = {
    # A CI job read exit 0 and "nothing trained" as success.
    "sys_exit_0": (with_line("import sys; sys.exit(0)"), "SystemExit: 0", ":3:"),
    "os_exit_0": (with_line("import os; os._exit(0)"), "exited with code 0 during the import", ""),
    "sigkill_self": (
        with_line("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),
        "killed by signal SIGKILL during the import",
        "",
    ),
    "keyboard_interrupt": (with_line("raise KeyboardInterrupt"), "KeyboardInterrupt", ":3:"),
    "generator_exit": (with_line("raise GeneratorExit('x')"), "GeneratorExit: x", ":3:"),
    "base_exception": (
        with_line("class Odd(BaseException): pass\nraise Odd('odd')"),
        "Odd: odd",
        ":4:",
    ),
    "exit_3_in_build": (with_line("raise SystemExit(3)", at="build"), "SystemExit: 3", ":5:"),
    "stray_thread": (
        with_line(
            "import threading, time; threading.Thread(target=time.sleep, args=(3600,)).start()"
        ),
        "leaves a running thread",
        "",
    ),
}


def train(module: Path, out: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [STRATEGIST, "train", "--local", "--dataset", "digits", "--strategy", "one_device",
         "--epochs", "1", "--model-module", str(module), "--output", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.mark.parametrize(
    "name",
    # `make test-heavy`: a BaseException that is neither SystemExit nor KeyboardInterrupt
    # is base_exception's case in `make test`.
    [
        pytest.param(n, marks=pytest.mark.heavy) if n == "generator_exit" else n
        for n in sorted(CASES)
    ],
)
def test_a_module_that_ends_its_process_is_refused_in_one_line(tmp_path, name):
    text, says, line = CASES[name]
    module = tmp_path / f"{name}.py"
    module.write_text(text)
    done = train(module, tmp_path / "run")
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(module) in lines[0] and says in lines[0], lines[0]
    assert f"{module}{line}" in lines[0] if line else True
    assert not (tmp_path / "run" / "status.json").exists()  # nothing started


def test_a_module_that_hangs_at_import_is_stopped_at_the_time_limit(tmp_path):
    module = tmp_path / "hang.py"
    module.write_text(with_line("import time; time.sleep(3600)"))
    done = train(module, tmp_path / "run", env={"STRATEGIST_MODULE_CHECK_TIMEOUT_S": "15"})
    assert done.returncode == 2 and "no answer within 15 s" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _processes_with(token: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def test_a_process_a_module_detaches_is_gone_after_train(tmp_path):
    """The module starts `setsid sleep` at import (in the check, then in the trainer): both
    escape every process group, and both are gone when `train` ends."""
    token = f"{uuid.uuid4().int % 10**6 + 10**6}"
    module = tmp_path / "detach.py"
    module.write_text(
        with_line(f"import subprocess; subprocess.Popen(['setsid', 'sleep', '{token}'])")
    )
    done = train(module, tmp_path / "run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _processes_with(f"sleep\0{token}") == []


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
        ("import os\nos._exit(1)\n", "exited with code 1"),
    ],
)
def test_a_dataset_module_that_ends_its_process_is_refused_in_one_line(tmp_path, code, says):
    module = tmp_path / "my_dataset.py"
    module.write_text(code)
    done = subprocess.run(
        [STRATEGIST, "train", "--local", "--dataset", "my_dataset", "--dataset-module",
         str(module), "--output", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(module) in lines[0] and says in lines[0], done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_during_the_module_check_stops_it_and_says_nothing_started(tmp_path, sig):
    """Ctrl-C or SIGTERM while the child checks a hanging module: exit 130/143 in seconds, the
    child and its group gone, and no claim of kept epochs (on main: "Finished epochs are kept
    in OUT/backup" for a run that never started)."""
    module = tmp_path / "hang.py"
    module.write_text(with_line("import time; time.sleep(3600)"))
    command = subprocess.Popen(
        [STRATEGIST, "train", "--local", "--dataset", "digits", "--strategy", "one_device",
         "--model-module", str(module), "--output", str(tmp_path / "run")],
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 300
    # The check's child names this code root on its command line (other checkouts' do not).
    child = "user_code.child_main()\0" + str(Path(__file__).resolve().parents[1])
    while not _processes_with(child) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # the child is importing the module, which sleeps
    command.send_signal(sig)
    _, err = command.communicate(timeout=60)
    assert command.returncode == 128 + sig, err[-2000:]
    assert "No training had started" in err and "Finished epochs" not in err, err
    time.sleep(1)
    assert _processes_with(child) == []
