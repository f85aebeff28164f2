"""An output folder a run owns: created by Strategist or marked as its own, one run at a time.

Strategist writes only into a folder that is new, empty, or carries its run
marker (`strategist-run.json`: the run's id, its configuration's digest and
the PID of the run that holds it). Anything else (a folder of someone else's
files, `/`, the home folder, the repository, a file) is refused before
anything starts. While a run writes, it holds an exclusive `flock` on the
folder itself: a second run on the same folder is refused naming the first's
PID, and a killed run leaves no stale lock, since the kernel drops the lock
with the process (https://man7.org/linux/man-pages/man2/flock.2.html).

`status.json` says what the folder's run is doing. A status that says
`running` while nobody holds the lock belongs to a run that was killed
(SIGKILL runs no handler): `read_status` reports it as `interrupted`, and the
next run rewrites it so.

A finished run is not trained again unless asked (`overwrite`); an unfinished
one (interrupted, failed) of the same configuration resumes. Replacing a run
removes only the entries a run writes (`RUN_ENTRIES`), never other files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from components.core import atomic, json_input, storage
from components.core.errors import ConfigError

MARKER_NAME = "strategist-run.json"
STATUS_NAME = "status.json"
# The file a run holds its `flock` on: created 0600 and opened without following a link,
# so only its owner (or root) can open it, and another user cannot hold the lock.
LOCK_NAME = ".strategist-lock"
# Space a run holds back in its folder while it runs, given up to write its final status on
# a full disk (a temporary file and its rename take a block or two).
RESERVE_NAME = ".strategist-reserve"
RESERVE_BYTES = 256 * 1024
# What a training run writes at the top of its output folder: all a replaced
# run's cleanup may remove (components/core/training.py, sidecar.py, launch/local.py).
FINAL_ENTRIES = ("metrics.json", "model", "config.json", "evaluation.html", "tasks")
RUN_ENTRIES = (
    *FINAL_ENTRIES,
    STATUS_NAME,
    "backup",
    "tensorboard",
    "_scratch",
    "evaluator",
    "checkpoints",
)
# Where submission stages a model module file before any replica runs (beside the
# job's outputs): a folder holding only it is still new.
STAGED_MODULE_DIR = "model_module"
# Names `atomic` gives files and folders while it writes them (`.tmp-x`, `.model-x`).
_PARTIAL = re.compile(r"^\.(tmp-|model-)")


def config_digest(config_json: str) -> str:
    """The SHA-256 of a run's configuration JSON: which run a folder holds."""
    return hashlib.sha256(config_json.encode()).hexdigest()


def check_destination(path: str, flag: str = "--output") -> str:
    """Refuses an output folder Strategist may not write into; returns its absolute path.

    Nothing is created. A folder is acceptable when it does not exist yet, is
    empty, or carries Strategist's run marker; a URI (`gs://...`) never is, as
    the run marker, lock and atomic renames need a local file system.

    Raises:
        ConfigError: naming the folder and what to pass instead.
    """
    if not path or not path.strip():
        raise ConfigError(f"{flag} is empty: pass a folder for the run, e.g. runs/my-run")
    if storage.is_uri(path):  # abspath would turn gs://b/x into a local folder named `gs:`
        raise ConfigError(
            f"{flag} {path} is a URI, but a local run writes a local folder: pass one "
            "(e.g. runs/my-run) and copy it up afterwards (gcloud storage cp -r), or "
            "train in the cloud (train --target vertex)"
        )
    real = os.path.realpath(path)
    for protected, what in _protected_folders():
        if real == protected:
            raise ConfigError(
                f"{flag} {path} is {what}: Strategist never writes there; pass a new "
                "folder, e.g. runs/my-run"
            )
    if os.path.lexists(path) and not os.path.isdir(path):
        what = "a file" if os.path.isfile(path) else "not a folder"
        raise ConfigError(f"{flag} {path} is {what}: pass a folder (a new one, or a run's)")
    if os.path.isdir(path) and not _owned(path):
        raise ConfigError(
            f"{flag} {path} holds files Strategist did not write (no {MARKER_NAME}): pass "
            "a new or empty folder; Strategist never writes into someone else's folder"
        )
    if os.path.isdir(path) and _locked_by_someone(path):
        raise _in_use(path)
    return os.path.abspath(path)


def _in_use(path: str) -> ConfigError:
    try:
        owner = (read_marker(path) or {}).get("pid", "unknown")
    except ConfigError:
        owner = "unknown"
    return ConfigError(
        f"--output {path} is in use by another Strategist run (PID {owner}): wait for it "
        "to finish, or pass another --output"
    )


