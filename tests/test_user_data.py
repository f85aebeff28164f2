"""The user's data: TFDS datasets of any shape, CSV, npz and tfrecord files, and bad data refused.

Everything is offline: CSV files come from scikit-learn's bundled data
(examples/csv_data.py), TFDS datasets from builders written here or bundled.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from components.core import data_sources, datasets
from components.core.config import ConfigError, DataConfig, RunConfig
from pipelines.cli import common, main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example_module(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def csv_dir(tmp_path_factory) -> Path:
    """breast_cancer.csv (classification) and diabetes.csv (regression)."""
    folder = tmp_path_factory.mktemp("csv")
    examples = _example_module("csv_data")
    examples.breast_cancer(str(folder))
    examples.diabetes(str(folder))
    return folder


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        return header, list(reader)


def _all(manifest, split="test", by_name=False):
    """Every example of `split`, in shard order, as numpy."""
    batches = list(datasets.eval_dataset(manifest, split, batch_size=1000, by_name=by_name))
    assert len(batches) == 1
    return batches[0]


def test_csv_numeric_columns_reach_a_single_input_model_as_one_vector(csv_dir, tmp_path):
    data = DataConfig(files=str(csv_dir / "breast_cancer.csv"), label="target", num_shards=1)
    manifest = datasets.shard_data(data, str(tmp_path / "s"))
    spec = manifest.input_spec
    assert spec.task == "classification" and spec.label.num_classes == 2
    assert spec.single_feature.shape == (30,) and spec.single_feature.dtype == "float32"
    header, rows = _rows(csv_dir / "breast_cancer.csv")
    assert manifest.columns == tuple(header[:-1])
    features, labels = _all(manifest)
    # The test split is every 5th row (test fraction 0.2), in file order with one shard file:
    # exactly what read_csv(...).to_numpy() gives for those rows.
    expected = np.array([[float(v) for v in row[:-1]] for row in rows[4::5]], np.float32)
    np.testing.assert_allclose(features.numpy(), expected, rtol=1e-6)
    assert labels.dtype.name == "int64"
    assert labels.numpy().tolist() == [int(row[-1]) for row in rows[4::5]]


def test_csv_columns_by_name_for_models_with_named_inputs(csv_dir, tmp_path):
    data = DataConfig(files=str(csv_dir / "breast_cancer.csv"), label="target", num_shards=2)
    manifest = datasets.shard_data(data, str(tmp_path / "s"))
    named = manifest.column_input_spec
    assert list(named.features) == list(manifest.columns)
    features, _ = _all(manifest, by_name=True)
    assert set(features) == set(manifest.columns)
    assert features["mean_radius"].shape == (manifest.split("test").num_examples,)


def test_whole_number_csv_columns_stay_integers(tmp_path):
    """A column of whole numbers (an age, a count) reaches a model with named inputs as int64,
    beside float and string columns; in the one vector of a numeric table, as numbers."""
    mixed = tmp_path / "pets.csv"
    rows = [f"{kind},{age},{fee / 3:.3f},{age % 2}" for age, (kind, fee) in
            enumerate([("Cat", 10), ("Dog", 25)] * 10)]  # fmt: skip
    mixed.write_text("type,age,fee,adopted\n" + "\n".join(rows) + "\n")
    manifest = datasets.shard_data(
        DataConfig(files=str(mixed), label="adopted", num_shards=1), str(tmp_path / "m")
    )
    dtypes = {name: f.dtype for name, f in manifest.input_spec.features.items()}
    assert dtypes == {"type": "string", "age": "int64", "fee": "float32"}
    features, _ = _all(manifest)
    assert features["age"].dtype.name == "int64"
    assert features["age"].numpy().tolist() == [4, 9, 14, 19]  # every 5th row: the test split

    numeric = tmp_path / "numbers.csv"
    numeric.write_text("age,fee,adopted\n" + "\n".join(r.split(",", 1)[1] for r in rows) + "\n")
    manifest = datasets.shard_data(
        DataConfig(files=str(numeric), label="adopted", num_shards=1), str(tmp_path / "n")
    )
    vector, _ = _all(manifest)
    assert vector.dtype.name == "float32" and vector.numpy()[0].tolist()[0] == 4.0


def test_float_labels_make_a_regression(csv_dir, tmp_path):
    data = DataConfig(files=str(csv_dir / "diabetes.csv"), label="progression", num_shards=2)
    manifest = datasets.shard_data(data, str(tmp_path / "s"))
    assert manifest.input_spec.task == "regression"
    assert manifest.input_spec.label.dtype == "float32"
    _, labels = _all(manifest)
    assert labels.dtype.name == "float32" and float(labels.numpy().min()) >= 25.0


@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.5])
def test_split_of_files_is_deterministic(csv_dir, tmp_path, fraction):
    data = DataConfig(
        files=str(csv_dir / "diabetes.csv"), label="progression", test_fraction=fraction
    )
    first = datasets.shard_data(data, str(tmp_path / "a"))
    again = datasets.shard_data(data, str(tmp_path / "b"))
    assert first.split("test").num_examples == int(442 * fraction)  # floor(n * f)
    assert first.split("train").num_examples == 442 - int(442 * fraction)
    np.testing.assert_array_equal(_all(first)[1], _all(again)[1])


def test_npz_x_and_y_or_named_arrays(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(50, 4, 4, 1), dtype=np.uint8)
    np.savez(tmp_path / "images.npz", x=x, y=np.arange(50) % 3)
    single = datasets.shard_data(
        DataConfig(files=str(tmp_path / "images.npz"), num_shards=2), str(tmp_path / "s1")
    )
    assert single.input_spec.single_feature.shape == (4, 4, 1)
    images, labels = _all(single, "train")
    assert float(images.numpy().max()) <= 1.0  # uint8 arrays arrive as float32 in [0, 1]
    assert single.input_spec.label.num_classes == 3

    np.savez(
        tmp_path / "named.npz",
        age=rng.random(50),
        tokens=rng.integers(0, 9, (50, 7)),
        price=rng.random(50),
    )
    named = datasets.shard_data(
        DataConfig(files=str(tmp_path / "named.npz"), label="price", num_shards=2),
        str(tmp_path / "s2"),
    )
    spec = named.input_spec
    assert spec.task == "regression" and set(spec.features) == {"age", "tokens"}
    assert spec.features["tokens"].dtype == "int64" and spec.features["tokens"].shape == (7,)
    features, _ = _all(named)
    assert features["tokens"].dtype.name == "int64"


def _write_tfrecord(path: Path, count: int) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(count):
            feature = {
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i + 0.5])),
                "words": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * (i % 4 + 1))),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


TFRECORD_SPEC = {
    "x": {"shape": [2], "dtype": "float32"},
    "words": {"shape": [None], "dtype": "int64"},
    "y": {"shape": [], "dtype": "int64", "num_classes": 2},
}


def test_tfrecord_files_keep_their_records_and_variable_features_are_padded(tmp_path):
    for part in range(2):
        _write_tfrecord(tmp_path / f"part-{part}.tfrecord", 20)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(TFRECORD_SPEC))
    data = DataConfig(
        files=str(tmp_path / "part-*.tfrecord"),
        label="y",
        feature_spec=str(spec_file),
        num_shards=2,
    )
    manifest = datasets.shard_data(data, str(tmp_path / "s"))
    assert manifest.split("test").num_examples == 8 and manifest.split("train").num_examples == 32
    assert manifest.input_spec.features["words"].shape == (None,)
    # The records are the source's bytes: the shards add up to the files (plus framing).
    source = sum(os.path.getsize(p) for p in tmp_path.glob("part-*.tfrecord"))
    shards = sum(f.num_bytes for s in manifest.splits.values() for f in s.files)
    assert shards == source
    features, labels = _all(manifest, "train")
    assert features["words"].shape == (32, 4)  # padded to the longest in the batch
    assert labels.dtype.name == "int64"
    datasets.load_manifest(manifest.root, verify_records=True)  # counts match the records


PASSENGERS_BUILDER = '''
import numpy as np
import tensorflow_datasets as tfds


class Passengers(tfds.core.GeneratorBasedBuilder):
    """Titanic-like: a dict of mixed features, a class label, a train split only."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "features": tfds.features.FeaturesDict({
                    "age": np.float32,
                    "fare": np.float32,
                    "name": tfds.features.Text(),
                    "pclass": tfds.features.ClassLabel(num_classes=3),
                }),
                "survived": tfds.features.ClassLabel(num_classes=2),
            }),
            supervised_keys=("features", "survived"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for i in range(500):
            yield i, {
                "features": {"age": float(i % 70), "fare": float(i), "name": f"p{i}",
                             "pclass": i % 3},
                "survived": int(i % 70 < 30),
            }
'''


@pytest.fixture(scope="module")
def passengers_module(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("module") / "passengers_builder.py"
    path.write_text(PASSENGERS_BUILDER)
    return str(path)


def test_tfds_dict_features_from_a_users_builder_module(passengers_module, tmp_path):
    (tmp_path / "tfds").mkdir()
    data = DataConfig(
        dataset="passengers",
        dataset_module=passengers_module,
        data_dir=str(tmp_path / "tfds"),
        num_shards=2,
    )
    spec = datasets.describe(data)
    assert set(spec.features) == {"age", "fare", "name", "pclass"}
    assert spec.features["name"].dtype == "string" and spec.features["pclass"].dtype == "int64"
    manifest = datasets.shard_data(data, str(tmp_path / "s"))
    # Only a train split: every 5th example is held out.
    assert manifest.split("test").num_examples == 100
    assert manifest.split("train").num_examples == 400
    features, labels = _all(manifest)
    assert features["name"].dtype.name == "string" and labels.dtype.name == "int64"
    # Another label: the other top-level features are the inputs, the numeric label a regression.
    by_label = datasets.describe(
        DataConfig(
            dataset="passengers",
            dataset_module=passengers_module,
            label="survived",
            data_dir=str(tmp_path / "tfds"),
        )
    )
    assert set(by_label.features) == {"age", "fare", "name", "pclass"}


def test_digits_shards_are_tfds_own_records(digits_shards, tfds_dir):
    """No growth: the shards hold TFDS's PNG records, byte for byte (docs/design.md)."""
    tfds_bytes = sum(
        os.path.getsize(p) for p in (tfds_dir / "digits" / "1.0.0").glob("*.tfrecord*")
    )
    manifest = datasets.load_manifest(digits_shards)
    shard_bytes = sum(f.num_bytes for s in manifest.splits.values() for f in s.files)
    assert shard_bytes == tfds_bytes


def test_tfds_files_are_the_shards_when_there_are_enough(tfds_dir, tmp_path):
    manifest = datasets.shard_dataset(
        "digits", str(tmp_path / "one"), num_shards=1, data_dir=str(tfds_dir)
    )
    source = tfds_dir / "digits" / "1.0.0" / "digits-train.tfrecord-00000-of-00001"
    shard = manifest.file_paths("train")[0]
    assert os.path.samefile(source, shard) or Path(source).read_bytes() == Path(shard).read_bytes()


# ------------------------------------------------------------------------- bad data

BAD_DATA = {
    "file-missing": (["--data", "{tmp}/nope.csv", "--label", "y"], "does not exist"),
    "glob-matches-nothing": (["--data", "{tmp}/none-*.csv"], "matches no file"),
    "unsupported-file": (["--data", "{tmp}/notes.txt"], "must all be one of .csv"),
    "csv-without-label-flag": (["--data", "{csv}/breast_cancer.csv"], "needs --label COLUMN"),
    "label-column-missing": (
        ["--data", "{csv}/breast_cancer.csv", "--label", "targett"],
        "is not a column of .* \\(did you mean 'target'\\?\\)",
    ),
    "non-numeric-column-for-a-vector-input": (
        ["--data", "{tmp}/words.csv", "--label", "y"],
        "--model mlp takes one numeric input, the data has .*colour \\(string\\)",
    ),
    # A built-in model takes the same pre-flight as a user's module: no cluster starts to fail.
    "built-in-cnn-on-a-vector": (
        ["--data", "{csv}/breast_cancer.csv", "--label", "target", "--model", "cnn"],
        "build_model of cnn failed: .*expected min_ndim=4, found ndim=2",
    ),
    "negative-class-ids": (["--data", "{tmp}/negative.csv", "--label", "y"], "class ids must"),
    "whole-number-regression-labels": (
        ["--data", "{tmp}/prices.csv", "--label", "y"],
        "too many to be class ids 0..K-1; for a regression write them as 1.0",
    ),
    "empty-label-cell": (["--data", "{tmp}/holes.csv", "--label", "y"], "holes.csv:3: label"),
    "empty-test-split": (["--data", "{tmp}/tiny.csv", "--label", "y"], "test split .* is empty"),
    "header-only": (["--data", "{tmp}/header.csv", "--label", "y"], "has a header but no rows"),
    "npz-without-label": (["--data", "{tmp}/nolabel.npz"], "has no array 'y'"),
    "tfrecord-without-spec": (["--data", "{tmp}/r.tfrecord", "--label", "y"], "--feature-spec"),
    "tfrecord-spec-does-not-match": (
        [
            "--data",
            "{tmp}/r.tfrecord",
            "--label",
            "y",
            "--feature-spec",
            '{"x": {"shape": [3], "dtype": "float32"}, "y": {"dtype": "int64", "num_classes": 2}}',
        ],
        "do not match --feature-spec",
    ),
    "tfrecord-int-label-without-classes": (
        [
            "--data",
            "{tmp}/r.tfrecord",
            "--label",
            "y",
            "--feature-spec",
            '{"x": {"shape": [2], "dtype": "float32"}, "y": {"dtype": "int64"}}',
        ],
        'add "num_classes"',
    ),
    "unknown-tfds-name": (["--dataset", "mnits"], "TFDS cannot find dataset 'mnits' .*mnist"),
    "unknown-tfds-config": (
        ["--dataset", "glue/nope"],
        "cannot build dataset 'glue/nope': it has no config 'nope'; .*configs: cola, sst2",
    ),
    "dict-features-for-the-mlp": (
        ["--dataset", "passengers", "--dataset-module", "{module}"],
        "--model mlp takes one numeric input, the data has age",
    ),
    "dataset-module-missing": (
        ["--dataset", "x", "--dataset-module", "{tmp}/nope.py"],
        "nope.py: no such file: pass the path of a .py file",
    ),
    "dataset-module-not-a-py-file": (
        ["--dataset", "x", "--dataset-module", "{tmp}/notes.txt"],
        "notes.txt: not a .py file: pass the path of a .py file",
    ),
    "dataset-module-a-folder": (
        ["--dataset", "x", "--dataset-module", "{tmp}/"],
        "is a folder: pass the path of a .py file",
    ),
    "dataset-module-raises": (
        ["--dataset", "x", "--dataset-module", "{tmp}/broken.py"],
        "ZeroDivisionError: division by zero \\(.*broken.py:2\\)",
    ),
    "label-not-a-feature": (
        ["--dataset", "digits", "--label", "colour"],
        "has no feature 'colour' for --label",
    ),
    "data-and-dataset": (["--data", "{tmp}/a.csv", "--dataset", "mnist"], "not allowed with"),
    "feature-spec-without-tfrecord": (
        ["--feature-spec", '{"x": {}}'],
        "--feature-spec describes .tfrecord files",
    ),
    "test-fraction-out-of-range": (["--test-fraction", "1.5"], "between 0 and 1"),
}


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bad")
    (folder / "notes.txt").write_text("hello\n")
    (folder / "words.csv").write_text("size,colour,y\n" + "1,red,0\n2,blue,1\n" * 10)
    (folder / "negative.csv").write_text("a,y\n" + "1,-1\n2,1\n" * 10)
    (folder / "prices.csv").write_text("a,y\n" + "".join(f"{i},{250000 + i}\n" for i in range(20)))
    (folder / "holes.csv").write_text("a,y\n1,0\n2,\n3,1\n")
    (folder / "tiny.csv").write_text("a,y\n1,0\n2,1\n3,0\n")
    (folder / "header.csv").write_text("a,y\n")
    np.savez(folder / "nolabel.npz", x=np.zeros((4, 2)), target=np.zeros(4))
    _write_plain_tfrecord(folder / "r.tfrecord")
    (folder / "broken.py").write_text("import os\nVALUE = 1 / 0\n")
    return folder


def _write_plain_tfrecord(path: Path) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(10):
            feature = {
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i])),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


@pytest.mark.parametrize("case", BAD_DATA, ids=list(BAD_DATA))
def test_bad_data_exits_2_with_what_to_do_before_anything_starts(
    case, bad_files, csv_dir, passengers_module, tfds_dir, tmp_path, capsys
):
    argv, message = BAD_DATA[case]
    values = {"tmp": bad_files, "csv": csv_dir, "module": passengers_module}
    argv = [a if a.startswith('{"') else a.format(**values) for a in argv]
    output = tmp_path / "out"
    try:
        code = main(["train", "--output", str(output), "--data-dir", str(tfds_dir), *argv])
        one_line = True
    except SystemExit as exit_:  # argparse's own refusals (usage, then the error)
        code, one_line = exit_.code, False
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(message, err), err
    if one_line:
        # One line to act on; its length allows for the long paths of the test's folders.
        assert len(err.strip().splitlines()) == 1 and len(err) < 400, err
    assert not output.exists()  # nothing started, nothing written


def test_bad_data_is_refused_by_compare_too(bad_files, capsys):
    code = main(["compare", "--data", str(bad_files / "words.csv"), "--label", "y"])
    assert code == 2
    assert "takes one numeric input" in capsys.readouterr().err


def test_compare_pre_flights_a_built_in_model_before_any_task_starts(csv_dir, tmp_path, capsys):
    out = tmp_path / "compare"
    data = ["--data", str(csv_dir / "breast_cancer.csv"), "--label", "target", "--model", "cnn"]
    assert main(["compare", *data, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search("build_model of cnn failed: .*expected min_ndim=4, found ndim=2", err), err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_compare_refuses_to_judge_a_regression_on_accuracy(csv_dir, tmp_path, capsys):
    """A float label has no accuracy: compare says which --target-metric to pass, and starts
    nothing (no output folder)."""
    out = tmp_path / "compare"
    data = ["--data", str(csv_dir / "diabetes.csv"), "--label", "progression"]
    assert main(["compare", *data, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "is a regression (its label is a float), which has no accuracy: pass" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_dataset_module_error_names_its_file_and_line(bad_files):
    with pytest.raises(ConfigError, match=r"broken\.py:2"):
        datasets.describe(DataConfig(dataset="x", dataset_module=str(bad_files / "broken.py")))


COUNTED_BUILDER = '''
import os

import numpy as np
import tensorflow_datasets as tfds


class Counted(tfds.core.GeneratorBasedBuilder):
    """Two float features and a class; each construction adds a line to `constructed`."""

    VERSION = tfds.core.Version("1.0.0")

    def __init__(self, **kwargs):
        with open(os.path.join(os.path.dirname(__file__), "constructed"), "a") as log:
            log.write("built\\n")
        super().__init__(**kwargs)

    def _info(self):
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "x": tfds.features.Tensor(shape=(2,), dtype=np.float32),
                "y": tfds.features.ClassLabel(num_classes=2),
            }),
            supervised_keys=("x", "y"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for i in range(10):
            yield i, {"x": [float(i), 1.0], "y": i % 2}
'''


def test_the_pre_flight_builds_a_tfds_dataset_once(tmp_path):
    """`train` and `compare` check the data with one builder: building one can import
    TensorFlow and read the dataset's metadata, seconds a time."""
    module = tmp_path / "counted_builder.py"
    module.write_text(COUNTED_BUILDER)
    (tmp_path / "tfds").mkdir()
    data = DataConfig(
        dataset="counted", dataset_module=str(module), data_dir=str(tmp_path / "tfds")
    )
    spec = common.check_data(RunConfig(data=data))
    assert spec.single_feature.shape == (2,)
    assert (tmp_path / "constructed").read_text().splitlines() == ["built"]


# ------------------------------------------------------------------------- real clusters


STRATEGIES = ["mirrored", "multi_worker_mirrored", "parameter_server"]


def _mean_predictor_mae(path: Path) -> float:
    """Test MAE of predicting the training mean: the bar a regression must clear."""
    _, rows = _rows(path)
    values = np.array([float(row[-1]) for row in rows])
    test = np.array([data_sources.in_test_split(i, 0.2) for i in range(len(values))])
    return float(np.mean(np.abs(values[test] - values[~test].mean())))


def _train(
    csv: Path, label: str, tmp_path: Path, *extra: str, strategy="multi_worker_mirrored"
) -> dict:
    out = tmp_path / "run"
    (tmp_path / "tfds").mkdir()
    data = ["--data", str(csv), "--label", label, "--data-dir", str(tmp_path / "tfds")]
    assert main(["train", "--strategy", strategy, "--output", str(out), *data, *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


# The CSV pipeline is the same under every strategy: one cluster in `make test`, the other
# two in `make test-heavy`.
@pytest.mark.cluster
@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param("mirrored", marks=pytest.mark.heavy),
        "multi_worker_mirrored",
        pytest.param("parameter_server", marks=pytest.mark.heavy),
    ],
)
def test_csv_classifier_example_learns(strategy, csv_dir, tmp_path):
    csv_file = csv_dir / "breast_cancer.csv"
    metrics = _train(csv_file, "target", tmp_path, "--epochs", "5", strategy=strategy)
    assert metrics["dataset"] == "breast_cancer" and metrics["task"] == "classification"
    assert metrics["eval_accuracy"] >= 0.85


@pytest.mark.cluster
def test_csv_regression_example_beats_the_mean_predictor(csv_dir, tmp_path):
    """The built-in mlp on a flat float vector, one output and MSE, on a real cluster (the
    regression example module learns the same file on every strategy: test_model_module)."""
    csv_file = csv_dir / "diabetes.csv"
    flags = ("--epochs", "20", "--learning-rate", "0.01")
    metrics = _train(csv_file, "progression", tmp_path, *flags)
    assert metrics["task"] == "regression"
    baseline = _mean_predictor_mae(csv_file)
    assert baseline > 55  # the spread of diabetes progression
    assert metrics["eval_metrics"]["mae"] < 0.85 * baseline


@pytest.mark.cluster
def test_a_model_with_named_inputs_gets_the_columns_by_name(csv_dir, tmp_path):
    csv_file = csv_dir / "diabetes.csv"
    module = EXAMPLES / "diabetes_named_inputs.py"
    metrics = _train(
        csv_file, "progression", tmp_path, "--model-module", str(module), "--epochs", "10"
    )
    assert metrics["eval_metrics"]["mae"] < 0.85 * _mean_predictor_mae(csv_file)


def test_inputs_by_name_follows_the_models_input_names(csv_dir, tmp_path):
    import tf_keras as keras

    named = _example_module("diabetes_named_inputs").build_model(None)
    data = DataConfig(files=str(csv_dir / "diabetes.csv"), label="progression", num_shards=1)
    manifest = datasets.shard_data(data, str(tmp_path / "s"))
    vector = keras.Sequential([keras.layers.Input(shape=(10,)), keras.layers.Dense(1)])
    assert datasets.inputs_by_name(manifest, named)
    assert not datasets.inputs_by_name(manifest, vector)
    features, _ = _all(manifest, by_name=True)
    assert named(features).shape == (manifest.split("test").num_examples, 1)


def test_compare_takes_existing_shards(digits_shards, tmp_path):
    """`compare --shards-dir`: checked record by record, passed to the shard step, linked."""
    from pipelines.cli import build_parser
    from pipelines.cli.compare import pipeline_arguments

    args = build_parser().parse_args(["compare", "--shards-dir", digits_shards])
    config = pipeline_arguments(args)["run_config"]
    assert config["data"]["shards_dir"] == digits_shards
    assert config["data"]["dataset"] == "digits"
    imported = datasets.import_shards(config["data"]["shards_dir"], str(tmp_path / "artifact"))
    again = datasets.load_manifest(imported.root, verify_records=True)
    assert again.input_spec == datasets.load_manifest(digits_shards).input_spec
    images, _ = _all(again)
    assert images.shape[1:] == (8, 8, 1)


@pytest.mark.heavy  # `make test-heavy`: a whole comparison; the pilot tests cover the path
@pytest.mark.cluster
@pytest.mark.slow
def test_compare_on_a_csv_file(csv_dir, tmp_path):
    """The CSV classifier through the comparison pipeline (kfp.local), shard step included."""
    out = tmp_path / "compare"
    data = ["--data", str(csv_dir / "breast_cancer.csv"), "--label", "target"]
    strategies = ["--strategies", "one_device,multi_worker_mirrored"]
    assert main(["compare", *data, *strategies, "--epochs", "3", "--output", str(out)]) == 0
    runs = json.loads((out / "comparison.json").read_text())["results"]
    assert [r["strategy"] for r in runs] == ["one_device", "multi_worker_mirrored"]
    assert all(r["dataset"] == "breast_cancer" and r["eval_accuracy"] >= 0.85 for r in runs)


@pytest.mark.cluster
def test_dict_features_train_a_model_with_named_inputs(passengers_module, tmp_path):
    """Titanic-like dict features: refused for the built-in mlp, trained by a named-input model."""
    out = tmp_path / "run"
    (tmp_path / "tfds").mkdir()
    argv = [
        "train", "--strategy", "multi_worker_mirrored", "--output", str(out),
        "--dataset", "passengers", "--dataset-module", passengers_module,
        "--data-dir", str(tmp_path / "tfds"), "--epochs", "10", "--learning-rate", "0.01",
        "--model-module", str(EXAMPLES / "passengers_module.py"),
    ]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dataset"] == "passengers" and metrics["eval_accuracy"] >= 0.85


def test_a_prepared_dataset_folder_is_a_dataset(digits_shards, tfds_dir, tmp_path):
    """`--dataset PATH` of a prepared TFDS folder: read by TFDS without the builder's code."""
    folder = str(tfds_dir / "digits" / "1.0.0")  # prepared by the digits_shards fixture
    data = DataConfig(dataset=folder, num_shards=2)
    assert datasets.describe(data) == datasets.load_manifest(digits_shards).input_spec
    manifest = datasets.shard_data(data, str(tmp_path / "s"))
    assert manifest.split("test").num_examples == 359 and manifest.version == "1.0.0"
