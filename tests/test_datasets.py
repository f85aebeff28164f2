"""TFDS -> TFRecord shards -> tf.data, on the real offline digits builder."""

from __future__ import annotations

import json
import os
import shutil
import time

import numpy as np
import pytest

from components.core import datasets, tfds_source
from components.core.config import ConfigError


def test_manifest_describes_real_digits(digits_shards):
    manifest = datasets.load_manifest(digits_shards, verify_records=True)
    assert manifest.dataset == "digits"
    assert manifest.image_shape == (8, 8, 1)
    assert manifest.num_classes == 10
    train, test = manifest.split("train"), manifest.split("test")
    assert train.num_examples + test.num_examples == 1797  # scikit-learn's digits
    assert len(train.files) == len(test.files) == 4
    counts = [f.num_examples for f in train.files]
    assert max(counts) - min(counts) <= 1  # dealt round-robin
    with open(os.path.join(digits_shards, "manifest.json")) as handle:
        on_disk = json.load(handle)
    assert on_disk["label"]["num_classes"] == 10
    assert on_disk["record_format"] == "tfds"  # TFDS's own records: PNGs, not pixels


def test_reader_yields_normalised_labelled_batches(digits_shards):
    manifest = datasets.load_manifest(digits_shards)
    images, labels = next(iter(datasets.eval_dataset(manifest, batch_size=64)))
    assert images.shape == (64, 8, 8, 1)
    assert float(np.min(images)) >= 0.0 and float(np.max(images)) <= 1.0
    assert set(np.unique(labels.numpy())) <= set(range(10))
    total = sum(int(b[1].shape[0]) for b in datasets.eval_dataset(manifest))
    assert total == manifest.split("test").num_examples


def test_each_input_pipeline_reads_its_own_files(digits_shards):
    import tensorflow as tf

    manifest = datasets.load_manifest(digits_shards)
    fn = datasets.make_dataset_fn(manifest, "train", 16, training=True)
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=2
        )
        images, _ = next(iter(fn(context)))
        assert images.shape[0] == 8  # per-replica share of the global batch of 16
        seen.append(images.numpy())
    assert not np.array_equal(seen[0], seen[1])


def _first_labels(dataset_fn, runs: int) -> list[list[int]]:
    """Labels of the first batch from `runs` executions of one traced dataset_fn.

    ParameterServerStrategy traces the dataset_fn once, with InputContext(1, 0),
    and runs that same function on every worker: each execution here is a worker.
    """
    import tensorflow as tf

    tf.random.set_seed(42)  # the coordinator's global seed (keras.utils.set_random_seed)
    traced = tf.function(lambda: dataset_fn(tf.distribute.InputContext(1, 0)))
    concrete = traced.get_concrete_function()
    labels = []
    for _ in range(runs):
        _, label = next(iter(concrete()))
        labels.append(label.numpy().tolist())
    return labels


@pytest.fixture(scope="module")
def one_file_manifest(tfds_dir, tmp_path_factory):
    """One shard file per split: the reader's order then depends on the seed alone."""
    folder = tmp_path_factory.mktemp("one-file") / "digits"
    return datasets.shard_dataset("digits", str(folder), num_shards=1, data_dir=str(tfds_dir))


def test_parameter_server_workers_read_different_streams(one_file_manifest):
    fn = datasets.make_dataset_fn(one_file_manifest, "train", 64, seed=42, per_worker_order=True)
    first, second, third = _first_labels(fn, 3)
    assert first != second and second != third and first != third


def test_without_per_worker_order_every_worker_reads_the_same_stream(one_file_manifest):
    """What ParameterServerStrategy workers read before: the same order everywhere."""
    fn = datasets.make_dataset_fn(one_file_manifest, "train", 64, seed=42)
    first, second = _first_labels(fn, 2)
    assert first == second


def test_fewer_files_than_pipelines_is_refused(digits_shards):
    import tensorflow as tf

    manifest = datasets.load_manifest(digits_shards)
    fn = datasets.make_dataset_fn(manifest, "train", 16)
    context = tf.distribute.InputContext(num_input_pipelines=5, input_pipeline_id=0)
    with pytest.raises(ConfigError, match="--num-shards 5"):
        fn(context)


def test_existing_shards_are_reused(digits_shards, tfds_dir):
    before = os.path.getmtime(os.path.join(digits_shards, "manifest.json"))
    lines = []
    datasets.shard_dataset(
        "digits", digits_shards, num_shards=4, data_dir=str(tfds_dir), log=lines.append
    )
    assert any("reusing" in line for line in lines)
    assert os.path.getmtime(os.path.join(digits_shards, "manifest.json")) == before


