"""The cloud launchers in the real world: transient API errors, a restart in the
middle (the step re-attaches), cancellation, permanent errors, `gcp_resources`.

Only the remote endpoint is faked: a JobService with the real client's method
signatures that hands out real `aiplatform_v1.CustomJob` protos, and a Kubernetes
`CustomObjectsApi` behind the real kubeflow `TrainingClient` that hands out real
TFJob dicts. Waits go to a recording sleep, so the backoff is asserted, not slept.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
import signal

import pytest
import urllib3
from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from components.core import signals
from components.core.config import ConfigError
from components.core.launch import kubeflow, remote, tfjob_client, tfjob_submit, vertex
from components.core.launch.cloud import JobFailed
from tests.test_cloud_config import make_cloud, make_run

State = aiplatform_v1.JobState
FAST = remote.Backoff(initial_s=1, multiplier=2, maximum_s=4, deadline_s=30)


class PodKilled(BaseException):
    """The step's pod dies (preempted, OOM-killed): no handler runs, nothing is cancelled."""


class Clock:
    """Records every wait; `kill_after` waits (polls and backoffs) the pod dies."""

    def __init__(self, kill_after: int | None = None, on_wait=None):
        self.waits: list[float] = []
        self.kill_after = kill_after
        self.on_wait = on_wait

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.on_wait:
            self.on_wait(len(self.waits))
        if self.kill_after is not None and len(self.waits) >= self.kill_after:
            raise PodKilled


# -- Vertex AI ---------------------------------------------------------------------


class FakeJobService:
    """Vertex AI's JobService endpoint: jobs kept by name, states and errors scripted.

    `create` and `get` are lists of outcomes, one per call: an exception to raise,
    `"lost"` (the job is created but the reply is lost: DeadlineExceeded), a
    `JobState` (get: the job's next state), or None (create: accepted).
    """

    PARENT = "projects/my-project/locations/us-central1"

    def __init__(self, create=(None,), get=(), cancel=()):
        self.create_script, self.get_script = list(create), list(get)
        self.cancel_script = list(cancel)
        self.jobs: dict[str, aiplatform_v1.CustomJob] = {}
        self.calls: list[str] = []
        self.cancelled: list[str] = []

    def create_custom_job(self, request=None, *, parent=None, custom_job=None, retry=None,
                          timeout=None, metadata=()):  # fmt: skip
        self.calls.append("create")
        outcome = self.create_script.pop(0) if self.create_script else None
        if isinstance(outcome, Exception):
            raise outcome
        assert parent == self.PARENT
        job = aiplatform_v1.CustomJob(custom_job)
        job.name = f"{self.PARENT}/customJobs/{1000 + len(self.jobs)}"
        job.state = State.JOB_STATE_QUEUED
        job.create_time = datetime.datetime.now(datetime.timezone.utc)
        self.jobs[job.name] = job
        if outcome == "lost":
            raise gexc.DeadlineExceeded("Deadline Exceeded")
        return aiplatform_v1.CustomJob(job)

    def get_custom_job(self, request=None, *, name=None, retry=None, timeout=None, metadata=()):
        self.calls.append("get")
        assert len(self.calls) < 100, "the launcher polls a job that never changes"
        outcome = self.get_script.pop(0) if self.get_script else None
        if isinstance(outcome, Exception):
            raise outcome
        if name not in self.jobs:
            raise gexc.NotFound(f"CustomJob {name} not found")
        if outcome is not None:
            self.jobs[name].state = outcome
        return aiplatform_v1.CustomJob(self.jobs[name])

    def list_custom_jobs(self, request=None, *, parent=None, retry=None, timeout=None,
                         metadata=()):  # fmt: skip
        self.calls.append("list")
        request = aiplatform_v1.ListCustomJobsRequest(request)
        # The filter launch/vertex.py sends: display_name="X" AND create_time>="T".
        match = re.fullmatch(r'display_name="([^"]+)" AND create_time>="([^"]+)"', request.filter)
        assert match, request.filter
        since = datetime.datetime.fromisoformat(match.group(2).replace("Z", "+00:00"))
        return [
            aiplatform_v1.CustomJob(job)
            for job in self.jobs.values()
            if job.display_name == match.group(1) and job.create_time >= since
        ]

    def cancel_custom_job(self, request=None, *, name=None, retry=None, timeout=None,
                          metadata=()):  # fmt: skip
        self.calls.append("cancel")
        outcome = self.cancel_script.pop(0) if self.cancel_script else None
        if isinstance(outcome, Exception):
            raise outcome
        self.cancelled.append(name)
        self.jobs[name].state = State.JOB_STATE_CANCELLING


