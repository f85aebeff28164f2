"""Folders published whole: a reader that finds the commit file finds every file of the tree."""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator

from components.core import atomic, storage

# Written last into a published folder that has no commit file of its own.
TREE_MARKER = "_STRATEGIST_COMPLETE.json"


@contextlib.contextmanager
def staged_tree(final: str | os.PathLike, commit_file: str = TREE_MARKER) -> Iterator[str]:
    """A local folder to write a whole tree into; on success it is published at `final`.

    A reader that finds `final/commit_file` finds the whole tree:

    - local: the folder is built beside `final` and renamed into its place
      (`atomic.staged_dir`);
    - `gs://` and `/gcs/` (gcsfuse refuses folder renames): it is built in a
      local temporary folder, the old tree's commit file is removed first, then
      the old tree, then every file is uploaded and `commit_file` goes last.

    When the writer leaves no `commit_file` in the folder, a marker listing
    every file and its size is written as it.

    Args:
        final: where the tree goes.
        commit_file: the file, relative to the tree, whose presence means
            complete (`manifest.json` for shards; the default marker otherwise).
    """
    text = os.fspath(final)
    if not storage.is_object_store(text):
        with atomic.staged_dir(storage.local_view(text)) as staging:
            yield staging
            _ensure_commit_file(staging, commit_file)
        return
    with tempfile.TemporaryDirectory(prefix="strategist-tree-") as staging:
        yield staging
        _ensure_commit_file(staging, commit_file)
        publish_tree(staging, text, commit_file)


def _ensure_commit_file(folder: str, commit_file: str) -> None:
    marker = os.path.join(folder, commit_file)
    if os.path.exists(marker):
        return
    files = {
        relative: os.path.getsize(os.path.join(folder, relative)) for relative in _files(folder)
    }
    atomic.write_json(marker, {"files": files})


def _files(folder: str) -> list[str]:
    """Relative paths of every file below a local folder, sorted."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            found.append(os.path.relpath(os.path.join(root, name), folder))
    return sorted(found)


def publish_tree(local_dir: str, final: str, commit_file: str = TREE_MARKER) -> None:
    """Uploads a local folder to `final` file by file, `commit_file` last; no folder rename.

    The old tree's commit file is removed before anything else, so a reader
    never takes a mix of old and new files for a complete tree.
    """
    files = [f for f in _files(local_dir) if f != commit_file]
    if commit_file not in _files(local_dir):
        raise FileNotFoundError(f"{local_dir} has no {commit_file} to publish last")
    target = storage.join(final, commit_file)
    if storage.exists(target):
        storage.remove_file(target)
    storage.remove_tree(final)
    for relative in [*files, commit_file]:
        source = os.path.join(local_dir, relative)
        destination = storage.join(final, *relative.split(os.sep))
        key = storage.object_key(destination)
        if key is None:
            local = storage.local_view(destination)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            # A file rename (not a folder's): gcsfuse allows it.
            with atomic.staged_file(local) as tmp:
                shutil.copyfile(source, tmp)
        else:
            storage.filesystem().put_file(source, key)


def is_complete(folder: str | os.PathLike, commit_file: str = TREE_MARKER) -> bool:
    """True when a tree published by `staged_tree` is whole (its commit file exists)."""
    return storage.exists(storage.join(folder, commit_file))


def download_tree(source: str | os.PathLike, destination: str) -> None:
    """Copies a folder (local, `/gcs/` or `gs://`) to a local folder, replacing it."""
    text = os.fspath(source)
    shutil.rmtree(destination, ignore_errors=True)
    key = storage.object_key(text)
    if key is None:
        shutil.copytree(storage.local_view(text), destination)
        return
    fs = storage.filesystem()
    for remote in fs.find(key):
        relative = posixpath.relpath(remote, key)
        local = os.path.join(destination, *relative.split("/"))
        os.makedirs(os.path.dirname(local), exist_ok=True)
        fs.get_file(remote, local)
