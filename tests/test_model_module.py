"""A user's model module: refused before anything starts when bad, staged for the cloud,
and (cluster tests) trained by every strategy with the user's own compile settings kept."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import trainer_pids

REPO = Path(__file__).resolve().parents[1]
CNN_MODULE = REPO / "examples" / "digits_cnn_module.py"
PEN_DIGITS_BUILDER = REPO / "examples" / "pen_digits_builder.py"
SGD_MODULE = REPO / "examples" / "sgd_compiled_module.py"
REGRESSION_MODULE = REPO / "examples" / "diabetes_regression_module.py"

GOOD_MODEL = """
import tf_keras as keras

def build_model(spec):
    return keras.Sequential([
        keras.layers.Input(spec.single_feature.shape),
        keras.layers.Flatten(),
        keras.layers.Dense(spec.label.num_classes),
    ])
"""
# Built only when first called: Keras knows its outputs after the first batch.
NO_INPUT_LAYER = """
import tf_keras as keras

def build_model(spec):
    return keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(spec.label.num_classes)])
"""

# name -> (module text, or None for no file; words the one-line message must hold;
# the line of the user's file it must name, or None).
NO_BUILD = "import tf_keras\n\ndef build(spec):\n    pass\n"
RAISES = "def build_model(spec):\n    width = spec.features['pixels']\n"
KERAS_3 = (
    "import keras\n\ndef build_model(spec):\n"
    "    return keras.Sequential([keras.layers.Input((8, 8, 1)), keras.layers.Dense(10)])\n"
)
BAD_MODULES = {
    "file-missing": (None, "no such file", None),
    "syntax-error": ("import tf_keras\ndef build_model(spec)\n    pass\n", "SyntaxError", 2),
    "import-error": ("import tf_keras\nimport no_such_package_xyz\n", "ModuleNotFoundError", 2),
    "no-build-model": (NO_BUILD, "defines no build_model", None),
    "build-model-raises": (RAISES, "KeyError: 'pixels'", 2),
    "returns-none": ("def build_model(spec):\n    return None\n", "NoneType, not a tf_keras", None),
    "returns-a-keras-3-model": (KERAS_3, "import tf_keras (Keras 2), not keras", None),
    "output-does-not-fit-the-classes": (
        GOOD_MODEL.replace("spec.label.num_classes", "3"),
        "has 10 classes: end the model with Dense(10)",
        None,
    ),
    "output-of-a-model-without-an-input-layer-does-not-fit-the-classes": (
        NO_INPUT_LAYER.replace("spec.label.num_classes", "3"),
        "outputs 3 value(s) per example, but the label 'label' has 10 classes: end the model "
        "with Dense(10)",
        None,
    ),
    "task-does-not-fit-the-labels": (
        GOOD_MODEL + "\nTASK = 'regression'\n",
        "makes it classification",
        None,
    ),
    "labels-do-not-fit-the-loss": (
        GOOD_MODEL + "\ndef compile_settings(spec):\n"
        "    return {'loss': keras.losses.CategoricalCrossentropy(from_logits=True)}\n",
        "the model does not take the data",
        None,
    ),
    "unknown-compile-setting": (
        GOOD_MODEL + "\ndef compile_settings(spec):\n    return {'optimiser': 'sgd'}\n",
        "returned optimiser; it may set optimizer, loss, metrics",
        None,
    ),
    "callback-monitors-validation": (
        GOOD_MODEL + "\ndef callbacks(spec):\n"
        "    return [keras.callbacks.EarlyStopping(monitor='val_loss')]\n",
        "monitors 'val_loss', but fit has no validation data",
        None,
    ),
    "callback-backup-and-restore": (
        GOOD_MODEL + "\ndef callbacks(spec):\n"
        "    return [keras.callbacks.BackupAndRestore('/tmp/backup')]\n",
        "Strategist backs up every epoch itself",
        None,
    ),
    "preprocess-scales-the-images-again": (
        GOOD_MODEL + "\ndef preprocess(image, label):\n    return image / 255.0, label\n",
        "scales the images to at most 1/255: Strategist gives images as float32 in [0, 1]",
        None,
    ),
    "preprocess-breaks-the-input": (
        GOOD_MODEL + "\ndef preprocess(image, label):\n    return image[..., :0], label\n",
        "the model does not take the data",
        None,
    ),
}


def strategist(argv: list[str]) -> int:
    from pipelines import cli

    try:
        return cli.main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize("case", list(BAD_MODULES), ids=list(BAD_MODULES))
def test_a_bad_module_exits_2_naming_its_file_and_line_before_anything_starts(
    case, digits_shards, tmp_path, capsys
):
    text, says, line = BAD_MODULES[case]
    module = tmp_path / "my_model.py"
    if text is not None:
        module.write_text(textwrap.dedent(text))
    out = tmp_path / "out"
    argv = [
        "train", "--local", "--strategy", "multi_worker_mirrored", "--workers", "2",
        "--model-module", str(module), "--shards-dir", digits_shards, "--epochs", "1",
        "--output", str(out),
    ]  # fmt: skip
    assert strategist(argv) == 2
    err = capsys.readouterr().err
    (message,) = err.strip().splitlines()  # one line, no traceback
    assert says in message, message
    assert "my_model.py" in message
    if line is not None:
        assert f"my_model.py:{line}:" in message, message
    assert not (out / "status.json").exists()  # no cluster was started
    assert not trainer_pids(str(out))


@pytest.mark.parametrize(
    ("name", "says"),
    [("my_model.txt", "my_model.txt: not a .py file"), ("my_model/", "my_model is a folder")],
)
def test_a_module_path_that_is_no_py_file_says_what_it_is(name, says, tmp_path, capsys):
    """Python has no loader for another suffix (spec_from_file_location gives None)."""
    (tmp_path / "my_model").mkdir()
    (tmp_path / "my_model.txt").write_text(textwrap.dedent(GOOD_MODEL))
    out = tmp_path / "out"
    argv = ["train", "--local", "--model-module", f"{tmp_path}/{name}", "--output", str(out)]
    assert strategist(argv) == 2
    (message,) = capsys.readouterr().err.strip().splitlines()  # one line, no traceback
    assert f"--model-module {tmp_path}/{says}: pass the path of a .py file" in message, message
    assert not out.exists()


def test_a_module_importing_tensorflow_leaves_its_start_up_lines_off_the_console(tmp_path):
    """TF >= 2.19 logs oneDNN/CUDA lines before absl is initialised, whatever
    TF_CPP_MIN_LOG_LEVEL says; a fresh `strategist` process must show only its error."""
    module = tmp_path / "my_model.py"
    module.write_text("import tensorflow\nraise RuntimeError('boom')\n")
    command = [str(Path(sys.executable).parent / "strategist"), "train", "--local",
               "--model-module", str(module), "--output", str(tmp_path / "out")]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"strategist train: error: --model-module {module}: {module}:2: RuntimeError: boom"
    ]


def test_an_unknown_module_name_is_refused_as_such(capsys):
    assert strategist(["train", "--model-module", "no_such_module_xyz", "--epochs", "1"]) == 2
    assert "no such file or importable module" in capsys.readouterr().err


def test_model_and_model_module_exclude_each_other(capsys):
    assert strategist(["train", "--model", "cnn", "--model-module", str(CNN_MODULE)]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_pre_flight_check_is_cheap(digits_shards):
    """Building the module once on the launcher's CPU and running one batch costs little."""
    import dataclasses

    from components.core import datasets, model_preflight
    from components.core.config import ModelConfig, RunConfig

    config = dataclasses.replace(RunConfig(), model=ModelConfig("cnn", str(CNN_MODULE)))
    model_preflight.preflight(
        config, datasets.load_manifest(digits_shards)
    )  # warm: imports, tracing
    # CPU time, not wall time: other work on a shared machine must not fail this test.
    started = time.process_time()
    model_preflight.preflight(config, datasets.load_manifest(digits_shards))
    assert time.process_time() - started < 3.0