def _protected_folders() -> list[tuple[str, str]]:
    repo = Path(__file__).resolve().parents[2]
    folders = [("/", "the root folder"), (str(repo), "Strategist's own repository")]
    home = os.path.expanduser("~")
    if home and home != "~":
        folders.append((os.path.realpath(home), "your home folder"))
    return folders


def _owned(path: str) -> bool:
    try:
        entries = os.listdir(path)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}; pass a readable folder") from None
    return not set(entries) - {STAGED_MODULE_DIR, LOCK_NAME} or MARKER_NAME in entries


def _read_record(path: str, name: str) -> dict[str, Any] | None:
    """A run folder's JSON record `name`, or None where there is none.

    Raises:
        ConfigError: it is there but unreadable (a FIFO, too large, not JSON,
            nested too deeply): one line saying to remove it.
    """
    where = os.path.join(path, name)
    try:
        record = json_input.load(
            where,
            where,
            "remove it (or pass another --output): Strategist writes it as a small JSON object",
        )
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not isinstance(record, dict):
        raise ConfigError(f"{where} is not a JSON object; remove it, or pass another --output")
    return record


def read_marker(path: str) -> dict[str, Any] | None:
    """The run marker of `path`, or None where there is none.

    Raises:
        ConfigError: it is there but unreadable.
    """
    return _read_record(path, MARKER_NAME)


def read_status(path: str, *, lock_held_here: bool = False) -> dict[str, Any] | None:
    """`status.json` of `path`, told truthfully.

    A `running` status of a folder whose lock nobody holds is a run that was
    killed without a chance to say so: it is returned as `interrupted`.

    Args:
        path: the run's folder.
        lock_held_here: this process holds the folder's lock (so no other run does).
    """
    status = _read_record(path, STATUS_NAME)
    if status is None:
        return None
    if status.get("state") == "running" and (lock_held_here or not _locked_by_someone(path)):
        status = {**status, "state": "interrupted", "owner_died": True}
    return status


def write_status(path: str, state: str, **extra: Any) -> None:
    """Writes `status.json` (atomically, a local folder or a bucket): `state` and `extra`.

    On a full disk the run's reserve (`claim`) is given up and the write tried again, so a
    run that the full disk stopped still says it failed.

    Raises:
        OSError: it cannot be written (a full disk without a reserve left, among others).
    """
    target, status = storage.join(path, STATUS_NAME), {"state": state, **extra}
    try:
        storage.write_json(target, status)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT) or not _release_reserve(path):
            raise
        storage.write_json(target, status)


def _hold_reserve(path: str) -> None:
    """Allocates the run's reserve (`RESERVE_NAME`) in `path`; a disk too full for it runs on
    without one."""
    try:
        fd = os.open(
            os.path.join(path, RESERVE_NAME),
            os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
    except OSError:
        return
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)  # real blocks, not a sparse file
    except OSError:
        _release_reserve(path)
    finally:
        os.close(fd)


def _release_reserve(path: str) -> bool:
    """Frees the run's reserve; whether there was one to free."""
    try:
        os.unlink(os.path.join(path, RESERVE_NAME))
    except OSError:
        return False
    return True


def _open_lock(path: str, create: bool) -> int:
    """A descriptor on the folder's lock file (`LOCK_NAME`), created 0600 when `create`.

    Raises:
        OSError: it cannot be opened (absent and not `create`, or a link, or another's).
    """
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    return os.open(os.path.join(path, LOCK_NAME), flags | (os.O_CREAT if create else 0), 0o600)


def _locked_by_someone(path: str) -> bool:
    try:
        fd = _open_lock(path, create=False)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock taken just now
    return False


