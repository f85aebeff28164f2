"""Blessing and promotion: a new model replaces the promoted one only when it is better.

`decide` is the whole rule, pure: a candidate is blessed when it beats the currently
promoted model on one metric by more than a margin (higher is better, except for
losses and errors, where lower is better); the first model, with nothing promoted,
is blessed. Where the promoted model is recorded is a *store*:

- `PointerStore`: a `promoted.json` pointer in a folder (local runs), a `/gcs/` path
  (Vertex AI's gcsfuse mount) or a `gs://` folder, written atomically by `storage`;
- `VertexModelRegistry`: the Vertex AI Model Registry; the promoted model is the
  default version of the model with a display name, its metric kept in labels.

This module never imports kfp; cloud SDKs are imported only when a store uses them.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from components.core import storage
from components.core.config import ConfigError
from components.core.storage_paths import to_gcsfuse

# Where Vertex AI mounts Cloud Storage (gcsfuse) in its tasks.
GCSFUSE_MOUNT = "/gcs"

TARGETS = ("pointer", "vertex", "none")
# Promotion metrics are test-split metrics: `test_` + any metric the evaluation
# gives (accuracy, loss, mae, rmse, mse, the model's compiled metrics).
METRIC_PREFIX = "test_"
POINTER_FILE = "promoted.json"
DEFAULT_MODEL_NAME = "strategist-model"
# Vertex AI prebuilt TensorFlow serving container for a SavedModel.
SERVING_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
_LABEL_KEY_METRIC = "strategist-metric"
_LABEL_KEY_VALUE = "strategist-value"


@dataclass(frozen=True)
class Blessing:
    """Whether a candidate model may replace the promoted one, and why.

    Attributes:
        blessed: True when the candidate should be promoted.
        reason: one human sentence with the numbers compared.
    """

    blessed: bool
    reason: str


@dataclass(frozen=True)
class Promoted:
    """The record of a promoted model.

    Attributes:
        model_uri: where the model is (SavedModel folder, `gs://...`, or a Vertex
            AI model version resource name).
        metric: the metric it was promoted on.
        value: its value of that metric.
        run_id: the pipeline run that promoted it.
        promoted_at: UTC time of promotion, ISO 8601.
    """

    model_uri: str
    metric: str
    value: float
    run_id: str = ""
    promoted_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Promoted:
        return cls(
            model_uri=str(payload["model_uri"]),
            metric=str(payload["metric"]),
            value=float(payload["value"]),
            run_id=str(payload.get("run_id", "")),
            promoted_at=str(payload.get("promoted_at", "")),
        )


def higher_is_better(metric: str) -> bool:
    """False for losses and errors (`test_loss`, `test_mae`, `test_rmse`...), True otherwise."""
    from components.core.evaluation import lower_is_better

    return not lower_is_better(metric)


def metric_value(metric: str, evaluated: dict[str, float]) -> float:
    """The value of promotion metric `test_<name>` among a model's evaluated metrics.

    Raises:
        ConfigError: the evaluation gave no such metric, naming those it gave.
    """
    value = evaluated.get(metric.removeprefix(METRIC_PREFIX))
    if value is None:
        names = ", ".join(METRIC_PREFIX + name for name in sorted(evaluated))
        raise ConfigError(f"promotion_metric {metric!r} was not evaluated: choose one of {names}")
    return float(value)


def decide(candidate: float, current: float | None, metric: str, margin: float = 0.0) -> Blessing:
    """Blesses `candidate` only when it beats `current` on `metric` by more than `margin`.

    Args:
        candidate: the new model's value of `metric`.
        current: the promoted model's value, or None when nothing is promoted yet
            (the candidate is then blessed).
        metric: metric name; losses and errors are better lower, the rest higher.
        margin: required improvement, in the metric's units (0.01 = one accuracy
            point); an improvement equal to the margin is not enough.

    Returns:
        The decision and its reason.

    Raises:
        ValueError: a negative or non-finite margin.
    """
    if not math.isfinite(margin) or margin < 0:
        raise ValueError(f"the promotion margin must be a number >= 0, got {margin}")
    if not math.isfinite(candidate):
        return Blessing(False, f"candidate {metric} is {candidate}: not promoted")
    if current is None:
        return Blessing(True, f"first model: nothing promoted yet ({metric}={candidate:.4f})")
    higher = higher_is_better(metric)
    gain = candidate - current if higher else current - candidate
    direction = "higher" if higher else "lower"
    numbers = (
        f"{metric} {candidate:.4f} vs promoted {current:.4f} "
        f"({direction} is better, improvement {gain:+.4f}, margin {margin:.4f})"
    )
    if gain > margin:
        return Blessing(True, f"better: {numbers}")
    return Blessing(False, f"kept the promoted model: {numbers}")


def bless(
    store: PointerStore | VertexModelRegistry | None, value: float, metric: str, margin: float
) -> Blessing:
    """Reads the promoted model from `store` and decides on a candidate with `decide`.

    Args:
        store: where the promoted model is recorded; None (target `none`) blesses nothing.
        value: the candidate's value of `metric`.
        metric: the promotion metric.
        margin: required improvement.
    """
    if store is None:
        return Blessing(False, "promotion_target is none: nothing is promoted")
    current = store.current()
    if current is not None and current.metric != metric:
        return Blessing(
            False,
            f"the promoted model was promoted on {current.metric}, not {metric}: pass "
            f"promotion_metric={current.metric}, or move the promoted record away to start over",
        )
    return decide(value, None if current is None else current.value, metric, margin)


def check_settings(target: str, metric: str, margin: float) -> None:
    """Refuses a promotion target, metric or margin the pipeline cannot use.

    Raises:
        ConfigError: naming the parameter to change.
    """
    if target not in TARGETS:
        raise ConfigError(f"promotion_target {target!r}: choose one of {', '.join(TARGETS)}")
    if not re.fullmatch(METRIC_PREFIX + r"\w+", metric):
        raise ConfigError(
            f"promotion_metric {metric!r}: name a test-split metric, test_<metric> "
            "(test_accuracy, test_loss, test_mae, test_rmse, or one your model compiles)"
        )
    if not math.isfinite(margin) or margin < 0:
        raise ConfigError(f"promotion_margin must be a number >= 0, got {margin}")


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class PointerStore:
    """A `promoted.json` pointer under a root folder (local, `/gcs/...` or `gs://...`).

    Written by `storage.write_text`: local and gcsfuse paths as a temporary file
    renamed over the pointer; a `gs://` object in one upload, which Cloud Storage
    makes visible all at once.
    """

    def __init__(self, root: str):
        if not root:
            raise ConfigError("promotion_root is empty: pass a folder, /gcs/... or gs://...")
        self.root = root.rstrip("/")
        self.path = f"{self.root}/{POINTER_FILE}"

    def current(self) -> Promoted | None:
        """The promoted record, or None when nothing is promoted yet."""
        text = self._read()
        return None if text is None else Promoted.from_dict(json.loads(text))

    def promote(self, record: Promoted) -> str:
        """Writes `record` as the new pointer; returns the pointer's path."""
        storage.write_json(self.path, record.to_dict())
        return self.path

    def _read(self) -> str | None:
        try:
            return storage.read_text(self.path)
        except FileNotFoundError:
            return None


