"""The model-module contract: a user's Python file or module that builds the model.

A model module (`--model-module PATH_OR_MODULE`, `RunConfig.model.module`) defines

- `build_model(spec: InputSpec) -> tf_keras.Model` (required): the model for
  examples described by `spec`, built by Strategist inside `strategy.scope()`;
- `compile_settings(spec) -> dict` (optional): any of `optimizer`, `loss`,
  `metrics`. A model that `build_model` compiled itself keeps its optimizer,
  loss and metrics instead; what is missing takes the task's default;
- `preprocess(features, label) -> (inputs, label)` (optional): mapped over
  each example in `tf.data`, for training and evaluation;
- `TASK` (optional): `classification` or `regression`, checked against the data;
- `callbacks(spec) -> list` (optional): tf_keras callbacks added to `fit` in
  every task (early stopping, learning-rate schedules, checkpoints of the
  user's choosing);
- `SCALE_LEARNING_RATE` (optional): False trains at the optimizer's rate as
  given, at any batch (as `--no-scale-learning-rate`).

Strategist keeps what the module chose and owns the rest: the strategy, the
batch, the learning rate's linear scaling (the optimizer's own rate is the rate
at `training.base_batch_size`), epochs, export and measurement. What it
changed is recorded (`RunMetrics.adjustments`).

The registry names (`mlp`, `cnn`, `resnet50`, `mobilenet_v2`) are built-in
modules of the same contract (`components.core.models`). docs/your-model.md is
the user's guide.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.core import storage, user_python_file
from components.core.errors import ConfigError
from components.core.input_spec import CLASSIFICATION, REGRESSION, InputSpec

COMPILE_KEYS = ("optimizer", "loss", "metrics")
# Where a module given as a gs:// file is copied before it is imported.
_FETCHED_DIR = os.path.join(os.path.expanduser("~"), ".cache", "strategist", "model_modules")


@dataclass(frozen=True)
class ModelModule:
    """A loaded model module.

    Attributes:
        source: what the run names (`RunConfig.model.module`, or a registry name).
        name: a short name for records and reports (a file's stem, a module's name).
        file: the file it was loaded from, for messages (None for built-ins).
        build_model: `build_model(spec) -> tf_keras.Model`.
        compile_settings: `compile_settings(spec) -> dict`, or None.
        preprocess: `preprocess(features, label) -> (inputs, label)`, or None.
        task: the task it declares (`TASK`), or None.
        callbacks: `callbacks(spec) -> list of tf_keras callbacks`, or None.
        scale_learning_rate: False when it asks for its rate unscaled
            (`SCALE_LEARNING_RATE = False`).
    """

    source: str
    name: str
    file: str | None
    build_model: Callable[[InputSpec], Any]
    compile_settings: Callable[[InputSpec], dict[str, Any]] | None = None
    preprocess: Callable[[Any, Any], tuple[Any, Any]] | None = None
    task: str | None = None
    callbacks: Callable[[InputSpec], list[Any]] | None = None
    scale_learning_rate: bool = True

    def where(self) -> str:
        """How a message names the module: its file, else its source."""
        return self.file or self.source


def is_file_source(source: str) -> bool:
    """True for a path (`x.py`, `dir/x.py`, `gs://...`), False for an importable module name."""
    return source.endswith(".py") or "/" in source or source.startswith("gs://")


def load(source: str) -> ModelModule:
    """Imports a model module from a `.py` file (local, `/gcs/` or `gs://`) or a module name.

    Raises:
        ConfigError: a missing file or module, a syntax or import error (naming
            the file and line), no callable `build_model`, or a bad `TASK`.
    """
    if not source:
        raise ConfigError("--model-module is empty: pass a .py file or a module name")
    if is_file_source(source):
        # Under a rehearsal `local_view` serves gs:// and /gcs/ from this machine.
        local = storage.local_view(source)
        path = _fetch(source) if storage.is_remote(local) else os.path.abspath(local)
        user_python_file.check_local(path, "--model-module", source)
        module = _import_file(source, path)
        name = os.path.splitext(os.path.basename(path))[0]
    else:
        module = _import_name(source)
        name = source
    return from_namespace(source, name, getattr(module, "__file__", None), vars(module))


def from_namespace(
    source: str, name: str, file: str | None, namespace: dict[str, Any]
) -> ModelModule:
    """A `ModelModule` from a module's names (also how built-ins are declared).

    Raises:
        ConfigError: no callable `build_model`, or a `TASK` that is not a task.
    """
    where = file or source
    build = namespace.get("build_model")
    if not callable(build):
        raise ConfigError(
            f"{where} defines no build_model(spec): add a function that returns a tf_keras "
            "model for the InputSpec (see docs/your-model.md)"
        )
    for optional in ("compile_settings", "preprocess", "callbacks"):
        if optional in namespace and not callable(namespace[optional]):
            raise ConfigError(f"{where}: {optional} is not a function")
    task = namespace.get("TASK")
    if task is not None and task not in (CLASSIFICATION, REGRESSION):
        raise ConfigError(f"{where}: TASK is {task!r}; use {CLASSIFICATION!r} or {REGRESSION!r}")
    scale = namespace.get("SCALE_LEARNING_RATE", True)
    if not isinstance(scale, bool):
        raise ConfigError(f"{where}: SCALE_LEARNING_RATE is {scale!r}; use True or False")
    return ModelModule(
        source=source,
        name=name,
        file=file,
        build_model=build,
        compile_settings=namespace.get("compile_settings"),
        preprocess=namespace.get("preprocess"),
        task=task,
        callbacks=namespace.get("callbacks"),
        scale_learning_rate=scale,
    )


def _import_file(source: str, path: str):
    # A unique module name per file and version: two modules called model.py do not
    # collide, and a file edited since it was imported is imported again.
    stat = os.stat(path)
    module_name = f"strategist_model_module_{abs(hash((path, stat.st_mtime_ns, stat.st_size)))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - any error of the user's code is reported
        raise ConfigError(f"--model-module {source}: {user_error(err, path)}") from None
    sys.modules[module_name] = module
    return module


def _import_name(source: str):
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as err:
        if (
            err.name
            and source.split(".")[0] == err.name.split(".")[0]
            and (source == err.name or source.startswith(err.name + "."))
        ):
            raise ConfigError(
                f"--model-module {source}: no such file or importable module: pass a .py file "
                "or a module on the Python path (in the cloud: in the trainer image)"
            ) from None
        raise ConfigError(f"--model-module {source}: {user_error(err, None)}") from None
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"--model-module {source}: {user_error(err, None)}") from None


def user_error(err: BaseException, path: str | None) -> str:
    """`FILE:LINE: Type: message` for an error raised by a user's code.

    The line is the deepest frame in `path` (or, without a path, the deepest
    frame outside Python's import machinery and Strategist); a SyntaxError
    names its own file and line.
    """
    what = f"{type(err).__name__}: {err}"
    if isinstance(err, SyntaxError) and err.filename:
        return f"{err.filename}:{err.lineno}: SyntaxError: {err.msg}"
    frames = traceback.extract_tb(err.__traceback__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    chosen = None
    for frame in frames:
        in_path = path is not None and os.path.abspath(frame.filename) == path
        outside = path is None and not (
            frame.filename.startswith("<frozen") or frame.filename.startswith(here)
        )
        if in_path or outside:
            chosen = frame
    if chosen is None:
        return what
    return f"{chosen.filename}:{chosen.lineno}: {what}"


def call(module: ModelModule, function: str, *args: Any) -> Any:
    """Calls one of the module's functions; its errors become a ConfigError naming file:line.

    Raises:
        ConfigError: whatever the function raised, with where.
    """
    try:
        return getattr(module, function)(*args)
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's code may raise anything
        path = os.path.abspath(module.file) if module.file else None
        raise ConfigError(
            f"{function} of {module.where()} failed: {user_error(err, path)}"
        ) from None


def check_isolated_import(source: str) -> None:
    """Refuses a module name that local trainers, started isolated (`python -I`), cannot find.

    Isolated interpreters ignore `PYTHONPATH` and the working directory, so a
    module importable here only through them would fail in every task.

    Raises:
        ConfigError: saying to install it or pass its file.
    """
    import subprocess

    if is_file_source(source):
        return
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
    found = subprocess.run(
        [sys.executable, "-I", "-c", probe, source], capture_output=True, check=False, timeout=60
    )
    if found.returncode != 0:
        raise ConfigError(
            f"--model-module {source} is importable here only through PYTHONPATH or the current "
            "folder, which the local trainers ignore (they start isolated): pass its .py file, "
            "or pip install its package into this environment"
        )


def _fetch(uri: str) -> str:
    """Copies a `gs://` module file to a local cache; returns the local path.

    The trainer of a Kubeflow replica receives the staged module as `gs://`
    (Vertex AI replicas get the `/gcs/` path and read it directly).

    Raises:
        ConfigError: not a `.py` file, missing, or a server that cannot be
            reached or refuses the read (`user_python_file.read_remote`).
    """
    content = user_python_file.read_remote(uri, "--model-module")
    local = os.path.join(_FETCHED_DIR, os.path.basename(uri))
    storage.makedirs(_FETCHED_DIR)
    storage.write_bytes(local, content)
    return local


def staged_name(source: str) -> str:
    """The file name a module file is staged under, beside the job's outputs."""
    return os.path.basename(source)
