"""A run's data -> TFRecord shards with a manifest -> `tf.data` input pipelines.

`shard_data` turns a supervised TFDS dataset or the user's files
(`components.core.data_sources`) into per-worker TFRecord shard files plus
`manifest.json` (dataset, version, splits, example counts, how each feature
is stored, shard files with their sizes). `make_dataset_fn`
reads them back as a `dataset_fn(input_context)` that every `tf.distribute`
strategy accepts: files are split across input pipelines (so each worker reads
its own files), batches are per replica, and prefetching is AUTOTUNEd.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from components.core import data_sources, json_input, storage, tfrecord
from components.core.config import ConfigError, DataConfig
from components.core.data_sources import (
    BYTES,
    FLOAT,
    IMAGE,
    INT,
    RAW_UINT8,
    VECTOR_FEATURE,
    StoredFeature,
)
from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

MANIFEST_NAME = "manifest.json"
# File descriptors left for everything else while the shard files are open.
_SPARE_FILES = 64
SPLITS = ("train", "test")
# Datasets Strategist builds without a network.
OFFLINE_DATASETS = ("digits",)
# Cache decoded examples in memory when the split is at most this big.
_CACHE_LIMIT_BYTES = 1 << 30
# Where TFDS downloads most datasets from; probed before a download so an
# offline machine fails in seconds instead of retrying for minutes.
_DOWNLOAD_PROBE = ("storage.googleapis.com", 443)


@dataclass(frozen=True)
class ShardFile:
    """One TFRecord shard file."""

    path: str  # relative to the manifest's folder
    num_examples: int
    num_bytes: int


@dataclass(frozen=True)
class SplitInfo:
    """The shard files of one split."""

    num_examples: int
    files: tuple[ShardFile, ...]


TFDS_RECORDS = "tfds"  # TFDS's own records, decoded with its features.json
EXAMPLE_RECORDS = "example"  # tf.train.Examples keyed as the manifest's features say
TFDS_FEATURES_NAME = "features.json"


@dataclass(frozen=True)
class Manifest:
    """What a shards folder holds; written last, so its presence means complete.

    Attributes:
        dataset: TFDS name, or the name of the files (`--data`).
        version: TFDS version, or a digest of the files.
        features: the input features as records hold them.
        label: the label as records hold it.
        num_classes: classes, or None for a regression.
        splits: split name -> its shard files.
        record_format: `TFDS_RECORDS` or `EXAMPLE_RECORDS`.
        columns: a CSV's numeric columns, in order: they reach a single-input
            model as one float vector named `features`.
        classes: class names, when the source gave names.
        source: the data settings the shards were made from (reuse checks them).
        root: the folder the manifest was read from (not serialised).
    """

    dataset: str
    version: str
    features: tuple[StoredFeature, ...]
    label: StoredFeature
    num_classes: int | None
    splits: dict[str, SplitInfo]
    record_format: str = EXAMPLE_RECORDS
    columns: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    source: dict[str, Any] = dataclasses.field(default_factory=dict)
    root: str = ""

    @classmethod
    def of_images(
        cls, dataset: str, version: str, image_shape, num_classes: int, splits, root: str = ""
    ) -> Manifest:
        """Shards written by `write_shards`: raw uint8 images and class ids."""
        return cls(
            dataset,
            version,
            (StoredFeature("image", "image", tuple(image_shape), RAW_UINT8),),
            StoredFeature("label", "label", (), INT),
            num_classes,
            splits,
            root=root,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "record_format": self.record_format,
            "features": {f.name: f.to_dict() for f in self.features},
            "label": {
                **self.label.to_dict(),
                "num_classes": self.num_classes,
                "classes": list(self.classes),
            },
            "columns": list(self.columns),
            "source": self.source,
            "splits": {
                name: {
                    "num_examples": split.num_examples,
                    "files": [dataclasses.asdict(f) for f in split.files],
                }
                for name, split in self.splits.items()
            },
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], root: str) -> Manifest:
        try:
            splits = {
                name: SplitInfo(
                    num_examples=int(split["num_examples"]),
                    files=tuple(ShardFile(**f) for f in split["files"]),
                )
                for name, split in raw["splits"].items()
            }
            label = raw["label"]
            manifest = cls(
                dataset=raw["dataset"],
                version=raw["version"],
                features=tuple(
                    StoredFeature.from_dict(name, f) for name, f in raw["features"].items()
                ),
                label=StoredFeature.from_dict("label", label),
                num_classes=label["num_classes"],
                splits=splits,
                record_format=raw["record_format"],
                columns=tuple(raw["columns"]),
                classes=tuple(label.get("classes", ())),
                source=raw.get("source", {}),
                root=root,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(
                f"{root}/{MANIFEST_NAME} is not a Strategist manifest of this version ({err!r}); "
                "delete the folder and shard the dataset again"
            ) from None
        if manifest.record_format not in (TFDS_RECORDS, EXAMPLE_RECORDS):
            raise ConfigError(
                f"{root}/{MANIFEST_NAME} says its records are {manifest.record_format!r}, not "
                f"{TFDS_RECORDS!r} or {EXAMPLE_RECORDS!r}: delete the folder and shard again"
            )
        return manifest

    @property
    def input_spec(self) -> InputSpec:
        """The examples as models see them after `parse_fn` (see `column_input_spec`)."""
        if self.columns:
            vector = FeatureSpec(shape=(len(self.columns),), dtype="float32")
            return InputSpec({VECTOR_FEATURE: vector}, self._label_spec())
        return self.column_input_spec

    @property
    def column_input_spec(self) -> InputSpec:
        """Every feature by its own name: what `parse_fn(by_name=True)` yields."""
        features = {f.name: FeatureSpec(shape=f.shape, dtype=f.dtype) for f in self.features}
        return InputSpec(features, self._label_spec())

    def _label_spec(self) -> LabelSpec:
        dtype = "int64" if self.num_classes else "float32"
        return LabelSpec(name=self.label.key, dtype=dtype, num_classes=self.num_classes)

    @property
    def image_shape(self) -> tuple[int | None, ...]:
        """The shape of the single input feature (what the built-in models take).

        Raises:
            ConfigError: when the data has several features.
        """
        single = self.input_spec.single_feature
        if single is None:
            names = ", ".join(f.name for f in self.features)
            raise ConfigError(
                f"dataset {self.dataset!r} has several input features ({names}): the built-in "
                "models take one; give a model with named inputs (--model-module)"
            )
        return single.shape

    def file_paths(self, split: str) -> list[str]:
        return [storage.join(self.root, f.path) for f in self.split(split).files]

    def split(self, name: str) -> SplitInfo:
        try:
            return self.splits[name]
        except KeyError:
            raise ConfigError(
                f"dataset {self.dataset!r} has no {name!r} split in {self.root}"
            ) from None


def tfds_builder_of(data: DataConfig):
    """The TFDS builder of `data`'s dataset, or None for files (`data.files`).

    Building one can import TensorFlow and read the dataset's metadata, seconds
    a time: a caller that needs it twice builds it once and passes it on.

    Raises:
        ConfigError: a dataset TFDS cannot find or build (`data_sources.tfds_builder`).
    """
    if data.files:
        return None
    return data_sources.tfds_builder(data.dataset, data.data_dir, data.dataset_module)


def describe(data: DataConfig, builder=None) -> InputSpec:
    """What the run's examples will look like, checked before anything is launched.

    Reads files' headers and small files whole; for TFDS, only the dataset's
    metadata (nothing is downloaded). Whether a TFDS dataset is prepared or can
    be is `check_available`'s, asked once the data is known to suit the model.

    Args:
        data: the run's data.
        builder: `tfds_builder_of(data)` when the caller has built it already
            (the pre-flight passes the same one to `check_available`); built
            here when None.

    Raises:
        ConfigError: anything `shard_data` would refuse that is known up front.
    """
    if data.files:
        features, label, num_classes, columns = _file_layout(data)
    else:
        if builder is None:
            builder = tfds_builder_of(data)
        features, label, num_classes = data_sources.tfds_features(builder.info, data.label)
        columns = ()
    return Manifest(
        data.dataset, "", tuple(features), label, num_classes, {}, columns=columns
    ).input_spec


def check_available(data: DataConfig, builder) -> None:
    """Refuses a TFDS dataset that is neither prepared nor downloadable from here.

    Args:
        data: the run's data.
        builder: `tfds_builder_of(data)`, the one `describe` read; None for files.

    Raises:
        ConfigError: when the download host cannot be reached (`check_obtainable`).
    """
    if builder is None:
        return
    check_obtainable(builder, users_builder=bool(data.dataset_module))


def _file_layout(data: DataConfig):
    """(features, label, num_classes, columns) of `--data` files."""
    paths = data_sources.match_files(data.files)
    kind = os.path.splitext(paths[0])[1].lower()
    if kind == ".tfrecord":
        return (*data_sources.tfrecord_spec(data.feature_spec, data.label), ())
    source = _read_arrays(paths, kind, data.label)
    return source.features, source.label, source.num_classes, source.columns


def _read_arrays(paths: list[str], kind: str, label: str | None) -> data_sources.ArraySource:
    reader = data_sources.read_csv if kind == ".csv" else data_sources.read_npz
    return reader(paths, label)


def prepare(builder, *, probe_timeout_s: float = 3.0, users_builder: bool = False) -> None:
    """Downloads and prepares `builder` unless it already is.

    Raises:
        ConfigError: when the download host cannot be reached (`check_obtainable`).
    """
    import tensorflow_datasets as tfds

    if _is_prepared(builder):
        return
    _check_downloadable(builder, probe_timeout_s, users_builder)
    tfds.disable_progress_bar()  # progress goes through `log`, line by line
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False)
    )


def check_obtainable(builder, *, probe_timeout_s: float = 3.0, users_builder: bool = False) -> None:
    """Refuses a dataset that is not prepared and cannot be downloaded here.

    A dataset that needs a download is first checked against the network, so
    an offline machine fails in seconds with what to do, not after minutes of
    retries (and, for `compare`, before the pipeline's shard step). A user's
    builder (`users_builder`, from `--dataset-module`) is not: it may read
    local files.

    Raises:
        ConfigError: when the download host cannot be reached.
    """
    if not _is_prepared(builder):
        _check_downloadable(builder, probe_timeout_s, users_builder)


def _check_downloadable(builder, probe_timeout_s: float, users_builder: bool) -> None:
    """Refuses an unprepared dataset whose download host cannot be reached.

    Raises:
        ConfigError: naming the dataset, its folder and what to do.
    """
    offline = builder.name in OFFLINE_DATASETS or users_builder
    if not offline and not storage.reachable(_DOWNLOAD_PROBE, probe_timeout_s):
        raise ConfigError(
            f"dataset {builder.name!r} is not prepared in {builder.data_dir} and cannot be "
            f"downloaded: {_DOWNLOAD_PROBE[0]} is unreachable. Prepare it where there is a "
            "network (`tfds build` or a Strategist run) and pass that folder with --data-dir, "
            "or use --dataset digits, which needs no network"
        )


def _is_prepared(builder) -> bool:
    return storage.isdir(builder.data_dir) and any(
        p.endswith(".json") for p in storage.listdir(builder.data_dir)
    )


def default_shards_dir(data: DataConfig) -> str:
    """Where a run's shards go when no folder is given: beside the TFDS data, keyed by source."""
    root = data.data_dir or os.path.join(os.path.expanduser("~"), "tensorflow_datasets")
    name = _safe_name(_dataset_name(data))
    if data.files or data.label or data.dataset_module:
        name += (
            "-" + hashlib.sha256(json.dumps(_source(data), sort_keys=True).encode()).hexdigest()[:8]
        )
    return storage.join(root, "strategist_shards", name, f"{data.num_shards}-shards")


def _dataset_name(data: DataConfig) -> str:
    """The name runs record: the TFDS name, or the files' (`data_sources.files_name`)."""
    return data_sources.files_name(data.files) if data.files else data.dataset


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name.strip("/"))