def run_vertex(fake, gcp_resources, clock=None, lines=None):
    cloud = make_cloud()
    return vertex.submit_and_wait(
        vertex.build_custom_job(make_run(), cloud),
        cloud,
        client=fake,
        poll_seconds=30,
        log=(lines if lines is not None else []).append,
        sleep=clock or Clock(),
        gcp_resources=str(gcp_resources),
        backoff=FAST,
    )


def recorded(path) -> dict:
    return json.loads(open(path).read())


def test_vertex_gcp_resources_is_gcpc_format(tmp_path):
    path = tmp_path / "gcp_resources"
    fake = FakeJobService(get=[State.JOB_STATE_RUNNING, State.JOB_STATE_SUCCEEDED])
    result = run_vertex(fake, path)
    assert result.state == State.JOB_STATE_SUCCEEDED
    assert recorded(path) == {
        "resources": [
            {
                "resourceType": "CustomJob",
                "resourceUri": "https://us-central1-aiplatform.googleapis.com/v1/"
                "projects/my-project/locations/us-central1/customJobs/1000",
            }
        ]
    }


def test_vertex_transient_errors_in_create_and_get_are_retried_with_capped_backoff(tmp_path):
    fake = FakeJobService(
        create=[gexc.ServiceUnavailable("unavailable"), gexc.TooManyRequests("quota"), None],
        get=[
            State.JOB_STATE_RUNNING,
            gexc.DeadlineExceeded("deadline"),
            gexc.InternalServerError("internal"),
            ConnectionError("connection reset by peer"),
            gexc.ServiceUnavailable("unavailable"),
            State.JOB_STATE_SUCCEEDED,
        ],
    )
    clock, lines = Clock(), []
    assert run_vertex(fake, tmp_path / "r", clock, lines).state == State.JOB_STATE_SUCCEEDED
    # List looks for a job the failed attempts may have made; none was.
    assert fake.calls.count("create") == 3 and len(fake.jobs) == 1
    # create: 1, 2; poll 30; get: 1, 2, 4, 4 (capped at 4)
    assert clock.waits == [1, 2, 30, 30, 1, 2, 4, 4]
    assert any("transient error (DeadlineExceeded" in line for line in lines)


def test_vertex_create_whose_reply_was_lost_is_found_not_made_twice(tmp_path):
    path = tmp_path / "gcp_resources"
    fake = FakeJobService(create=["lost"], get=[State.JOB_STATE_SUCCEEDED])
    lines = []
    run_vertex(fake, path, lines=lines)
    assert fake.calls.count("create") == 1 and len(fake.jobs) == 1
    (name,) = fake.jobs
    assert recorded(path)["resources"][0]["resourceUri"].endswith(name)
    assert f"vertex: found {name}, created by an earlier attempt" in lines


def test_vertex_restart_in_the_middle_re_attaches_without_a_second_create(tmp_path):
    path = tmp_path / "gcp_resources"
    fake = FakeJobService(
        get=[
            State.JOB_STATE_PENDING,
            State.JOB_STATE_RUNNING,
            State.JOB_STATE_RUNNING,
            State.JOB_STATE_SUCCEEDED,
        ]  # fmt: skip
    )
    with pytest.raises(PodKilled):  # the first pod dies while the job runs
        run_vertex(fake, path, Clock(kill_after=3))
    assert list(fake.jobs.values())[0].state == State.JOB_STATE_RUNNING
    lines = []
    result = run_vertex(fake, path, lines=lines)  # the retried step
    assert result.state == State.JOB_STATE_SUCCEEDED
    assert fake.calls.count("create") == 1 and len(fake.jobs) == 1
    assert not fake.cancelled
    assert any(line.startswith("vertex: re-attached to projects/my-project") for line in lines)


def test_vertex_restart_after_a_succeeded_job_only_reads_it(tmp_path):
    path = tmp_path / "gcp_resources"
    fake = FakeJobService(get=[State.JOB_STATE_SUCCEEDED])
    run_vertex(fake, path)
    assert run_vertex(fake, path).state == State.JOB_STATE_SUCCEEDED
    assert fake.calls.count("create") == 1


