"""A shards folder read back and checked: its manifest, files, sizes, records and contents."""

from __future__ import annotations

from typing import Any

import numpy as np

from components.core import json_input, storage, tfds_source, tfrecord
from components.core.config import ConfigError
from components.core.datasets.input_pipeline import record_decoder
from components.core.datasets.manifest import MANIFEST_NAME, TFDS_RECORDS, Manifest


def load_manifest(shards_dir: str, *, verify_records: bool = False) -> Manifest:
    """Reads and checks a shards folder.

    Every listed file must exist with the recorded size; with `verify_records`
    every record is also read back (CRC-checked) and counted.

    Raises:
        ConfigError: missing folder or manifest, a file instead of a folder,
            missing, truncated or corrupted shard files, counts that do not
            match — with what to do.
        OSError: a `gs://` manifest that cannot be read (credentials, access):
            the caller names its flag (`storage_access.unreadable`).
    """
    path = storage.join(shards_dir, MANIFEST_NAME)
    remote = storage.is_remote(shards_dir)
    if not remote:
        _check_shards_folder(shards_dir)
    try:
        data = storage.read_bytes(path, limit=json_input.MAX_BYTES)
    except FileNotFoundError:
        # On Cloud Storage the folder is looked at only now: gcsfs's isdir answers a
        # refused request with False, which would hide the refusal.
        if remote:
            _check_shards_folder(shards_dir)
        raise ConfigError(
            f"{shards_dir} has no {MANIFEST_NAME}: it is not a finished shards folder; "
            "shard the dataset again"
        ) from None
    except OSError as err:
        if remote:
            raise
        raise ConfigError(
            f"cannot read {path} ({err.strerror}): it must be the shards' manifest file; "
            "shard the dataset again"
        ) from None
    raw = json_input.parse(data, path, "shard the dataset again")
    manifest = Manifest.from_dict(raw, root=shards_dir)
    remedy = "delete the folder and shard the dataset again"
    for name, split in manifest.splits.items():
        if sum(f.num_examples for f in split.files) != split.num_examples:
            raise ConfigError(
                f"manifest of {shards_dir}: {name} file counts do not add up to "
                f"{split.num_examples}; {remedy}"
            )
        for shard in split.files:
            if not _inside_folder(shard.path):
                raise ConfigError(
                    f"manifest of {shards_dir}: shard path {shard.path!r} is not a file of the "
                    f"folder; {remedy}"
                )
            file_path = storage.join(shards_dir, shard.path)
            try:
                size = storage.size(file_path)
            except OSError:
                raise ConfigError(f"shard file {file_path} is missing; {remedy}") from None
            if size != shard.num_bytes:
                raise ConfigError(
                    f"shard file {file_path} has {size} bytes, the manifest says "
                    f"{shard.num_bytes}: it was changed or truncated; {remedy}"
                )
            if verify_records:
                _verify_records(file_path, shard.num_examples, remedy)
    if verify_records:
        check_contents(manifest)
    return manifest


def _check_shards_folder(shards_dir: str) -> None:
    """Refuses a shards folder that is a file or does not exist.

    Raises:
        ConfigError: saying which, and what to pass.
    """
    if storage.isdir(shards_dir):
        return
    if storage.isfile(shards_dir):
        raise ConfigError(
            f"{shards_dir} is a file, not a shards folder: pass the folder that holds "
            f"{MANIFEST_NAME} (written by sharding)"
        )
    raise ConfigError(f"shards folder {shards_dir} does not exist: shard the dataset first")


# Records of each split read back by `check_contents`: enough to see a label out of
# range, few enough that a large dataset costs no more than a small one.
_SAMPLED_RECORDS = 64