def _source(data: DataConfig) -> dict[str, Any]:
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
    with storage.staged_tree(shards_dir, commit_file=MANIFEST_NAME) as staging:
        if data.files:
            manifest = _shard_files(data, staging, log)
        else:
            manifest = _shard_tfds(data, staging, log)
        manifest = dataclasses.replace(manifest, source=_source(data), root=shards_dir)
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
    features, label, num_classes = data_sources.tfds_features(builder.info, data.label)
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
                splits[split] = _link_files(files(split), list(info.shard_lengths), split, folder)
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
    version = _files_digest(paths)
    log(f"shards: reading {len(paths)} {kind} file(s) of {data.files}")
    if kind == ".tfrecord":
        features, label, num_classes = data_sources.tfrecord_spec(data.feature_spec, data.label)
        _check_first_record(paths, features, label)
        splits = deal_records(paths, folder, data.num_shards, test_fraction=data.test_fraction)
        return Manifest(_dataset_name(data), version, tuple(features), label, num_classes, splits)
    source = _read_arrays(paths, kind, data.label)
    splits = {}
    for split in SPLITS:
        chosen = (
            _serialize(source, i)
            for i, position in enumerate(source.positions)
            if data_sources.in_test_split(position, data.test_fraction) == (split == "test")
        )
        splits[split] = write_records(chosen, split, folder, data.num_shards)
    return Manifest(
        _dataset_name(data),
        version,
        tuple(source.features),
        source.label,
        source.num_classes,
        splits,
        columns=source.columns,
        classes=source.classes,
    )