def test_vertex_restart_after_a_failed_job_launches_a_new_one(tmp_path):
    path = tmp_path / "gcp_resources"
    fake = FakeJobService(get=[State.JOB_STATE_FAILED])
    with pytest.raises(JobFailed):
        run_vertex(fake, path)
    first = recorded(path)
    fake.get_script = [None, State.JOB_STATE_SUCCEEDED]  # the old job is read once, still failed
    run_vertex(fake, path)
    assert fake.calls.count("create") == 2 and len(fake.jobs) == 2
    assert recorded(path) != first and recorded(path)["resources"][0]["resourceUri"].endswith(
        "1001"
    )


def test_vertex_sigterm_cancels_the_job_and_retries_the_cancel(tmp_path):
    def terminate(waits):
        if waits == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    fake = FakeJobService(
        get=[State.JOB_STATE_RUNNING], cancel=[gexc.ServiceUnavailable("unavailable"), None]
    )
    with pytest.raises(signals.Interrupted):
        run_vertex(fake, tmp_path / "r", Clock(on_wait=terminate))
    assert fake.cancelled == [f"{FakeJobService.PARENT}/customJobs/1000"]
    assert fake.calls.count("cancel") == 2
    assert signal.getsignal(signal.SIGTERM) is previous


def test_vertex_permanent_error_ends_at_once_and_clearly(tmp_path):
    fake = FakeJobService(create=[gexc.PermissionDenied("aiplatform.customJobs.create denied")])
    clock = Clock()
    with pytest.raises(remote.RemoteCallFailed) as err:
        run_vertex(fake, tmp_path / "r", clock)
    assert str(err.value) == (
        "vertex: create_custom_job failed (error): "
        "PermissionDenied: 403 aiplatform.customJobs.create denied"
    )
    assert fake.calls == ["create"] and clock.waits == []
    assert not (tmp_path / "r").exists()


def test_vertex_transient_errors_past_the_deadline_end_the_step(tmp_path):
    fake = FakeJobService(get=[State.JOB_STATE_RUNNING] + [gexc.ServiceUnavailable("down")] * 50)
    clock = Clock()
    with pytest.raises(remote.RemoteCallFailed, match="past the retry deadline"):
        run_vertex(fake, tmp_path / "r", clock)
    assert clock.waits == [30, 30, 1, 2, 4, 4, 4, 4, 4, 4]  # 27 s of backoff; 4 more pass 30


def test_backoff_is_exponential_and_capped():
    assert list(remote.Backoff(1, 2, 4, 20).delays()) == [1, 2, 4, 4, 4, 4]
    assert list(remote.Backoff(5, 3, 60, 600).delays())[:4] == [5, 15, 45, 60]


def test_a_foreign_gcp_resources_is_refused(tmp_path):
    path = tmp_path / "gcp_resources"
    path.write_text('{"resources": [{"resourceType": "BatchPredictionJob", "resourceUri": "x"}]}')
    with pytest.raises(ConfigError, match="delete it to launch a new job"):
        run_vertex(FakeJobService(), path)


# -- Kubeflow TFJob ------------------------------------------------------------------


class _Thread:
    """What `CustomObjectsApi` hands back with `async_req=True`."""

    def __init__(self, value):
        self.value = value

    def get(self, timeout=None):
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def api_error(status: int, reason: str) -> ApiException:
    return ApiException(status=status, reason=reason)


