"""Sharding: the run's data (TFDS or the user's files) into a shards folder with its manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import resource
import time
from collections.abc import Callable
from typing import Any

from components.core import data_sources, storage, storage_trees, tfds_source
from components.core.config import ConfigError, DataConfig
from components.core.data_sources import INT, StoredFeature
from components.core.datasets.input_pipeline import record_decoder
from components.core.datasets.manifest import (
    EXAMPLE_RECORDS,
    MANIFEST_NAME,
    SPLITS,
    TFDS_FEATURES_NAME,
    TFDS_RECORDS,
    Manifest,
    SplitInfo,
)
from components.core.datasets.resolution import prepare, read_arrays, tfds_builder_of
from components.core.datasets.shard_files import (
    deal_records,
    link_files,
    serialize,
    write_records,
)
from components.core.datasets.verification import load_manifest

# File descriptors left for everything else while the shard files are open.
_SPARE_FILES = 64


def default_shards_dir(data: DataConfig) -> str:
    """Where a run's shards go when no folder is given: beside the TFDS data, keyed by source."""
    root = data.data_dir or os.path.join(os.path.expanduser("~"), "tensorflow_datasets")
    name = _safe_name(dataset_name(data))
    if data.files or data.label or data.dataset_module:
        name += (
            "-"
            + hashlib.sha256(
                json.dumps(source_settings(data), sort_keys=True).encode()
            ).hexdigest()[:8]
        )
    return storage.join(root, "strategist_shards", name, f"{data.num_shards}-shards")


def dataset_name(data: DataConfig) -> str:
    """The name runs record: the TFDS name, or the files' (`data_sources.files_name`)."""
    return data_sources.files_name(data.files) if data.files else data.dataset


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name.strip("/"))


def source_settings(data: DataConfig) -> dict[str, Any]:
    """The data settings shards depend on: shards are reused only when they match."""
    keys = ("dataset", "dataset_module", "files", "label", "feature_spec", "test_fraction")
    keys += ("num_shards",)
    raw = {key: getattr(data, key) for key in keys}
    if data.files:
        raw.pop("dataset")
    return raw


def shard_dataset(
    dataset: str,
    shards_dir: str,
    *,
    num_shards: int = 8,
    data_dir: str | None = None,
    log: Callable[[str], None] = print,
) -> Manifest:
    """`shard_data` of a TFDS dataset by name (`digits` builds offline)."""
    data = DataConfig(dataset=dataset, data_dir=data_dir, num_shards=num_shards)
    return shard_data(data, shards_dir, log=log)


def shard_data(
    data: DataConfig, shards_dir: str, *, log: Callable[[str], None] = print
) -> Manifest:
    """Writes the run's data as TFRecord shards plus `manifest.json`.

    The records keep the source's encoding: TFDS's records are copied as they
    are (images stay PNG/JPEG), reusing TFDS's own files when a split already
    has at least `num_shards` of them; otherwise records are dealt round-robin
    to `num_shards` files in one pass, the source files read in parallel
    (`deal_records`). `.tfrecord` files are copied the same way. CSV and npz data
    (small, read whole) are written as `tf.train.Example`s. Data without a
    test split gets one: every (1/test_fraction)-th example of each file
    (`data_sources.in_test_split`).

    The folder is built beside its final place and renamed into it, so a crash
    never leaves a complete-looking one. An existing, valid shards folder made
    from the same data settings is reused.

    Args:
        data: the run's data settings.
        shards_dir: output folder.
        log: progress sink.

    Returns:
        The manifest.

    Raises:
        ConfigError: unknown or unsuitable data, unreachable download, an empty split.
    """
    if data.num_shards < 1:
        raise ConfigError(f"--num-shards must be at least 1, got {data.num_shards}")
    # Every shard file of a split is open while it is written.
    open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - _SPARE_FILES
    if data.num_shards > open_files:
        raise ConfigError(
            f"--num-shards {data.num_shards}: at most {open_files} shard files can be written "
            "at once on this machine (its open-file limit); pass fewer"
        )
    if not 0 < data.test_fraction < 1:
        raise ConfigError(f"--test-fraction must be between 0 and 1, got {data.test_fraction}")
    existing = _reusable_manifest(shards_dir, data)
    if existing is not None:
        log(f"shards: reusing {shards_dir} ({_describe(existing)})")
        return existing
    started = time.perf_counter()
    with storage_trees.staged_tree(shards_dir, commit_file=MANIFEST_NAME) as staging:
        if data.files:
            manifest = _shard_files(data, staging, log)
        else:
            manifest = _shard_tfds(data, staging, log)
        manifest = dataclasses.replace(manifest, source=source_settings(data), root=shards_dir)
        for name, split in manifest.splits.items():
            if split.num_examples == 0:
                raise ConfigError(
                    f"the {name} split of {manifest.dataset!r} is empty: give more data or "
                    "raise --test-fraction"
                )
            log(f"shards: {name}: {split.num_examples} examples in {len(split.files)} files")
        # Written last: a folder with a manifest is a finished folder.
        storage.write_json(os.path.join(staging, MANIFEST_NAME), manifest.to_dict())
    log(f"shards: wrote {shards_dir} in {time.perf_counter() - started:.1f}s")
    return manifest


