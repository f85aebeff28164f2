"""The manifest: what a shards folder holds (splits, files, how each feature is stored)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from components.core import storage
from components.core.config import ConfigError
from components.core.data_sources import INT, RAW_UINT8, VECTOR_FEATURE, StoredFeature
from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "test")


@dataclass(frozen=True)
class ShardFile:
    """One TFRecord shard file."""

    path: str  # relative to the manifest's folder
    num_examples: int
    num_bytes: int


@dataclass(frozen=True)
class SplitInfo:
    """The shard files of one split."""

    num_examples: int
    files: tuple[ShardFile, ...]


TFDS_RECORDS = "tfds"  # TFDS's own records, decoded with its features.json
EXAMPLE_RECORDS = "example"  # tf.train.Examples keyed as the manifest's features say
TFDS_FEATURES_NAME = "features.json"


@dataclass(frozen=True)
class Manifest:
    """What a shards folder holds; written last, so its presence means complete.

    Attributes:
        dataset: TFDS name, or the name of the files (`--data`).
        version: TFDS version, or a digest of the files.
        features: the input features as records hold them.
        label: the label as records hold it.
        num_classes: classes, or None for a regression.
        splits: split name -> its shard files.
        record_format: `TFDS_RECORDS` or `EXAMPLE_RECORDS`.
        columns: a CSV's numeric columns, in order: they reach a single-input
            model as one float vector named `features`.
        classes: class names, when the source gave names.
        source: the data settings the shards were made from (reuse checks them).
        root: the folder the manifest was read from (not serialised).
    """

    dataset: str
    version: str
    features: tuple[StoredFeature, ...]
    label: StoredFeature
    num_classes: int | None
    splits: dict[str, SplitInfo]
    record_format: str = EXAMPLE_RECORDS
    columns: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    source: dict[str, Any] = dataclasses.field(default_factory=dict)
    root: str = ""

    @classmethod
    def of_images(
        cls, dataset: str, version: str, image_shape, num_classes: int, splits, root: str = ""
    ) -> Manifest:
        """Shards written by `write_shards`: raw uint8 images and class ids."""
        return cls(
            dataset,
            version,
            (StoredFeature("image", "image", tuple(image_shape), RAW_UINT8),),
            StoredFeature("label", "label", (), INT),
            num_classes,
            splits,
            root=root,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "record_format": self.record_format,
            "features": {f.name: f.to_dict() for f in self.features},
            "label": {
                **self.label.to_dict(),
                "num_classes": self.num_classes,
                "classes": list(self.classes),
            },
            "columns": list(self.columns),
            "source": self.source,
            "splits": {
                name: {
                    "num_examples": split.num_examples,
                    "files": [dataclasses.asdict(f) for f in split.files],
                }
                for name, split in self.splits.items()
            },
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], root: str) -> Manifest:
        try:
            splits = {
                name: SplitInfo(
                    num_examples=int(split["num_examples"]),
                    files=tuple(ShardFile(**f) for f in split["files"]),
                )
                for name, split in raw["splits"].items()
            }
            label = raw["label"]
            manifest = cls(
                dataset=raw["dataset"],
                version=raw["version"],
                features=tuple(
                    StoredFeature.from_dict(name, f) for name, f in raw["features"].items()
                ),
                label=StoredFeature.from_dict("label", label),
                num_classes=label["num_classes"],
                splits=splits,
                record_format=raw["record_format"],
                columns=tuple(raw["columns"]),
                classes=tuple(label.get("classes", ())),
                source=raw.get("source", {}),
                root=root,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(
                f"{root}/{MANIFEST_NAME} is not a Strategist manifest of this version ({err!r}); "
                "delete the folder and shard the dataset again"
            ) from None
        if manifest.record_format not in (TFDS_RECORDS, EXAMPLE_RECORDS):
            raise ConfigError(
                f"{root}/{MANIFEST_NAME} says its records are {manifest.record_format!r}, not "
                f"{TFDS_RECORDS!r} or {EXAMPLE_RECORDS!r}: delete the folder and shard again"
            )
        return manifest

    @property
    def input_spec(self) -> InputSpec:
        """The examples as models see them after `parse_fn` (see `column_input_spec`)."""
        if self.columns:
            vector = FeatureSpec(shape=(len(self.columns),), dtype="float32")
            return InputSpec({VECTOR_FEATURE: vector}, self._label_spec())
        return self.column_input_spec

    @property
    def column_input_spec(self) -> InputSpec:
        """Every feature by its own name: what `parse_fn(by_name=True)` yields."""
        features = {f.name: FeatureSpec(shape=f.shape, dtype=f.dtype) for f in self.features}
        return InputSpec(features, self._label_spec())

    def _label_spec(self) -> LabelSpec:
        dtype = "int64" if self.num_classes else "float32"
        return LabelSpec(name=self.label.key, dtype=dtype, num_classes=self.num_classes)

    @property
    def image_shape(self) -> tuple[int | None, ...]:
        """The shape of the single input feature (what the built-in models take).

        Raises:
            ConfigError: when the data has several features.
        """
        single = self.input_spec.single_feature
        if single is None:
            names = ", ".join(f.name for f in self.features)
            raise ConfigError(
                f"dataset {self.dataset!r} has several input features ({names}): the built-in "
                "models take one; give a model with named inputs (--model-module)"
            )
        return single.shape

    def file_paths(self, split: str) -> list[str]:
        return [storage.join(self.root, f.path) for f in self.split(split).files]

    def split(self, name: str) -> SplitInfo:
        try:
            return self.splits[name]
        except KeyError:
            raise ConfigError(
                f"dataset {self.dataset!r} has no {name!r} split in {self.root}"
            ) from None


def manifest_sha256(manifest: Manifest) -> str:
    """A fingerprint of the data, recorded with results so runs can be matched."""
    return hashlib.sha256(json.dumps(manifest.to_dict(), sort_keys=True).encode()).hexdigest()