class FakeCustomObjectsApi:
    """The Kubernetes API server's custom-objects endpoint, as the training operator
    keeps TFJobs: real TFJob dicts; `create` and `get` outcomes scripted like the
    JobService's (`get` outcomes: an exception, or a condition type to reach)."""

    HOST = "https://34.118.224.1"

    def __init__(self, create=(None,), get=(), delete=()):
        self.create_script, self.get_script = list(create), list(get)
        self.delete_script = list(delete)
        self.jobs: dict[tuple[str, str], dict] = {}
        self.calls: list[str] = []
        self.deleted: list[tuple[str, str]] = []
        configuration = k8s.Configuration()
        configuration.host = self.HOST
        self.api_client = k8s.ApiClient(configuration)

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **kwargs):
        self.calls.append("create")
        assert (group, version, plural) == ("kubeflow.org", "v1", "tfjobs")
        outcome = self.create_script.pop(0) if self.create_script else None
        if isinstance(outcome, Exception):
            raise outcome
        job = k8s.ApiClient().sanitize_for_serialization(body)
        key = (namespace, job["metadata"]["name"])
        if key in self.jobs:
            raise api_error(409, "Conflict")
        job["status"] = {"conditions": []}
        self.jobs[key] = job
        if outcome == "lost":
            raise api_error(504, "Gateway Timeout")
        return job

    def get_namespaced_custom_object(self, group, version, namespace, plural, name, **kwargs):
        self.calls.append("get")
        assert len(self.calls) < 100, "the launcher polls a job that never changes"
        outcome = self.get_script.pop(0) if self.get_script else None
        if isinstance(outcome, Exception):
            return _Thread(outcome)
        job = self.jobs.get((namespace, name))
        if job is None:
            return _Thread(api_error(404, "Not Found"))
        if outcome:
            job["status"] = {
                "conditions": [
                    {
                        "type": outcome,
                        "status": "True",
                        "reason": f"TFJob{outcome}",
                        "message": f"TFJob {namespace}/{name} is {outcome.lower()}.",
                        "lastTransitionTime": "2026-11-24T00:00:00Z",
                    }
                ],  # fmt: skip
                "replicaStatuses": {"Chief": {"active": 1}, "Worker": {"active": 2}},
            }
        return _Thread(json.loads(json.dumps(job)))

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, **kwargs):
        self.calls.append("delete")
        outcome = self.delete_script.pop(0) if self.delete_script else None
        if isinstance(outcome, Exception):
            raise outcome
        self.deleted.append((namespace, name))
        del self.jobs[(namespace, name)]


def training_client(api: FakeCustomObjectsApi):
    """The real kubeflow TrainingClient with its custom-objects endpoint replaced."""
    from kubeflow.training import TrainingClient

    client = TrainingClient(
        client_configuration=k8s.Configuration(), namespace="ml", job_kind="TFJob"
    )
    client.custom_api = api
    return client


def run_tfjob(api, gcp_resources, clock=None, lines=None):
    cloud = make_cloud(target="kubeflow", project=None, region=None, namespace="ml")
    job = kubeflow.build_tfjob(make_run(), make_cloud(**{**cloud.__dict__, "job_name": "run-1"}))
    return tfjob_submit.submit_and_wait(
        job,
        cloud,
        client=training_client(api),
        poll_seconds=15,
        log=(lines if lines is not None else []).append,
        sleep=clock or Clock(),
        gcp_resources=str(gcp_resources),
        backoff=FAST,
    )


def test_tfjob_transient_errors_are_retried_and_recorded(tmp_path):
    path = tmp_path / "gcp_resources"
    api = FakeCustomObjectsApi(
        create=[api_error(503, "Service Unavailable"), None],
        get=[
            "Running",
            api_error(429, "Too Many Requests"),
            api_error(500, "Internal Server Error"),
            urllib3.exceptions.ProtocolError("Connection aborted."),
            "Succeeded",
        ],
    )
    clock = Clock()
    assert run_tfjob(api, path, clock) == "Succeeded"
    assert api.calls.count("create") == 2 and len(api.jobs) == 1
    assert clock.waits == [1, 15, 1, 2, 4]
    assert recorded(path) == {
        "resources": [
            {
                "resourceType": "TFJob",
                "resourceUri": f"{FakeCustomObjectsApi.HOST}/apis/kubeflow.org/v1/namespaces/ml"
                "/tfjobs/run-1",
            }
        ]
    }


def test_tfjob_create_whose_reply_was_lost_is_adopted_on_conflict(tmp_path):
    api = FakeCustomObjectsApi(create=["lost"], get=["Succeeded"])
    lines = []
    assert run_tfjob(api, tmp_path / "r", lines=lines) == "Succeeded"
    assert api.calls.count("create") == 2 and len(api.jobs) == 1
    assert "kubeflow: TFJob ml/run-1 exists: created by an earlier attempt" in lines


def test_tfjob_restart_in_the_middle_re_attaches_without_a_second_create(tmp_path):
    path = tmp_path / "gcp_resources"
    api = FakeCustomObjectsApi(get=["Created", "Running", "Running", "Succeeded"])
    with pytest.raises(PodKilled):
        run_tfjob(api, path, Clock(kill_after=2))
    lines = []
    assert run_tfjob(api, path, lines=lines) == "Succeeded"
    assert api.calls.count("create") == 1 and not api.deleted
    assert "kubeflow: re-attached to TFJob ml/run-1, recorded in " + str(path) in lines


