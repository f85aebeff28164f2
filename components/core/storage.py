"""Where bytes live: one small API for local paths, `/gcs/` paths and `gs://` URIs.

Every path a user gives Strategist (shards, manifest, metrics, status, backup,
model export, promotion pointer, report) is read and written through this
module, so `--output gs://bucket/run` works wherever a local folder does.

Three kinds of path:

- a local path: plain `os` calls; single files are written atomically by
  `atomic.staged_file` (temporary file, then rename) and folders by
  `atomic.staged_dir` (built beside their place, renamed in).
- a `gs://` URI: Cloud Storage through fsspec's `gcsfs` (its plain
  `gcsfs.core.GCSFileSystem`, JSON API only; the package's default class adds
  gRPC control-plane calls for zonal/HNS buckets that Strategist needs none of).
  An object upload becomes visible whole when it finishes, so a single object
  is written directly; a folder is uploaded file by file with its commit file
  (a manifest or an export marker) written last, never renamed.
- a `/gcs/` path: Vertex AI's gcsfuse mount of the same objects. File reads,
  writes and file renames work there; folder renames are refused by default
  (https://cloud.google.com/storage/docs/cloud-storage-fuse/semantics), so
  folders are published as on `gs://`: file by file, commit file last.

Why fsspec/gcsfs rather than `tf.io.gfile`: most readers and writers here run
without TensorFlow (the launcher, the KFP components, the CLI) and importing it
costs seconds; gcsfs honours `STORAGE_EMULATOR_HOST`, so the code is tested
against a real local Cloud Storage emulator. `tf.io.gfile` is used nowhere:
TensorFlow opens only its own paths (TFRecord files as training reads them, checkpoints,
SavedModel, TensorBoard logs) with its built-in GCS filesystem, and those paths go through
`local_view` first (tests/tensorflow_gcs_check.py runs that filesystem against
the same emulator).

Rehearsal: with `STRATEGIST_GCS_LOCAL_ROOT=/some/dir` set, `gs://BUCKET/a/b`
(and its gcsfuse form `/gcs/BUCKET/a/b`) is served from `/some/dir/BUCKET/a/b`,
and `local_view` gives TensorFlow that local path, so a cloud job's own
arguments run on a laptop with no bucket and no credentials. Folders of such a
path are still published file by file, commit file last, as in the cloud.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import shutil
import stat
import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO

from components.core import atomic
from components.core.storage_paths import GCSFUSE_PREFIX, GS_PREFIX

LOCAL_ROOT_ENV = "STRATEGIST_GCS_LOCAL_ROOT"
# gcsfs reads this too (as google-cloud-storage does): a Cloud Storage emulator's address.
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
# What `open_bytes` fetches of a `gs://` object at a time.
_READ_AHEAD_BYTES = 8 << 20


def is_gs(path: str | os.PathLike) -> bool:
    """True for a `gs://` URI (whether or not a rehearsal maps it to a local folder)."""
    return os.fspath(path).startswith(GS_PREFIX)


def is_object_store(path: str | os.PathLike) -> bool:
    """True where folders cannot be renamed: `gs://` URIs and gcsfuse `/gcs/` paths."""
    text = os.fspath(path)
    return is_gs(text) or text.startswith(GCSFUSE_PREFIX)


def is_uri(path: str | os.PathLike) -> bool:
    """True for a URI of any scheme (`gs://`, `s3://`): no local path."""
    return "://" in os.fspath(path)


def absolute(path: str) -> str:
    """A local path made absolute; a URI (`gs://...`) as it is (abspath would make `<cwd>/gs:/`)."""
    return path if is_uri(path) else os.path.abspath(path)


def local_view(path: str | os.PathLike) -> str:
    """The path TensorFlow should open for `path`.

    Under a rehearsal (`STRATEGIST_GCS_LOCAL_ROOT` set) a `gs://BUCKET/x` URI or
    its gcsfuse form `/gcs/BUCKET/x` becomes `ROOT/BUCKET/x`; otherwise every
    path is returned unchanged (TensorFlow reads `gs://` itself).
    """
    text = os.fspath(path)
    root = os.environ.get(LOCAL_ROOT_ENV)
    if not root:
        return text
    for prefix in (GS_PREFIX, GCSFUSE_PREFIX):
        if text.startswith(prefix):
            return os.path.join(root, text[len(prefix) :])
    return text


def join(base: str | os.PathLike, *parts: str) -> str:
    """`base/part/...`: `/`-joined for `gs://` URIs, `os.path.join` for local paths."""
    text = os.fspath(base)
    if is_gs(text):
        return posixpath.join(text.rstrip("/") + "/", *parts)
    return os.path.join(text, *parts)


def is_remote(path: str | os.PathLike) -> bool:
    """True for a `gs://` URI served by Cloud Storage (not mapped by a rehearsal)."""
    return object_key(os.fspath(path)) is not None


def object_key(path: str) -> str | None:
    """`bucket/key` of a `gs://` URI Cloud Storage serves, or None for a local file."""
    if not is_gs(path) or os.environ.get(LOCAL_ROOT_ENV):
        return None
    return path[len(GS_PREFIX) :].rstrip("/")


def filesystem():
    """The gcsfs filesystem for `gs://` (anonymous credentials against an emulator)."""
    from gcsfs.core import GCSFileSystem

    token = "anon" if os.environ.get(EMULATOR_ENV) else None
    # No listings cache: other processes of the run (the chief, the launcher) write the
    # same prefixes, and a cached listing would hide their files. fsspec reuses one
    # instance per arguments; gcsfs reads STORAGE_EMULATOR_HOST itself.
    return GCSFileSystem(token=token, use_listings_cache=False)


# -- reading ---------------------------------------------------------------------


def exists(path: str | os.PathLike) -> bool:
    text = os.fspath(path)
    key = object_key(text)
    return os.path.exists(local_view(text)) if key is None else filesystem().exists(key)


def isdir(path: str | os.PathLike) -> bool:
    """A folder, or on Cloud Storage a prefix that holds objects."""
    text = os.fspath(path)
    key = object_key(text)
    return os.path.isdir(local_view(text)) if key is None else filesystem().isdir(key)


def isfile(path: str | os.PathLike) -> bool:
    text = os.fspath(path)
    key = object_key(text)
    return os.path.isfile(local_view(text)) if key is None else filesystem().isfile(key)


def size(path: str | os.PathLike) -> int:
    """Bytes of a file or object.

    Raises:
        FileNotFoundError: when there is none.
    """
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        return os.path.getsize(local_view(text))
    info = filesystem().info(key)
    if info.get("type") != "file":
        raise FileNotFoundError(text)
    return int(info["size"])


def modified(path: str | os.PathLike) -> float:
    """When a file or object was last written, in seconds since the epoch.

    Raises:
        FileNotFoundError: when there is none.
    """
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        return os.path.getmtime(local_view(text))
    # gcsfs gives the object's `updated` time as `mtime` (a datetime).
    return filesystem().modified(key).timestamp()


def listdir(path: str | os.PathLike) -> list[str]:
    """Names directly inside a folder (files and sub-folders), sorted.

    Raises:
        FileNotFoundError: when it does not exist.
    """
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        return sorted(os.listdir(local_view(text)))
    fs = filesystem()
    if not fs.isdir(key):
        raise FileNotFoundError(text)
    return sorted(posixpath.basename(entry.rstrip("/")) for entry in fs.ls(key, detail=False))


def glob(pattern: str) -> list[str]:
    """Paths matching a shell pattern, sorted, in the pattern's own form (`gs://` stays)."""
    key = object_key(pattern)
    if key is not None:
        return sorted(GS_PREFIX + match for match in filesystem().glob(key))
    import glob as globlib

    view = local_view(pattern)
    matches = sorted(globlib.glob(view))
    if view == pattern:
        return matches
    # Mapped by a rehearsal: `ROOT/BUCKET/x` goes back to `gs://BUCKET/x` (or `/gcs/...`).
    root = os.path.join(os.environ[LOCAL_ROOT_ENV], "")
    prefix = GS_PREFIX if is_gs(pattern) else GCSFUSE_PREFIX
    return [prefix + match[len(root) :] for match in matches]


