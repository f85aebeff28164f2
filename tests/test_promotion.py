"""Blessing and promotion: the rule, the pointer store, and the Vertex AI Model Registry
through the real aiplatform SDK with only its gRPC methods faked."""

from __future__ import annotations

import json
import os

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.cloud.aiplatform_v1.services.model_service.transports import grpc as model_grpc
from google.longrunning import operations_pb2

from components.core import promotion
from components.core.config import ConfigError

# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("candidate", "current", "metric", "margin", "blessed", "says"),
    [
        (0.95, None, "test_accuracy", 0.0, True, "first model"),
        (0.95, 0.90, "test_accuracy", 0.0, True, "better"),
        (0.90, 0.95, "test_accuracy", 0.0, False, "kept the promoted model"),
        (0.90, 0.90, "test_accuracy", 0.0, False, "kept"),  # equal is not better
        (0.915, 0.90, "test_accuracy", 0.02, False, "margin 0.0200"),  # not by the margin
        (0.93, 0.90, "test_accuracy", 0.02, True, "improvement +0.0300"),
        (0.20, 0.30, "test_loss", 0.0, True, "lower is better"),
        (0.30, 0.20, "test_loss", 0.0, False, "kept"),
        (float("nan"), 0.5, "test_accuracy", 0.0, False, "nan"),
    ],
)
def test_blessing_rule(candidate, current, metric, margin, blessed, says):
    decision = promotion.decide(candidate, current, metric, margin)
    assert decision.blessed is blessed
    assert says in decision.reason


@pytest.mark.parametrize("margin", [-0.1, float("inf"), float("nan")])
def test_a_bad_margin_is_refused(margin):
    with pytest.raises(ValueError, match="margin"):
        promotion.decide(0.9, 0.8, "test_accuracy", margin)
    with pytest.raises(ConfigError, match="promotion_margin"):
        promotion.check_settings("pointer", "test_accuracy", margin)


@pytest.mark.parametrize(
    ("target", "metric", "says"),
    [
        ("s3", "test_accuracy", "promotion_target 's3'"),
        ("pointer", "f1", "promotion_metric"),
        ("pointer", "test_", "promotion_metric"),
    ],  # fmt: skip
)
def test_unknown_target_or_metric_is_refused(target, metric, says):
    with pytest.raises(ConfigError, match=says):
        promotion.check_settings(target, metric, 0.0)


# ---------------------------------------------------------------- the pointer store


def test_pointer_store_first_better_worse(tmp_path):
    store = promotion.PointerStore(str(tmp_path / "promotion"))
    assert store.current() is None
    assert promotion.bless(store, 0.91, "test_accuracy", 0.0).blessed  # first run promotes
    path = store.promote(promotion.Promoted("/runs/a/model", "test_accuracy", 0.91, "run-a"))
    assert path == str(tmp_path / "promotion" / "promoted.json")
    assert store.current() == promotion.Promoted("/runs/a/model", "test_accuracy", 0.91, "run-a")

    worse = promotion.bless(store, 0.90, "test_accuracy", 0.0)
    assert not worse.blessed and "0.9000 vs promoted 0.9100" in worse.reason
    assert promotion.bless(store, 0.95, "test_accuracy", 0.0).blessed
    assert os.listdir(tmp_path / "promotion") == ["promoted.json"]  # no temporaries left


def test_pointer_of_another_metric_is_not_compared(tmp_path):
    store = promotion.PointerStore(str(tmp_path))
    store.promote(promotion.Promoted("m", "test_loss", 0.2))
    decision = promotion.bless(store, 0.99, "test_accuracy", 0.0)
    assert not decision.blessed
    assert "promotion_metric=test_loss" in decision.reason


def test_target_none_blesses_nothing():
    assert promotion.store_for("none") is None
    assert not promotion.bless(None, 0.99, "test_accuracy", 0.0).blessed


def test_pointer_needs_a_root():
    with pytest.raises(ConfigError, match="promotion_root is empty"):
        promotion.store_for("pointer", "")


def test_default_root_is_beside_the_pipeline_root(tmp_path):
    assert promotion.default_root(str(tmp_path) + "/") == f"{tmp_path}/strategist-promotion"


def test_pipeline_store_from_the_pipeline_parameters(tmp_path):
    pointer = promotion.pipeline_store("pointer", "", str(tmp_path))
    assert pointer.path == f"{tmp_path}/strategist-promotion/promoted.json"
    assert promotion.pipeline_store("pointer", "/x", str(tmp_path)).path == "/x/promoted.json"
    cloud = {"project": "acme", "region": "europe-west4", "target": "vertex"}
    registry = promotion.pipeline_store("vertex", "", "gs://b/root", "digits", cloud)
    assert (registry.project, registry.region, registry.display_name) == (
        "acme", "europe-west4", "digits",
    )  # fmt: skip
    assert promotion.pipeline_store("none", "", "gs://b/root") is None


def test_label_values_round_trip():
    for value in (0.9731, 0.0, 1.0, -0.25, 12.5):
        encoded = promotion.encode_label_value(value)
        assert all(c.isdigit() or c in "_n" for c in encoded)  # a valid label value
        assert promotion.decode_label_value(encoded) == pytest.approx(value)


# ---------------------------------------------------------------- Vertex AI Model Registry

PROJECT, REGION = "acme-ml", "europe-west4"
PARENT = f"projects/{PROJECT}/locations/{REGION}"