def test_a_model_without_an_input_layer_passes_the_pre_flight(digits_shards, tmp_path):
    import dataclasses

    from components.core import datasets, model_preflight
    from components.core.config import ModelConfig, RunConfig

    # NO_INPUT_LAYER's model, with a first layer that writes down each batch it is called on.
    seen = tmp_path / "seen"
    recording = NO_INPUT_LAYER.replace(
        "return keras.Sequential([",
        "return keras.Sequential([Seen(), ",
    ) + textwrap.dedent(f"""
        class Seen(keras.layers.Layer):
            def call(self, x):
                with open({str(seen)!r}, "a") as log:
                    log.write(f"{{tuple(x.shape)}}\\n")
                return x
    """)
    assert "keras.layers.Input" not in recording and "Seen(), " in recording
    module = tmp_path / "no_input.py"
    module.write_text(textwrap.dedent(recording))
    config = dataclasses.replace(RunConfig(), model=ModelConfig("no_input", str(module)))
    seconds = model_preflight.preflight(config, datasets.load_manifest(digits_shards))
    assert seconds > 0
    # Built from the input spec (symbolic, any batch: nothing computed), then called on a real
    # batch of the data: 2 of the digits' 8x8 images.
    assert seen.exists(), "the pre-flight never called the model"
    calls = seen.read_text().splitlines()
    assert calls[0] == "(None, 8, 8, 1)" and "(2, 8, 8, 1)" in calls, calls


