"""Tests of model_profile."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from components.core import model_profile
from components.core.config import ConfigError
from components.core.model_profile import from_params


def test_model_profile_counts_macs():
    mlp, _, _ = model_profile._build_and_count("mlp", 10, (8, 8, 1))
    # Dense MACs: 64x128 + 128x64 + 64x10 = 17,024 -> 34,048 FLOPs
    assert mlp.flops_per_example == 34_048
    assert mlp.params == 64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10
    assert mlp.largest_variable_params == 64 * 128
    cnn, _, _ = model_profile._build_and_count("cnn", 10, (8, 8, 1))
    # 8x8x16x9 + 4x4x32x(9x16) + 32x64 + 64x10 = 85,632 MACs
    assert cnn.flops_per_example == 2 * 85_632


@pytest.mark.parametrize(
    ("name", "classes"),
    [("mlp", 10), ("mlp", 1000), ("cnn", 3), ("resnet50", 10), ("mobilenet_v2", 1000)],
)
def test_bundled_profiles_match_a_live_count(name, classes):
    """data/model_profiles.json (rewritten by `python -m components.core.model_profile`) is
    what building and counting the registry model gives, for any class count."""
    from components.core.models import DEFAULT_INPUT_SHAPES

    live, _, _ = model_profile._build_and_count(name, classes, DEFAULT_INPUT_SHAPES[name])
    assert model_profile.profile_model(name, num_classes=classes) == live


def test_bundled_profiles_hold_every_field_the_generator_writes():
    """Cheap (no model built): the committed file has each field `to_dict` writes, so a
    new ModelProfile field fails here until `python -m components.core.model_profile` runs."""
    bundled = json.loads(model_profile.BUNDLED_PATH.read_text())
    assert bundled["version"] == model_profile.PROFILE_VERSION
    for name, entry in bundled["models"].items():
        written = json.loads(json.dumps(model_profile.ModelProfile(**entry["profile"]).to_dict()))
        assert written == entry["profile"], name


def test_select_sizes_a_registry_model_without_tensorflow():
    code = (
        "import sys; from pipelines.cli import main; "
        "code = main(['select', '--machines', '2', '--gpus-per-machine', '4', '--model', "
        "'resnet50', '--classes', '1000', '--json']); "
        "assert 'tensorflow' not in sys.modules, 'imported TensorFlow'; sys.exit(code)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["inputs"]["model"]["params"] == 25_636_712  # as built


def test_from_params_refuses_bad_counts():
    assert from_params(1000, 2000.0).flops_per_example == 2000
    assert from_params(1000, 2000.0, 10.0).estimated == ()
    guessed = from_params(1000)
    assert guessed.estimated == ("flops", "activations")
    assert guessed.flops_per_example == pytest.approx(1000 * model_profile.FLOPS_PER_PARAM_ESTIMATE)
    assert guessed.activation_bytes_per_example > 0
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ConfigError):
            from_params(bad)