def _files_digest(paths: list[str]) -> str:
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

    parse = _parser(EXAMPLE_RECORDS, (*features, label), root="")
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


def deal_records(
    files: list[str],
    folder: str,
    num_shards: int,
    split: str = "train",
    *,
    test_fraction: float | None = None,
) -> dict[str, SplitInfo]:
    """Deals the serialised records of `files` into shards, as they are (never decoded).

    One pass over the records: the source files are divided among up to
    `num_shards` threads (at most one per CPU; their reads of `gs://` objects
    overlap), each reading its own files and dealing their records round-robin
    to its own shard files. With `test_fraction` the records go to the train
    and test splits, record k of each file to test when
    `data_sources.in_test_split(k, test_fraction)`; otherwise all go to `split`.

    Returns:
        Each split's entry of the manifest.

    Raises:
        ConfigError: a source file is truncated or corrupted.
    """
    names = SPLITS if test_fraction is not None else (split,)
    workers = max(1, min(len(files), num_shards, os.cpu_count() or 1))
    shard_names = {
        name: [f"{name}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
        for name in names
    }
    counts = {name: [0] * num_shards for name in names}
    writers = {
        name: [tfrecord.RecordWriter(os.path.join(folder, n)) for n in shard_names[name]]
        for name in names
    }

    def work(worker: int) -> None:
        mine = list(range(worker, num_shards, workers))  # the shard files this thread writes
        dealt = dict.fromkeys(names, 0)
        for path in files[worker::workers]:
            for position, record in enumerate(_records(path)):
                is_test = test_fraction is not None and data_sources.in_test_split(
                    position, test_fraction
                )
                name = "test" if is_test else names[0]
                shard = mine[dealt[name] % len(mine)]
                writers[name][shard].write(record)
                counts[name][shard] += 1
                dealt[name] += 1

    try:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(work, range(workers)))
    finally:
        for writer in (w for group in writers.values() for w in group):
            writer.close()
    return {
        name: SplitInfo(
            sum(counts[name]),
            tuple(
                ShardFile(n, c, storage.size(storage.join(folder, n)))
                for n, c in zip(shard_names[name], counts[name], strict=True)
            ),
        )
        for name in names
    }