def test_the_module_is_staged_beside_the_outputs_and_every_vertex_replica_reads_it(capsys):
    from google.cloud import aiplatform_v1

    argv = [
        "train", "--target", "vertex", "--project", "my-project", "--region", "us-central1",
        "--image", "us-docker.pkg.dev/p/r/trainer:1", "--output", "gs://bucket/runs/x",
        "--shards-dir", "gs://bucket/shards", "--strategy", "multi_worker_mirrored",
        "--workers", "2", "--model-module", str(CNN_MODULE), "--dry-run",
    ]  # fmt: skip
    assert strategist(argv) == 0
    out, err = capsys.readouterr()
    job = aiplatform_v1.CustomJob.from_json(out, ignore_unknown_fields=False)
    staged = "gs://bucket/runs/x/model_module/digits_cnn_module.py"
    for pool in job.job_spec.worker_pool_specs:
        config = json.loads(pool.container_spec.args[1])
        # Vertex AI mounts Cloud Storage at /gcs/ (gcsfuse) in every replica.
        assert config["model"] == {"name": "digits_cnn_module", "module": "/gcs/" + staged[5:]}
    assert f"model module {CNN_MODULE}: staged to {staged} at submission" in err


def test_kubeflow_replicas_fetch_the_staged_module_from_cloud_storage(capsys):
    import yaml

    argv = [
        "train", "--target", "kubeflow", "--image", "img:1", "--output", "gs://bucket/runs/k",
        "--shards-dir", "gs://bucket/shards", "--strategy", "parameter_server",
        "--model-module", str(CNN_MODULE), "--dry-run",
    ]  # fmt: skip
    assert strategist(argv) == 0
    out, err = capsys.readouterr()
    job = yaml.safe_load(out)
    for replica in job["spec"]["tfReplicaSpecs"].values():
        args = replica["template"]["spec"]["containers"][0]["args"]
        config = json.loads(args[args.index("--config-json") + 1])
        assert config["model"]["module"] == "gs://bucket/runs/k/model_module/digits_cnn_module.py"
    assert "staged to gs://bucket/runs/k/model_module/digits_cnn_module.py" in err


def test_an_importable_module_name_is_imported_from_the_image(capsys):
    argv = [
        "train", "--target", "vertex", "--project", "my-project", "--region", "us-central1",
        "--image", "img:1", "--output", "gs://bucket/runs/x", "--shards-dir", "gs://bucket/s",
        "--strategy", "one_device", "--model-module", "examples.digits_cnn_module", "--dry-run",
    ]  # fmt: skip
    assert strategist(argv) == 0
    err = capsys.readouterr().err
    assert "model module examples.digits_cnn_module: imported on every replica" in err


# -- training on real localhost clusters ---------------------------------------------------


STRATEGY_FLAGS = {
    "mirrored": ["--strategy", "mirrored", "--gpus-per-machine", "2"],
    "multi_worker_mirrored": ["--strategy", "multi_worker_mirrored", "--workers", "2"],
    "parameter_server": ["--strategy", "parameter_server", "--workers", "2", "--ps", "1"],
}


