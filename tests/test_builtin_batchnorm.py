"""The built-in models that hold BatchNormalization (`resnet50`, `mobilenet_v2`) finish under
the multi-machine strategies on a real localhost cluster: trained, exported and evaluated,
with `metrics.json` written. Under multi_worker_mirrored the moving statistics are
sync-on-read variables, and reading them is an all-reduce every task must join.

Each run costs minutes on two cores (ImageNet-sized models, traced and exported), so they
are `heavy`: `make test-heavy` runs them, `make test` leaves them out. The same failure
on a small model, run by `make test`: tests/test_tutorial_ports.py (timeseries_fcn under
multi_worker_mirrored)."""

from __future__ import annotations

import json

import pytest

STRATEGY_FLAGS = {
    "multi_worker_mirrored": ["--strategy", "multi_worker_mirrored", "--workers", "2"],
    "parameter_server": ["--strategy", "parameter_server", "--workers", "2", "--ps", "1"],
}


@pytest.fixture(scope="module")
def tiny_images(tmp_path_factory) -> str:
    """80 images of 32 x 32 x 3 (the applications' smallest input), two classes told apart by
    brightness, as an .npz a NumPy user saves."""
    import numpy as np

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 80)
    images = rng.random((80, 32, 32, 3)) * 0.2 + labels[:, None, None, None] * 0.6
    path = tmp_path_factory.mktemp("tiny") / "tiny_images.npz"
    np.savez(path, x=images.astype("float32"), y=labels)
    return str(path)


@pytest.mark.heavy
@pytest.mark.cluster
@pytest.mark.parametrize("strategy", list(STRATEGY_FLAGS))
@pytest.mark.parametrize("model", ["resnet50", "mobilenet_v2"])
def test_builtin_batchnorm_models_finish_under_multi_machine_strategies(
    model, strategy, tiny_images, tmp_path
):
    from pipelines import cli

    out = tmp_path / f"{model}-{strategy}"
    argv = [
        "train", "--local", *STRATEGY_FLAGS[strategy], "--model", model, "--data", tiny_images,
        "--epochs", "1", "--batch-size", "8", "--output", str(out),
    ]  # fmt: skip
    assert cli.main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == model and metrics["strategy"] == strategy
    assert metrics["eval_examples"] == 16  # the whole test split was evaluated
    assert metrics["history"]["loss"][0] > 0
    assert (out / "model" / "saved_model.pb").exists()