def check_contents(manifest: Manifest) -> None:
    """Checks what the manifest says against the shards, before anything is launched.

    Decodes the first records of each split as the manifest describes them:
    every feature must have the manifest's shape, every label must be a class
    id below `num_classes` (or a number, for a regression). A manifest that
    names a TFDS dataset must describe that dataset's features and classes.

    Raises:
        ConfigError: saying what does not match, and to shard the dataset again.
    """
    import tensorflow as tf

    where = f"manifest of {manifest.root}"
    remedy = "delete the folder and shard the dataset again"
    _check_label_description(manifest, where, remedy)
    _check_named_dataset(manifest, where, remedy)
    decode = record_decoder(
        manifest.record_format, (*manifest.features, manifest.label), manifest.root
    )
    for split in manifest.splits:
        paths = [storage.local_view(p) for p in manifest.file_paths(split)[:1]]
        for record in tf.data.TFRecordDataset(paths).take(_SAMPLED_RECORDS):
            try:
                values = decode(record)
            except KeyError as err:
                raise ConfigError(
                    f"{where}: its {split} records have no feature {err.args[0]!r}; {remedy}"
                ) from None
            except (tf.errors.OpError, ValueError, TypeError) as err:
                message = getattr(err, "message", str(err)).strip().splitlines()[0][:160]
                raise ConfigError(
                    f"{where}: its {split} records do not decode as it describes them "
                    f"({message}); {remedy}"
                ) from None
            for feature in manifest.features:
                actual = tuple(values[feature.key].shape)
                if not _shape_fits(actual, feature.shape):
                    raise ConfigError(
                        f"{where}: feature {feature.name!r} has shape {list(feature.shape)} "
                        f"there, its {split} records hold {list(actual)}; {remedy}"
                    )
            _check_label_value(manifest, values[manifest.label.key], split, where, remedy)


def _shape_fits(actual: tuple, described: tuple) -> bool:
    return len(actual) == len(described) and all(
        d is None or a == d for a, d in zip(actual, described, strict=True)
    )


def _check_label_description(manifest: Manifest, where: str, remedy: str) -> None:
    classes = manifest.num_classes
    if classes is None:
        return
    if isinstance(classes, bool) or not isinstance(classes, int) or classes < 2:
        raise ConfigError(f"{where}: num_classes {classes!r} is not a count of 2 or more; {remedy}")
    if manifest.classes and len(manifest.classes) != classes:
        raise ConfigError(
            f"{where}: num_classes is {classes} but it names {len(manifest.classes)} classes; "
            f"{remedy}"
        )


def _check_label_value(manifest: Manifest, label, split: str, where: str, remedy: str) -> None:
    value = np.asarray(label)
    if value.shape != ():
        raise ConfigError(f"{where}: a {split} label holds {value.size} values, not one; {remedy}")
    if manifest.num_classes is None:
        return
    if not np.issubdtype(value.dtype, np.integer) or not 0 <= int(value) < manifest.num_classes:
        raise ConfigError(
            f"{where}: a {split} record has label {value.item()!r}, outside the "
            f"{manifest.num_classes} classes (0..{manifest.num_classes - 1}) it declares; {remedy}"
        )


def _check_named_dataset(manifest: Manifest, where: str, remedy: str) -> None:
    """A manifest of TFDS records must describe the dataset it names, as TFDS describes it."""
    source = manifest.source
    if (
        manifest.record_format != TFDS_RECORDS
        or source.get("files")
        or source.get("dataset_module")
    ):
        return  # the user's files or builder: nothing registered to compare with
    try:
        info = tfds_source.tfds_builder(manifest.dataset).info
        features, label, num_classes = tfds_source.tfds_features(info, source.get("label"))
    except ConfigError:
        return  # a name TFDS does not know (a prepared folder since moved): the records decide
    registered = {f.key: (list(f.shape), f.encoding) for f in features}
    described = {f.key: (list(f.shape), f.encoding) for f in manifest.features}
    if registered != described or num_classes != manifest.num_classes:
        raise ConfigError(
            f"{where}: it names dataset {manifest.dataset!r}, whose features (shape, "
            f"encoding) are {registered} with {num_classes} classes, but describes {described} "
            f"with {manifest.num_classes}; {remedy}"
        )


def _inside_folder(path: Any) -> bool:
    """A shard path names a file in the manifest's own folder (never `/x` or `../x`)."""
    return (
        isinstance(path, str)
        and bool(path)
        and not path.startswith(("/", "\\"))
        and ".." not in path.replace("\\", "/").split("/")
        and ":" not in path  # no `gs://` or drive letters: another place altogether
    )


def _verify_records(file_path: str, expected: int, remedy: str) -> None:
    try:
        count = sum(1 for _ in tfrecord.read_records(file_path))
    except tfrecord.CorruptRecordError as err:
        raise ConfigError(f"shard file {file_path} is corrupted ({err}); {remedy}") from None
    if count != expected:
        raise ConfigError(
            f"shard file {file_path} holds {count} records, the manifest says {expected}; {remedy}"
        )
