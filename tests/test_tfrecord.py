"""TFRecord shards written without TensorFlow, checked against TensorFlow's own writer and reader.

`components.core.tfrecord` frames records and `datasets` builds `tf.train.Example`s
from TFDS's copy of the protos; TensorFlow is imported here only as the reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from components.core import data_sources, datasets, tfrecord
from components.core.config import ConfigError, DataConfig
from components.core.datasets import shard_files

ROOT = Path(__file__).resolve().parents[1]


def _records() -> list[bytes]:
    """Records of every kind of length: empty, one byte, one longer than 64 KiB, Examples."""
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, (8, 8, 1), dtype=np.uint8)
    mixed = shard_files._example(
        {
            "x": shard_files._float_feature([0.5, -1.25, 3e-8]),
            "name": shard_files._bytes_feature([b"seven", b""]),
            "y": shard_files._int_feature([7, -1, 2**40]),
        }
    )
    return [b"", b"x", rng.bytes(70_000), shard_files._image_example(image, 3), mixed]


def _tensorflow_writes(path: Path, records: list[bytes]) -> bytes:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path.read_bytes()


def test_writer_writes_byte_for_byte_what_tensorflow_writes(tmp_path):
    import tensorflow as tf

    records = _records()
    ours = tmp_path / "ours.tfrecord"
    with tfrecord.RecordWriter(ours) as writer:
        for record in records:
            writer.write(record)
    assert ours.read_bytes() == _tensorflow_writes(tmp_path / "tf.tfrecord", records)
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(ours))] == records
    assert list(tfrecord.read_records(tmp_path / "tf.tfrecord")) == records


def test_examples_serialise_as_tensorflow_does():
    import tensorflow as tf

    ours = _records()[-1]
    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, -1.25, 3e-8])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"seven", b""])),
        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[7, -1, 2**40])),
    }
    theirs = tf.train.Example(features=tf.train.Features(feature=feature))
    assert ours == theirs.SerializeToString()
    assert tf.train.Example.FromString(ours) == theirs


def _npz(path: Path, count: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    arrays = {
        "image": rng.integers(0, 256, (count, 4, 4, 1), dtype=np.uint8),
        "tokens": rng.integers(-5, 9, (count, 3)),
        "age": rng.random(count).astype(np.float32),
        "y": np.arange(count) % 3,
    }
    np.savez(path, **arrays)
    return arrays


def _tensorflow_example(arrays: dict[str, np.ndarray], row: int) -> bytes:
    """Row `row` of `_npz`'s arrays as TensorFlow itself serialises it."""
    import tensorflow as tf

    feature = {
        "image": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[arrays["image"][row].tobytes()])
        ),
        "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=arrays["tokens"][row])),
        "age": tf.train.Feature(float_list=tf.train.FloatList(value=[arrays["age"][row]])),
        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[arrays["y"][row]])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_npz_shards_are_the_files_tensorflow_writes_and_the_trainer_parses_them(tmp_path):
    arrays = _npz(tmp_path / "data.npz")
    data = DataConfig(files=str(tmp_path / "data.npz"), num_shards=3, test_fraction=0.25)
    manifest = datasets.shard_data(data, str(tmp_path / "shards"), log=lambda _: None)
    for split in datasets.SPLITS:
        rows = [
            row
            for row in range(len(arrays["y"]))
            if data_sources.in_test_split(row, data.test_fraction) == (split == "test")
        ]
        for index, path in enumerate(manifest.file_paths(split)):
            # Dealt round-robin: shard `index` holds every third example of the split.
            expected = [_tensorflow_example(arrays, row) for row in rows[index::3]]
            reference = _tensorflow_writes(tmp_path / f"{split}-{index}.tf", expected)
            assert Path(path).read_bytes() == reference, path
        parsed = list(datasets.eval_dataset(manifest, split, batch_size=len(rows), by_name=True))
        ((features, labels),) = parsed
        np.testing.assert_array_equal(labels.numpy(), arrays["y"][rows])
        np.testing.assert_array_equal(features["tokens"].numpy(), arrays["tokens"][rows])
        np.testing.assert_array_equal(features["age"].numpy(), arrays["age"][rows])
        np.testing.assert_allclose(features["image"].numpy(), arrays["image"][rows] / 255.0)


def test_reader_refuses_truncated_and_damaged_files(tmp_path):
    records = [b"first record", b"second"]
    whole = b"".join(tfrecord.frame(r) for r in records)
    first = len(tfrecord.frame(records[0]))
    path = tmp_path / "r.tfrecord"
    for cut in (5, first + 3, first + 14, len(whole) - 1):  # header, length CRC, data, footer
        path.write_bytes(whole[:cut])
        with pytest.raises(tfrecord.CorruptRecordError, match="record 1|record 0"):
            list(tfrecord.read_records(path))
    for position in (2, 9, first - 6, first - 1):  # length, its CRC, data, data CRC
        damaged = bytearray(whole)
        damaged[position] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(tfrecord.CorruptRecordError, match="record 0"):
            list(tfrecord.read_records(path))


def test_a_corrupted_source_file_is_refused_with_its_name(tmp_path):
    path = tmp_path / "part.tfrecord"
    path.write_bytes(tfrecord.frame(b"record")[:-1])
    with pytest.raises(ConfigError, match=r"part.tfrecord is corrupted \(record 0 is truncated"):
        datasets.deal_records([str(path)], str(tmp_path), 1)


def test_sharding_digits_and_npz_imports_no_tensorflow(digits_shards, tfds_dir, tmp_path):
    """The shard step's work: TFDS's digits records dealt and npz arrays written, no TensorFlow."""
    _npz(tmp_path / "data.npz")
    script = f"""
import sys
from components.core import datasets
from components.core.config import DataConfig
datasets.shard_dataset("digits", {str(tmp_path / "d")!r}, num_shards=3, data_dir={str(tfds_dir)!r})
datasets.shard_data(DataConfig(files={str(tmp_path / "data.npz")!r}), {str(tmp_path / "n")!r})
datasets.load_manifest({str(tmp_path / "d")!r})
print("tensorflow imported:", "tensorflow" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tensorflow imported: False" in done.stdout
    # What TensorFlow's reader and the trainer's parser make of the digits shards.
    manifest = datasets.load_manifest(str(tmp_path / "d"), verify_records=True)
    total = sum(int(labels.shape[0]) for _, labels in datasets.eval_dataset(manifest))
    assert total == manifest.split("test").num_examples == 359
