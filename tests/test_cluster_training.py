"""Real training on real localhost clusters: every strategy learns the digits.

Each test starts real TensorFlow processes talking gRPC on 127.0.0.1.
"""

from __future__ import annotations

import json

import pytest

from components.core.config import ClusterConfig, DataConfig, RunConfig, TrainingConfig
from components.core.launch.cluster_failure import ClusterFailed
from components.core.launch.local import LocalCluster, run_local
from tests.conftest import trainer_pids

pytestmark = pytest.mark.cluster

SHAPES = {
    "mirrored": ClusterConfig("mirrored", gpus_per_machine=2),
    "multi_worker_mirrored": ClusterConfig("multi_worker_mirrored", workers=2),
    "parameter_server": ClusterConfig("parameter_server", workers=2, ps=1),
}
# (num_replicas, replicas_in_sync, global_batch_size) of each shape, worked out by hand at
# 32 examples per replica (the default). parameter_server: 2 workers are 2 replicas and a
# global batch of both workers' steps, but one step runs on one worker's device (in sync: 1).
REPLICAS = {
    "mirrored": (2, 2, 64),  # 1 machine x 2 devices
    "multi_worker_mirrored": (2, 2, 64),  # 2 workers x 1 device
    "parameter_server": (2, 1, 64),
}


def _config(shards, out, cluster, epochs=4) -> RunConfig:
    return RunConfig(
        data=DataConfig(shards_dir=shards),
        cluster=cluster,
        training=TrainingConfig(epochs=epochs),
        output_dir=str(out),
    )


@pytest.fixture(scope="module")
def trained(digits_shards, tmp_path_factory):
    """Each strategy trained once; tests below inspect the results."""
    results = {}
    for name, cluster in SHAPES.items():
        out = tmp_path_factory.mktemp(name)
        metrics = run_local(_config(digits_shards, out, cluster), log=lambda _: None)
        results[name] = (metrics.to_dict(), out)
    return results


@pytest.mark.parametrize("strategy", list(SHAPES))
def test_strategy_learns_the_digits(trained, strategy):
    metrics, out = trained[strategy]
    assert metrics["strategy"] == strategy
    assert metrics["eval_accuracy"] >= 0.85, metrics["eval_accuracy"]  # chance is 0.10
    assert metrics["history"]["loss"][-1] < metrics["history"]["loss"][0]
    assert len(metrics["epoch_seconds"]) == metrics["epochs"] == 4
    assert metrics["examples_per_second"] > 0
    replicas = (metrics["num_replicas"], metrics["replicas_in_sync"], metrics["global_batch_size"])
    assert replicas == REPLICAS[strategy]
    on_disk = json.loads((out / "metrics.json").read_text())
    for field in ("workers", "ps", "epoch_seconds", "history", "eval_loss", "num_replicas"):
        assert on_disk[field] == metrics[field]
    assert (out / "model" / "saved_model.pb").exists()
    assert not (out / "_scratch").exists()
    assert json.loads((out / "status.json").read_text())["state"] == "succeeded"


@pytest.mark.parametrize("strategy", list(SHAPES))
def test_metrics_say_where_the_time_went(trained, strategy):
    metrics, _ = trained[strategy]
    phases = metrics["phase_seconds"]
    assert set(phases) == {"startup", "setup", "fit", "epochs", "export", "evaluate"}
    assert all(value > 0 for value in phases.values()), phases
    # The epochs are timed inside fit, and every phase inside the launcher's wall time.
    assert phases["epochs"] == pytest.approx(sum(metrics["epoch_seconds"]))
    assert phases["epochs"] <= phases["fit"]
    assert sum(v for k, v in phases.items() if k != "epochs") < metrics["launcher_wall_seconds"]


def evaluate_saved_model(model_dir: str, shards_dir: str):
    """Loads an exported SavedModel and evaluates it on the test split, apart from the
    trainer: compiled as the run compiled it, from the run config saved beside it."""
    import tf_keras as keras

    from components.core import datasets, evaluation, model_build, model_export, models
    from components.core.config import RunConfig

    manifest = datasets.load_manifest(shards_dir)
    config = RunConfig.from_dict(model_export.saved_run_config(model_dir))
    module = models.resolve(config.model)
    model = model_build.build_compiled(config, manifest.input_spec, module).model
    model.set_weights(keras.models.load_model(model_dir, compile=False).get_weights())
    by_name = datasets.inputs_by_name(manifest, model)
    return evaluation.evaluate(
        model,
        datasets.eval_dataset(manifest, "test", preprocess=module.preprocess, by_name=by_name),
        manifest.input_spec,
    )


def test_exported_model_reproduces_the_test_accuracy(trained, digits_shards):
    metrics, out = trained["multi_worker_mirrored"]
    result = evaluate_saved_model(str(out / "model"), digits_shards)
    assert result.accuracy == pytest.approx(metrics["eval_accuracy"], abs=1e-6)
    assert result.loss == pytest.approx(metrics["eval_loss"], abs=1e-5)


