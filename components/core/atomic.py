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


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode())


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, payload: Any) -> None:
    write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def staged_dir(final: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary folder beside `final`; on success it replaces `final`.

    On any error the temporary folder is removed and `final` is left untouched.
    """
    final = os.path.abspath(final)
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}-", dir=parent)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if os.path.exists(final):
        shutil.rmtree(final)
    os.replace(staging, final)