def find(folder: str | os.PathLike, name: str) -> list[str]:
    """Every file called `name` at any depth under `folder`, sorted, in the folder's form."""
    text = os.fspath(folder)
    key = object_key(text)
    if key is not None:
        # gcsfs `find` lists every object under the prefix, however deep.
        found = filesystem().find(key)
        relative = [posixpath.relpath(match, key) for match in found]
    else:
        view = local_view(text)
        relative = [
            os.path.relpath(os.path.join(dirpath, name), view)
            for dirpath, _, files in os.walk(view)
            if name in files
        ]
    return sorted(join(text, rel) for rel in relative if posixpath.basename(rel) == name)


def read_bytes(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """The whole file or object.

    Args:
        path: local, `/gcs/` or `gs://`.
        limit: for a file a user names: the most bytes it may hold; a local one
            must then also be a regular file (a FIFO would block, `/dev/zero`
            never ends).

    Raises:
        FileNotFoundError: when there is none.
        OSError: when it cannot be read, is not a regular file, or is over `limit`.
    """
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        local = local_view(text)
        if limit is not None:
            return _read_regular_file(local, limit)
        with open(local, "rb") as handle:
            data = handle.read()
    else:
        data = filesystem().cat_file(key)
    if limit is not None and len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", text)
    return data


def _read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a local regular file of at most `limit` bytes.

    Opened without blocking (a FIFO with no writer would block `open` itself)
    and checked on the open descriptor, so nothing swapped in between is read.

    Raises:
        FileNotFoundError: when there is none.
        OSError: a directory, device, FIFO or socket, or over `limit`.
    """
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, "a directory, not a file", os.fspath(path))
        if not stat.S_ISREG(mode):
            raise OSError(
                errno.EINVAL, "not a regular file (a device, pipe or socket)", os.fspath(path)
            )
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", os.fspath(path))
    return b"".join(chunks)


def open_bytes(path: str | os.PathLike) -> BinaryIO:
    """The file or object opened for reading from the start: large files are read in pieces.

    Raises:
        FileNotFoundError: when there is none.
    """
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        return open(local_view(text), "rb")  # noqa: SIM115  (the caller closes it)
    # Read ahead in large blocks: gcsfs's default ("adaptive") fetches exactly what each
    # read asks for, one request per read, and a record reader reads 12 bytes at a time.
    return filesystem().open(key, "rb", block_size=_READ_AHEAD_BYTES, cache_type="readahead")


def read_text(path: str | os.PathLike) -> str:
    return read_bytes(path).decode("utf-8")


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file's value (`FileNotFoundError`, `ValueError` as `json` raises them)."""
    return json.loads(read_text(path))


# -- writing ---------------------------------------------------------------------


def makedirs(path: str | os.PathLike) -> None:
    """Creates a folder and its parents; nothing on Cloud Storage, which has no folders."""
    text = os.fspath(path)
    if object_key(text) is None:
        os.makedirs(local_view(text), exist_ok=True)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes one file atomically: a reader sees the old content or the new, never half.

    Local (and gcsfuse) files: a temporary file beside it, renamed over it.
    Cloud Storage: one object upload, which becomes visible only when complete.
    """
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        atomic.write_bytes(local_view(text), data)
        return
    filesystem().pipe_file(key, data)


def copy_file(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copies one file or object between any two places, written as `write_bytes` writes."""
    write_bytes(target, read_bytes(source))


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, payload: Any) -> None:
    """Writes `payload` as indented, key-sorted strict JSON, atomically (`write_bytes`).

    Raises:
        ValueError: `payload` holds a NaN or an infinity, which strict JSON has
            no token for (kfp, `jq` and browsers refuse such a file).
    """
    write_text(path, atomic.strict_json(payload))


