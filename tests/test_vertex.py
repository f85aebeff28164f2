"""Vertex AI backend: CustomJobs for every strategy, parsed strictly, and the wait loop."""

from __future__ import annotations

import os
import signal

import pytest
from google.cloud import aiplatform_v1

from components.core import signals
from components.core.config import ConfigError, RunConfig
from components.core.launch import cloud as cloudlib
from components.core.launch import credentials, vertex
from components.core.launch.cloud import JobFailed
from tests.test_cloud_config import IMAGE, make_cloud, make_run

State = aiplatform_v1.JobState
TRAINER = ["python", "-m", "components.core.trainer"]


def parse_strictly(job: aiplatform_v1.CustomJob) -> aiplatform_v1.CustomJob:
    """The job through its REST JSON and back, refusing unknown fields."""
    text = vertex.to_json(job)
    parsed = aiplatform_v1.CustomJob.from_json(text, ignore_unknown_fields=False)
    assert parsed == job
    return parsed


def pools(job):
    return list(job.job_spec.worker_pool_specs)


def test_one_device_is_one_chief_with_one_gpu():
    job = parse_strictly(vertex.build_custom_job(make_run("one_device"), make_cloud()))
    (chief,) = pools(job)
    assert chief.replica_count == 1
    assert chief.machine_spec.machine_type == "n1-standard-8"
    assert chief.machine_spec.accelerator_type == aiplatform_v1.AcceleratorType.NVIDIA_TESLA_T4
    assert chief.machine_spec.accelerator_count == 1
    assert chief.container_spec.image_uri == IMAGE
    assert list(chief.container_spec.command) == TRAINER


def test_mirrored_is_one_machine_with_all_its_gpus():
    job = parse_strictly(
        vertex.build_custom_job(make_run("mirrored"), make_cloud(gpu="a100", gpus_per_machine=8))
    )
    (chief,) = pools(job)
    assert (chief.replica_count, chief.machine_spec.machine_type) == (1, "a2-highgpu-8g")
    assert chief.machine_spec.accelerator_type == aiplatform_v1.AcceleratorType.NVIDIA_TESLA_A100
    assert chief.machine_spec.accelerator_count == 8
    sent = RunConfig.from_json(chief.container_spec.args[1])
    assert sent.cluster.gpus_per_machine == 8


def test_multi_worker_mirrored_is_a_chief_and_n_minus_one_workers_with_reduction_server():
    cloud = make_cloud(
        gpu="v100", gpus_per_machine=2, reduction_server=True, reduction_server_replicas=4
    )
    job = parse_strictly(vertex.build_custom_job(make_run(workers=4), cloud))
    chief, workers, reducers = pools(job)
    assert chief.replica_count == 1 and workers.replica_count == 3
    for pool in (chief, workers):
        assert pool.machine_spec.machine_type == "n1-standard-16"
        assert pool.machine_spec.accelerator_count == 2
        assert list(pool.container_spec.args) == list(chief.container_spec.args)
    assert reducers.replica_count == 4
    assert reducers.machine_spec.machine_type == "n1-highcpu-16"
    assert reducers.machine_spec.accelerator_count == 0
    assert reducers.container_spec.image_uri == cloudlib.REDUCTION_SERVER_IMAGE
    assert not reducers.container_spec.args


def test_parameter_server_has_cpu_chief_gpu_workers_and_cpu_ps():
    run = make_run("parameter_server", workers=4, ps=2)
    job = parse_strictly(
        vertex.build_custom_job(run, make_cloud(gpu="l4", ps_machine_type="n2-standard-16"))
    )
    chief, workers, ps = pools(job)
    assert (chief.replica_count, chief.machine_spec.machine_type) == (1, "n2-standard-16")
    assert chief.machine_spec.accelerator_count == 0
    assert (workers.replica_count, workers.machine_spec.machine_type) == (4, "g2-standard-8")
    assert workers.machine_spec.accelerator_type == aiplatform_v1.AcceleratorType.NVIDIA_L4
    assert (ps.replica_count, ps.machine_spec.machine_type) == (2, "n2-standard-16")
    assert ps.machine_spec.accelerator_count == 0
    for pool in (chief, workers, ps):
        sent = RunConfig.from_json(pool.container_spec.args[1])
        assert (sent.cluster.workers, sent.cluster.ps) == (4, 2)
        env = {e.name: e.value for e in pool.container_spec.env}
        assert env["GRPC_FAIL_FAST"] == "use_caller"