def train(module: Path, flags: list[str], shards: str, out: Path, epochs: int = 4) -> dict:
    argv = ["train", "--local", *flags, "--model-module", str(module), "--shards-dir", shards]
    assert strategist([*argv, "--epochs", str(epochs), "--output", str(out)]) == 0
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture(scope="module")
def pen_digits_shards(tmp_path_factory) -> str:
    """The user's own TFDS builder (examples/pen_digits_builder.py), prepared and sharded once
    as `--dataset pen_digits --dataset-module examples/pen_digits_builder.py` does."""
    from components.core import datasets
    from components.core.config import DataConfig

    root = tmp_path_factory.mktemp("pen-digits")
    data = DataConfig(
        dataset="pen_digits", dataset_module=str(PEN_DIGITS_BUILDER), data_dir=str(root)
    )
    return datasets.shard_data(data, str(root / "shards")).root


# One strategy in `make test` (the one whose learning rate is not scaled); the synchronous
# two run the same module in `make test-heavy` and the tutorial ports in `make test`.
@pytest.mark.cluster
@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param("mirrored", marks=pytest.mark.heavy),
        pytest.param("multi_worker_mirrored", marks=pytest.mark.heavy),
        "parameter_server",
    ],
)
def test_the_example_cnn_module_learns_the_users_tfds_dataset_with_every_strategy(
    strategy, pen_digits_shards, tmp_path
):
    metrics = train(CNN_MODULE, STRATEGY_FLAGS[strategy], pen_digits_shards, tmp_path / strategy)
    assert metrics["dataset"] == "pen_digits"  # the user's builder, not the bundled digits
    assert metrics["eval_accuracy"] >= 0.85, metrics["eval_accuracy"]  # chance is 0.10
    assert metrics["model"] == "digits_cnn_module"
    assert metrics["model_module"] == str(CNN_MODULE)
    assert metrics["compile_settings"]["from"] == "compile_settings"
    assert metrics["compile_settings"]["optimizer"] == "Adam"
    # Adam's 0.002 is the rate for a batch of 32: scaled to the batch of one update, 64 for
    # two replicas in sync; a parameter-server worker updates alone, with its own 32.
    per_update = 32 * metrics["replicas_in_sync"]
    assert per_update == (32 if strategy == "parameter_server" else 64)
    assert metrics["compile_settings"]["learning_rate"] == pytest.approx(0.002 * per_update / 32)
    scaled = "learning rate 0.002 -> 0.004" in " ".join(metrics["adjustments"])
    assert scaled is (per_update == 64)


@pytest.mark.cluster
def test_the_users_own_compile_reaches_the_trained_model_and_the_record_names_the_scaling(
    digits_shards, tmp_path, capsys
):
    """SGD with momentum, a custom metric, compiled by the user: kept; only the rate scaled."""
    out = tmp_path / "sgd"
    metrics = train(SGD_MODULE, STRATEGY_FLAGS["multi_worker_mirrored"], digits_shards, out, 6)
    settings = metrics["compile_settings"]
    assert settings["from"] == "build_model's compile"
    assert settings["optimizer"] == "SGD"
    assert settings["optimizer_config"]["momentum"] == pytest.approx(0.9)
    assert settings["optimizer_config"]["nesterov"] is True
    assert settings["metrics"] == ["accuracy", "top2_accuracy"]
    assert settings["learning_rate"] == pytest.approx(0.02)  # 0.01 at batch 32, 64 per step
    # The custom metric was computed in training (every epoch) and on the test split.
    assert len(metrics["history"]["top2_accuracy"]) == 6
    assert metrics["eval_metrics"]["top2_accuracy"] >= metrics["eval_accuracy"] >= 0.85
    changed = metrics["adjustments"]
    assert "learning rate 0.01 -> 0.02 (scaled linearly: batch 64 per update / base batch 32)" in (
        changed
    )
    printed = capsys.readouterr().out
    assert re.search(r"strategist changed +learning rate 0\.01 -> 0\.02", printed), printed
    assert "SGD, loss sparse_categorical_crossentropy" in printed


def test_the_select_step_profiles_a_users_module_for_the_shards_examples(digits_shards):
    """The pipelines' select step sizes the user's model for the data it will train on."""
    from components.core.config import ModelConfig, RunConfig
    from components.core.strategy_choice import choose_for_pipeline

    run = RunConfig(model=ModelConfig("digits_cnn_module", str(CNN_MODULE)))
    choice = choose_for_pipeline(
        run_config=run.to_pipeline_parameter(),
        machines=1,
        gpus_per_machine=2,
        gpu="t4",
        interconnect=None,
        network_gbps=10.0,
        shards_dir=digits_shards,
    )
    model = json.loads(choice.recommendation_json)["inputs"]["model"]
    assert model["params"] == 43_050  # the example CNN on 8x8x1 digits, 10 classes
    assert f"built from {CNN_MODULE} for image" in model["source"]