def test_tfjob_sigterm_deletes_the_job(tmp_path):
    def terminate(waits):
        if waits == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    api = FakeCustomObjectsApi(get=["Running"], delete=[api_error(503, "Service Unavailable")])
    with pytest.raises(signals.Interrupted):
        run_tfjob(api, tmp_path / "r", Clock(on_wait=terminate))
    assert api.deleted == [("ml", "run-1")] and api.calls.count("delete") == 2


def test_tfjob_permanent_error_ends_clearly(tmp_path):
    api = FakeCustomObjectsApi(create=[api_error(403, "Forbidden")])
    clock = Clock()
    with pytest.raises(remote.RemoteCallFailed, match=r"create TFJob failed \(error\).*403"):
        run_tfjob(api, tmp_path / "r", clock)
    assert api.calls == ["create"] and clock.waits == []


def test_tfjob_name_taken_by_another_job_is_a_config_error(tmp_path):
    api = FakeCustomObjectsApi(get=["Succeeded"])
    run_tfjob(api, tmp_path / "first")
    with pytest.raises(ConfigError, match="TFJob ml/run-1 already exists: pass another --job-name"):
        run_tfjob(api, tmp_path / "second")


# -- the KFP train step ---------------------------------------------------------------


def test_train_component_declares_gcp_resources_output():
    from components.registry import build_components

    spec = build_components().train.component_spec
    assert spec.outputs["gcp_resources"].type == "String"


def test_train_step_records_the_job_before_it_ends(tmp_path, monkeypatch):
    """The step writes gcp_resources as soon as the job exists (a failure still links it)."""
    from components.core import launch
    from components.core.launch import credentials

    fake = FakeJobService(get=[State.JOB_STATE_FAILED])
    monkeypatch.setattr(credentials, "google_credentials", lambda: None)
    monkeypatch.setattr(vertex, "make_client", lambda cloud, credentials=None: fake)
    monkeypatch.setattr(
        vertex, "submit_and_wait", functools.partial(vertex.submit_and_wait, sleep=Clock())
    )
    path = tmp_path / "gcp_resources"
    cloud = {k: v for k, v in make_cloud().__dict__.items() if k != "target"}
    with pytest.raises(JobFailed):
        launch.train_to_artifacts(
            run_config={},
            cluster={"strategy": "multi_worker_mirrored", "workers": 2},
            shards_dir="/gcs/bucket/shards/digits",
            model_dir=str(tmp_path / "model"),
            metrics_path=str(tmp_path / "metrics.json"),
            backend="vertex",
            cloud_config=cloud,
            gcp_resources_path=str(path),
        )
    assert recorded(path)["resources"][0]["resourceUri"].endswith("customJobs/1000")


# -- pre-launch checks: the local ones, before any request ----------------------------

CLOUD_ARGS = {
    "vertex": ["--target", "vertex", "--project", "my-project", "--region", "us-central1"],
    "kubeflow": ["--target", "kubeflow", "--namespace", "ml"],
}


@pytest.fixture
def no_requests(monkeypatch):
    """Both backends' clients: fakes that record any call (none may come)."""
    from components.core.launch import credentials

    vertex_fake, api = FakeJobService(), FakeCustomObjectsApi()
    monkeypatch.setattr(credentials, "google_credentials", lambda: None)
    monkeypatch.setattr(vertex, "make_client", lambda cloud, credentials=None: vertex_fake)
    monkeypatch.setattr(tfjob_client, "make_client", lambda cloud, conf=None: training_client(api))
    yield
    assert vertex_fake.calls == [] and api.calls == []


def cloud_train(target: str, *flags: str) -> list[str]:
    return [
        "train", *CLOUD_ARGS[target], "--image", "registry/strategist-trainer:1",
        "--base-output-dir", "gs://bucket/runs/x", "--shards-dir", "gs://bucket/shards/digits",
        *flags,
    ]  # fmt: skip