def test_evaluator_is_pool_3_with_empty_pools_before_it():
    run = make_run("mirrored", evaluator=True)
    job = parse_strictly(vertex.build_custom_job(run, make_cloud()))
    chief, worker, ps, evaluator = pools(job)
    assert worker == aiplatform_v1.WorkerPoolSpec() and ps == aiplatform_v1.WorkerPoolSpec()
    assert evaluator.replica_count == 1
    assert evaluator.machine_spec == chief.machine_spec


def test_job_settings_reach_the_spec():
    cloud = make_cloud(
        spot=True,
        timeout_s=7200,
        restart_job_on_worker_restart=True,
        service_account="trainer@proj.iam.gserviceaccount.com",
        network="projects/123/global/networks/vpc",
        tensorboard="projects/my-project/locations/us-central1/tensorboards/42",
        job_name="nightly",
    )
    job = parse_strictly(vertex.build_custom_job(make_run(), cloud))
    spec = job.job_spec
    assert job.display_name == "nightly"
    assert spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    assert spec.scheduling.timeout.total_seconds() == 7200
    assert spec.scheduling.restart_job_on_worker_restart
    assert spec.service_account == "trainer@proj.iam.gserviceaccount.com"
    assert spec.network == "projects/123/global/networks/vpc"
    assert spec.tensorboard.endswith("/tensorboards/42")
    assert spec.base_output_directory.output_uri_prefix == "gs://bucket/runs/x"
    sent = RunConfig.from_json(spec.worker_pool_specs[0].container_spec.args[1])
    assert sent.output_dir == "/gcs/bucket/runs/x"
    assert job.labels["strategy"] == "multi_worker_mirrored"


def test_cpu_job_has_no_accelerators_and_default_scheduling():
    job = parse_strictly(vertex.build_custom_job(make_run(), make_cloud(gpu=None)))
    for pool in pools(job):
        assert pool.machine_spec.accelerator_count == 0
        assert pool.machine_spec.machine_type == "n1-standard-8"
    assert (
        job.job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.STRATEGY_UNSPECIFIED
    )
    assert not job.job_spec.scheduling.restart_job_on_worker_restart


def test_kubeflow_config_is_refused():
    with pytest.raises(ConfigError, match="--target vertex"):
        vertex.build_custom_job(make_run(), make_cloud(target="kubeflow"))


class FakeJobService:
    """The remote JobService: hands out a scripted sequence of job states."""

    NAME = "projects/my-project/locations/us-central1/customJobs/8675309"

    def __init__(self, states, error="", on_get=None):
        self.states = list(states)
        self.error = error
        self.on_get = on_get
        self.created = []
        self.cancelled = []
        self.gets = 0

    def _job(self, state):
        job = aiplatform_v1.CustomJob(name=self.NAME, state=state)
        if state == State.JOB_STATE_FAILED and self.error:
            job.error.message = self.error
        return job

    def create_custom_job(self, parent, custom_job):
        self.created.append((parent, custom_job))
        return self._job(self.states.pop(0))

    def get_custom_job(self, name):
        assert name == self.NAME
        self.gets += 1
        if self.on_get:
            self.on_get(self.gets)
        return self._job(self.states.pop(0) if len(self.states) > 1 else self.states[0])

    def cancel_custom_job(self, name):
        self.cancelled.append(name)


def wait(fake, **kwargs):
    lines = []
    job = vertex.build_custom_job(make_run(), make_cloud())
    result = vertex.submit_and_wait(
        job,
        make_cloud(),
        client=fake,
        poll_seconds=0,
        log=lines.append,
        sleep=lambda s: None,
        **kwargs,
    )
    return result, lines


