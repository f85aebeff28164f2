"""Importing TensorFlow in the CLI's own process without its C++ start-up lines.

Since TensorFlow 2.19, lines logged before `absl::InitializeLog()` (oneDNN,
"Could not find cuda drivers", "failed call to cuInit") ignore
`TF_CPP_MIN_LOG_LEVEL` (https://github.com/tensorflow/tensorflow/issues/100442)
and reach the console of any command that imports TensorFlow: a user's module,
or a TFDS builder that reaches for `tf` while `train` describes its dataset
(`titanic`'s features do). Trainer processes keep them: on a GPU machine they
are how a missing driver shows.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import os
import sys
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def _stderr_held() -> Iterator[None]:
    """Standard error (the file descriptor, which C++ writes to) held back; what was
    held is shown only if the body raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class _HeldLoader(importlib.abc.Loader):
    """TensorFlow's own loader, run with standard error held back."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def __getattr__(self, name: str):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        with _stderr_held():
            self.loader.exec_module(module)
            module.config.list_physical_devices()  # the CUDA probe logs here


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as the other finders do, and gives it a `_HeldLoader`.

    Returning a spec whose loader runs the import, rather than importing here,
    keeps the import system's own bookkeeping (module locks, `sys.modules`, a
    failed import left out of it).
    """

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        others = [finder for finder in sys.meta_path if finder is not self]
        for finder in others:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HeldLoader(spec.loader)
                return spec
        return None


@contextlib.contextmanager
def tensorflow_imported_quietly() -> Iterator[None]:
    """While inside, whatever imports TensorFlow first imports it without its start-up lines.

    Costs nothing when nothing imports TensorFlow: only the import is held back,
    when it happens.
    """
    if "tensorflow" in sys.modules:
        yield
        return
    finder = _QuietTensorFlowFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
