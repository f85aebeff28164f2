"""One reader for every file a user hands over (`json_input`): real files, FIFOs, the real
`strategist` entry point in a subprocess with a time limit (a hang fails the test).

Each bad file must end in exit 2 and one error line, in seconds, never a traceback or a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from components.core import json_input, run_folder
from components.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
GOOD_REPORT = {
    "winner": "mirrored",
    "results": [
        {
            "strategy": "mirrored",
            "name": "mirrored",
            "examples_per_second": 1000.0,
            "eval_accuracy": 0.95,
        }
    ],
}


def strategist(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The real command in a process of its own; a hang raises `TimeoutExpired`."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "strategist"), *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_one_line_exit_2(done: subprocess.CompletedProcess, says: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and says in lines[0], lines[0]


# Every member of the class a reader must refuse, written into a real file.
def _deep(path: Path) -> None:
    path.write_text('{"state": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _long_int(path: Path) -> None:
    path.write_text('{"state": "running", "restarts": ' + "9" * 5000 + "}")


def _nan(path: Path) -> None:
    path.write_text('{"state": "running", "restarts": NaN}')


def _huge_float(path: Path) -> None:
    path.write_text('{"state": "running", "restarts": 1e400}')


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _binary(path: Path) -> None:
    path.write_bytes(b"\xff\xfe\x00garbage")


def _array(path: Path) -> None:
    path.write_text("[1, 2]")


BAD = {
    "deep": (_deep, "nests deeper than 64 levels"),
    "long_int": (_long_int, "an integer of 5,000 digits"),
    "nan": (_nan, "NaN, which is not a JSON number"),
    "huge_float": (_huge_float, "beyond float range"),
    "fifo": (_fifo, "not a regular file"),
    "binary": (_binary, "not UTF-8"),
    "array": (_array, "not a JSON object"),
}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("record", [run_folder.STATUS_NAME, run_folder.MARKER_NAME])
def test_status_refuses_a_bad_run_folder_record_in_one_line(tmp_path, name, record):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / run_folder.MARKER_NAME).write_text('{"pid": 1}')
    (folder / run_folder.STATUS_NAME).write_text('{"state": "failed"}')
    (folder / record).unlink()
    spoil, says = BAD[name]
    spoil(folder / record)
    if record == run_folder.MARKER_NAME:
        # `train --output` reads the marker before anything starts (a FIFO hung it forever).
        done = strategist("train", "--local", "--dataset", "digits", "--output", str(folder))
    else:
        done = strategist("status", str(folder))
    assert_one_line_exit_2(done, says)


@pytest.mark.parametrize("name", ["deep", "long_int", "nan", "huge_float", "fifo", "binary"])
def test_gate_exits_2_never_1_on_a_file_it_cannot_read(tmp_path, name):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(GOOD_REPORT))
    report = tmp_path / "report.json"
    BAD[name][0](report)
    assert_one_line_exit_2(strategist("gate", str(report), "--baseline", str(baseline)), "report")


@pytest.mark.parametrize(
    "content",
    [
        {"results": "mirrored"},
        {"results": [{"strategy": ["x"], "examples_per_second": {}}]},
        {"results": [{"strategy": "mirrored", "examples_per_second": "fast"}]},
        {"results": [None]},
    ],
)
def test_gate_exits_2_on_a_report_of_the_wrong_shape(tmp_path, content):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(GOOD_REPORT))
    report = tmp_path / "report.json"
    report.write_text(json.dumps(content))
    done = strategist("gate", str(report), "--baseline", str(baseline))
    assert_one_line_exit_2(done, "")


def test_the_reader_takes_good_json_and_its_largest_numbers():
    assert json_input.parse(b'{"a": [1.5, -2, 9223372036854775807]}', "x", "y") == {
        "a": [1.5, -2, 9223372036854775807]
    }
    assert json_input.parse("[" * 64 + "]" * 64, "x", "y") is not None
    with pytest.raises(ConfigError, match="nests deeper"):
        json_input.parse("[" * 65 + "]" * 65, "x", "y")
    # Brackets inside strings are text, not nesting.
    assert json_input.parse(json.dumps({"s": "[" * 1000}), "x", "y") == {"s": "[" * 1000}


def test_another_user_cannot_hold_the_run_lock(request):
    """The lock file is 0600: only its owner opens it. Another user's process (uid 65534 by
    setpriv, as root) holding a lock on the folder itself no longer blocks the owner."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    scratch = Path(tempfile.mkdtemp(prefix="strategist-lock-"))  # pytest's tmp is 0700
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    os.chmod(scratch, 0o755)
    folder = scratch / "run"
    with run_folder.claim(str(folder), "{}", log=lambda _: None):
        pass
    assert (os.stat(folder / run_folder.LOCK_NAME).st_mode & 0o777) == 0o600
    os.chmod(folder, 0o755)
    holder = subprocess.Popen(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"d = os.open({str(folder)!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
            "fcntl.flock(d, fcntl.LOCK_EX)\n"
            "try:\n"
            f"    os.open({str(folder / run_folder.LOCK_NAME)!r}, os.O_RDONLY)\n"
            "    print('opened', flush=True)\n"
            "except PermissionError:\n"
            "    print('refused', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "refused"
        with run_folder.claim(str(folder), "{}", log=lambda _: None) as claimed:
            assert claimed == str(folder)
    finally:
        holder.kill()
        holder.wait()


def test_compare_publishes_each_file_whole_or_not_at_all(tmp_path, monkeypatch):
    """`collect_outputs` writes each file under a temporary name and renames it: a copy that
    fails half-way (here: the rename) leaves the previous comparison.json whole, no 0-byte
    file and no temporary (on main `shutil.copyfile` truncated it first)."""
    from types import SimpleNamespace

    from pipelines.cli.compare import collect_outputs

    task = tmp_path / "task"
    (task / "plots").mkdir(parents=True)
    for name in ("comparison.json", "report.html", "summary.md"):
        (task / name).write_text("new " + name)
    (task / "plots" / "throughput.png").write_bytes(b"png")
    output = tmp_path / "out"
    output.mkdir()
    (output / "comparison.json").write_text('{"old": true}')
    outputs = {
        "comparison": task / "comparison.json",
        "report": task / "report.html",
        "summary": task / "summary.md",
        "plots": task / "plots",
    }
    result = SimpleNamespace(outputs={k: SimpleNamespace(path=str(v)) for k, v in outputs.items()})

    def killed(*args):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", killed)
        with pytest.raises(OSError):
            collect_outputs(result, str(output))
    assert (output / "comparison.json").read_text() == '{"old": true}'
    assert sorted(p.name for p in output.iterdir()) == ["comparison.json"]
    assert collect_outputs(result, str(output)) == [
        "comparison.json",
        "report.html",
        "summary.md",
        "throughput.png",
    ]
    assert (output / "comparison.json").read_text() == "new comparison.json"