@contextlib.contextmanager
def staged_file(final: str | os.PathLike) -> Iterator[str]:
    """A local temporary file path to write; on success it becomes `final` whole.

    For writers that take a path (a compiler, a library's `save`). Local: the
    temporary file is beside `final` and renamed over it (`atomic.staged_file`).
    Cloud Storage: it is a local temporary file uploaded as one object.
    """
    text = os.fspath(final)
    key = object_key(text)
    if key is None:
        with atomic.staged_file(local_view(text)) as tmp:
            yield tmp
        return
    suffix = posixpath.splitext(key)[1]
    with tempfile.TemporaryDirectory(prefix="strategist-upload-") as scratch:
        tmp = os.path.join(scratch, "staged" + suffix)
        yield tmp
        filesystem().put_file(tmp, key)


def remove_tree(path: str | os.PathLike) -> None:
    """Removes a folder (or a prefix of objects) and everything below; nothing if absent."""
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        shutil.rmtree(local_view(text), ignore_errors=True)
        return
    fs = filesystem()
    with contextlib.suppress(FileNotFoundError):
        fs.rm(key, recursive=True)
    fs.invalidate_cache(key)


def remove_empty_dir(path: str | os.PathLike) -> None:
    """Removes a local folder if it is empty; Cloud Storage has no empty folders to remove."""
    text = os.fspath(path)
    if object_key(text) is None:
        with contextlib.suppress(OSError):
            os.rmdir(local_view(text))


def remove_file(path: str | os.PathLike) -> None:
    """Removes one file or object; nothing if absent."""
    text = os.fspath(path)
    key = object_key(text)
    if key is None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(local_view(text))
        return
    with contextlib.suppress(FileNotFoundError):
        filesystem().rm_file(key)