def test_the_select_step_charges_the_metrics_the_runs_model_compiles(digits_shards):
    """Keras all-reduces 3 scalars per compiled metric every multi_worker_mirrored step: the
    select step builds the run's model for the shards, counts the metrics it compiles (a
    built-in's default accuracy; the user's own accuracy and top2_accuracy) and its tensors,
    and charges 3 gRPC rings more per metric between two CPU workers."""
    from components.core.config import ModelConfig, RunConfig
    from components.core.selection.step_time import CPU_RING_HOP_S
    from components.core.strategy_choice import choose_for_pipeline

    def choose(model: ModelConfig) -> tuple[dict, dict]:
        choice = choose_for_pipeline(
            run_config=RunConfig(model=model).to_pipeline_parameter(),
            machines=2, gpus_per_machine=1, gpu="cpu", interconnect=None,
            network_gbps=10.0, shards_dir=digits_shards,
        )  # fmt: skip
        rec = json.loads(choice.recommendation_json)
        every = [{"strategy": rec["strategy"], "predicted": rec["predicted"]}, *rec["alternatives"]]
        mwm = next(c for c in every if c["strategy"] == "multi_worker_mirrored")
        return rec["inputs"], mwm["predicted"]

    builtin, builtin_step = choose(ModelConfig("mlp"))
    user, user_step = choose(ModelConfig("sgd_compiled_module", str(SGD_MODULE)))
    assert (builtin["model"]["compiled_metrics"], user["model"]["compiled_metrics"]) == (1, 2)
    assert user["model"]["tensors"] == 4  # two Dense layers: kernels and biases
    # the smaller user model's gradients cost less; its 3 more scalars, a 2-hop ring each, more
    extra = user_step["communication_s"] - builtin_step["communication_s"]
    assert 3 * 2 * CPU_RING_HOP_S * 0.9 < extra < 3 * 2 * CPU_RING_HOP_S * 1.1


@pytest.mark.heavy  # `make test-heavy`: a whole comparison; the pilot tests cover the path
@pytest.mark.cluster
def test_compare_takes_the_module_and_judges_on_its_custom_metric(tmp_path, capsys):
    """`compare --model-module`: the module crosses the pipeline (run_config.model.module) to
    every train and evaluate step; time to target is measured on the user's own metric."""
    out = tmp_path / "compare"
    argv = [
        "compare", "--local", "--strategies", "one_device,mirrored",
        "--model-module", str(SGD_MODULE), "--epochs", "3",
        "--target-metric", "top2_accuracy", "--target-value", "0.9", "--output", str(out),
    ]  # fmt: skip
    assert strategist(argv) == 0, capsys.readouterr()
    report = json.loads((out / "comparison.json").read_text())
    assert report["target_metric"] == "top2_accuracy"
    for result in report["results"]:
        assert result["model_module"] == str(SGD_MODULE)
        assert result["run_config"]["model"]["module"] == str(SGD_MODULE)
        assert result["compile_settings"]["optimizer"] == "SGD"
        assert result["eval_accuracy"] >= 0.85
        assert result["time_to_target_s"] is not None  # top-2 reaches 0.9 quickly
    assert "training top2_accuracy of 0.9 was reached" in (out / "summary.md").read_text()
    # The evaluate step compiled the exported model as the run did: the custom metric is there.
    logged = [p.read_text() for p in (out / "pipeline_root").rglob("*") if p.name == "metrics"]
    assert any("test_top2_accuracy" in text for text in logged) or any(
        "test_top2_accuracy" in p.read_text()
        for p in (out / "pipeline_root").rglob("executor_output.json")
    )