def test_multi_worker_mirrored_workers_end_with_identical_weights(trained):
    _, out = trained["multi_worker_mirrored"]
    digests = {
        p.stem: json.loads(p.read_text())["weights_sha256"] for p in (out / "tasks").iterdir()
    }
    assert set(digests) == {"chief-0", "worker-0"}
    assert digests["chief-0"] == digests["worker-0"]


def test_parameter_server_variables_live_on_the_ps_task(trained):
    metrics, _ = trained["parameter_server"]
    placement = metrics["variable_placement"]
    assert placement and all(device.startswith("/job:ps/") for device in placement), placement
    mirrored_placement = trained["mirrored"][0]["variable_placement"]
    assert not any(device.startswith("/job:ps/") for device in mirrored_placement)


def test_a_killed_worker_fails_the_run_cleanly(digits_shards, tmp_path):
    config = _config(digits_shards, tmp_path, SHAPES["multi_worker_mirrored"], epochs=50)
    cluster = LocalCluster(config, log=lambda _: None)

    def kill_worker_once_training(task, line):
        if task.name == "chief-0" and line.startswith("epoch 1/"):
            cluster.kill("worker-0")

    cluster.on_line = kill_worker_once_training
    with pytest.raises(ClusterFailed) as failure:
        cluster.run()
    assert failure.value.task in ("chief-0", "worker-0")
    assert failure.value.returncode != 0
    pids = cluster.pids()
    assert pids and not set(pids) & set(trainer_pids(str(tmp_path)))
    assert json.loads((tmp_path / "status.json").read_text())["state"] == "failed"
    assert not (tmp_path / "metrics.json").exists()


def test_a_task_that_errors_reports_its_last_lines(tmp_path):
    config = _config(str(tmp_path / "no-shards"), tmp_path / "out", SHAPES["parameter_server"])
    with pytest.raises(ClusterFailed) as failure:
        run_local(config, log=lambda _: None)
    assert failure.value.task == "chief-0"
    assert "does not exist" in str(failure.value)  # the chief's own error, surfaced
    assert not trainer_pids(str(tmp_path))


def train_with_speed_flags(out, shards, strategy_flags, speed_flags, capsys) -> dict:
    """`strategist train --local` with the speed flags; returns metrics.json after checks."""
    from pipelines.cli import main

    argv = ["train", "--local", *strategy_flags, *speed_flags]
    argv += ["--shards-dir", shards, "--epochs", "4", "--output", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["eval_accuracy"] >= 0.85, metrics["eval_accuracy"]  # chance is 0.10
    for option in ("precision", "jit_compile", "steps_per_execution"):
        assert metrics[option] == metrics["run_config"]["training"][option], option
    xla = {
        None: "off",
        "train_step": "on",
        "model": "on (forward and backward passes; all-reduce and update outside XLA)",
    }[metrics["xla_scope"]]
    assert metrics["jit_compile"] == (metrics["xla_scope"] is not None)
    steps = metrics["steps_per_execution"]
    summary = f"{metrics['precision']}, XLA {xla}, {steps} step{'s' if steps > 1 else ''} per"
    assert summary in printed
    return metrics


def test_multi_worker_mirrored_learns_in_bfloat16_with_xla_and_several_steps_per_execution(
    digits_shards, tmp_path, capsys, monkeypatch
):
    """The speed flags reach every worker of a real two-worker cluster, which still learns.

    Without GPUs XLA compiles each worker's forward and backward passes (its
    dumps show them) and the ring all-reduce runs outside XLA.
    """
    dumps = tmp_path / "xla-dumps"
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={dumps}")
    metrics = train_with_speed_flags(
        tmp_path / "bf16",
        digits_shards,
        ["--strategy", "multi_worker_mirrored", "--workers", "2"],
        ["--precision", "mixed_bfloat16", "--jit-compile", "--steps-per-execution", "4"],
        capsys,
    )
    assert (metrics["precision"], metrics["steps_per_execution"]) == ("mixed_bfloat16", 4)
    assert (metrics["jit_compile"], metrics["xla_scope"]) == (True, "model")
    assert metrics["all_reduce"] == "ring"  # auto, on a machine without GPUs
    assert metrics["hardware"]["processes"] == 2
    compiled = {p.name for p in dumps.glob("*before_optimizations.txt")}
    assert any("forward_call" in name for name in compiled), sorted(compiled)
    assert any("backward_call" in name for name in compiled), sorted(compiled)
    # The all-reduce stayed out of XLA: no compiled module holds a collective.
    assert not any("all-reduce" in (dumps / name).read_text() for name in compiled), (
        "a collective was compiled"
    )


def test_xla_learns_in_bfloat16_on_one_device(digits_shards, tmp_path, capsys):
    """--jit-compile on CPU: one device (XLA compiles no collectives on CPU devices)."""
    metrics = train_with_speed_flags(
        tmp_path / "xla",
        digits_shards,
        ["--strategy", "one_device"],
        ["--precision", "mixed_bfloat16", "--jit-compile", "--steps-per-execution", "4"],
        capsys,
    )
    assert (metrics["precision"], metrics["jit_compile"]) == ("mixed_bfloat16", True)
