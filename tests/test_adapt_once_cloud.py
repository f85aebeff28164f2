"""Preprocessing layers adapted once for cloud jobs, and for the select step's profile.

The model module is TensorFlow's structured-data tutorial port
(examples/tutorials/structured_data_preprocessing.py: `Normalization` and
`StringLookup` adapted on `spec.training_data()`), with a marker: each build
appends its process and the rows `spec.training_data()` gave it to a file, so a
test counts the builds that read the data and those that took the recorded state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.core.config import ClusterConfig, DataConfig, ModelConfig, RunConfig, TrainingConfig
from components.core.launch.rehearsal import GCS_ROOT_ENV
from tests.conftest import trainer_pids

REPO = Path(__file__).resolve().parents[1]
PORT = REPO / "examples" / "tutorials" / "structured_data_preprocessing.py"
MARKER_ENV = "STRATEGIST_TEST_BUILD_MARKER"
BUCKET = "adapt-bucket"
BUCKET_ON_SERVER = "tf-bucket"  # tests/tensorflow_gcs_check.py's
SHARDS = f"gs://{BUCKET}/shards/tumours"
# The tutorial's model, each build marked with the rows its training split held.
MARKED_BUILD = f'''

_tutorial_build_model = build_model


def build_model(spec):
    import os

    rows = sum(int(label.shape[0]) for _, label in spec.training_data())
    with open(os.environ["{MARKER_ENV}"], "a") as marker:
        marker.write(f"{{os.getpid()}} {{rows}}\\n")
    return _tutorial_build_model(spec)
'''


def marked_module(folder: Path) -> Path:
    path = folder / "marked_preprocessing.py"
    path.write_text(PORT.read_text() + MARKED_BUILD)
    return path


def builds(marker: Path) -> list[int]:
    """The rows each build's `spec.training_data()` held, in order."""
    if not marker.exists():
        return []
    return [int(line.split()[1]) for line in marker.read_text().splitlines()]


def shard_tumours(folder: Path, shards: Path):
    import importlib.util

    from components.core import datasets

    spec = importlib.util.spec_from_file_location(
        "tutorial_data", REPO / "examples" / "tutorials" / "tutorial_data.py"
    )
    tutorial_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tutorial_data)
    csv = tutorial_data.tumours(str(folder))
    return datasets.shard_data(DataConfig(files=csv, label="target"), str(shards), log=print)


@pytest.fixture(scope="module")
def gcs_root(tmp_path_factory) -> Path:
    """A folder standing in for Cloud Storage, with the tumours table's shards in it."""
    root = tmp_path_factory.mktemp("gcs")
    shard_tumours(tmp_path_factory.mktemp("csv"), root / BUCKET / "shards" / "tumours")
    return root


