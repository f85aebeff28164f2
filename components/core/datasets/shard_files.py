"""Shard files: records dealt, linked or serialised into a split's TFRecord files."""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from components.core import data_sources, storage, tfrecord
from components.core.config import ConfigError
from components.core.data_sources import BYTES, INT, RAW_UINT8
from components.core.datasets.manifest import SPLITS, ShardFile, SplitInfo


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


def link_files(files: list[str], lengths: list[int], split: str, folder: str) -> SplitInfo:
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


def serialize(source: data_sources.ArraySource, index: int) -> bytes:
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
