"""Kubeflow backend: TFJobs for every strategy against the real CRD schema, and the wait loop."""

from __future__ import annotations

import copy
import hashlib
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
import yaml
from kubernetes import client as k8s

from components.core import signals
from components.core.config import ConfigError, RunConfig
from components.core.launch import kubeflow, tfjob_client, tfjob_submit
from components.core.launch.cloud import JobFailed
from tests.test_cloud_config import IMAGE, make_cloud, make_run

# The TFJob CRD of training-operator v1.9.0, as released: manifests/base/crds/
# kubeflow.org_tfjobs.yaml at tag v1.9.0 (commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c),
# https://github.com/kubeflow/training-operator/blob/v1.9.0/manifests/base/crds/kubeflow.org_tfjobs.yaml
CRD = Path(__file__).resolve().parent / "data" / "kubeflow.org_tfjobs-v1.9.0.yaml"
CRD_SHA256 = "1fea6d2d9d3fec4697db322d4490be67b0d616478f42566e4c48ae865130a8c8"


def kube_cloud(**overrides):
    return make_cloud(**{"target": "kubeflow", "project": None, "region": None, **overrides})


def _strict(schema):
    """The CRD schema with unknown fields refused: the API server would silently prune them."""
    if isinstance(schema, dict):
        schema = {key: _strict(value) for key, value in schema.items()}
        if (
            schema.get("type") == "object"
            and "properties" in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema.setdefault("additionalProperties", False)
        return schema
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


@pytest.fixture(scope="module")
def tfjob_schema():
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return _strict(version["schema"]["openAPIV3Schema"])


def test_the_tfjob_schema_is_the_released_one():
    """The schema the requests are held to is training-operator v1.9.0's, byte for byte."""
    assert hashlib.sha256(CRD.read_bytes()).hexdigest() == CRD_SHA256


def validate(job, schema):
    jsonschema.Draft7Validator(schema).validate(job)
    api = k8s.ApiClient()
    for replica in job["spec"]["tfReplicaSpecs"].values():
        template = _deserialize(api, replica["template"], "V1PodTemplateSpec")
        assert api.sanitize_for_serialization(template) == replica["template"]


def _deserialize(api, data, klass):
    import json

    return api.deserialize(SimpleNamespace(data=json.dumps(data)), klass)


def replicas(job):
    return {kind: spec["replicas"] for kind, spec in job["spec"]["tfReplicaSpecs"].items()}


def container(job, kind):
    (only,) = job["spec"]["tfReplicaSpecs"][kind]["template"]["spec"]["containers"]
    return only


def pod_spec(job, kind):
    return job["spec"]["tfReplicaSpecs"][kind]["template"]["spec"]


def gpus(job, kind):
    return container(job, kind).get("resources", {}).get("limits", {}).get("nvidia.com/gpu")


def test_the_strict_schema_catches_a_typo(tfjob_schema):
    job = kubeflow.build_tfjob(make_run(), kube_cloud())
    validate(job, tfjob_schema)
    broken = copy.deepcopy(job)
    broken["spec"]["runPolicy"]["cleanupPolicy"] = "All"
    with pytest.raises(jsonschema.ValidationError, match="cleanupPolicy"):
        jsonschema.Draft7Validator(tfjob_schema).validate(broken)
    broken = copy.deepcopy(job)
    broken["spec"]["tfReplicaSpecs"]["Chief"]["replicas"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(tfjob_schema).validate(broken)


@pytest.mark.parametrize(
    ("run", "cloud", "expected"),
    [
        (make_run("one_device"), kube_cloud(), {"Chief": 1}),
        (make_run("mirrored"), kube_cloud(), {"Chief": 1}),
        (make_run(workers=4), kube_cloud(), {"Chief": 1, "Worker": 3}),
        (make_run(workers=1), kube_cloud(), {"Chief": 1}),
        (
            make_run("parameter_server", workers=3, ps=2),
            kube_cloud(),
            {"Chief": 1, "Worker": 3, "PS": 2},
        ),
        (
            make_run("parameter_server", evaluator=True),
            kube_cloud(),
            {"Chief": 1, "Worker": 2, "PS": 1, "Evaluator": 1},
        ),
        (make_run(), kube_cloud(gpu=None), {"Chief": 1, "Worker": 2}),
    ],
)
def test_every_strategy_builds_a_valid_tfjob(run, cloud, expected, tfjob_schema):
    job = kubeflow.build_tfjob(run, cloud)
    validate(job, tfjob_schema)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    assert replicas(job) == expected
    for kind in expected:
        c = container(job, kind)
        assert c["name"] == "tensorflow" and c["image"] == IMAGE
        assert c["command"] == ["python", "-m", "components.core.trainer"]
        sent = RunConfig.from_json(c["args"][1])
        assert sent.cluster == RunConfig.from_json(container(job, "Chief")["args"][1]).cluster
        assert sent.output_dir == "gs://bucket/runs/x"


def test_gpu_pods_ask_for_gpus_on_the_accelerator_pool(tfjob_schema):
    job = kubeflow.build_tfjob(make_run("mirrored"), kube_cloud(gpu="a100", gpus_per_machine=4))
    validate(job, tfjob_schema)
    assert gpus(job, "Chief") == "4"
    spec = pod_spec(job, "Chief")
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_parameter_server_cpu_pods_stay_off_gpu_nodes(tfjob_schema):
    job = kubeflow.build_tfjob(make_run("parameter_server"), kube_cloud(gpu="l4"))
    validate(job, tfjob_schema)
    assert gpus(job, "Worker") == "1"
    assert (
        pod_spec(job, "Worker")["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"
    )
    for kind in ("Chief", "PS"):
        assert gpus(job, kind) is None
        assert "nodeSelector" not in pod_spec(job, kind)
        assert "tolerations" not in pod_spec(job, kind)


def test_a_parameter_server_too_big_for_its_machine_type_is_refused():
    """Sized from the model: each of 2 servers of a 4-billion-parameter model needs 30.5 GB
    (half of 12 bytes a parameter with Adam, 1.25 headroom, 0.5 GB base), more than an
    n1-standard-8 pod gets (22.5 GB): refused naming the shape that holds it; the
    16-vCPU shape is taken. A model whose largest variable fits no server (one server
    holds it whole) is not told to add servers."""
    import dataclasses

    from components.core.model_profile import from_params

    profile = dataclasses.replace(from_params(4 * 10**9), largest_variable_params=10**8)
    with pytest.raises(ConfigError, match=r"--ps-machine-type n1-standard-16 or more --ps$"):
        kubeflow.parameter_server_memory_gb(profile, 2, "n1-standard-8")
    assert kubeflow.parameter_server_memory_gb(profile, 2, "n1-standard-16") == pytest.approx(30.5)
    with pytest.raises(ConfigError, match=r"pass a larger --ps-machine-type$"):
        kubeflow.parameter_server_memory_gb(from_params(10**11), 100, "n1-standard-8")


def test_run_policy_restart_policy_spot_and_service_account(tfjob_schema):
    cloud = kube_cloud(
        timeout_s=3600,
        backoff_limit=5,
        clean_pod_policy="All",
        ttl_seconds_after_finished=600,
        restart_policy="OnFailure",
        spot=True,
        namespace="ml",
        job_name="nightly",
        kube_service_account="trainer",
    )
    job = kubeflow.build_tfjob(make_run(), cloud)
    validate(job, tfjob_schema)
    assert job["metadata"]["name"] == "nightly" and job["metadata"]["namespace"] == "ml"
    assert job["spec"]["runPolicy"] == {
        "activeDeadlineSeconds": 3600,
        "backoffLimit": 5,
        "cleanPodPolicy": "All",
        "ttlSecondsAfterFinished": 600,
    }
    for spec in job["spec"]["tfReplicaSpecs"].values():
        assert spec["restartPolicy"] == "OnFailure"
        pod = spec["template"]["spec"]
        assert pod["serviceAccountName"] == "trainer"
        assert pod["nodeSelector"]["cloud.google.com/gke-spot"] == "true"
        assert {
            "key": "cloud.google.com/gke-spot",
            "operator": "Equal",
            "value": "true",
            "effect": "NoSchedule",
        } in pod["tolerations"]


def test_default_restart_policy_is_exit_code():
    job = kubeflow.build_tfjob(make_run(), kube_cloud())
    assert {s["restartPolicy"] for s in job["spec"]["tfReplicaSpecs"].values()} == {"ExitCode"}
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"


def test_manifest_round_trips_through_the_sdk_model_and_yaml():
    job = kubeflow.build_tfjob(make_run("parameter_server"), kube_cloud())
    model = tfjob_client.from_dict(job)
    assert model.spec.tf_replica_specs["PS"].replicas == 1
    assert k8s.ApiClient().sanitize_for_serialization(model) == job
    assert yaml.safe_load(kubeflow.to_yaml(job)) == job


def test_vertex_config_is_refused():
    with pytest.raises(ConfigError, match="--target kubeflow"):
        kubeflow.build_tfjob(make_run(), make_cloud())


def condition(kind, reason="", message=""):
    return SimpleNamespace(type=kind, status="True", reason=reason, message=message)


def tfjob_status(*conditions, **replica_statuses):
    return SimpleNamespace(
        status=SimpleNamespace(
            conditions=list(conditions),
            replica_statuses={
                k: SimpleNamespace(active=a, succeeded=s, failed=f)
                for k, (a, s, f) in replica_statuses.items()
            },
        )
    )


class FakeTrainingClient:
    """The remote training operator: a scripted sequence of TFJob statuses."""

    def __init__(self, statuses, logs=None, on_get=None):
        self.statuses = list(statuses)
        self.logs = logs or {}
        self.on_get = on_get
        self.created, self.deleted, self.log_requests = [], [], []
        self.gets = 0

    def create_job(self, job, namespace):
        self.created.append((job, namespace))

    def get_job(self, name, namespace, job_kind):
        assert job_kind == "TFJob"
        self.gets += 1
        if self.on_get:
            self.on_get(self.gets)
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def get_job_logs(self, name, namespace, job_kind, is_master):
        self.log_requests.append((name, namespace, is_master))
        return self.logs, {}

    def delete_job(self, name, namespace, job_kind):
        self.deleted.append((name, namespace, job_kind))


def wait(fake):
    lines = []
    job = kubeflow.build_tfjob(make_run(), kube_cloud(job_name="run-1", namespace="ml"))
    result = tfjob_submit.submit_and_wait(
        job,
        kube_cloud(namespace="ml"),
        client=fake,
        poll_seconds=0,
        log=lines.append,
        sleep=lambda s: None,
    )
    return result, lines


def test_success_prints_each_status_change_once():
    fake = FakeTrainingClient(
        [
            tfjob_status(),
            tfjob_status(condition("Created", "TFJobCreated")),
            tfjob_status(
                condition("Created"),
                condition("Running", "TFJobRunning"),
                Chief=(1, 0, 0),
                Worker=(2, 0, 0),
            ),
            tfjob_status(
                condition("Created"),
                condition("Running", "TFJobRunning"),
                Chief=(1, 0, 0),
                Worker=(2, 0, 0),
            ),
            tfjob_status(condition("Succeeded", "TFJobSucceeded"), Chief=(0, 1, 0)),
        ]
    )
    result, lines = wait(fake)
    assert result == "Succeeded"
    model, namespace = fake.created[0]
    assert namespace == "ml" and model.metadata.name == "run-1"
    assert model.spec.tf_replica_specs["Worker"].replicas == 2
    states = [line for line in lines if not line.startswith("kubeflow: created")][1:]
    assert states == [
        "kubeflow: Submitted",
        "kubeflow: Created (TFJobCreated)",
        "kubeflow: Running (TFJobRunning) [Chief: 1 active; Worker: 2 active]",
        "kubeflow: Succeeded (TFJobSucceeded) [Chief: 1 succeeded]",
    ]
    assert not fake.deleted and not fake.log_requests


def test_failure_raises_with_the_chiefs_last_log_lines():
    log = "\n".join(f"line {i}" for i in range(100)) + "\nValueError: bad shard"
    fake = FakeTrainingClient(
        [
            tfjob_status(condition("Running")),
            tfjob_status(
                condition(
                    "Failed",
                    "TFJobFailed",
                    "TFJob ml/run-1 has failed because 1 Chief replica(s) failed.",
                ),
                Chief=(0, 0, 1),
            ),
        ],
        logs={"run-1-chief-0": log},
    )
    with pytest.raises(JobFailed) as err:
        wait(fake)
    text = str(err.value)
    assert err.value.state == "Failed" and err.value.job == "ml/run-1"
    assert "1 Chief replica(s) failed" in text
    assert "[run-1-chief-0] ValueError: bad shard" in text
    assert "line 50" not in text  # only the tail
    assert fake.log_requests == [("run-1", "ml", True)]
    assert not fake.deleted


def test_ctrl_c_deletes_the_job():
    def interrupt(gets):
        if gets == 2:
            raise KeyboardInterrupt

    fake = FakeTrainingClient([tfjob_status(condition("Running"))], on_get=interrupt)
    with pytest.raises(KeyboardInterrupt):
        wait(fake)
    assert fake.deleted == [("run-1", "ml", "TFJob")]


def test_sigterm_deletes_the_job():
    def terminate(gets):
        if gets == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    fake = FakeTrainingClient([tfjob_status(condition("Running"))], on_get=terminate)
    with pytest.raises(signals.Interrupted):
        wait(fake)
    assert fake.deleted == [("run-1", "ml", "TFJob")]


def test_missing_kube_config_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="get-credentials"):
        tfjob_client.load_credentials(kube_cloud())