@pytest.fixture
def marker(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "builds.txt"
    monkeypatch.setenv(MARKER_ENV, str(path))
    return path


# -- the select step's profile -------------------------------------------------------------


def test_the_select_step_profiles_a_module_that_adapts_with_the_training_split(
    gcs_root, marker, tmp_path
):
    """The pipeline's select step builds the model to size it: its `spec.training_data()`
    is the training split, less the validation share the run holds out."""
    from components.core import datasets
    from components.core.strategy_choice import choose_for_pipeline

    module = marked_module(tmp_path)
    shards = str(gcs_root / BUCKET / "shards" / "tumours")
    manifest = datasets.load_manifest(shards)
    train_rows = manifest.split("train").num_examples
    for fraction in (0.0, 0.25):
        run = RunConfig(
            model=ModelConfig(module=str(module)),
            training=TrainingConfig(validation_fraction=fraction),
        )
        choice = choose_for_pipeline(
            run_config=run.to_pipeline_parameter(),
            machines=2,
            gpus_per_machine=1,
            gpu="t4",
            interconnect=None,
            network_gbps=10.0,
            shards_dir=shards,
        )
        assert choice.cluster.strategy
    whole, held_out = builds(marker)
    assert whole == train_rows
    assert 0 < held_out < train_rows  # the validation share is not adapted on


def test_the_profile_counts_the_vocabularies_adapted_on_the_training_split(gcs_root, marker):
    """The sized model is the one the run trains: its lookups' vocabularies from the data."""
    from components.core import adapt_once, datasets, model_profile, models

    shards = str(gcs_root / BUCKET / "shards" / "tumours")
    profile = model_profile.profile_for(ModelConfig(module=str(PORT)), shards)
    manifest = datasets.load_manifest(shards)
    module = models.resolve(ModelConfig(module=str(PORT)))
    spec = adapt_once.with_training_split(manifest, module.preprocess)
    plain = module.build_model(spec)  # as a user's own script builds it
    # Each StringLookup's vocabulary (3 words and the OOV token) widens the Dense layer's input.
    assert profile.params == plain.count_params()


def test_a_kubeflow_parameter_server_job_sizes_its_servers_with_an_adapting_module(
    gcs_root, marker, tmp_path, monkeypatch
):
    """Building the TFJob sizes the parameter servers from the module's built model."""
    from components.core.launch import build_cloud_job
    from components.core.launch.cloud import CloudConfig

    monkeypatch.setenv(GCS_ROOT_ENV, str(gcs_root))
    run = RunConfig(
        data=DataConfig(shards_dir=SHARDS),
        model=ModelConfig(module=str(marked_module(tmp_path))),
        cluster=ClusterConfig(strategy="parameter_server", workers=2, ps=1),
        output_dir=f"gs://{BUCKET}/runs/sized",
    )
    cloud = CloudConfig(target="kubeflow", image="example.com/trainer:1", job_name="sized")
    job = build_cloud_job(run, cloud)
    assert set(job["spec"]["tfReplicaSpecs"]) == {"Chief", "Worker", "PS"}
    assert builds(marker) == [456]


# -- cloud jobs rehearsed: the launcher adapts once, every replica takes the state ----------


def cloud_argv(target: str, output: str, module: Path, *flags: str) -> list[str]:
    where = (
        ["--project", "my-project", "--region", "us-central1"]
        if target == "vertex"
        else ["--job-name", "adapted"]
    )
    return [
        "train", "--target", target, "--image", "example.com/strategist/trainer:test", *where,
        "--output", output, "--shards-dir", SHARDS, "--model-module", str(module), *flags,
    ]  # fmt: skip


def layer_states(model) -> list[dict]:
    """The state of every adapted preprocessing layer of a model."""
    import tf_keras as keras

    from components.core import adapt_once

    kinds = (keras.layers.Normalization, keras.layers.StringLookup)
    return [adapt_once.state_of(layer) for layer in model.layers if isinstance(layer, kinds)]


def exported_states(model_dir: Path) -> list[dict]:
    """The state of every adapted preprocessing layer of an exported model."""
    import tf_keras as keras

    return layer_states(keras.models.load_model(str(model_dir), compile=False))


def comparable(states: list[dict]) -> list[str]:
    """States as sorted JSON, without the recorded input shape (a loaded layer's own)."""
    import numpy as np

    def plain(state: dict) -> str:
        values = state.get("vocabulary") or [
            np.round(np.asarray(w, dtype=float), 4).tolist() for w in state["weights"]
        ]
        return json.dumps([state["layer"], values])

    return sorted(plain(state) for state in states)


CLOUD_CASES = {
    # target: (strategy flags, processes)
    "vertex": (["--strategy", "parameter_server", "--workers", "2", "--ps", "1"], 4),
    "kubeflow": (["--strategy", "multi_worker_mirrored", "--workers", "2"], 2),
}


@pytest.mark.cluster
@pytest.mark.parametrize(
    "target",
    # A TFJob's replica builds on gs:// are the storage-server test's, below.
    ["vertex", pytest.param("kubeflow", marks=pytest.mark.heavy)],
)
def test_a_rehearsed_cloud_job_adapts_once_and_every_replica_takes_the_state(
    target, gcs_root, marker, tmp_path, monkeypatch, capsys
):
    from pipelines import cli

    flags, processes = CLOUD_CASES[target]
    monkeypatch.setenv(GCS_ROOT_ENV, str(gcs_root))
    output = f"gs://{BUCKET}/runs/{target}"
    module = marked_module(tmp_path)
    code = cli.main([*cloud_argv(target, output, module, *flags, "--epochs", "6"), "--rehearse"])
    out, err = capsys.readouterr()
    assert code == 0, f"{out[-3000:]}\n{err[-3000:]}"
    local = gcs_root / BUCKET / "runs" / target
    metrics = json.loads((local / "metrics.json").read_text())
    train_rows = 456
    # One build read the training split: the launcher's, before any replica started.
    # Every replica's build (the chief's twice: training and evaluation) read none.
    rows = builds(marker)
    assert rows.count(train_rows) == 1 and rows[0] == train_rows, rows
    assert rows[1:] and set(rows[1:]) == {0}, rows
    assert "built once on the training split here" in out
    started = [line for line in out.splitlines() if line.startswith("[launcher] started")]
    assert started == [line for line in started if f"started {processes} process(es)" in line]
    # The replicas were given the job's own output folder (Vertex AI: its /gcs/ mount)...
    replica_output = metrics["run_config"]["output_dir"]
    expected = f"/gcs/{BUCKET}/runs/{target}" if target == "vertex" else output
    assert replica_output == expected
    # ...where the launcher's states were, and the export holds exactly those.
    recorded = json.loads((local / "model_module" / "adapted_layers.json").read_text())
    assert len(recorded) == 6  # 4 Normalization, 2 StringLookup, in the module's order
    assert comparable(exported_states(local / "model")) == comparable(recorded)
    # Learned: the majority class of the test rows is about 0.63.
    assert metrics["eval_accuracy"] >= 0.75, metrics["eval_accuracy"]
    assert not trainer_pids(f"{BUCKET}/runs/{target}")


# -- gs:// on a real Cloud Storage server --------------------------------------------------


def test_a_cloud_jobs_adapt_once_reads_and_writes_gs_on_a_storage_server(tmp_path):
    """The launcher's build on `gs://` shards, its state written to the job's `gs://` output,
    and each replica's build (a TFJob's, which reads `gs://` itself) taking it from there:
    all against a Cloud Storage emulator (see tests/adapt_once_gcs_check.py)."""
    from tests.tensorflow_gcs_check import run_beside_emulator

    script = Path(__file__).with_name("adapt_once_gcs_check.py")
    result = run_beside_emulator(script, tmp_path, timeout_s=900)
    # The launcher read the split from the server, once; the replicas' builds read none of it.
    assert result["builds"][0] == result["train_rows"] == 456, result["builds"]
    assert result["builds"][1:] == [0, 0], result["builds"]
    # The state is an object on the server beside the staged module; each replica, given
    # the job's gs:// output and module, built its layers with exactly that state.
    assert result["state_objects"] == ["adapted_layers.json", "marked_preprocessing.py"]
    assert set(result["replicas"]) == {"chief-0", "worker-0"}
    for replica in result["replicas"].values():
        assert replica["output_dir"] == f"gs://{BUCKET_ON_SERVER}/runs/adapted"
        assert replica["module"].startswith(f"gs://{BUCKET_ON_SERVER}/runs/adapted/model_module/")
        assert replica["states"] == result["recorded_states"] and len(replica["states"]) == 6