@contextlib.contextmanager
def claim(
    path: str,
    config_json: str,
    *,
    overwrite: bool = False,
    entries: tuple[str, ...] = RUN_ENTRIES,
    stale: tuple[str, ...] = FINAL_ENTRIES,
    log: Callable[[str], None] = print,
) -> Iterator[str]:
    """Holds `path` for one run of `config_json`; yields its absolute path.

    Creates the folder (or takes an empty one), locks it, and decides from
    its marker and status: a new folder or the same unfinished run goes on
    (the run resumes from its backup); a finished run, or a run of another
    configuration, is refused unless `overwrite`, which first removes the
    entries a run writes. Final artifacts left by an unfinished attempt
    (`metrics.json`, `model/`) are removed, so a failed run never shows an
    older run's results. While the run holds the folder, `RESERVE_BYTES` of it
    are held back (`RESERVE_NAME`) for its final status on a full disk
    (`write_status`).

    Args:
        path: the output folder.
        config_json: the run's configuration: which run the folder holds.
        overwrite: replace a finished run or a run of another configuration.
        entries: what a run writes in the folder (removed when it is replaced).
        stale: what an unfinished run's re-run removes first.
        log: where the decision is said.

    Raises:
        ConfigError: a folder Strategist may not write into, one another run
            holds (naming its PID), a finished or different run without
            `overwrite`, or a folder that cannot be written.
    """
    path = check_destination(path)
    try:
        os.makedirs(path, exist_ok=True)
        fd = _open_lock(path, create=True)
    except OSError as err:
        raise ConfigError(
            f"cannot create --output {path}: {err.strerror}; pass a writable folder"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(path) from None
        _take_over(path, config_digest(config_json), overwrite, entries, stale, log)
        _hold_reserve(path)
        try:
            yield path
        finally:
            _release_reserve(path)
    finally:
        os.close(fd)  # releases the lock


def _take_over(
    path: str,
    digest: str,
    overwrite: bool,
    entries: tuple[str, ...],
    stale: tuple[str, ...],
    log: Callable[[str], None],
) -> None:
    marker = read_marker(path)
    status = read_status(path, lock_held_here=True) or {}
    state = status.get("state")
    if marker is not None and status.get("owner_died"):
        log(
            f"[launcher] the run in {path} (PID {marker.get('pid', 'unknown')}) was killed "
            "while running; status.json now says interrupted"
        )
        write_status(path, "interrupted", restarts=status.get("restarts", 0))
    if marker is not None:
        other = marker.get("config_sha256") != digest
        if not overwrite:
            _refuse_to_replace(path, other, state)
        if other or state == "succeeded":
            log(f"[launcher] --overwrite: replacing the run in {path}")
            remove_entries(path, entries)
        else:
            remove_entries(path, stale)  # an unfinished attempt's, if any
    try:
        atomic.write_json(
            os.path.join(path, MARKER_NAME),
            {
                "run_id": (marker or {}).get("run_id") or uuid.uuid4().hex,
                "config_sha256": digest,
                "pid": os.getpid(),
            },
        )
    except OSError as err:
        raise ConfigError(
            f"cannot write into --output {path}: {err.strerror}; pass a writable folder"
        ) from None


def check_reusable(path: str, config_json: str, *, overwrite: bool = False) -> None:
    """Refuses, before any long work, a folder whose run `claim` would refuse to replace.

    Sharding, record checks and the model's pre-flight take seconds to
    minutes; a folder that holds a finished run or a run of another
    configuration is refused first, with the words `claim` uses.

    Raises:
        ConfigError: a finished run, or a run of another configuration,
            without `overwrite`.
    """
    path = os.path.abspath(path)
    if overwrite or not os.path.isdir(path):
        return
    marker = read_marker(path)
    if marker is not None:
        state = (read_status(path) or {}).get("state")
        _refuse_to_replace(path, marker.get("config_sha256") != config_digest(config_json), state)


def _refuse_to_replace(path: str, other: bool, state: str | None) -> None:
    if other or state == "succeeded":
        what = "a run of another configuration" if other else "a finished run"
        raise ConfigError(
            f"--output {path} holds {what}: pass --overwrite to replace it, or another --output"
        )


def remove_entries(path: str, names: tuple[str, ...]) -> None:
    """Removes the named entries of `path` (files or folders) that exist."""
    for name in names:
        entry = os.path.join(path, name)
        if os.path.isdir(entry) and not os.path.islink(entry):
            shutil.rmtree(entry)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(entry)


def remove_partial_files(path: str) -> None:
    """Removes what a killed task was writing (atomic temporaries) in the run's own entries.

    Looks at the top of `path` and inside the folders a run writes
    (`RUN_ENTRIES`), nowhere else: files of the same names elsewhere are not
    the run's. Only local disks have such temporaries: an object in a bucket
    appears whole or not at all.
    """
    path = storage.local_view(path)
    if storage.is_remote(path):
        return
    _remove_partial_in(path)
    for name in RUN_ENTRIES:
        entry = os.path.join(path, name)
        if os.path.isdir(entry) and not os.path.islink(entry):
            for root, dirs, _ in os.walk(entry):
                _remove_partial_in(root)
                dirs[:] = [d for d in dirs if not _PARTIAL.match(d)]


def _remove_partial_in(folder: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(folder):
            if not _PARTIAL.match(name):
                continue
            entry = os.path.join(folder, name)
            if os.path.isdir(entry) and not os.path.islink(entry):
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(entry)