def _shard_tfds(data: DataConfig, folder: str, log) -> Manifest:
    """TFDS's records of the train and test splits, copied or dealt into shards."""

    builder = tfds_builder_of(data)
    features, label, num_classes = tfds_source.tfds_features(builder.info, data.label)
    log(f"shards: preparing {builder.info.full_name} in {builder.data_dir}")
    prepare(builder, users_builder=bool(data.dataset_module))
    # The trainer decodes TFDS's records with the feature description TFDS wrote.
    storage.copy_file(
        storage.join(str(builder.data_dir), TFDS_FEATURES_NAME),
        storage.join(folder, TFDS_FEATURES_NAME),
    )
    info_splits = builder.info.splits
    if "train" not in info_splits:
        raise ConfigError(
            f"dataset {data.dataset!r} has no 'train' split (it has {', '.join(info_splits)})"
        )

    for split in SPLITS:
        examples = info_splits[split].num_examples if split in info_splits else 0
        if 0 < examples < data.num_shards:
            raise ConfigError(
                f"--num-shards {data.num_shards} is more than the {examples} examples of "
                f"{data.dataset}'s {split} split: pass at most {examples} (a shard file holds "
                "at least one)"
            )

    def files(split: str) -> list[str]:
        return [str(p) for p in info_splits[split].filepaths]

    splits: dict[str, SplitInfo] = {}
    if "test" in info_splits:
        for split in SPLITS:
            info = info_splits[split]
            if len(info.filepaths) >= data.num_shards:
                splits[split] = link_files(files(split), list(info.shard_lengths), split, folder)
            else:
                splits.update(deal_records(files(split), folder, data.num_shards, split))
    else:
        log(f"shards: no test split: every 1/{data.test_fraction:g}-th example becomes one")
        splits = deal_records(
            files("train"), folder, data.num_shards, test_fraction=data.test_fraction
        )
    return Manifest(
        dataset=data.dataset,
        version=str(builder.info.version),
        features=tuple(features),
        label=label,
        num_classes=num_classes,
        splits=splits,
        record_format=TFDS_RECORDS,
        classes=tuple(_class_names(builder.info, label)),
    )


def _class_names(info, label: StoredFeature) -> list[str]:
    feature = info.features[label.key]
    return list(getattr(feature, "names", []) or []) if label.encoding == INT else []


def _shard_files(data: DataConfig, folder: str, log) -> Manifest:
    """`--data` files: tfrecords copied record for record, CSV and npz serialised."""
    paths = data_sources.match_files(data.files)
    kind = os.path.splitext(paths[0])[1].lower()
    version = files_digest(paths)
    log(f"shards: reading {len(paths)} {kind} file(s) of {data.files}")
    if kind == ".tfrecord":
        features, label, num_classes = data_sources.tfrecord_spec(data.feature_spec, data.label)
        _check_first_record(paths, features, label)
        splits = deal_records(paths, folder, data.num_shards, test_fraction=data.test_fraction)
        return Manifest(dataset_name(data), version, tuple(features), label, num_classes, splits)
    source = read_arrays(paths, kind, data.label)
    splits = {}
    for split in SPLITS:
        chosen = (
            serialize(source, i)
            for i, position in enumerate(source.positions)
            if data_sources.in_test_split(position, data.test_fraction) == (split == "test")
        )
        splits[split] = write_records(chosen, split, folder, data.num_shards)
    return Manifest(
        dataset_name(data),
        version,
        tuple(source.features),
        source.label,
        source.num_classes,
        splits,
        columns=source.columns,
        classes=source.classes,
    )


def files_digest(paths: list[str]) -> str:
    """A short fingerprint of the files' names, sizes and modification times."""
    stats = [(p, storage.size(p), int(storage.modified(p))) for p in paths]
    return "files-" + hashlib.sha256(json.dumps(stats).encode()).hexdigest()[:12]


def _check_first_record(paths: list[str], features, label) -> None:
    """Parses the first record of `.tfrecord` files with the spec.

    Raises:
        ConfigError: unreadable files, no records, or a first record the spec
            does not parse.
    """
    import tensorflow as tf

    parse = record_decoder(EXAMPLE_RECORDS, (*features, label), root="")
    try:
        records = tf.data.TFRecordDataset([storage.local_view(p) for p in paths])
        first = next(iter(records.take(1)), None)
        if first is None:
            raise ConfigError(f"--data {paths[0]}...: the files hold no records")
        parse(first)
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError, ValueError) as err:
        message = getattr(err, "message", str(err)).splitlines()[0]
        # TensorFlow's op prefix and suffix say nothing to the user.
        message = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\]", "", message)
        raise ConfigError(
            f"--data {paths[0]}: its records do not match --feature-spec ({message}); fix "
            "the spec's names, shapes and dtypes"
        ) from None


def import_shards(source_dir: str, shards_dir: str) -> Manifest:
    """Existing shards, every record checked, linked (or copied) into `shards_dir`.

    Raises:
        ConfigError: what `load_manifest(verify_records=True)` refuses.
    """

    manifest = load_manifest(source_dir, verify_records=True)
    with storage_trees.staged_tree(shards_dir, commit_file=MANIFEST_NAME) as staging:
        names = [f.path for split in manifest.splits.values() for f in split.files]
        if manifest.record_format == TFDS_RECORDS:
            names.append(TFDS_FEATURES_NAME)
        for name in [*names, MANIFEST_NAME]:
            try:
                os.link(os.path.join(source_dir, name), os.path.join(staging, name))
            except OSError:
                storage.copy_file(storage.join(source_dir, name), storage.join(staging, name))
    return dataclasses.replace(manifest, root=shards_dir)


def _describe(manifest: Manifest) -> str:
    return ", ".join(
        f"{name} {split.num_examples} examples/{len(split.files)} files"
        for name, split in manifest.splits.items()
    )


def _reusable_manifest(shards_dir: str, data: DataConfig) -> Manifest | None:
    if not storage.exists(storage.join(shards_dir, MANIFEST_NAME)):
        return None
    try:
        manifest = load_manifest(shards_dir)
    except ConfigError:
        return None
    if manifest.source != source_settings(data):
        return None
    if data.files and manifest.version != files_digest(data_sources.match_files(data.files)):
        return None  # the files changed
    return manifest
