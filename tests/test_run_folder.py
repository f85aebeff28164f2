"""Output folders are owned, not taken: what Strategist refuses, keeps, locks and resumes.

The fast tests drive `run_folder` and the real `strategist train` entry point on
folders that are refused before anything starts; the cluster test runs real
trainings: two at once on one folder, a SIGKILLed owner, a finished run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from components.core import run_folder
from pipelines import cli
from tests.conftest import trainer_pids
from tests.test_faults import STRATEGIST, start_streaming

REPO = Path(__file__).resolve().parents[1]


def run_cli(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exit_:
        return exit_.code


def refused(capsys, argv: list[str], message: str) -> str:
    code = run_cli(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def user_folder(tmp_path: Path) -> Path:
    """A folder of someone else's files, shaped like a run's (the probe's data-loss case)."""
    folder = tmp_path / "mine"
    (folder / "backup").mkdir(parents=True)
    (folder / "backup" / "thesis.tex").write_text("years of work\n")
    (folder / "notes").mkdir()
    (folder / "notes" / ".tmp-draft.txt").write_text("a draft\n")
    (folder / ".model-keep").mkdir()
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"/" for p in
            sorted(folder.rglob("*"))}  # fmt: skip


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("/", "is the root folder"),
        ("~", "is your home folder"),
        ("{repo}", "is Strategist's own repository"),
        ("", "--output is empty"),
        ("{user}", "holds files Strategist did not write"),
        ("{file}", "is a file: pass a folder"),
        ("/dev/null", "is not a folder"),
    ],
)
def test_train_refuses_an_output_folder_it_does_not_own(capsys, tmp_path, where, message):
    user = user_folder(tmp_path)
    before = snapshot(user)
    (tmp_path / "file.txt").write_text("x")
    output = where.format(repo=REPO, user=user, file=tmp_path / "file.txt")
    output = os.path.expanduser(output)
    refused(capsys, ["train", "--local", "--output", output, "--epochs", "1"], message)
    assert snapshot(user) == before  # nothing deleted or added
    assert not trainer_pids(str(tmp_path))


def test_compare_refuses_a_foreign_folder_too(capsys, tmp_path):
    user = user_folder(tmp_path)
    before = snapshot(user)
    refused(
        capsys,
        ["compare", "--local", "--strategies", "mirrored", "--output", str(user)],
        "holds files Strategist did not write",
    )
    assert snapshot(user) == before


@pytest.mark.parametrize("command", [["train", "--local"], ["compare", "--local"]])
def test_a_gs_output_is_refused_not_written_to_a_local_folder_named_gs(
    capsys, tmp_path, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)  # abspath used to make <cwd>/gs:/my-bucket/runs/x
    argv = [*command, "--output", "gs://my-bucket/runs/x", "--epochs", "1"]
    refused(capsys, argv, "--output gs://my-bucket/runs/x is a URI, but a local run")
    assert list(tmp_path.iterdir()) == []
    assert not trainer_pids(str(tmp_path))


def test_a_second_claim_on_a_held_folder_is_refused_naming_the_owner(tmp_path):
    out = str(tmp_path / "run")
    owner = rf"in use by .* \(PID {os.getpid()}\)"
    with (
        run_folder.claim(out, "{}", log=lambda _: None),
        pytest.raises(run_folder.ConfigError, match=owner),
        run_folder.claim(out, "{}", log=lambda _: None),
    ):
        pass
    with run_folder.claim(out, "{}", log=lambda _: None):  # released: free again
        pass


def test_a_finished_run_is_not_replaced_without_overwrite(tmp_path):
    out = tmp_path / "run"
    lines: list[str] = []
    with run_folder.claim(str(out), '{"a": 1}', log=lines.append):
        (out / "metrics.json").write_text("{}")
        (out / "model").mkdir()
        (out / "backup").mkdir()
        run_folder.write_status(str(out), "succeeded")
    (out / "my-notes.txt").write_text("kept")
    for config in ('{"a": 1}', '{"a": 2}'):  # the same run, and another configuration
        with (
            pytest.raises(run_folder.ConfigError, match="pass --overwrite to replace it"),
            run_folder.claim(str(out), config, log=lines.append),
        ):
            pass
        assert (out / "metrics.json").exists()
    with run_folder.claim(str(out), '{"a": 2}', overwrite=True, log=lines.append):
        # The old results are gone before the new run starts: a failure cannot show them.
        assert not (out / "metrics.json").exists() and not (out / "model").exists()
        assert not (out / "backup").exists() and not (out / "status.json").exists()
    assert (out / "my-notes.txt").read_text() == "kept"  # not a run's entry: untouched