def test_the_regression_example_learns_with_mse_and_is_evaluated_as_a_regression():
    """examples/diabetes_regression_module.py, built and compiled as a run builds it, learns
    scikit-learn's diabetes data (in this process: the shards of a float-labelled CSV come
    with the data side, `--data ... --label progression`) and beats the mean predictor."""
    import dataclasses

    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_diabetes

    from components.core import evaluation, model_build, model_module
    from components.core.config import ModelConfig, RunConfig
    from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

    x, y = load_diabetes(return_X_y=True, scaled=False)
    x = ((x - x.mean(axis=0)) / x.std(axis=0)).astype(np.float32)
    y = y.astype(np.float32)
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:354], order[354:]
    path = str(REPO / "examples" / "diabetes_regression_module.py")
    spec = InputSpec({"features": FeatureSpec((10,))}, LabelSpec("progression", "float32"))
    config = dataclasses.replace(RunConfig(), model=ModelConfig("diabetes", path))
    tf.keras.utils.set_random_seed(1)
    built = model_build.build_compiled(config, spec, model_module.load(path), batch_per_update=32)
    assert built.compile["loss"] == "mean_squared_error" and built.compile["metrics"] == ["mae"]
    built.model.fit(x[train], y[train], batch_size=32, epochs=20, verbose=0)

    result = evaluation.evaluate(
        built.model, tf.data.Dataset.from_tensor_slices((x[test], y[test])).batch(64), spec
    )
    mean_mse = float(np.mean((y[test] - y[train].mean()) ** 2))
    assert result.task == "regression" and result.accuracy is None
    # A clear margin: R² above 0.25 on this split (a linear fit reaches about 0.37 here).
    assert result.metrics["mse"] < 0.75 * mean_mse, (result.metrics, mean_mse)
    assert result.metrics["rmse"] == pytest.approx(result.metrics["mse"] ** 0.5)
    assert len(result.points) == len(test)  # the predicted-vs-true plot's points


