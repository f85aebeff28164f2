"""Atomic writes: a reader sees the old artifact or the whole new one, never half.

Files are written to a temporary name in the same folder and renamed over the
target; folders are built beside their final place and renamed into it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode())


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with staged_file(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


@contextlib.contextmanager
def staged_file(final: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary file path beside `final`; on success it is renamed over `final`.

    For writers that take a path (a compiler, a library's `save`): the temporary
    name keeps `final`'s suffix. On any error it is removed and `final` is left
    untouched.
    """
    final = os.path.abspath(final)
    directory = os.path.dirname(final)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=Path(final).suffix, dir=directory)
    os.close(fd)
    try:
        yield tmp
        # mkstemp makes the file private (0600); give it the mode open() would have.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def strict_json(payload: Any) -> str:
    """`payload` as indented, key-sorted JSON text with no NaN or infinity: every record
    Strategist writes goes through here.

    Raises:
        ValueError: `payload` holds a non-finite float (strict JSON has no token for it).
    """
    return json.dumps(payload, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike, payload: Any) -> None:
    """Writes `payload` as `strict_json` text, atomically."""
    write_text(path, strict_json(payload))


@contextlib.contextmanager
def staged_dir(final: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary folder beside `final`; on success it replaces `final`.

    An existing `final` is renamed aside, the new folder renamed into its place,
    and only then is the old one deleted: at every moment one complete folder
    exists (the old one, under its aside name for the instant between the two
    renames, or the new one). On any error the temporary folder is removed and
    `final` is left untouched.
    """
    final = os.path.abspath(final)
    parent = os.path.dirname(final)
    name = os.path.basename(final)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{name}-", dir=parent)
    try:
        yield staging
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private (0700), unlike mkdir
        if not os.path.lexists(final):
            os.replace(staging, final)
            return
        # An empty folder reserves the aside name; renaming a folder onto it replaces it.
        retired = tempfile.mkdtemp(prefix=f".{name}-old-", dir=parent)
        try:
            os.replace(final, retired)
        except BaseException:
            os.rmdir(retired)
            raise
        try:
            os.replace(staging, final)
        except BaseException:
            os.replace(retired, final)  # the old folder goes back
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(retired, ignore_errors=True)