class ModelServiceWire:
    """ListModels, UploadModel (an already finished operation) and GetModel, recorded."""

    def __init__(self, existing: list[aiplatform_v1.Model]):
        self.existing = existing
        self.requests: dict[str, list] = {"list": [], "upload": [], "get": []}

    def list_models(self, request, **kwargs):
        self.requests["list"].append(request)
        return aiplatform_v1.ListModelsResponse(models=self.existing)

    def upload_model(self, request, **kwargs):
        """Answers the raw long-running operation, already done, as the service does."""
        self.requests["upload"].append(request)
        response = aiplatform_v1.UploadModelResponse(
            model=f"{PARENT}/models/777", model_version_id=str(len(self.existing) + 1)
        )
        done = operations_pb2.Operation(name=f"{PARENT}/operations/1", done=True)
        done.response.Pack(aiplatform_v1.UploadModelResponse.pb(response))
        return done

    def get_model(self, request, **kwargs):
        self.requests["get"].append(request)
        uploaded = self.requests["upload"][-1].model
        model = aiplatform_v1.Model(uploaded)
        model.name = f"{PARENT}/models/777"
        model.version_id = str(len(self.existing) + 1)
        return model


@pytest.fixture
def model_wire(monkeypatch):
    from google.cloud.aiplatform import initializer

    for field in ("_project", "_location", "_credentials"):  # restored after the test
        monkeypatch.setattr(initializer.global_config, field, None)
    holder: dict[str, ModelServiceWire] = {}

    def install(existing):
        holder["wire"] = wire = ModelServiceWire(existing)
        for name in ("list_models", "upload_model", "get_model"):
            method = getattr(wire, name)
            monkeypatch.setattr(
                model_grpc.ModelServiceGrpcTransport, name, property(lambda self, m=method: m)
            )
        return wire

    return install


def registry():
    return promotion.VertexModelRegistry(
        "digits-classifier", PROJECT, REGION, credentials=AnonymousCredentials()
    )


def test_registry_with_no_model_promotes_the_first(model_wire):
    wire = model_wire([])
    store = registry()
    assert promotion.bless(store, 0.93, "test_accuracy", 0.0).blessed
    (listed,) = wire.requests["list"]
    assert listed.parent == PARENT
    assert listed.filter == 'display_name="digits-classifier"'

    record = promotion.Promoted("gs://acme/run-1/model", "test_accuracy", 0.93, "Run-1", "now")
    name = store.promote(record)
    assert name == f"{PARENT}/models/777@1"
    (upload,) = wire.requests["upload"]
    assert upload.parent == PARENT
    assert not upload.parent_model  # a new model, not a version
    model = upload.model
    assert model.display_name == "digits-classifier"
    assert model.artifact_uri == "gs://acme/run-1/model"
    assert model.container_spec.image_uri == promotion.SERVING_IMAGE
    assert dict(model.labels) == {
        "strategist-metric": "test_accuracy",
        "strategist-value": "0_930000",
        "strategist-run": "run-1",
    }
    assert list(model.version_aliases) == ["default"]


def test_registry_compares_with_the_default_version_and_uploads_a_new_version(model_wire):
    promoted = aiplatform_v1.Model(
        name=f"{PARENT}/models/777",
        version_id="3",
        display_name="digits-classifier",
        labels={"strategist-metric": "test_accuracy", "strategist-value": "0_950000"},
    )
    wire = model_wire([promoted])
    store = registry()
    assert store.current() == promotion.Promoted(
        f"{PARENT}/models/777@3", "test_accuracy", 0.95, ""
    )
    assert not promotion.bless(store, 0.95, "test_accuracy", 0.0).blessed  # equal: kept
    assert promotion.bless(store, 0.96, "test_accuracy", 0.0).blessed

    store.promote(promotion.Promoted("gs://acme/run-2/model", "test_accuracy", 0.96, "run-2"))
    (upload,) = wire.requests["upload"]
    assert upload.parent_model == f"{PARENT}/models/777"  # a new version of the same model
    assert upload.model.labels["strategist-value"] == "0_960000"


def test_registry_ignores_a_model_strategist_did_not_promote(model_wire):
    foreign = aiplatform_v1.Model(name=f"{PARENT}/models/1", display_name="digits-classifier")
    model_wire([foreign])
    assert registry().current() is None


def test_registry_refuses_a_local_model_before_any_request(model_wire):
    wire = model_wire([])
    with pytest.raises(ConfigError, match="gs:// pipeline root"):
        registry().promote(promotion.Promoted("/tmp/model", "test_accuracy", 0.9))
    assert not any(wire.requests.values())


def test_pointer_record_is_json_with_every_field(tmp_path):
    store = promotion.PointerStore(str(tmp_path))
    store.promote(promotion.Promoted("gs://b/m", "test_accuracy", 0.9, "r", "2026-11-23T00:00:00"))
    assert json.loads((tmp_path / "promoted.json").read_text()) == {
        "model_uri": "gs://b/m",
        "metric": "test_accuracy",
        "value": 0.9,
        "run_id": "r",
        "promoted_at": "2026-11-23T00:00:00",
    }


def test_any_evaluated_metric_can_promote_with_its_direction():
    evaluated = {"loss": 0.3, "mae": 1.2, "rmse": 1.5, "top2_accuracy": 0.97}
    assert promotion.metric_value("test_mae", evaluated) == 1.2
    assert promotion.decide(1.1, 1.2, "test_mae").blessed  # lower is better
    assert not promotion.decide(1.3, 1.2, "test_rmse").blessed
    assert promotion.decide(0.98, 0.97, "test_top2_accuracy").blessed  # higher is better
    promotion.check_settings("pointer", "test_top2_accuracy", 0.0)
    says = "'test_f1' was not evaluated: choose one of test_loss, test_mae"
    with pytest.raises(ConfigError, match=says):
        promotion.metric_value("test_f1", evaluated)