def test_success_prints_link_and_each_state_change_once():
    fake = FakeJobService(
        [
            State.JOB_STATE_QUEUED,
            State.JOB_STATE_PENDING,
            State.JOB_STATE_RUNNING,
            State.JOB_STATE_RUNNING,
            State.JOB_STATE_SUCCEEDED,
        ]
    )
    result, lines = wait(fake)
    assert result.state == State.JOB_STATE_SUCCEEDED
    parent, sent = fake.created[0]
    assert parent == "projects/my-project/locations/us-central1"
    assert sent.job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE
    assert (
        "vertex: console https://console.cloud.google.com/vertex-ai/locations/us-central1"
        "/training/8675309?project=my-project"
    ) in lines
    states = [line for line in lines if "JOB_STATE" in line]
    assert states == [
        "vertex: JOB_STATE_QUEUED",
        "vertex: JOB_STATE_PENDING",
        "vertex: JOB_STATE_RUNNING",
        "vertex: JOB_STATE_SUCCEEDED",
    ]
    assert not fake.cancelled


def test_failure_raises_with_the_job_error():
    fake = FakeJobService(
        [State.JOB_STATE_PENDING, State.JOB_STATE_RUNNING, State.JOB_STATE_FAILED],
        error="The replica workerpool0-0 exited with a non-zero status of 1.",
    )
    with pytest.raises(JobFailed) as err:
        wait(fake)
    assert err.value.state == "JOB_STATE_FAILED"
    assert "workerpool0-0 exited with a non-zero status of 1" in str(err.value)
    assert not fake.cancelled


def test_cancelled_by_someone_else_is_a_failure():
    fake = FakeJobService([State.JOB_STATE_RUNNING, State.JOB_STATE_CANCELLED])
    with pytest.raises(JobFailed, match="JOB_STATE_CANCELLED"):
        wait(fake)


def test_ctrl_c_cancels_the_job():
    def interrupt(gets):
        if gets == 2:
            raise KeyboardInterrupt

    fake = FakeJobService([State.JOB_STATE_PENDING, State.JOB_STATE_RUNNING], on_get=interrupt)
    with pytest.raises(KeyboardInterrupt):
        wait(fake)
    assert fake.cancelled == [FakeJobService.NAME]


def test_sigterm_cancels_the_job():
    """A cancelled pipeline run sends SIGTERM: the job is cancelled, not left running."""

    def terminate(gets):
        if gets == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    fake = FakeJobService([State.JOB_STATE_PENDING, State.JOB_STATE_RUNNING], on_get=terminate)
    with pytest.raises(signals.Interrupted):
        wait(fake)
    assert fake.cancelled == [FakeJobService.NAME]
    assert signal.getsignal(signal.SIGTERM) is previous


def test_real_client_with_only_the_grpc_endpoint_mocked():
    """The real JobServiceClient builds the requests; only the gRPC calls are replaced."""
    from unittest import mock

    from google.auth.credentials import AnonymousCredentials

    cloud = make_cloud()
    client = vertex.make_client(cloud, credentials=AnonymousCredentials())
    name = FakeJobService.NAME
    replies = iter(
        aiplatform_v1.CustomJob(name=name, state=state)
        for state in (State.JOB_STATE_PENDING, State.JOB_STATE_RUNNING, State.JOB_STATE_SUCCEEDED)
    )
    requests = []

    def endpoint(request, **kwargs):
        requests.append(request)
        return next(replies)

    # Every unary gRPC stub of the transport shares one callable type.
    with mock.patch.object(type(client.transport.create_custom_job), "__call__") as call:
        call.side_effect = endpoint
        job = vertex.build_custom_job(make_run(), cloud)
        result = vertex.submit_and_wait(
            job, cloud, client=client, poll_seconds=0, log=lambda line: None, sleep=lambda s: 0
        )
    assert result.state == State.JOB_STATE_SUCCEEDED
    create, *gets = requests
    assert isinstance(create, aiplatform_v1.CreateCustomJobRequest)
    assert create.parent == "projects/my-project/locations/us-central1"
    assert create.custom_job == job
    assert [type(r) for r in gets] == [aiplatform_v1.GetCustomJobRequest] * 2
    assert gets[0].name == name
    assert client.api_endpoint == "us-central1-aiplatform.googleapis.com"