def encode_label_value(value: float) -> str:
    """A metric value as a Vertex AI label value (`0.9731` -> `0_973100`)."""
    text = f"{value:.6f}".replace(".", "_")
    return text.replace("-", "n")


def decode_label_value(text: str) -> float:
    return float(text.replace("n", "-").replace("_", "."))


class VertexModelRegistry:
    """The Vertex AI Model Registry as the store of the promoted model.

    The promoted model is the default version of the model named `display_name`;
    promoting uploads a new version (`parent_model`) and makes it the default.
    The metric is kept in the version's labels, where `current` reads it back.

    Args:
        display_name: the registry model's display name.
        project: Google Cloud project (None: the environment's default).
        region: Vertex AI region (None: `aiplatform`'s default).
        serving_image: the prediction container for the SavedModel.
        credentials: google-auth credentials (None: Application Default Credentials).
    """

    def __init__(
        self,
        display_name: str = DEFAULT_MODEL_NAME,
        project: str | None = None,
        region: str | None = None,
        serving_image: str = SERVING_IMAGE,
        credentials: Any = None,
    ):
        self.display_name = display_name
        self.project = project
        self.region = region
        self.serving_image = serving_image
        self.credentials = credentials

    def _default_version(self):
        from google.cloud import aiplatform

        models = aiplatform.Model.list(
            filter=f'display_name="{self.display_name}"',
            order_by="update_time desc",
            project=self.project,
            location=self.region,
            credentials=self.credentials,
        )
        return models[0] if models else None

    def current(self) -> Promoted | None:
        """The default version's record, or None when no such model exists."""
        model = self._default_version()
        if model is None:
            return None
        labels = dict(model.labels or {})
        if _LABEL_KEY_VALUE not in labels:
            return None  # a model Strategist did not promote: nothing to compare with
        return Promoted(
            model_uri=model.versioned_resource_name,
            metric=labels.get(_LABEL_KEY_METRIC, ""),
            value=decode_label_value(labels[_LABEL_KEY_VALUE]),
            run_id=labels.get("strategist-run", ""),
        )

    def upload_arguments(self, record: Promoted, parent: str | None) -> dict[str, Any]:
        """The keyword arguments of `aiplatform.Model.upload` for `record`."""
        run_label = re.sub(r"[^a-z0-9_-]", "-", record.run_id.lower())[:63]
        return {
            "display_name": self.display_name,
            "artifact_uri": record.model_uri,
            "serving_container_image_uri": self.serving_image,
            "parent_model": parent,
            "is_default_version": True,
            "version_description": (
                f"{record.metric}={record.value:.6f} run={record.run_id} at {record.promoted_at}"
            ),
            "labels": {
                _LABEL_KEY_METRIC: record.metric.replace(".", "_").lower(),
                _LABEL_KEY_VALUE: encode_label_value(record.value),
                "strategist-run": run_label,
            },
            "project": self.project,
            "location": self.region,
            "credentials": self.credentials,
        }

    def promote(self, record: Promoted) -> str:
        """Uploads `record.model_uri` as the new default version; returns its resource name."""
        from google.cloud import aiplatform

        if not record.model_uri.startswith("gs://"):
            raise ConfigError(
                f"Vertex AI can only register a model in Cloud Storage, not {record.model_uri!r}: "
                "run the pipeline with a gs:// pipeline root"
            )
        existing = self._default_version()
        parent = existing.resource_name if existing is not None else None
        # Model.upload builds the Model it returns with the SDK's global defaults, not the
        # project and credentials passed to it: make those the defaults (one process per task).
        aiplatform.init(project=self.project, location=self.region, credentials=self.credentials)
        model = aiplatform.Model.upload(**self.upload_arguments(record, parent))
        return model.versioned_resource_name


