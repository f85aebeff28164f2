"""Where a run's examples come from: a TFDS dataset, or the user's files.

Each source is described as `StoredFeature`s (what a shard record holds and
what parsing makes of it) so the shard writer and the reader in
`components.core.datasets` treat every source alike:

- TFDS: anything `tfds.builder(...)` resolves (`name`, `name/config`,
  `name:1.2.0`, a builder registered by `--dataset-module`, a dataset prepared
  in `--data-dir`) or a prepared dataset folder given as `--dataset PATH`. Its
  records are TFDS's own (images stay PNG/JPEG): parsing decodes them with
  the `features.json` TFDS wrote.
- Files (`--data PATH_OR_GLOB`): `.csv` and `.npz` (read whole, small data) and
  `.tfrecord` (records copied as they are, parsed with `--feature-spec`).

Every problem a user can fix is a `ConfigError` raised before any cluster starts.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import glob
import hashlib
import importlib
import importlib.util
import io
import json
import math
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any

from components.core import storage, user_python_file
from components.core.errors import ConfigError

# How a feature is stored in a shard record, and what the model receives:
FLOAT = "float"  # float_list -> float32
INT = "int"  # int64_list -> int64
BYTES = "bytes"  # bytes_list -> string
RAW_UINT8 = "raw_uint8"  # the array's bytes -> float32, unscaled (what Keras does to uint8)
IMAGE = "image"  # an encoded PNG/JPEG, or a TFDS image -> float32 in [0, 1]
ENCODINGS = (FLOAT, INT, BYTES, RAW_UINT8, IMAGE)
MODEL_DTYPES = {FLOAT: "float32", INT: "int64", BYTES: "string", RAW_UINT8: "float32"}
MODEL_DTYPES[IMAGE] = "float32"
# The one feature a CSV's numeric columns become, in column order.
VECTOR_FEATURE = "features"
FILE_KINDS = (".csv", ".npz", ".tfrecord")


@dataclass(frozen=True)
class StoredFeature:
    """One feature (or the label) as a shard record holds it.

    Attributes:
        name: what the model calls it (a dict key, a Keras input name).
        key: where it is in the record; for TFDS records, its path in the
            decoded example (`features/age`).
        shape: one example's shape; `None` marks a variable dimension.
        encoding: one of `ENCODINGS`.
    """

    name: str
    key: str
    shape: tuple[int | None, ...]
    encoding: str

    @property
    def dtype(self) -> str:
        """The dtype the model receives."""
        return MODEL_DTYPES[self.encoding]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "shape": list(self.shape), "encoding": self.encoding}

    @classmethod
    def from_dict(cls, name: str, raw: dict[str, Any]) -> StoredFeature:
        return cls(name, raw["key"], tuple(raw["shape"]), raw["encoding"])


def listing(names, limit: int = 8) -> str:
    """`a, b, c` of at most `limit` names, `... (N in all)` after them: messages stay one line."""
    names = list(names)
    shown = ", ".join(str(n) for n in names[:limit])
    return shown if len(names) <= limit else f"{shown} ... ({len(names)} in all)"


def in_test_split(index: int, fraction: float) -> bool:
    """Whether example `index` (0-based, in its file's order) is a test example.

    The documented split of data without a test split: example j of each file
    is a test example when floor((j + 1) * f) > floor(j * f), i.e. every
    (1/f)-th example, evenly spread (a file sorted by label still gives a test
    split of every label). Each file holds floor(n * f) test examples of its n.
    """
    return math.floor((index + 1) * fraction) > math.floor(index * fraction)


# ---------------------------------------------------------------- TFDS


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


# ---------------------------------------------------------------- files


def files_name(pattern: str) -> str:
    """A name for `--data` files in reports: the file's stem (`wine` for `data/wine.csv`)."""
    stem = os.path.splitext(os.path.basename(pattern))[0].replace("*", "")
    return stem.strip("-_.") or os.path.basename(os.path.dirname(pattern)) or "files"


def match_files(pattern: str) -> list[str]:
    """The files `--data` names, sorted; all of one supported kind.

    Raises:
        ConfigError: nothing matches, mixed or unsupported kinds, or a `gs://`
            pattern that cannot be reached or read.
    """
    with storage.reading(pattern, "--data"):
        paths = storage.glob(pattern) if glob.has_magic(pattern) else [pattern]
        if not glob.has_magic(pattern) and not storage.isfile(pattern):
            raise ConfigError(f"--data {pattern} does not exist: pass a file or a glob")
    if not paths:
        raise ConfigError(f"--data {pattern} matches no file: check the path and the pattern")
    kinds = {os.path.splitext(p)[1].lower() for p in paths}
    if len(kinds) > 1 or not kinds <= set(FILE_KINDS):
        raise ConfigError(
            f"--data {pattern}: files must all be one of {', '.join(FILE_KINDS)}, got "
            f"{', '.join(sorted(kinds))}"
        )
    return paths


@dataclass
class ArraySource:
    """Small data read whole (CSV, npz): arrays with one row per example.

    Attributes:
        features: the input features; `arrays[f.key]` holds each one's values.
        label: the label feature.
        num_classes: classes, or None for regression.
        arrays: key -> numpy array, first axis the examples.
        columns: for a CSV of numeric columns, their names in order (they
            reach a single-input model as one float vector).
        classes: names of the classes when the label column held names.
        positions: each example's row index within its own file (the test
            split is chosen per file, `in_test_split`).
    """

    features: list[StoredFeature]
    label: StoredFeature
    num_classes: int | None
    arrays: dict[str, Any]
    columns: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    positions: list[int] = dataclasses.field(default_factory=list)

    @property
    def num_examples(self) -> int:
        return len(self.arrays[self.label.key])


def read_csv(paths: list[str], label: str | None) -> ArraySource:
    """CSV files with a header row; every column but `label` is a feature.

    A column whose every cell is a whole number is an integer column (int64),
    one whose every cell is a number is float32; others are strings. Labels:
    names (any non-numeric cell) are classes in sorted order;
    whole numbers (`3`) are class ids 0..K-1; other numbers (`3.5`, `151.0`)
    make a regression.

    Raises:
        ConfigError: no `--label`, label column missing, empty file, ragged rows,
            empty label cells, negative class ids.
    """
    import numpy as np

    if not label:
        raise ConfigError("--data with CSV files needs --label COLUMN naming the label column")
    header, rows, positions = None, [], []
    for path in paths:
        with io.StringIO(storage.read_text(path), newline="") as handle:
            reader = csv.reader(handle)
            file_header = next(reader, None)
            if file_header is None:
                raise ConfigError(f"{path} is empty: a CSV needs a header row and data rows")
            if header is not None and file_header != header:
                raise ConfigError(f"{path} has other columns than {paths[0]}: {file_header}")
            header = file_header
            for line, row in enumerate(reader, start=2):
                if len(row) != len(header):
                    raise ConfigError(
                        f"{path}:{line} has {len(row)} cells, the header {len(header)}"
                    )
                rows.append(row)
                positions.append(line - 2)
    if label not in header:
        close = difflib.get_close_matches(label, header, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"--label {label!r} is not a column of {paths[0]}{hint}; columns: {listing(header)}"
        )
    if not rows:
        raise ConfigError(f"{paths[0]} has a header but no rows: there is nothing to train on")
    cells = {name: [row[i] for row in rows] for i, name in enumerate(header)}
    arrays: dict[str, Any] = {}
    features = []
    for name in header:
        if name == label:
            continue
        numbers = _numbers(cells[name])
        if numbers is None:
            arrays[name] = np.array(cells[name], dtype=object)
            features.append(StoredFeature(name, name, (), BYTES))
        elif _whole_numbers(cells[name]):
            # Counts, ages, codes stay integers (int64), as pandas reads them.
            arrays[name] = np.array([int(c) for c in cells[name]], dtype=np.int64)
            features.append(StoredFeature(name, name, (), INT))
        else:
            arrays[name] = np.array(numbers, dtype=np.float32)
            features.append(StoredFeature(name, name, (), FLOAT))
    label_feature, num_classes, classes, values = _csv_label(paths[0], label, cells[label])
    arrays[label] = values
    numeric = all(f.encoding in (FLOAT, INT) for f in features)
    columns = tuple(f.name for f in features) if numeric else ()
    return ArraySource(features, label_feature, num_classes, arrays, columns, classes, positions)


def _whole_numbers(cells: list[str]) -> bool:
    """Every cell is written as a whole number (`3`, `-12`; not `3.0`, `1e3`)."""
    return all(c.strip().lstrip("+-").isdigit() for c in cells)


def _numbers(cells: list[str]) -> list[float] | None:
    try:
        return [float(c) for c in cells]
    except ValueError:
        return None


def _csv_label(path: str, name: str, cells: list[str]):
    import numpy as np

    empty = [i + 2 for i, c in enumerate(cells) if not c.strip()]
    if empty:
        raise ConfigError(
            f"{path}:{empty[0]}: label column {name!r} is empty; fill or drop the row"
        )
    try:
        ids = [int(c) for c in cells]
    except ValueError:
        ids = None
    if ids is not None:
        if min(ids) < 0:
            raise ConfigError(
                f"{path}: label {name!r} holds {min(ids)}: class ids must be 0 or more "
                "(write the values as 1.0, 2.5 ... for a regression)"
            )
        _check_class_ids(path, name, max(ids) + 1, len(ids), "write them as 1.0, 2.5 ...")
        label = StoredFeature("label", name, (), INT)
        return label, max(ids) + 1, (), np.array(ids, dtype=np.int64)
    numbers = _numbers(cells)
    if numbers is not None:
        if not all(math.isfinite(v) for v in numbers):
            raise ConfigError(f"{path}: label {name!r} holds NaN or infinity; clean the column")
        return StoredFeature("label", name, (), FLOAT), None, (), np.array(numbers, np.float32)
    classes = tuple(sorted(set(cells)))
    index = {c: i for i, c in enumerate(classes)}
    ids = np.array([index[c] for c in cells], dtype=np.int64)
    return StoredFeature("label", name, (), INT), len(classes), classes, ids


# More class ids than this, or than examples, is a regression written as whole numbers.
MAX_CLASSES = 1000


def _check_class_ids(path: str, name: str, num_classes: int, count: int, remedy: str) -> None:
    """Refuses whole-number labels that cannot be class ids of this data.

    Raises:
        ConfigError: ids up to more than `MAX_CLASSES` or than there are examples.
    """
    if num_classes > min(MAX_CLASSES, count):
        raise ConfigError(
            f"{path}: label {name!r} holds whole numbers up to {num_classes - 1} for {count} "
            f"examples: too many to be class ids 0..K-1; for a regression {remedy}"
        )


def read_npz(paths: list[str], label: str | None) -> ArraySource:
    """`.npz` files: the label array (`--label`, default `y`) and the feature arrays.

    Arrays `x` and `y` make a single-input dataset; other names become named
    features. Integer labels are class ids (classification), floats a
    regression; uint8 features are kept as bytes and reach the model as float32.

    Raises:
        ConfigError: unreadable file, no label array, arrays of different lengths,
            labels that are not one number per example, negative class ids.
    """
    import numpy as np

    merged: dict[str, list[Any]] = {}
    positions: list[int] = []
    for path in paths:
        try:
            # Through the storage layer: `--data gs://bucket/*.npz` reads like a local glob.
            with np.load(io.BytesIO(storage.read_bytes(path)), allow_pickle=False) as archive:
                for key in archive.files:
                    merged.setdefault(key, []).append(archive[key])
                first = archive[archive.files[0]] if archive.files else []
                positions += range(len(first))
        except (OSError, ValueError) as err:
            raise ConfigError(f"{path} is not a readable .npz file ({err})") from None
    arrays = {k: np.concatenate(v) for k, v in merged.items()}
    label = label or "y"
    if label not in arrays:
        raise ConfigError(
            f"{paths[0]} has no array {label!r} for the label; its arrays: "
            f"{listing(arrays)} (name it with --label)"
        )
    count = len(arrays[label])
    uneven = [k for k, a in arrays.items() if len(a) != count]
    if uneven:
        raise ConfigError(
            f"{paths[0]}: arrays {listing(uneven)} do not have {count} rows like {label!r}"
        )
    values = arrays[label]
    if values.ndim != 1:
        raise ConfigError(
            f"{paths[0]}: label {label!r} has shape {values.shape}; it must be one number per "
            "example (class ids, not one-hot)"
        )
    if values.dtype.kind in "iub":
        if count and values.min() < 0:
            raise ConfigError(
                f"{paths[0]}: label {label!r} holds {values.min()}: class ids must be 0 or more"
            )
        num_classes = int(values.max()) + 1
        _check_class_ids(paths[0], label, num_classes, count, "store them as floats")
        arrays[label] = values.astype(np.int64)
        label_feature = StoredFeature("label", label, (), INT)
    elif values.dtype.kind == "f":
        arrays[label] = values.astype(np.float32)
        label_feature, num_classes = StoredFeature("label", label, (), FLOAT), None
    else:
        raise ConfigError(f"{paths[0]}: label {label!r} has dtype {values.dtype}; use numbers")
    features = []
    for key, array in arrays.items():
        if key == label:
            continue
        if array.dtype == np.uint8:
            encoding = RAW_UINT8
        elif array.dtype.kind == "f":
            encoding, arrays[key] = FLOAT, array.astype(np.float32)
        elif array.dtype.kind in "iub":
            encoding, arrays[key] = INT, array.astype(np.int64)
        else:
            raise ConfigError(f"{paths[0]}: array {key!r} has dtype {array.dtype}; use numbers")
        features.append(StoredFeature(key, key, tuple(array.shape[1:]), encoding))
    if not features:
        raise ConfigError(f"{paths[0]} holds only the label {label!r}: add feature arrays")
    return ArraySource(features, label_feature, num_classes, arrays, positions=positions)


def tfrecord_spec(
    text: str | None, label: str | None
) -> tuple[list[StoredFeature], StoredFeature, int | None]:
    """The features and label of `.tfrecord` files of `tf.train.Example`s.

    `--feature-spec` is JSON, inline or in a file: feature name ->
    `{"shape": [...], "dtype": "float32" | "int64" | "string" | "image" | "uint8"}`
    (`null` marks a variable dimension; `image` is an encoded PNG/JPEG,
    `uint8` raw bytes of an array), and the label's entry may add
    `"num_classes": K` (int64 labels need it: classification); a float32 label
    makes a regression.

    Raises:
        ConfigError: no spec, bad JSON, unknown dtype, label not in the spec.
    """
    if not text:
        raise ConfigError(
            "--data with .tfrecord files needs --feature-spec JSON or a .json file: "
            '{"x": {"shape": [4], "dtype": "float32"}, "y": {"shape": [], "dtype": "int64", '
            '"num_classes": 3}}'
        )
    if storage.isfile(text):
        text = storage.read_text(text)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"--feature-spec is not valid JSON ({err})") from None
    if not isinstance(raw, dict) or not raw:
        raise ConfigError("--feature-spec must be a JSON object: feature name -> {shape, dtype}")
    encodings = {
        "float32": FLOAT,
        "int64": INT,
        "string": BYTES,
        "image": IMAGE,
        "uint8": RAW_UINT8,
    }
    label = label or ("label" if "label" in raw else None)
    if label not in raw:
        raise ConfigError(
            f"--label {label!r} is not in --feature-spec (names: {listing(raw)}); pass --label"
        )
    features, label_feature, num_classes = [], None, None
    for name, entry in raw.items():
        if not isinstance(entry, dict) or entry.get("dtype") not in encodings:
            raise ConfigError(
                f'--feature-spec {name!r}: give {{"shape": [...], "dtype": one of '
                f"{', '.join(encodings)}}}, got {entry!r}"
            )
        shape = tuple(entry.get("shape", []))
        if any(d is not None and (not isinstance(d, int) or d < 1) for d in shape):
            raise ConfigError(
                f"--feature-spec {name!r}: shape {list(shape)} must hold sizes or null"
            )
        stored = StoredFeature(name, name, shape, encodings[entry["dtype"]])
        if stored.encoding not in (IMAGE, BYTES) and shape.count(None) > 1:
            raise ConfigError(f"--feature-spec {name!r}: at most one variable (null) dimension")
        if name != label:
            features.append(stored)
            continue
        num_classes = entry.get("num_classes")
        if shape != () or stored.encoding not in (INT, FLOAT):
            raise ConfigError(
                f"--feature-spec label {name!r} must be a scalar (shape []) int64 or float32"
            )
        if stored.encoding == INT and not (isinstance(num_classes, int) and num_classes >= 2):
            raise ConfigError(
                f'--feature-spec label {name!r} is int64: add "num_classes": K (2 or more) '
                "for classification, or make it float32 for a regression"
            )
        label_feature = StoredFeature("label", name, (), stored.encoding)
        num_classes = num_classes if stored.encoding == INT else None
    if not features:
        raise ConfigError("--feature-spec names only the label: add the input features")
    return features, label_feature, num_classes
