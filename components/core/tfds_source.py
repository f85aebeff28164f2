"""TFDS datasets as a run's source: the builder a name resolves to, and its features as stored.

Anything `tfds.builder(...)` resolves (`name`, `name/config`, `name:1.2.0`, a builder
registered by `--dataset-module`, a dataset prepared in `--data-dir`) or a prepared
dataset folder given as `--dataset PATH`.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from typing import Any

from components.core import storage, user_python_file
from components.core.data_sources import (
    BYTES,
    FLOAT,
    IMAGE,
    INT,
    StoredFeature,
    listing,
)
from components.core.errors import ConfigError


def import_dataset_module(module: str) -> None:
    """Imports a user's module that registers TFDS builders (`--dataset-module`).

    Args:
        module: a `.py` file path or an importable module name.

    Raises:
        ConfigError: file missing, a folder or not a `.py` file, a `gs://` file
            (refused once found readable), or the module raises (with its file
            and line).
    """
    try:
        if module.endswith(".py") or "/" in module:
            _import_file(module)
        else:
            importlib.import_module(module)
    except ConfigError:
        raise
    except ModuleNotFoundError as err:
        if err.name and module.startswith(err.name):
            raise ConfigError(
                f"--dataset-module {module}: no such module; pass a .py file or a module on "
                "PYTHONPATH"
            ) from None
        raise ConfigError(f"--dataset-module {module} failed: {_where(err)}") from None
    except Exception as err:  # the user's code: any error is theirs to fix
        raise ConfigError(f"--dataset-module {module} failed: {_where(err)}") from None


def _import_file(path: str) -> None:
    """Imports a builder file, its builders told where their metadata lives.

    TFDS looks for a builder's metadata files (`dataset_info_from_configs`)
    through the package of the builder's module, which a lone file has not:
    each builder it defines gets its folder as `pkg_dir_path`.
    """
    import tensorflow_datasets as tfds
    from etils import epath

    flag = "--dataset-module"
    local = storage.local_view(path)  # a rehearsal serves gs:// from this machine
    if storage.is_remote(local):
        user_python_file.read_remote(local, flag)  # missing or unreadable: said in seconds
        raise ConfigError(
            f"{flag} {path}: a builder file is imported from this machine, beside its "
            f"metadata: copy its folder here (gcloud storage cp -r) and pass the local path"
        )
    user_python_file.check_local(local, flag, path)
    path = os.path.abspath(local)
    name = "strategist_dataset_" + hashlib.sha256(path.encode()).hexdigest()[:8]
    if name in sys.modules:
        return  # imported already: its builders are registered
    spec = importlib.util.spec_from_file_location(name, path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    sys.modules[name] = loaded
    for value in vars(loaded).values():
        builder = isinstance(value, type) and issubclass(value, tfds.core.DatasetBuilder)
        if builder and value.__module__ == name and value.__dict__.get("pkg_dir_path") is None:
            value.pkg_dir_path = epath.Path(os.path.dirname(path))


def _where(err: BaseException) -> str:
    """`Type: message (file:line)` of the innermost frame of an exception."""
    frames = traceback.extract_tb(err.__traceback__)
    place = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    if isinstance(err, SyntaxError) and err.filename:
        place = f" ({err.filename}:{err.lineno})"
    return f"{type(err).__name__}: {err}{place}"


def tfds_builder(name: str, data_dir: str | None = None, module: str | None = None):
    """The TFDS builder of `name`, resolved by TFDS itself.

    `name` is what `tfds.builder` takes (`mnist`, `glue/sst2`, `mnist:3.0.1`)
    or a prepared dataset folder (`.../my_dataset/1.0.0`, holding
    `dataset_info.json`), read with `tfds.builder_from_directory`.

    Raises:
        ConfigError: TFDS cannot find it (with close matches), or cannot build it.
    """
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core import registered

    import components.core.builders  # noqa: F401  (registers `digits` with TFDS)

    if module:
        import_dataset_module(module)
    if data_dir is not None and not storage.isdir(data_dir):
        raise ConfigError(f"--data-dir {data_dir} does not exist: create it or pass another folder")
    if storage.isfile(storage.join(name, "dataset_info.json")):
        return tfds.builder_from_directory(name)
    if name.startswith(("/", ".", "~")) or ".." in name.split("/") or storage.is_uri(name):
        raise ConfigError(
            f"--dataset {name!r} is a path but no prepared dataset folder (it holds no "
            "dataset_info.json): pass a TFDS name (mnist, glue/sst2), a prepared dataset "
            "folder, or files with --data"
        )
    try:
        return tfds.builder(name, data_dir=data_dir)
    except registered.DatasetNotFoundError:
        base = name.split("/")[0].split(":")[0]
        close = difflib.get_close_matches(
            base, tfds.list_builders(with_community_datasets=False), n=3
        )
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(
            f"TFDS cannot find dataset {name!r}{hint}: pass a TFDS name, your builder with "
            "--dataset-module, a prepared dataset folder, or files with --data"
        ) from None
    except (ValueError, AssertionError, KeyError, TypeError) as err:
        reason = _unknown_config_hint(name) or str(err).splitlines()[0]
        raise ConfigError(f"TFDS cannot build dataset {name!r}: {reason}") from None


def _unknown_config_hint(name: str) -> str:
    """What to pass instead of an unknown `name/config`, or "" when the config exists.

    TFDS 4.9's own message promises the closest configs and then lists none.
    """
    import tensorflow_datasets as tfds

    base, _, config = name.split(":")[0].partition("/")
    if not config:
        return ""
    configs = [c.name for c in getattr(tfds.builder_cls(base), "BUILDER_CONFIGS", [])]
    if config in configs:
        return ""
    close = difflib.get_close_matches(config, configs, n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return f"it has no config {config!r}; {hint}configs: {', '.join(configs[:12])}"


def tfds_features(info, label: str | None) -> tuple[list[StoredFeature], StoredFeature, int | None]:
    """The features and label of a TFDS dataset, from its supervised keys or `label`.

    Args:
        info: the builder's `DatasetInfo`.
        label: the label feature (`--label`); the other top-level features
            become the inputs. Without it, `info.supervised_keys`.

    Returns:
        (features, label, num_classes or None for regression).

    Raises:
        ConfigError: no supervised keys and no `--label`, an unknown label, a
            label that is neither a class label nor a number, or a feature
            Strategist cannot hand to a model.
    """
    import tensorflow_datasets as tfds

    top = info.features
    if label:
        if label not in top:
            raise ConfigError(
                f"dataset {info.name!r} has no feature {label!r} for --label; its features: "
                f"{listing(top.keys())}"
            )
        input_keys: Any = [k for k, _ in top.items() if k != label]
        label_key = label
    elif info.supervised_keys and len(info.supervised_keys) >= 2:
        input_keys, label_key = info.supervised_keys[0], info.supervised_keys[1]
    else:
        raise ConfigError(
            f"dataset {info.name!r} has no supervised (input, label) keys: pass --label NAME, "
            f"one of {listing(top.keys())}"
        )
    if not isinstance(label_key, str):
        raise ConfigError(f"dataset {info.name!r}: its label {label_key!r} is not one feature")
    label_feature = top[label_key]
    if isinstance(label_feature, tfds.features.ClassLabel):
        label_spec = StoredFeature("label", label_key, (), INT)
        num_classes = label_feature.num_classes
    elif _kind(label_feature) in (FLOAT, INT) and tuple(label_feature.shape) == ():
        label_spec = StoredFeature("label", label_key, (), FLOAT)
        num_classes = None  # a number: regression
    else:
        raise ConfigError(
            f"dataset {info.name!r}: label {label_key!r} is neither a class label nor a single "
            "number; pass --label with a ClassLabel or numeric feature"
        )
    features = [
        _tfds_leaf(info.name, name, path, feature)
        for name, path, feature in _leaves(top, input_keys)
    ]
    return features, label_spec, num_classes


def _leaves(top, keys) -> list[tuple[str, str, Any]]:
    """(model name, decoded-example path, feature) of every input leaf."""
    import tensorflow_datasets as tfds

    if isinstance(keys, str):
        keys = [keys]
    elif isinstance(keys, dict):
        keys = list(keys.values())
    leaves = []
    for key in keys:
        feature = top[key]
        if isinstance(feature, tfds.features.FeaturesDict):
            leaves += [(inner, f"{key}/{inner}", f) for inner, f in feature.items()]
        else:
            leaves.append((key, key, feature))
    return leaves


def _tfds_leaf(dataset: str, name: str, path: str, feature) -> StoredFeature:
    import tensorflow_datasets as tfds

    if isinstance(feature, tfds.features.Image):
        return StoredFeature(name, path, tuple(feature.shape), IMAGE)
    kind = _kind(feature)
    if kind is None or isinstance(feature, tfds.features.FeaturesDict):
        raise ConfigError(
            f"dataset {dataset!r}: feature {path!r} ({type(feature).__name__}) is nested or not "
            "a tensor; Strategist hands models tensors: choose a dataset or --label whose "
            "inputs are tensors"
        )
    return StoredFeature(name, path, tuple(feature.shape), kind)


def _kind(feature) -> str | None:
    import numpy as np

    try:
        dtype = np.dtype(feature.np_dtype)
    except (AttributeError, TypeError):
        return None
    if dtype.kind == "f":
        return FLOAT
    if dtype.kind in "iub":
        return INT
    if dtype.kind in "OSU":
        return BYTES
    return None