def test_the_early_check_refuses_what_claim_refuses_and_only_that(tmp_path):
    """`check_reusable` runs before sharding and the model's pre-flight: it must agree with
    `claim`, or an unfinished run would no longer resume."""
    out = tmp_path / "run"
    run_folder.check_reusable(str(out), '{"a": 1}')  # no folder yet
    with run_folder.claim(str(out), '{"a": 1}', log=lambda _: None):
        run_folder.write_status(str(out), "interrupted")
    run_folder.check_reusable(str(out), '{"a": 1}')  # the same unfinished run resumes
    with pytest.raises(run_folder.ConfigError, match="holds a run of another configuration"):
        run_folder.check_reusable(str(out), '{"a": 2}')
    run_folder.write_status(str(out), "succeeded")
    with pytest.raises(run_folder.ConfigError, match=f"--output {out} holds a finished run"):
        run_folder.check_reusable(str(out), '{"a": 1}')
    run_folder.check_reusable(str(out), '{"a": 2}', overwrite=True)


def test_an_unfinished_run_resumes_without_an_older_attempts_results(tmp_path):
    out = tmp_path / "run"
    with run_folder.claim(str(out), "{}", log=print):
        (out / "backup").mkdir()
        (out / "metrics.json").write_text("{}")  # written, then the launcher died
        run_folder.write_status(str(out), "failed")
    with run_folder.claim(str(out), "{}", log=print):
        assert (out / "backup").exists()  # resumes from here
        assert not (out / "metrics.json").exists()


def test_partial_files_are_removed_only_in_the_runs_own_entries(tmp_path):
    out = tmp_path / "run"
    with run_folder.claim(str(out), "{}", log=print):
        (out / ".tmp-a.json").write_text("half")
        (out / ".model-x1").mkdir()
        (out / "backup").mkdir()
        (out / "backup" / ".tmp-b.json").write_text("half")
        (out / "data").mkdir()  # the user's, added to the run's folder
        (out / "data" / ".tmp-user.txt").write_text("mine")
        run_folder.remove_partial_files(str(out))
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert left == [
        run_folder.LOCK_NAME,
        "backup",
        "data",
        "data/.tmp-user.txt",
        run_folder.MARKER_NAME,
    ]


def test_status_of_a_killed_owner_reads_interrupted(tmp_path, capsys):
    """A run SIGKILLed while `running`: the lock is free, so the status is not believed."""
    out = tmp_path / "run"
    code = (
        "import sys, time; from components.core import run_folder\n"
        f"with run_folder.claim({str(out)!r}, '{{}}'):\n"
        f"    run_folder.write_status({str(out)!r}, 'running', restarts=0)\n"
        "    print('held', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [os.sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run_folder.read_status(str(out))["state"] == "running"  # its owner lives
        holder.kill()
        holder.wait()
    finally:
        if holder.poll() is None:
            holder.kill()
    assert run_folder.read_status(str(out))["state"] == "interrupted"
    assert run_cli(["status", str(out)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "interrupted" and shown["owner_died"] is True
    lines: list[str] = []
    with run_folder.claim(str(out), "{}", log=lines.append):
        assert json.loads((out / "status.json").read_text())["state"] == "interrupted"
    assert "was killed while running" in lines[0]


@pytest.mark.cluster
def test_two_runs_one_folder_a_killed_owner_and_a_finished_run(digits_shards, tmp_path):
    """Real runs: the second is refused naming the first's PID; after the first is
    SIGKILLed the folder is free, says interrupted, and the next run resumes; the
    finished run is then refused, and replaced with --overwrite."""
    out = tmp_path / "run"
    command = [
        str(STRATEGIST), "train", "--local", "--strategy", "multi_worker_mirrored",
        "--epochs", "12", "--shards-dir", digits_shards, "--output", str(out),
    ]  # fmt: skip
    first, events, reader = start_streaming(command, start_new_session=True)
    try:
        events.wait_for(r"\] epoch 1/12")
        second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert f"in use by another Strategist run (PID {first.pid})" in second.stderr
        first.send_signal(signal.SIGKILL)  # the launcher alone: no handler runs
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    reader.join(timeout=10)
    deadline = time.monotonic() + 10
    while trainer_pids(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not trainer_pids(str(out))
    assert run_folder.read_status(str(out))["state"] == "interrupted"

    third = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stdout[-2000:] + third.stderr[-2000:]
    assert "was killed while running; status.json now says interrupted" in third.stdout
    assert "resuming the interrupted run" in third.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["eval_accuracy"] >= 0.85

    fourth = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert fourth.returncode == 2 and "holds a finished run" in fourth.stderr, fourth.stderr
    assert json.loads((out / "metrics.json").read_text()) == metrics  # not retrained
