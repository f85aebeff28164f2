"""`--validation-fraction`: a held-out share of the training split, evaluated after each epoch.

The share is the first records of each training shard file; training reads the rest. A real
cluster records the `val_` metrics of every epoch in metrics.json; bad values and what a
strategy cannot do are refused with exit 2 before any process starts.
"""

import json

import pytest

from tests.test_tutorial_ports import STRATEGY_FLAGS, strategist


def test_the_held_out_records_are_the_first_of_each_file_and_training_never_reads_them(
    digits_shards,
):
    from components.core import datasets

    manifest = datasets.load_manifest(digits_shards)
    files = manifest.split("train").files
    held = datasets.validation_examples(manifest, 0.1)
    assert held == sum(max(1, round(0.1 * f.num_examples)) for f in files)
    assert datasets.training_examples(manifest, 0.1) == manifest.split("train").num_examples - held

    def images(dataset, batches):
        return {row.tobytes() for x, _ in dataset.take(batches) for row in x.numpy()}

    validation = datasets.make_dataset_fn(
        manifest, "train", held, training=False, validation_fraction=0.1, held_out=True
    )(None)
    training = datasets.make_dataset_fn(
        manifest, "train", 64, training=False, validation_fraction=0.1
    )(None)
    held_images, trained_images = images(validation, 1), images(training, 10_000)
    assert len(held_images) > held * 0.9  # digits may repeat a few images
    assert held_images.isdisjoint(trained_images)
    assert len(trained_images) + len(held_images) >= manifest.split("train").num_examples * 0.95
    # What a module adapts its preprocessing on (spec.training_data()): the rest only.
    adapted_on = datasets.eval_dataset(manifest, "train", validation_fraction=0.1)
    assert sum(len(y) for _, y in adapted_on) == datasets.training_examples(manifest, 0.1)
    # Repeated: a fixed number of validation steps never runs dry.
    assert sum(1 for _ in validation.take(3)) == 3


@pytest.mark.parametrize(
    "value, message",
    [
        ("1", "must be 0 or more and below 1"),
        ("-0.1", "must be 0 or more and below 1"),
        ("a", "a number"),
    ],
)
def test_a_fraction_outside_0_to_1_exits_2(value, message, capsys, tmp_path):
    code = strategist(
        ["train", "--local", "--validation-fraction", value, "--output", str(tmp_path / "o")]
    )
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_fraction_that_leaves_a_shard_file_no_training_example_exits_2(
    digits_shards, capsys, tmp_path
):
    code = strategist(
        [
            "train", "--local", "--shards-dir", digits_shards, "--validation-fraction", "0.9999",
            "--epochs", "1", "--output", str(tmp_path / "o"),
        ]
    )  # fmt: skip
    assert code == 2
    assert "leaves no training example" in capsys.readouterr().err
    assert not (tmp_path / "o" / "metrics.json").exists()


def test_compare_trains_every_strategy_with_the_same_validation_share(digits_shards):
    from components.core.config import RunConfig
    from pipelines.cli import build_parser
    from pipelines.cli.compare import pipeline_arguments

    args = build_parser().parse_args(
        ["compare", "--shards-dir", digits_shards, "--validation-fraction", "0.2"]
    )
    config = RunConfig.from_dict(pipeline_arguments(args)["run_config"])
    assert config.training.validation_fraction == 0.2
    default = build_parser().parse_args(["compare", "--shards-dir", digits_shards])
    assert pipeline_arguments(default)["run_config"]["training"]["validation_fraction"] == 0.0


@pytest.mark.cluster
@pytest.mark.parametrize(
    "strategy",
    [
        "multi_worker_mirrored",
        # The other two in `make test-heavy`.
        pytest.param("parameter_server", marks=pytest.mark.heavy),
        pytest.param("mirrored", marks=pytest.mark.heavy),
    ],
)
def test_validation_metrics_of_every_epoch_reach_metrics_json(strategy, digits_shards, tmp_path):
    from components.core import datasets

    out = tmp_path / "run"
    code = strategist(
        [
            "train", "--local", *STRATEGY_FLAGS[strategy], "--shards-dir", digits_shards,
            "--validation-fraction", "0.1", "--epochs", "3", "--output", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    history = metrics["history"]
    assert len(history["val_loss"]) == len(history["val_accuracy"]) == 3
    assert history["val_accuracy"][-1] > 0.5, history  # chance is 0.10
    assert history["val_loss"][-1] < history["val_loss"][0], history
    # Trained on the rest only.
    manifest = datasets.load_manifest(digits_shards)
    assert metrics["examples_per_epoch"] <= datasets.training_examples(manifest, 0.1)
    assert datasets.training_examples(manifest, 0.1) < manifest.split("train").num_examples


def test_a_callback_may_monitor_val_metrics_only_when_a_share_is_held_out(digits_shards, tmp_path):
    from components.core import datasets, model_module
    from components.core.config import ConfigError
    from components.core.module_callbacks import module_callbacks

    path = tmp_path / "stops_early.py"
    path.write_text(
        "import tf_keras as keras\n\n"
        "def build_model(spec):\n"
        "    return keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(10)])\n\n"
        "def callbacks(spec):\n"
        "    return [keras.callbacks.EarlyStopping(monitor='val_loss', patience=2)]\n"
    )
    module, spec = model_module.load(str(path)), datasets.load_manifest(digits_shards).input_spec
    (callback,) = module_callbacks(module, spec, validates=True)
    assert callback.monitor == "val_loss"
    with pytest.raises(ConfigError, match="hold out a share with --validation-fraction"):
        module_callbacks(module, spec, validates=False)


def test_an_epochs_seconds_are_its_trainings_the_validation_is_timed_apart():
    import time

    from components.core.epoch_records import EpochRecorder

    recorder = EpochRecorder(None, examples_per_epoch=100, epochs=1, verbose=False)
    recorder.callback.on_epoch_begin(0)
    recorder.callback.on_test_begin()
    time.sleep(0.3)
    recorder.callback.on_test_end()
    recorder.callback.on_epoch_end(0, {"loss": 1.0, "val_loss": 1.1})
    (record,) = recorder.records
    assert record["validation_seconds"] >= 0.3
    assert record["seconds"] < 0.3
    assert record["metrics"]["val_loss"] == 1.1
