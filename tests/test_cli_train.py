"""`strategist train`: bad input exits 2 before anything starts; a real run writes metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines import cli
from tests.conftest import trainer_pids


def scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """The epoch scalars in `log_dir`, read by TensorBoard's own reader (not traces)."""
    try:
        from tensorboard.backend.event_processing import event_accumulator
        from tensorboard.util import tensor_util
    except ImportError:
        pytest.fail("tensorboard is a dependency of Strategist (pyproject.toml): run make install")
    assert list(log_dir.glob("events.out.tfevents.*")), f"no event file in {log_dir}"
    reader = event_accumulator.EventAccumulator(str(log_dir))
    reader.Reload()
    return {
        tag: [
            (e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in reader.Tensors(tag)
        ]
        for tag in reader.Tags()["tensors"]
        if reader.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"
    }


def main(argv: list[str]) -> int:
    """The CLI's exit code, whether it returns it or argparse raises SystemExit."""
    try:
        return cli.main(argv)
    except SystemExit as exit_:
        return exit_.code


BAD_INPUT = [
    (["--strategy", "horovod"], "unknown strategy"),
    (["--strategy", "mirrored", "--workers", "2"], "runs on one machine"),
    (["--strategy", "parameter_server", "--ps", "0"], "at least one parameter server"),
    (["--strategy", "multi_worker_mirrored", "--workers", "0"], "--workers must be at least 1"),
    (["--strategy", "multi_worker_mirrored", "--ps", "2"], "has no parameter servers"),
    (["--epochs", "0"], "--epochs: must be at least 1"),
    (["--batch-size", "-4"], "--batch-size: must be at least 1"),
    (["--model", "transformer9000"], "unknown model"),
    (["--dataset", "no_such_dataset"], "TFDS cannot find dataset"),
    (["--data-dir", "/nonexistent/strategist"], "does not exist"),
    (
        ["--strategy", "multi_worker_mirrored", "--workers", "3", "--global-batch-size", "100"],
        "multiple of 3",
    ),
    (["--gpus-per-machine", "0"], "--gpus-per-machine must be at least 1"),
    (["--strategy", "parameter_server", "--gpus-per-machine", "2"], "one device per worker"),
    (["--strategy", "multi_worker_mirrored", "--gpus-per-machine", "2"], "one device per worker"),
    (["--strategy", "one_device", "--gpus-per-machine", "2"], "one_device trains on one device"),
    (["--all-reduce", "ring"], "--all-reduce ring does not apply to mirrored"),
    (["--all-reduce", "fastest"], "invalid choice"),
    # This machine has no GPU (tests run on CPU).
    (
        ["--strategy", "multi_worker_mirrored", "--all-reduce", "nccl"],
        "--all-reduce nccl needs GPUs and this machine has none: use auto or ring",
    ),
    (["--precision", "mixed_float16"], "use --precision mixed_bfloat16 to rehearse"),
    (["--precision", "float8"], "invalid choice"),
    (["--profile-steps", "5,2"], "1 <= A <= B"),
    (["--profile-steps", "ten"], "two step numbers A,B"),
    (["--steps-per-execution", "0"], "--steps-per-execution: must be 1 to 100,000"),
    (["--checkpoint-every", "0"], "--checkpoint-every takes 1 to 1,000,000,000 steps"),
    (["--checkpoint-every", "10x"], "--checkpoint-every takes 'epoch', a number of steps"),
    (["--checkpoint-every", "-5"], "--checkpoint-every takes 'epoch', a number of steps"),
    (["--checkpoint-every", "0.5s"], "--checkpoint-every takes a duration of 1s to 168h"),
    (
        ["--strategy", "parameter_server", "--jit-compile"],
        "--jit-compile cannot run parameter_server on a machine without GPUs",
    ),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUT)
def test_bad_input_exits_2_before_launching(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["train", "--local", "--output", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()[-1]) < 300  # one line, not a dump
    assert not out.exists()  # nothing was started or written
    assert not trainer_pids(str(out))


@pytest.mark.cluster
def test_train_writes_metrics_and_model(tmp_path, tfds_dir, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "train", "--local", "--strategy", "one_device", "--epochs", "4",
            "--data-dir", str(tfds_dir), "--num-shards", "2", "--output", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    for field in (
        "strategy", "num_replicas", "workers", "ps", "global_batch_size", "epochs",
        "epoch_seconds", "examples_per_second", "history", "eval_accuracy", "eval_loss",
    ):  # fmt: skip
        assert field in metrics, field
    assert metrics["strategy"] == "one_device" and metrics["num_replicas"] == 1
    assert metrics["eval_accuracy"] >= 0.85
    assert "epoch 4/4" in printed and "test accuracy" in printed
    assert (out / "model" / "saved_model.pb").exists()
    config = json.loads((out / "config.json").read_text())
    assert config["cluster"]["strategy"] == "one_device"
    # TensorBoard logs under the output: one point per epoch of every scalar.
    written = scalars(out / "tensorboard" / "train")
    for tag in ("loss", "accuracy", "learning_rate", "examples_per_second", "seconds"):
        assert [step for step, _ in written[f"epoch_{tag}"]] == [0, 1, 2, 3], tag
    assert [value for _, value in written["epoch_accuracy"]] == pytest.approx(
        metrics["history"]["accuracy"], rel=1e-5
    )
    assert [value for _, value in written["epoch_examples_per_second"]] == pytest.approx(
        metrics["epoch_examples_per_second"], rel=1e-5
    )
    assert not (out / "tensorboard" / "plugins" / "profile").exists()  # no trace unless asked


@pytest.mark.cluster
def test_train_writes_tensorboard_logs_where_vertex_ai_asks(tmp_path, tfds_dir, monkeypatch):
    """`AIP_TENSORBOARD_LOG_DIR` (set by Vertex AI for `--tensorboard`) wins over the output.

    `--profile-steps` puts a profiler trace of those steps there too.
    """
    out, board = tmp_path / "run", tmp_path / "vertex-tensorboard"
    monkeypatch.setenv("AIP_TENSORBOARD_LOG_DIR", str(board))
    code = main(
        [
            "train", "--local", "--strategy", "one_device", "--epochs", "2",
            "--data-dir", str(tfds_dir), "--num-shards", "2", "--output", str(out),
            "--profile-steps", "3,5",
        ]
    )  # fmt: skip
    assert code == 0
    assert len(scalars(board / "train")["epoch_loss"]) == 2
    assert not (out / "tensorboard").exists()
    traces = list((board / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(traces) == 1 and traces[0].stat().st_size > 0