def _copy(src, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def test_truncated_shard_is_detected(digits_shards, tmp_path):
    copy = _copy(digits_shards, tmp_path)
    victim = copy / "train-00001-of-00004.tfrecord"
    victim.write_bytes(victim.read_bytes()[:-10])
    with pytest.raises(ConfigError, match="truncated"):
        datasets.load_manifest(str(copy))


def test_corrupted_shard_is_detected_by_record_check(digits_shards, tmp_path):
    copy = _copy(digits_shards, tmp_path)
    victim = copy / "test-00002-of-00004.tfrecord"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, broken CRC
    victim.write_bytes(bytes(data))
    datasets.load_manifest(str(copy))  # sizes still match
    with pytest.raises(ConfigError, match="corrupted"):
        datasets.load_manifest(str(copy), verify_records=True)


def test_manifest_that_does_not_match_its_shards(digits_shards, tmp_path):
    copy = _copy(digits_shards, tmp_path)
    raw = json.loads((copy / "manifest.json").read_text())
    raw["splits"]["train"]["num_examples"] += 5
    (copy / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="do not add up"):
        datasets.load_manifest(str(copy))


def test_missing_manifest_means_unfinished(tmp_path):
    (tmp_path / "half").mkdir()
    with pytest.raises(ConfigError, match="not a finished shards folder"):
        datasets.load_manifest(str(tmp_path / "half"))


def test_unknown_dataset_suggests_close_names(tfds_dir):
    with pytest.raises(ConfigError, match="did you mean.*mnist"):
        tfds_source.tfds_builder("mnistt", str(tfds_dir))


def test_tfds_resolves_configs_and_versions(tfds_dir):
    """What `tfds.builder` takes passes: name/config and name:version, no list check."""
    from components.core.config import DataConfig

    builder = tfds_source.tfds_builder("glue/sst2", str(tfds_dir))
    assert builder.builder_config.name == "sst2"
    assert str(tfds_source.tfds_builder("digits:1.0.0", str(tfds_dir)).info.version) == "1.0.0"
    with pytest.raises(ConfigError, match="cannot build.*glue/nope"):
        tfds_source.tfds_builder("glue/nope", str(tfds_dir))
    # No supervised keys: --label names the label, the other features are the inputs.
    with pytest.raises(ConfigError, match="pass --label NAME"):
        datasets.describe(DataConfig(dataset="glue/sst2", data_dir=str(tfds_dir)))
    spec = datasets.describe(DataConfig(dataset="glue/sst2", label="label", data_dir=str(tfds_dir)))
    assert spec.task == "classification" and spec.label.num_classes == 2
    assert spec.features["sentence"].dtype == "string"


def test_numeric_tfds_label_is_a_regression(tfds_dir):
    from components.core.config import DataConfig

    spec = datasets.describe(DataConfig(dataset="wine_quality", data_dir=str(tfds_dir)))
    assert spec.task == "regression" and spec.label.dtype == "float32"
    assert len(spec.features) == 11  # the dict feature's leaves, by name


def test_download_fails_fast_when_unreachable(tfds_dir, monkeypatch, tmp_path):
    # Port 1 on loopback refuses at once: the real probe, deterministically offline.
    monkeypatch.setattr(datasets.resolution, "_DOWNLOAD_PROBE", ("127.0.0.1", 1))
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="cannot be downloaded.*--data-dir"):
        datasets.shard_dataset("mnist", str(tmp_path / "s"), data_dir=str(tfds_dir))
    assert time.perf_counter() - started < 30
    assert not (tmp_path / "s").exists()


def test_pre_launch_check_follows_how_each_strategy_reads(one_file_manifest, tmp_path):
    from components.core import batching
    from components.core.config import ClusterConfig, DataConfig, RunConfig

    def config(cluster):
        return RunConfig(data=DataConfig(shards_dir=one_file_manifest.root), cluster=cluster)

    # Parameter-server workers each read the whole split: one file feeds them all.
    batching.check_fits(config(ClusterConfig("parameter_server", 3, 1)), one_file_manifest)
    # Multi-worker mirrored workers read their own files: one is too few for two.
    with pytest.raises(ConfigError, match="--num-shards 2"):
        batching.check_fits(config(ClusterConfig("multi_worker_mirrored", 2)), one_file_manifest)