def _records(path: str) -> Iterable[bytes]:
    """The records of a source's TFRecord file (`tfrecord.read_records`).

    Raises:
        ConfigError: the file is truncated or corrupted, naming it.
    """
    try:
        yield from tfrecord.read_records(path)
    except tfrecord.CorruptRecordError as err:
        raise ConfigError(
            f"TFRecord file {path} is corrupted ({err}): replace it, or prepare the dataset again"
        ) from None


def _link_files(files: list[str], lengths: list[int], split: str, folder: str) -> SplitInfo:
    """TFDS's own files of a split, as its shards (hard links where possible)."""

    shards = []
    for i, (path, length) in enumerate(zip(files, lengths, strict=True)):
        name = f"{split}-{i:05d}-of-{len(files):05d}.tfrecord"
        target = os.path.join(folder, name)
        try:
            os.link(path, target)
        except OSError:
            storage.copy_file(path, target)
        shards.append(ShardFile(name, length, storage.size(target)))
    return SplitInfo(sum(lengths), tuple(shards))


def write_records(records: Iterable[bytes], split: str, folder: str, num_shards: int) -> SplitInfo:
    """Deals serialised records round-robin into `num_shards` TFRecord files.

    The files are `folder/<split>-0000i-of-0000n.tfrecord` (a local folder);
    they differ in size by at most one record.

    Returns:
        The split's entry of the manifest.
    """
    names = [f"{split}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    counts = [0] * num_shards
    writers = [tfrecord.RecordWriter(os.path.join(folder, n)) for n in names]
    try:
        for index, record in enumerate(records):
            writers[index % num_shards].write(record)
            counts[index % num_shards] += 1
    finally:
        for writer in writers:
            writer.close()
    files = tuple(
        ShardFile(n, c, storage.size(storage.join(folder, n)))
        for n, c in zip(names, counts, strict=True)
    )
    return SplitInfo(sum(counts), files)


def write_shards(
    examples: Iterable[tuple[Any, int]], split: str, folder: str, num_shards: int
) -> SplitInfo:
    """Deals (uint8 image, class id) pairs into shards (`Manifest.of_images` reads them)."""
    return write_records(
        (_image_example(np.asarray(image, np.uint8), int(label)) for image, label in examples),
        split,
        folder,
        num_shards,
    )


def _image_example(image, label: int) -> bytes:
    return _example({"image": _bytes_feature([image.tobytes()]), "label": _int_feature([label])})


def _serialize(source: data_sources.ArraySource, index: int) -> bytes:
    """Example `index` of an array source as a `tf.train.Example`."""
    values = {}
    for feature in (*source.features, source.label):
        value = source.arrays[feature.key][index]
        if feature.encoding == BYTES:
            values[feature.key] = _bytes_feature([str(value).encode()])
        elif feature.encoding == RAW_UINT8:
            values[feature.key] = _bytes_feature([np.ascontiguousarray(value).tobytes()])
        elif feature.encoding == INT:
            values[feature.key] = _int_feature(np.ravel(value).tolist())
        else:
            values[feature.key] = _float_feature(np.ravel(value).tolist())
    return _example(values)


# tf.train.Example and tf.train.Feature as TFDS copies them, so that building one imports
# no TensorFlow: the same fields, so the same bytes (tests/test_tfrecord.py).
# https://github.com/tensorflow/datasets/blob/master/tensorflow_datasets/proto/build_tf_proto.py


def _example(feature: dict[str, Any]) -> bytes:
    from tensorflow_datasets.proto import tf_example_pb2, tf_feature_pb2

    features = tf_feature_pb2.Features(feature=feature)
    return tf_example_pb2.Example(features=features).SerializeToString()


def _bytes_feature(values):
    from tensorflow_datasets.proto import tf_feature_pb2

    return tf_feature_pb2.Feature(bytes_list=tf_feature_pb2.BytesList(value=values))


def _int_feature(values):
    from tensorflow_datasets.proto import tf_feature_pb2

    return tf_feature_pb2.Feature(int64_list=tf_feature_pb2.Int64List(value=values))


def _float_feature(values):
    from tensorflow_datasets.proto import tf_feature_pb2

    return tf_feature_pb2.Feature(float_list=tf_feature_pb2.FloatList(value=values))


def import_shards(source_dir: str, shards_dir: str) -> Manifest:
    """Existing shards, every record checked, linked (or copied) into `shards_dir`.

    Raises:
        ConfigError: what `load_manifest(verify_records=True)` refuses.
    """

    manifest = load_manifest(source_dir, verify_records=True)
    with storage.staged_tree(shards_dir, commit_file=MANIFEST_NAME) as staging:
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
    if manifest.source != _source(data):
        return None
    if data.files and manifest.version != _files_digest(data_sources.match_files(data.files)):
        return None  # the files changed
    return manifest


def load_manifest(shards_dir: str, *, verify_records: bool = False) -> Manifest:
    """Reads and checks a shards folder.

    Every listed file must exist with the recorded size; with `verify_records`
    every record is also read back (CRC-checked) and counted.

    Raises:
        ConfigError: missing folder or manifest, a file instead of a folder,
            missing, truncated or corrupted shard files, counts that do not
            match — with what to do.
        OSError: a `gs://` manifest that cannot be read (credentials, access):
            the caller names its flag (`storage.unreadable`).
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
    decode = _parser(manifest.record_format, (*manifest.features, manifest.label), manifest.root)
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
        info = data_sources.tfds_builder(manifest.dataset).info
        features, label, num_classes = data_sources.tfds_features(info, source.get("label"))
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


def parse_fn(manifest: Manifest, *, by_name: bool = False):
    """A function that turns a serialised record into (features, label).

    Features are a single tensor when there is one feature (or a CSV's numeric
    columns, stacked into one float32 vector in column order), else a dict
    keyed by feature name; `by_name` always gives the dict (a CSV's columns by
    column name), for models with named inputs. Images are float32 in [0, 1];
    labels are int64 class ids, or float32 values for a regression.
    """
    import tensorflow as tf

    decode = _parser(manifest.record_format, (*manifest.features, manifest.label), manifest.root)
    stack = bool(manifest.columns) and not by_name
    label_dtype = tf.int64 if manifest.num_classes else tf.float32

    def parse(record):
        values = decode(record)
        features = {f.name: values[f.key] for f in manifest.features}
        label = tf.cast(values[manifest.label.key], label_dtype)
        if stack:
            return tf.stack([features[c] for c in manifest.columns], axis=-1), label
        if len(features) == 1 and not by_name:
            return next(iter(features.values())), label
        return features, label

    return parse


def _parser(record_format: str, stored, root: str):
    """record -> {key: the value as the model receives it} for `stored` features."""
    import tensorflow as tf

    if record_format == TFDS_RECORDS:
        import tensorflow_datasets as tfds

        # https://www.tensorflow.org/datasets/api_docs/python/tfds/features/FeatureConnector#from_config
        # TFDS reads the file itself: through `local_view` under a rehearsal.
        connector = tfds.features.FeatureConnector.from_config(storage.local_view(root))

        def decode(record):
            flat = _flatten(connector.deserialize_example(record))
            return {f.key: _from_tfds(flat[f.key], f) for f in stored}

        return decode
    spec = {f.key: _parse_spec(f) for f in stored}

    def decode(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {f.key: _from_example(parsed[f.key], f) for f in stored}

    return decode


def _flatten(example, prefix: str = "") -> dict[str, Any]:
    """A decoded TFDS example with nested dicts flattened to `outer/inner` keys."""
    flat = {}
    for key, value in example.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _model_dtype(feature: StoredFeature):
    import tensorflow as tf

    return tf.as_dtype(feature.dtype)


def _from_tfds(value, feature: StoredFeature):
    import tensorflow as tf

    if feature.encoding == IMAGE:
        return tf.cast(value, tf.float32) / 255.0
    if feature.encoding == BYTES:
        return value
    return tf.cast(value, _model_dtype(feature))


def _parse_spec(feature: StoredFeature):
    import tensorflow as tf

    if feature.encoding in (IMAGE, RAW_UINT8):
        return tf.io.FixedLenFeature([], tf.string)
    dtype = {FLOAT: tf.float32, INT: tf.int64, BYTES: tf.string}[feature.encoding]
    if None in feature.shape:
        return tf.io.VarLenFeature(dtype)
    return tf.io.FixedLenFeature(list(feature.shape), dtype)


def _from_example(value, feature: StoredFeature):
    import tensorflow as tf

    shape = [-1 if d is None else d for d in feature.shape]
    if feature.encoding == IMAGE:
        channels = feature.shape[-1] if feature.shape and feature.shape[-1] else 0
        image = tf.io.decode_image(value, channels=channels, expand_animations=False)
        image.set_shape(feature.shape or None)
        return tf.cast(image, tf.float32) / 255.0
    if feature.encoding == RAW_UINT8:
        return tf.cast(tf.reshape(tf.io.decode_raw(value, tf.uint8), shape), tf.float32) / 255.0
    if isinstance(value, tf.SparseTensor):
        return tf.reshape(tf.sparse.to_dense(value), shape)
    return value


def make_dataset_fn(
    manifest: Manifest,
    split: str,
    global_batch_size: int,
    *,
    training: bool = True,
    seed: int = 0,
    per_worker_order: bool = False,
    by_name: bool = False,
    preprocess=None,
):
    """A `dataset_fn(input_context)` for `DatasetCreator` and every strategy.

    Each input pipeline (one per worker) reads only its own shard files; the
    batch is the per-replica share of `global_batch_size`. Training data is
    cached (when small), shuffled and repeated; `steps_per_epoch` bounds an
    epoch.

    Under `ParameterServerStrategy` TensorFlow traces `dataset_fn` once, with
    `InputContext(1, 0)`, and runs that one function on every worker, so file
    sharding cannot tell the workers apart and a fixed shuffle seed would give
    every worker the same stream. With `per_worker_order` each worker reads the
    whole split, as TensorFlow's parameter-server guide does for `Model.fit`
    (shuffle and repeat, `steps_per_epoch` bounding an epoch), in its own order:
    the shuffle seed adds the worker's clock (microseconds) when its dataset is
    created. Parameter-server training is asynchronous, so its order was never
    reproducible anyway.

    `by_name` yields features as a dict by name (`parse_fn`).
    `preprocess(features, label) -> (inputs, label)`, a model module's, is
    mapped over each example after the cache, so random augmentation differs
    per epoch.

    Raises:
        ConfigError: when there are fewer shard files than input pipelines.
    """
    import tensorflow as tf

    # TensorFlow opens the files itself: through `local_view` under a rehearsal.
    files = [storage.local_view(path) for path in manifest.file_paths(split)]
    info = manifest.split(split)
    total_bytes = sum(f.num_bytes for f in info.files)
    parse = parse_fn(manifest, by_name=by_name)
    # Variable-size features are padded to the longest of each batch.
    variable = any(None in f.shape for f in manifest.features)

    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        pipelines = input_context.num_input_pipelines if input_context else 1
        pipeline_id = input_context.input_pipeline_id if input_context else 0
        if len(files) < pipelines:
            raise ConfigError(
                f"{len(files)} shard files of {split!r} cannot feed {pipelines} input "
                f"pipelines: shard with --num-shards {pipelines} or more"
            )
        batch = (
            input_context.get_per_replica_batch_size(global_batch_size)
            if input_context
            else global_batch_size
        )
        ds = tf.data.Dataset.from_tensor_slices(files[pipeline_id::pipelines])
        ds = ds.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(4, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=not training,
        )
        ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        if total_bytes <= _CACHE_LIMIT_BYTES:
            ds = ds.cache()
        if preprocess is not None:
            ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
        if training:
            order = seed
            if per_worker_order:
                order = seed + tf.cast(tf.timestamp() * 1e6, tf.int64) % (2**31)
            ds = ds.shuffle(min(info.num_examples, 10_000), seed=order).repeat()
        if variable:
            ds = ds.padded_batch(batch, drop_remainder=training)
        else:
            ds = ds.batch(batch, drop_remainder=training)
        return ds.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def eval_dataset(
    manifest: Manifest,
    split: str = "test",
    batch_size: int = 256,
    preprocess=None,
    *,
    by_name: bool = False,
):
    """The whole `split`, in order, for evaluation in one process (through `preprocess`)."""
    return make_dataset_fn(
        manifest, split, batch_size, training=False, preprocess=preprocess, by_name=by_name
    )(None)


def inputs_by_name(manifest: Manifest, model) -> bool:
    """Whether `model` takes a CSV's columns by name rather than as one vector.

    True when the data has columns and every one of the model's Keras inputs
    is named after one of them: such a model gets `parse_fn(by_name=True)`.
    """
    names = list(getattr(model, "input_names", None) or [])
    return bool(manifest.columns) and bool(names) and set(names) <= set(manifest.columns)


def manifest_sha256(manifest: Manifest) -> str:
    """A fingerprint of the data, recorded with results so runs can be matched."""
    return hashlib.sha256(json.dumps(manifest.to_dict(), sort_keys=True).encode()).hexdigest()