def store_for(
    target: str,
    root: str = "",
    *,
    display_name: str = DEFAULT_MODEL_NAME,
    project: str | None = None,
    region: str | None = None,
    serving_image: str = SERVING_IMAGE,
) -> PointerStore | VertexModelRegistry | None:
    """The store of a promotion target (None for `none`).

    Raises:
        ConfigError: unknown target, or `pointer` without a root.
    """
    if target == "none":
        return None
    if target == "pointer":
        return PointerStore(root)
    if target == "vertex":
        return VertexModelRegistry(display_name, project, region, serving_image)
    raise ConfigError(f"promotion_target {target!r}: choose one of {', '.join(TARGETS)}")


def pipeline_store(
    target: str,
    root: str,
    pipeline_root: str,
    display_name: str = DEFAULT_MODEL_NAME,
    cloud_config: Mapping[str, Any] | None = None,
    serving_image: str = SERVING_IMAGE,
) -> PointerStore | VertexModelRegistry | None:
    """The store named by the training pipeline's promotion parameters.

    Args:
        target: `promotion_target`.
        root: `promotion_root`; empty: beside the pipeline root (`default_root`).
        pipeline_root: the run's pipeline root.
        display_name: `model_display_name` (Vertex AI Model Registry).
        cloud_config: the pipeline's CloudConfig (project and region).
        serving_image: prediction container of a registered model.
    """
    cloud_config = cloud_config or {}
    project, region = cloud_config.get("project") or None, cloud_config.get("region") or None
    return store_for(
        target,
        root or default_root(pipeline_root),
        display_name=display_name,
        project=project,
        region=region,
        serving_image=serving_image,
    )


def default_root(pipeline_root: str) -> str:
    """Where the pointer lives when `promotion_root` is empty: beside the pipeline's outputs.

    A `gs://` pipeline root inside a Vertex AI task is read through gcsfuse (`/gcs/`).
    """
    root = pipeline_root.rstrip("/")
    if os.path.isdir(GCSFUSE_MOUNT):  # inside a Vertex AI task
        root = to_gcsfuse(root)
    return f"{root}/strategist-promotion"