def exit_and_error(argv, capsys) -> tuple[int, str]:
    from pipelines import cli

    code = cli.main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_too_few_shards_refused_as_locally_before_any_request(
    target, digits_shards, tmp_path, monkeypatch, capsys, no_requests
):
    from components.core.launch import cloud_checks

    # The job's gs:// shards, readable from here (as on a pipeline step's gcsfuse mount).
    monkeypatch.setattr(
        cloud_checks, "readable_shards",
        lambda uri: digits_shards if uri == "gs://bucket/shards/digits" else None,
    )  # fmt: skip
    shape = ("--strategy", "multi_worker_mirrored", "--workers", "5")  # 4 shard files
    local = exit_and_error(
        ["train", "--local", "--shards-dir", digits_shards, "--output", str(tmp_path), *shape],
        capsys,
    )
    assert local[0] == 2 and "too few for 5 workers" in local[1]
    assert exit_and_error(cloud_train(target, *shape, "--dry-run"), capsys) == local
    assert exit_and_error(cloud_train(target, *shape), capsys) == local


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_indivisible_global_batch_refused_as_locally_before_any_request(
    target, capsys, no_requests
):
    shape = ("--strategy", "multi_worker_mirrored", "--workers", "3", "--global-batch-size", "100")
    expected = (
        "strategist train: error: --global-batch-size 100 does not divide across 3 replicas "
        "of multi_worker_mirrored: use a multiple of 3\n"
    )
    assert exit_and_error(cloud_train(target, *shape, "--dry-run"), capsys) == (2, expected)
    assert exit_and_error(cloud_train(target, *shape), capsys) == (2, expected)


def test_global_batch_divides_over_the_jobs_gpus_as_over_the_local_devices(
    tmp_path, capsys, no_requests
):
    """One `--gpus-per-machine`: the job's GPUs are the replicas, as the local devices are."""
    mirrored = ("--strategy", "mirrored", "--gpus-per-machine", "4", "--global-batch-size", "6")
    local = exit_and_error(["train", "--local", "--output", str(tmp_path), *mirrored], capsys)
    assert local[0] == 2 and "does not divide across 4 replicas" in local[1]
    assert exit_and_error(cloud_train("vertex", "--gpu", "t4", *mirrored), capsys) == local


def test_evaluator_and_ps_shape_errors_refused_as_locally(tmp_path, capsys, no_requests):
    for shape in (("--strategy", "parameter_server", "--workers", "2", "--ps", "0"),
                  ("--strategy", "mirrored", "--ps", "1")):  # fmt: skip
        local = exit_and_error(["train", "--local", "--output", str(tmp_path), *shape], capsys)
        assert local[0] == 2
        assert exit_and_error(cloud_train("kubeflow", *shape, "--dry-run"), capsys) == local


def test_a_recorded_job_that_no_longer_exists_is_replaced(tmp_path):
    path = tmp_path / "gcp_resources"
    fake = FakeJobService(get=[State.JOB_STATE_SUCCEEDED])
    run_vertex(fake, path)
    fake.jobs.clear()  # deleted since
    fake.get_script = [None, State.JOB_STATE_SUCCEEDED]
    run_vertex(fake, path)
    assert fake.calls.count("create") == 2

    api = FakeCustomObjectsApi(get=["Succeeded"])
    run_tfjob(api, path.with_name("tfjob"))
    api.jobs.clear()  # deleted since (ttlSecondsAfterFinished)
    api.get_script = [None, "Succeeded"]  # the first get finds nothing
    lines = []
    assert run_tfjob(api, path.with_name("tfjob"), lines=lines) == "Succeeded"
    assert api.calls.count("create") == 2
    assert "kubeflow: the recorded TFJob ml/run-1 no longer exists; creating a new one" in lines


def test_a_failures_last_lines_leave_out_tensorflows_start_up_notices():
    """The lines of the issue's failing `--model cnn` task: its own error, not the notices."""
    from components.core.launch.local import ClusterFailed

    tail = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1764 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
        "available CPU instructions in performance-critical operations.",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
        "TensorFlow with the appropriate compiler flags.",
        "I0000 00:00:1764 port.cc:153] oneDNN custom operations are on. You may see slightly "
        "different numerical results.",
        "E0000 00:00:1764 cuda_executor.cc:1309] failed call to cuInit: INTERNAL: CUDA error",
        "trainer: error: build_model of cnn failed: Input 0 of layer conv2d is incompatible "
        "with the layer: expected min_ndim=4, found ndim=2",
    ]
    failed = ClusterFailed("chief-0", 2, tail)
    assert failed.tail == tail[-1:]
    assert str(failed).splitlines()[1:] == [f"  [chief-0] {tail[-1]}"]
    assert str(failed).startswith("chief-0 exited 2: build_model of cnn failed: ")