@pytest.fixture(scope="module")
def diabetes_csv(tmp_path_factory) -> Path:
    """scikit-learn's diabetes data as the CSV a pandas user writes (examples/csv_data.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("csv_data", REPO / "examples" / "csv_data.py")
    csv_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(csv_data)
    return Path(csv_data.diabetes(str(tmp_path_factory.mktemp("csv"))))


@pytest.fixture(scope="module")
def regression_run(diabetes_csv, tmp_path_factory):
    """`regression_run(strategy)`: the output folder of `--data diabetes.csv --label
    progression` with the regression example, trained once per strategy on a real cluster."""
    runs: dict[str, Path] = {}

    def run(strategy: str) -> Path:
        if strategy not in runs:
            out = tmp_path_factory.mktemp("regression") / strategy
            argv = [
                "train", "--local", *STRATEGY_FLAGS[strategy], "--data", str(diabetes_csv),
                "--label", "progression", "--model-module", str(REGRESSION_MODULE),
                "--epochs", "20", "--output", str(out),
            ]  # fmt: skip
            assert strategist(argv) == 0
            runs[strategy] = out
        return runs[strategy]

    return run


@pytest.mark.cluster
@pytest.mark.parametrize(
    "strategy",
    [
        "mirrored",  # the evaluate-step test below reads this run too
        pytest.param("multi_worker_mirrored", marks=pytest.mark.heavy),
        pytest.param("parameter_server", marks=pytest.mark.heavy),
    ],
)
def test_the_regression_example_learns_a_float_csv_label_with_every_strategy(
    strategy, regression_run
):
    """MSE on `--data diabetes.csv --label progression`: a regression on a real cluster that
    beats the mean predictor by a clear margin, evaluated with MAE, RMSE and MSE."""
    import numpy as np

    from components.core import datasets

    out = regression_run(strategy)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["task"] == "regression" and metrics["eval_accuracy"] is None
    manifest = datasets.load_manifest(metrics["run_config"]["data"]["shards_dir"])
    labels = np.concatenate([y.numpy() for _, y in datasets.eval_dataset(manifest)])
    # The chief's page beside metrics.json: the plot has a point per test example.
    page = (out / "evaluation.html").read_text()
    assert page.count('<circle class="point"') == len(labels)
    assert f"<td>mae</td><td>{metrics['eval_metrics']['mae']:.5g}</td>" in page
    # The mean predictor's MSE on the test split (its own mean: the best constant).
    constant = float(np.var(labels))
    assert metrics["eval_metrics"]["mse"] < 0.75 * constant, (metrics["eval_metrics"], constant)
    assert set(metrics["eval_metrics"]) >= {"loss", "mae", "rmse", "mse"}
    assert metrics["compile_settings"]["loss"] == "mean_squared_error"


@pytest.mark.cluster
def test_the_evaluate_step_shows_the_predicted_vs_true_plot_of_a_trained_regression(
    regression_run, tmp_path
):
    """The KFP evaluate component, run on the regression a real mirrored cluster trained, as
    the comparison pipeline runs it (no promotion, the default promotion_metric test_accuracy,
    which a regression lacks), reads the chief's evaluation from the run's record and writes a
    page (the KFP UI's HTML visualization) whose inline SVG has one point per test example, at
    its true value and the exported model's prediction."""
    import numpy as np
    import tf_keras as keras
    from kfp.dsl import HTML, Artifact, ClassificationMetrics, Metrics, Model

    from components.core import datasets, evaluation_page
    from components.evaluate import evaluate
    from tests.test_evaluation import svg_points

    out = regression_run("mirrored")
    metrics = json.loads((out / "metrics.json").read_text())
    shards_dir = metrics["run_config"]["data"]["shards_dir"]
    page = HTML(uri=str(tmp_path / "report.html"))
    model = Model(uri=str(out / "model"))
    outputs = evaluate(
        model=model,
        run=Artifact(uri=str(out / "metrics.json")),  # the chief's record, evaluation and all
        metrics=Metrics(uri=str(tmp_path / "metrics")),
        confusion=ClassificationMetrics(uri=str(tmp_path / "confusion")),
        report=page,
    )
    assert np.isnan(outputs[1]) and np.isnan(outputs[2])  # no accuracy for a regression
    assert not outputs[0] and "nothing is promoted" in outputs[3]

    text = Path(page.path).read_text()
    assert not list(tmp_path.glob(".tmp-*"))  # written atomically: nothing left beside it
    drawn, (x1, y1, x2, y2) = svg_points(text)
    manifest = datasets.load_manifest(shards_dir)
    truth = np.concatenate([y.numpy() for _, y in datasets.eval_dataset(manifest)])
    assert len(drawn) == len(truth) == manifest.splits["test"].num_examples
    # Each point's x is its true value and its y the model's prediction, on the plot's scale.
    predicted = keras.models.load_model(str(out / "model"), compile=False).predict(
        datasets.eval_dataset(manifest).map(lambda x, y: x), verbose=0
    )[:, 0]
    low, high = evaluation_page.axis_range([*truth, *predicted])  # the diagonal's ends
    across, up = (x2 - x1) / (high - low), (y1 - y2) / (high - low)
    assert [cx for cx, _ in drawn] == pytest.approx(x1 + (truth - low) * across, abs=0.01)
    assert [cy for _, cy in drawn] == pytest.approx(y1 - (predicted - low) * up, abs=0.05)
    for name in ("mae", "rmse", "mse"):
        assert f"<td>{name}</td><td>{metrics['eval_metrics'][name]:.5g}</td>" in text


@pytest.mark.heavy  # `make test-heavy`: a whole comparison; the pilot tests cover the path
@pytest.mark.cluster
def test_the_regression_example_through_compare_and_the_gate(diabetes_csv, tmp_path, capsys):
    """The regression example through the comparison pipeline (kfp.local): time to an MAE
    target, each strategy's evaluate page, and `gate` on MAE (a rise beyond the allowed change
    fails, exit 1; gating it on accuracy, which a regression lacks, exits 2)."""
    out = tmp_path / "compare"
    argv = [
        "compare", "--strategies", "one_device,mirrored", "--data", str(diabetes_csv),
        "--label", "progression", "--model-module", str(REGRESSION_MODULE), "--epochs", "20",
        "--target-metric", "mae", "--target-value", "60", "--output", str(out),
    ]  # fmt: skip
    assert strategist(argv) == 0, capsys.readouterr()
    report = json.loads((out / "comparison.json").read_text())
    assert report["target_metric"] == "mae"
    for result in report["results"]:
        assert result["task"] == "regression" and result["eval_accuracy"] is None
        assert result["eval_metrics"]["mae"] < 60  # the mean predictor's is about 65
        assert result["time_to_target_s"] is not None  # MAE got below 60 in training
    pages = [p for p in (out / "pipeline_root").rglob("evaluate/report") if p.is_file()]
    assert len(pages) == 2 and all('class="point"' in p.read_text() for p in pages)

    capsys.readouterr()
    assert strategist(["gate", str(out), "--baseline", str(out), "--metric", "mae"]) == 0
    worse = json.loads((out / "comparison.json").read_text())
    for result in worse["results"]:
        result["eval_metrics"]["mae"] *= 1.10  # 10 % more error than the baseline
    (tmp_path / "worse").mkdir()
    (tmp_path / "worse" / "comparison.json").write_text(json.dumps(worse))
    assert strategist(["gate", str(tmp_path / "worse"), "--baseline", str(out)]) == 1
    assert "mae" in capsys.readouterr().out
    assert strategist(["gate", str(out), "--baseline", str(out), "--metric", "accuracy"]) == 2


# -- the learning rate the user asks for --------------------------------------------------


def dry_run_config(extra: list[str], capsys) -> dict:
    """The RunConfig every Vertex AI replica receives for `train ... extra`."""
    from google.cloud import aiplatform_v1

    argv = [
        "train", "--target", "vertex", "--project", "my-project", "--region", "us-central1",
        "--image", "img:1", "--output", "gs://bucket/runs/x", "--shards-dir", "gs://bucket/s",
        "--strategy", "multi_worker_mirrored", "--workers", "2",
        "--model-module", str(SGD_MODULE), "--dry-run", *extra,
    ]  # fmt: skip
    assert strategist(argv) == 0
    job = aiplatform_v1.CustomJob.from_json(capsys.readouterr().out)
    return json.loads(job.job_spec.worker_pool_specs[0].container_spec.args[1])


@pytest.mark.parametrize(
    "flags, rate, says",
    [
        ([], 0.02, "learning rate 0.01 -> 0.02 (scaled linearly"),
        (["--no-scale-learning-rate"], 0.01, "learning rate 0.01 kept at any batch: not scaled"),
        (
            ["--learning-rate", "0.05"],
            0.1,
            "learning rate 0.01 of the module's SGD replaced by --learning-rate 0.05",
        ),
    ],
)
def test_the_learning_rate_flags_reach_the_module_optimizer(flags, rate, says, capsys):
    """SGD(0.01) compiled by the module, two workers (64 per update): scaled by default, kept
    with --no-scale-learning-rate, replaced (then scaled) by an explicit --learning-rate."""
    from components.core import model_build, model_module
    from components.core.config import RunConfig
    from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

    config = RunConfig.from_dict(dry_run_config(flags, capsys))
    spec = InputSpec({"image": FeatureSpec((8, 8, 1))}, LabelSpec(num_classes=10))
    built = model_build.build_compiled(
        config, spec, model_module.load(str(SGD_MODULE)), batch_per_update=64, steps_per_epoch=5
    )
    assert built.compile["learning_rate"] == pytest.approx(rate)
    assert any(change.startswith(says) for change in built.adjustments), built.adjustments
    assert built.model.optimizer.get_config()["momentum"] == pytest.approx(0.9)  # still theirs


def test_a_module_can_keep_its_rate_unscaled(tmp_path):
    from components.core import model_build, model_module
    from components.core.config import RunConfig
    from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

    module = tmp_path / "unscaled.py"
    module.write_text(SGD_MODULE.read_text() + "\nSCALE_LEARNING_RATE = False\n")
    spec = InputSpec({"image": FeatureSpec((8, 8, 1))}, LabelSpec(num_classes=10))
    built = model_build.build_compiled(
        RunConfig(), spec, model_module.load(str(module)), batch_per_update=64
    )
    assert built.compile["learning_rate"] == pytest.approx(0.01)


EARLY_STOPPING = (
    GOOD_MODEL
    + """
def callbacks(spec):
    # No epoch improves the loss by 10: training stops after the second.
    return [keras.callbacks.EarlyStopping(monitor="loss", min_delta=10.0, patience=1)]
"""
)


@pytest.mark.cluster
def test_the_modules_own_callbacks_run_in_every_task(digits_shards, tmp_path):
    """EarlyStopping from the module's callbacks(spec) stops a 6-epoch multi-worker run after
    its second epoch, on every task at once (the all-reduced loss they all see)."""
    module = tmp_path / "early_stopping.py"
    module.write_text(EARLY_STOPPING)
    out = tmp_path / "run"
    metrics = train(module, STRATEGY_FLAGS["multi_worker_mirrored"], digits_shards, out, 6)
    assert len(metrics["history"]["loss"]) == 2, metrics["history"]
    assert metrics["eval_examples"] == 359
