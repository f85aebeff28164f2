"""TensorFlow imported in the CLI's own process leaves its start-up lines off the console.

TF >= 2.19 logs oneDNN/CUDA lines before absl is initialised, whatever
TF_CPP_MIN_LOG_LEVEL says; each case runs a fresh process, one that has not
imported TensorFlow yet, and expects only the command's own error line.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# This checkout's CLI (cwd first on sys.path), not the one the `strategist` script imports.
STRATEGIST = [sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main())"]


def _strategist(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*STRATEGIST, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_tfds_builder_that_imports_tensorflow_leaves_only_the_refusal(tmp_path):
    # titanic's builder reaches for `tf` while train's pre-flight describes its features.
    run = _strategist("train", "--dataset", "titanic", "--model", "mlp",
                      "--output", str(tmp_path / "out"))  # fmt: skip
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("strategist train: error: --model mlp takes one numeric input"), line


@pytest.mark.parametrize("flag", ["--model-module", "--dataset-module"])
def test_a_users_module_that_imports_tensorflow_leaves_only_its_error(tmp_path, flag):
    module = tmp_path / "my_module.py"
    module.write_text("import tensorflow\nraise RuntimeError('boom')\n")
    run = _strategist("train", "--local", flag, str(module), "--output", str(tmp_path / "out"))
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("strategist train: error: ") and "RuntimeError: boom" in line, line
