"""TFDS datasets -> TFRecord shards with a manifest -> `tf.data` input pipelines.

`shard_dataset` turns any supervised image-classification TFDS dataset into
per-worker TFRecord shard files plus `manifest.json` (dataset, version, splits,
example counts, feature spec, shard files with their sizes). `make_dataset_fn`
reads them back as a `dataset_fn(input_context)` that every `tf.distribute`
strategy accepts: files are split across input pipelines (so each worker reads
its own files), batches are per replica, and prefetching is AUTOTUNEd.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from components.core import atomic
from components.core.config import ConfigError
from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

MANIFEST_NAME = "manifest.json"
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


@dataclass(frozen=True)
class Manifest:
    """What a shards folder holds; written last, so its presence means complete.

    Attributes:
        dataset: TFDS name.
        version: TFDS version the shards were made from.
        image_shape: shape of one image (height, width, channels).
        num_classes: number of labels.
        splits: split name -> its shard files.
        root: the folder the manifest was read from (not serialised).
    """

    dataset: str
    version: str
    image_shape: tuple[int, ...]
    num_classes: int
    splits: dict[str, SplitInfo]
    root: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "features": {
                "image": {"shape": list(self.image_shape), "dtype": "uint8"},
                "label": {"num_classes": self.num_classes, "dtype": "int64"},
            },
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
            return cls(
                dataset=raw["dataset"],
                version=raw["version"],
                image_shape=tuple(raw["features"]["image"]["shape"]),
                num_classes=int(raw["features"]["label"]["num_classes"]),
                splits=splits,
                root=root,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(
                f"{root}/{MANIFEST_NAME} is not a Strategist manifest ({err!r}); "
                "delete the folder and shard the dataset again"
            ) from None

    @property
    def input_spec(self) -> InputSpec:
        """The examples these shards hold, as models see them after parsing."""
        return InputSpec(
            features={"image": FeatureSpec(shape=tuple(self.image_shape), dtype="float32")},
            label=LabelSpec(name="label", dtype="int64", num_classes=self.num_classes),
        )

    def file_paths(self, split: str) -> list[str]:
        return [os.path.join(self.root, f.path) for f in self.split(split).files]

    def split(self, name: str) -> SplitInfo:
        try:
            return self.splits[name]
        except KeyError:
            raise ConfigError(
                f"dataset {self.dataset!r} has no {name!r} split in {self.root}"
            ) from None


def _register_builders() -> None:
    import components.core.builders  # noqa: F401  (registers `digits` with TFDS)


def get_builder(name: str, data_dir: str | None = None):
    """The TFDS builder for `name`, checked to be a supervised image classifier.

    Raises:
        ConfigError: unknown dataset (with close matches), or one without an
            image and a class label.
    """
    import tensorflow_datasets as tfds

    _register_builders()
    if data_dir is not None and not os.path.isdir(data_dir):
        raise ConfigError(f"--data-dir {data_dir} does not exist: create it or pass another folder")
    known = tfds.list_builders(with_community_datasets=False)
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(
            f"unknown dataset {name!r}{hint}; `digits` works offline, any TFDS image "
            "classification dataset works with a network"
        )
    builder = tfds.builder(name, data_dir=data_dir)
    check_supervised(builder.info)
    return builder


def check_supervised(info) -> None:
    """Refuses datasets that are not (image, class label) pairs.

    Raises:
        ConfigError: naming what is missing.
    """
    import tensorflow_datasets as tfds

    keys = info.supervised_keys
    if not keys or len(keys) != 2:
        raise ConfigError(
            f"dataset {info.name!r} has no (input, label) supervised keys; Strategist trains "
            "image classifiers: choose a dataset with an image and a label feature"
        )
    image_key, label_key = keys
    label = info.features[label_key]
    if not isinstance(label, tfds.features.ClassLabel):
        raise ConfigError(
            f"dataset {info.name!r}: {label_key!r} is not a class label feature; "
            "Strategist needs a classification label"
        )
    image = info.features[image_key]
    if not isinstance(image, tfds.features.Image) or None in (image.shape or (None,)):
        raise ConfigError(f"dataset {info.name!r}: {image_key!r} is not a fixed-size image feature")


def prepare(builder, *, probe_timeout_s: float = 3.0) -> None:
    """Downloads and prepares `builder` unless it already is.

    A dataset that needs a download is first checked against the network, so
    an offline machine fails in seconds with what to do, not after minutes of
    retries.

    Raises:
        ConfigError: when the download host cannot be reached.
    """
    import tensorflow_datasets as tfds

    if _is_prepared(builder):
        return
    tfds.disable_progress_bar()  # progress goes through `log`, line by line
    if builder.name not in OFFLINE_DATASETS and not _reachable(_DOWNLOAD_PROBE, probe_timeout_s):
        raise ConfigError(
            f"dataset {builder.name!r} is not prepared in {builder.data_dir} and cannot be "
            f"downloaded: {_DOWNLOAD_PROBE[0]} is unreachable. Prepare it where there is a "
            "network (`tfds build` or a Strategist run) and pass that folder with --data-dir, "
            "or use --dataset digits, which needs no network"
        )
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False)
    )


def _is_prepared(builder) -> bool:
    return os.path.isdir(builder.data_dir) and any(
        p.endswith(".json") for p in os.listdir(builder.data_dir)
    )


def _reachable(address: tuple[str, int], timeout_s: float) -> bool:
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return True
    except OSError:
        return False


def default_shards_dir(data_dir: str | None, dataset: str, num_shards: int) -> str:
    root = data_dir or os.path.join(os.path.expanduser("~"), "tensorflow_datasets")
    return os.path.join(root, "strategist_shards", dataset, f"{num_shards}-shards")


def shard_dataset(
    dataset: str,
    shards_dir: str,
    *,
    num_shards: int = 8,
    data_dir: str | None = None,
    log: Callable[[str], None] = print,
) -> Manifest:
    """Writes a TFDS dataset as TFRecord shards plus `manifest.json`.

    Examples are dealt round-robin to `num_shards` files per split, so files
    differ in size by at most one example. The folder is built beside its final
    place and renamed into it, so a crash never leaves a complete-looking one.
    An existing, valid shards folder for the same dataset is reused.

    Args:
        dataset: TFDS name (`digits` builds offline).
        shards_dir: output folder.
        num_shards: files per split; at least the number of input pipelines
            (workers) that will read them.
        data_dir: TFDS data directory.
        log: progress sink.

    Returns:
        The manifest.

    Raises:
        ConfigError: unknown or unsuitable dataset, unreachable download.
    """
    if num_shards < 1:
        raise ConfigError(f"--num-shards must be at least 1, got {num_shards}")
    existing = _reusable_manifest(shards_dir, dataset, num_shards)
    if existing is not None:
        log(f"shards: reusing {shards_dir} ({_describe(existing)})")
        return existing

    builder = get_builder(dataset, data_dir)
    started = time.perf_counter()
    log(f"shards: preparing {dataset} {builder.info.version} in {builder.data_dir}")
    prepare(builder)
    image_key, label_key = builder.info.supervised_keys
    image_shape = tuple(int(d) for d in builder.info.features[image_key].shape)
    num_classes = builder.info.features[label_key].num_classes

    splits: dict[str, SplitInfo] = {}
    with atomic.staged_dir(shards_dir) as staging:
        for split in SPLITS:
            if split not in builder.info.splits:
                raise ConfigError(f"dataset {dataset!r} has no {split!r} split")
            splits[split] = _write_split(builder, split, staging, num_shards)
            log(f"shards: {split}: {splits[split].num_examples} examples in {num_shards} files")
        manifest = Manifest(
            dataset=dataset,
            version=str(builder.info.version),
            image_shape=image_shape,
            num_classes=num_classes,
            splits=splits,
            root=shards_dir,
        )
        # Written last: a folder with a manifest is a finished folder.
        atomic.write_json(os.path.join(staging, MANIFEST_NAME), manifest.to_dict())
    log(f"shards: wrote {shards_dir} in {time.perf_counter() - started:.1f}s")
    return manifest


def _write_split(builder, split: str, folder: str, num_shards: int) -> SplitInfo:
    """Writes one split of a TFDS builder as shards (see `write_shards`)."""
    import tensorflow_datasets as tfds

    examples = tfds.as_numpy(builder.as_dataset(split=split, as_supervised=True))
    return write_shards(examples, split, folder, num_shards)


def write_shards(
    examples: Iterable[tuple[Any, int]], split: str, folder: str, num_shards: int
) -> SplitInfo:
    """Deals (image, label) examples round-robin into `num_shards` TFRecord files.

    The files are `folder/<split>-0000i-of-0000n.tfrecord`, each record an
    `Example` with the uint8 image bytes and the int64 label: what `parse_fn`
    reads. Files differ in size by at most one example.

    Returns:
        The split's entry of the manifest.
    """
    import numpy as np
    import tensorflow as tf

    names = [f"{split}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    counts = [0] * num_shards
    writers = [tf.io.TFRecordWriter(os.path.join(folder, n)) for n in names]
    try:
        for index, (image, label) in enumerate(examples):
            shard = index % num_shards
            writers[shard].write(_serialize(np.asarray(image, np.uint8), int(label)))
            counts[shard] += 1
    finally:
        for writer in writers:
            writer.close()
    files = tuple(
        ShardFile(n, c, os.path.getsize(os.path.join(folder, n)))
        for n, c in zip(names, counts, strict=True)
    )
    return SplitInfo(sum(counts), files)


def _describe(manifest: Manifest) -> str:
    return ", ".join(
        f"{name} {split.num_examples} examples/{len(split.files)} files"
        for name, split in manifest.splits.items()
    )


def _reusable_manifest(shards_dir: str, dataset: str, num_shards: int) -> Manifest | None:
    if not os.path.exists(os.path.join(shards_dir, MANIFEST_NAME)):
        return None
    try:
        manifest = load_manifest(shards_dir)
    except ConfigError:
        return None
    if manifest.dataset != dataset or any(
        len(s.files) != num_shards for s in manifest.splits.values()
    ):
        return None
    return manifest


def _serialize(image, label: int) -> bytes:
    import tensorflow as tf

    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def load_manifest(shards_dir: str, *, verify_records: bool = False) -> Manifest:
    """Reads and checks a shards folder.

    Every listed file must exist with the recorded size; with `verify_records`
    every record is also read back (CRC-checked) and counted.

    Raises:
        ConfigError: missing folder or manifest, missing, truncated or corrupted
            shard files, counts that do not match — with what to do.
    """
    path = os.path.join(shards_dir, MANIFEST_NAME)
    if not os.path.isdir(shards_dir):
        raise ConfigError(f"shards folder {shards_dir} does not exist: shard the dataset first")
    try:
        with open(path) as handle:
            raw = json.load(handle)
    except FileNotFoundError:
        raise ConfigError(
            f"{shards_dir} has no {MANIFEST_NAME}: it is not a finished shards folder; "
            "shard the dataset again"
        ) from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path} is not valid JSON ({err}); shard the dataset again") from None
    manifest = Manifest.from_dict(raw, root=shards_dir)
    remedy = "delete the folder and shard the dataset again"
    for name, split in manifest.splits.items():
        if sum(f.num_examples for f in split.files) != split.num_examples:
            raise ConfigError(
                f"manifest of {shards_dir}: {name} file counts do not add up to "
                f"{split.num_examples}; {remedy}"
            )
        for shard in split.files:
            file_path = os.path.join(shards_dir, shard.path)
            try:
                size = os.path.getsize(file_path)
            except OSError:
                raise ConfigError(f"shard file {file_path} is missing; {remedy}") from None
            if size != shard.num_bytes:
                raise ConfigError(
                    f"shard file {file_path} has {size} bytes, the manifest says "
                    f"{shard.num_bytes}: it was changed or truncated; {remedy}"
                )
            if verify_records:
                _verify_records(file_path, shard.num_examples, remedy)
    return manifest


def _verify_records(file_path: str, expected: int, remedy: str) -> None:
    import tensorflow as tf

    try:
        count = sum(1 for _ in tf.data.TFRecordDataset(file_path))
    except tf.errors.DataLossError as err:
        raise ConfigError(
            f"shard file {file_path} is corrupted ({err.message}); {remedy}"
        ) from None
    if count != expected:
        raise ConfigError(
            f"shard file {file_path} holds {count} records, the manifest says {expected}; {remedy}"
        )


def parse_fn(manifest: Manifest):
    """A function that turns a serialised example into (image float32 in [0,1], label)."""
    import tensorflow as tf

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    shape = manifest.image_shape

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        image = tf.reshape(tf.io.decode_raw(example["image"], tf.uint8), shape)
        return tf.cast(image, tf.float32) / 255.0, example["label"]

    return parse


def make_dataset_fn(
    manifest: Manifest,
    split: str,
    global_batch_size: int,
    *,
    training: bool = True,
    seed: int = 0,
    per_worker_order: bool = False,
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

    `preprocess(features, label) -> (inputs, label)`, a model module's, is
    mapped over each example after the cache, so random augmentation differs
    per epoch.

    Raises:
        ConfigError: when there are fewer shard files than input pipelines.
    """
    import tensorflow as tf

    files = manifest.file_paths(split)
    info = manifest.split(split)
    total_bytes = sum(f.num_bytes for f in info.files)
    parse = parse_fn(manifest)

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
        ds = ds.batch(batch, drop_remainder=training)
        return ds.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def eval_dataset(manifest: Manifest, split: str = "test", batch_size: int = 256, preprocess=None):
    """The whole `split`, in order, for evaluation in one process (through `preprocess`)."""
    return make_dataset_fn(manifest, split, batch_size, training=False, preprocess=preprocess)(None)


def manifest_sha256(manifest: Manifest) -> str:
    """A fingerprint of the data, recorded with results so runs can be matched."""
    return hashlib.sha256(json.dumps(manifest.to_dict(), sort_keys=True).encode()).hexdigest()
