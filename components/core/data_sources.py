"""Where a run's examples come from: a TFDS dataset, or the user's files.

Each source is described as `StoredFeature`s (what a shard record holds and
what parsing makes of it) so the shard writer and the reader in
`components.core.datasets` treat every source alike:

- TFDS (`components.core.tfds_source`): its records are TFDS's own (images
  stay PNG/JPEG): parsing decodes them with the `features.json` TFDS wrote.
- Files (`--data PATH_OR_GLOB`): `.csv` and `.npz` (read whole, small data) and
  `.tfrecord` (records copied as they are, parsed with `--feature-spec`).

Every problem a user can fix is a `ConfigError` raised before any cluster starts.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import glob
import io
import math
import os
from dataclasses import dataclass
from typing import Any

from components.core import json_input, storage, storage_access
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
    with storage_access.reading(pattern, "--data"):
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
            with np.errstate(over="ignore"):  # beyond float32 becomes inf, refused next
                arrays[name] = np.array(numbers, dtype=np.float32)
            _check_finite(paths[0], f"column {name!r}", arrays[name], positions, first_row=2)
            features.append(StoredFeature(name, name, (), FLOAT))
    label_feature, num_classes, classes, values = _csv_label(paths[0], label, cells[label])
    arrays[label] = values
    numeric = all(f.encoding in (FLOAT, INT) for f in features)
    columns = tuple(f.name for f in features) if numeric else ()
    return ArraySource(features, label_feature, num_classes, arrays, columns, classes, positions)


def _whole_numbers(cells: list[str]) -> bool:
    """Every cell is written as a whole number (`3`, `-12`; not `3.0`, `1e3`)."""
    # At most 18 digits: every such number fits an int64.
    return all(c.strip().lstrip("+-").isdigit() and len(c.strip()) <= 18 for c in cells)


def _check_finite(
    path: str, what: str, array: Any, positions: list[int], first_row: int = 0
) -> None:
    """Refuses a float array (as float32, as it is trained on) holding NaN or infinity.

    `1e400`, `inf` and `1e39` (beyond float32) all become infinities, a NaN
    anywhere makes every loss NaN: the run would "train" to nothing.

    Args:
        path: the file, as the message names it.
        what: `column 'x'` or `array 'x'`.
        array: its values, float32.
        positions: each row's index in its file (the message names the first bad row).
        first_row: what the first row is called (2 in a CSV under its header).

    Raises:
        ConfigError: naming the count and the first row.
    """
    import numpy as np

    finite = np.isfinite(array).reshape(len(array), -1).all(axis=1)
    if finite.all():
        return
    bad = int((~finite).sum())
    row = positions[int(np.argmin(finite))] + first_row if positions else int(np.argmin(finite))
    raise ConfigError(
        f"{path}: {what} holds NaN or infinity (or a number beyond float32, about 3.4e38) "
        f"in {bad:,} row(s), first row {row}: clean or drop them before training"
    )


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
        with np.errstate(over="ignore"):
            values = np.array(numbers, np.float32)
        _check_finite(path, f"label {name!r}", values, list(range(len(values))), first_row=2)
        return StoredFeature("label", name, (), FLOAT), None, (), values
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
                positions += range(len(first) if np.ndim(first) else 0)
        except (OSError, ValueError) as err:
            raise ConfigError(f"{path} is not a readable .npz file ({err})") from None
    scalars = [k for k, v in merged.items() if any(a.ndim == 0 for a in v)]
    if scalars:
        raise ConfigError(
            f"{paths[0]}: arrays {listing(scalars)} hold a single value, not one row per "
            "example: store one array per feature with the examples along its first axis"
        )
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
    if count == 0:
        raise ConfigError(f"{paths[0]}: label {label!r} has no rows: there is nothing to train on")
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
        with np.errstate(over="ignore"):
            arrays[label] = values.astype(np.float32)
        _check_finite(paths[0], f"label {label!r}", arrays[label], positions)
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
            with np.errstate(over="ignore"):
                encoding, arrays[key] = FLOAT, array.astype(np.float32)
            _check_finite(paths[0], f"array {key!r}", arrays[key], positions)
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
    where = "--feature-spec"
    if storage.isfile(text):
        where = f"--feature-spec {text}"
        try:
            text = storage.read_bytes(text, limit=json_input.MAX_BYTES)
        except OSError as err:
            raise ConfigError(
                f"{where} cannot be read ({err.strerror or err}); pass a JSON file"
            ) from None
    raw = json_input.parse(text, where, "pass a JSON object: feature name -> {shape, dtype}")
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