def test_sigterm_on_strategist_train_target_vertex_exits_143(monkeypatch, capsys):
    """`strategist train --target vertex` cancels its job on SIGTERM and exits 128 + 15."""
    import functools

    from pipelines import cli

    def terminate(gets):
        if gets == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    fake = FakeJobService([State.JOB_STATE_PENDING, State.JOB_STATE_RUNNING], on_get=terminate)
    monkeypatch.setattr(credentials, "google_credentials", lambda: None)
    monkeypatch.setattr(vertex, "make_client", lambda cloud, credentials=None: fake)
    monkeypatch.setattr(
        vertex, "submit_and_wait", functools.partial(vertex.submit_and_wait, poll_seconds=0)
    )
    previous = signal.getsignal(signal.SIGTERM)
    argv = [
        "train", "--target", "vertex", "--project", "my-project", "--region", "us-central1",
        "--image", IMAGE, "--output", "gs://bucket/runs/x", "--shards-dir", "gs://bucket/shards",
        "--strategy", "multi_worker_mirrored", "--workers", "2",
    ]  # fmt: skip
    assert cli.main(argv) == 143
    assert fake.cancelled == [FakeJobService.NAME]
    assert "interrupted (SIGTERM)" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is previous


def test_train_attach_follows_a_running_vertex_job_and_creates_nothing(monkeypatch, capsys):
    """`strategist train --target vertex --attach ID` follows the job through the real
    JobServiceClient (only its gRPC calls replaced) to its end, sending no create; a
    failed job exits 1 with its error; an ID Vertex AI does not know, a malformed name
    or another region's job exit 2."""
    import functools
    from unittest import mock

    from google.api_core.exceptions import NotFound
    from google.auth.credentials import AnonymousCredentials

    from pipelines import cli

    monkeypatch.setattr(credentials, "google_credentials", AnonymousCredentials)
    monkeypatch.setattr(
        vertex, "submit_and_wait", functools.partial(vertex.submit_and_wait, poll_seconds=0)
    )
    name = FakeJobService.NAME
    scripted = {}
    requests = []

    def endpoint(request, **kwargs):
        requests.append(request)
        if request.name != name:
            raise NotFound(f"CustomJob {request.name} not found")
        state = scripted["states"].pop(0)
        job = aiplatform_v1.CustomJob(name=name, state=state)
        if state == State.JOB_STATE_FAILED:
            job.error.message = "The replica workerpool0-0 exited with a non-zero status of 1."
        return job

    argv = ["train", "--target", "vertex", "--project", "my-project", "--region", "us-central1"]
    with mock.patch.object(
        type(vertex.make_client(make_cloud(), AnonymousCredentials()).transport.get_custom_job),
        "__call__",
    ) as call:
        call.side_effect = endpoint
        scripted["states"] = [State.JOB_STATE_RUNNING, State.JOB_STATE_SUCCEEDED]
        assert cli.main([*argv, "--attach", "8675309"]) == 0
        out = capsys.readouterr().out
        assert f"vertex: attached to {name}" in out
        assert "vertex: JOB_STATE_RUNNING" in out and "vertex: JOB_STATE_SUCCEEDED" in out
        assert f"train: Vertex AI job {name} succeeded" in out
        assert [type(r) for r in requests] == [aiplatform_v1.GetCustomJobRequest] * 2

        scripted["states"] = [State.JOB_STATE_RUNNING, State.JOB_STATE_FAILED]
        assert cli.main([*argv, "--attach", name]) == 1
        assert "workerpool0-0 exited with a non-zero status of 1" in capsys.readouterr().err

        assert cli.main([*argv, "--attach", "42"]) == 2
        err = capsys.readouterr().err
        assert "no Vertex AI job projects/my-project/locations/us-central1/customJobs/42" in err
        sent = len(requests)
        for bad, says in (
            ("my-job", "give the job's ID or its name"),
            ("projects/my-project/locations/europe-west4/customJobs/7", "--region europe-west4"),
        ):
            assert cli.main([*argv, "--attach", bad]) == 2
            assert says in capsys.readouterr().err
        assert len(requests) == sent  # refused before any call
