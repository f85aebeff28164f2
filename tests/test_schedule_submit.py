"""`strategist submit` and `strategist schedule`: validation before anything is sent, and the
real SDK requests (aiplatform protos, kfp_server_api JSON) with only the wire faked."""

from __future__ import annotations

import json
import urllib.parse

import pytest
import urllib3
import yaml
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.cloud.aiplatform_v1.services.pipeline_service.transports import (
    grpc as pipeline_grpc,
)
from google.cloud.aiplatform_v1.services.schedule_service.transports import (
    grpc as schedule_grpc,
)
from google.cloud.storage import _http as storage_http

from components.core.config import RunConfig, TrainingConfig
from pipelines import cli, submission
from pipelines.cli import schedule as schedule_cli
from pipelines.cli import submit as submit_cli
from pipelines.submission import Submission

PROJECT, REGION, ROOT = "acme-ml", "europe-west4", "gs://acme-ml-pipelines/root"
VERTEX = ["--target", "vertex", "--project", PROJECT, "--region", REGION, "--pipeline-root", ROOT]
HOST = "http://kfp.example:8080"


# ---------------------------------------------------------------- cron validation


@pytest.mark.parametrize(
    ("cron", "target", "expected"),
    [
        ("0 3 * * 1", "vertex", "0 3 * * 1"),
        ("  */15   * * * * ", "vertex", "*/15 * * * *"),
        ("TZ=Europe/Berlin 0 3 * * 1-5", "vertex", "TZ=Europe/Berlin 0 3 * * 1-5"),
        ("CRON_TZ=America/New_York 30 6 1 * *", "vertex", "TZ=America/New_York 30 6 1 * *"),
        ("0 3 * * 1", "kfp", "0 0 3 * * 1"),  # KFP: seconds first
        ("30 0 3 * * *", "kfp", "30 0 3 * * *"),  # already 6 fields: kept
    ],
)
def test_cron_is_normalised_for_the_target(cron, target, expected):
    assert submission.validate_cron(cron, target) == expected


@pytest.mark.parametrize(
    ("cron", "target", "message"),
    [
        ("0 25 * * *", "vertex", "not a valid cron"),
        ("61 * * * *", "kfp", "not a valid cron"),
        ("0 3 32 * *", "vertex", "not a valid cron"),
        ("0 3 * *", "vertex", "has 4 fields"),
        ("0 0 3 * * *", "vertex", "has 6 fields"),  # Vertex AI is unix cron
        ("0 0 0 3 * * *", "kfp", "has 7 fields"),
        ("@daily", "vertex", "has 1 fields"),
        ("", "kfp", "has 0 fields"),
        ("TZ=Mars/Olympus 0 3 * * *", "vertex", "unknown time zone"),
        ("TZ=Europe/Berlin 0 3 * * *", "kfp", "no time-zone prefix"),
    ],
)
def test_bad_cron_is_refused(cron, target, message):
    with pytest.raises(cli.ConfigError, match=message):
        submission.validate_cron(cron, target)


# ---------------------------------------------------------------- fakes of the wire only


class FakeRpc:
    """Stands in for one gRPC method of a transport: records requests, answers protos."""

    def __init__(self, respond):
        self.requests = []
        self.respond = respond

    def __call__(self, request, timeout=None, metadata=None, **kwargs):
        self.requests.append(request)
        return self.respond(request)


@pytest.fixture
def vertex_wire(monkeypatch):
    """Replaces the gRPC calls CreatePipelineJob and CreateSchedule; the SDKs run for real."""

    def created_job(request):
        job = aiplatform_v1.PipelineJob(request.pipeline_job)
        job.name = f"{request.parent}/pipelineJobs/run-123"
        job.state = aiplatform_v1.PipelineState.PIPELINE_STATE_PENDING
        return job

    def created_schedule(request):
        schedule = aiplatform_v1.Schedule(request.schedule)
        schedule.name = f"{request.parent}/schedules/456"
        return schedule

    wire = {"job": FakeRpc(created_job), "schedule": FakeRpc(created_schedule), "storage": []}

    def storage_request(self, method, path, **kwargs):
        """Cloud Storage JSON API: PipelineJob.submit checks the pipeline root's bucket."""
        wire["storage"].append((method, path))
        return {"kind": "storage#bucket", "name": path.rsplit("/", 1)[-1]}

    monkeypatch.setattr(storage_http.Connection, "api_request", storage_request)
    monkeypatch.setattr(
        pipeline_grpc.PipelineServiceGrpcTransport,
        "create_pipeline_job",
        property(lambda self: wire["job"]),
    )
    monkeypatch.setattr(
        schedule_grpc.ScheduleServiceGrpcTransport,
        "create_schedule",
        property(lambda self: wire["schedule"]),
    )
    return wire


class KfpServer:
    """A KFP API server at the urllib3 layer: records every request, answers JSON."""

    def __init__(self):
        self.requests: list[tuple[str, str, dict | None]] = []

    def request(self, method, url, body=None, fields=None, **kwargs):
        path = urllib.parse.urlparse(url).path
        payload = json.loads(body) if body else None
        self.requests.append((method, path, payload))
        if path.endswith("/healthz"):
            answer = {"multi_user": False}
        elif method == "GET" and path.endswith("/experiments"):
            answer = {"experiments": [{"experiment_id": "exp-1", "display_name": "Default"}]}
        elif method == "POST" and path.endswith("/runs"):
            answer = {"run_id": "run-9", "display_name": payload["display_name"]}
        elif method == "POST" and path.endswith("/recurringruns"):
            answer = {"recurring_run_id": "rr-7", "display_name": payload["display_name"]}
        else:
            answer = {}
        return urllib3.HTTPResponse(
            body=json.dumps(answer).encode(),
            status=200,
            headers={"Content-Type": "application/json"},
            preload_content=True,
        )

    def posts(self, suffix):
        return [body for method, path, body in self.requests if method == "POST" and
                path.endswith(suffix)]  # fmt: skip


@pytest.fixture
def kfp_server(monkeypatch):
    server = KfpServer()
    monkeypatch.setattr(
        urllib3.PoolManager, "request", lambda self, *a, **k: server.request(*a, **k)
    )
    return server


def _sub(target="vertex", pipeline="training", **overrides):
    settings = (
        {"project": PROJECT, "region": REGION, "pipeline_root": ROOT}
        if target == "vertex"
        else {"host": HOST}
    )
    return Submission(target=target, pipeline=pipeline, **{**settings, **overrides})


def _runtime_parameters(job: aiplatform_v1.PipelineJob) -> dict:
    """The job's parameter values as plain JSON values (the wire form)."""
    values = aiplatform_v1.PipelineJob.to_dict(job)["runtime_config"]["parameter_values"]
    return json.loads(json.dumps(values))


# ---------------------------------------------------------------- Vertex AI


def test_vertex_submit_sends_the_compiled_pipeline_with_typed_parameters(vertex_wire):
    lines = []
    code = submit_cli.submit(
        _sub(
            params={
                "run_config.training.epochs": "3",
                "promotion_margin": "0.01",
                "run_config.cluster.strategy": "mirrored",
            },
            service_account="trainer@acme-ml.iam.gserviceaccount.com",
        ),
        credentials=AnonymousCredentials(),
        log=lines.append,
    )
    assert code == 0
    (request,) = vertex_wire["job"].requests
    assert request.parent == f"projects/{PROJECT}/locations/{REGION}"
    job = request.pipeline_job
    assert job.display_name == "strategist-training"
    assert job.service_account == "trainer@acme-ml.iam.gserviceaccount.com"
    assert job.runtime_config.gcs_output_directory == ROOT
    parameters = _runtime_parameters(job)
    assert parameters["promotion_margin"] == 0.01
    # The dotted fields changed; the rest of the run config keeps the pipeline's default.
    sent = RunConfig.from_dict(parameters["run_config"])
    assert sent.training == TrainingConfig(epochs=3)
    assert sent.cluster.strategy == "mirrored" and sent.data.dataset == "digits"
    spec = dict(job.pipeline_spec)
    assert spec["pipelineInfo"]["name"] == "strategist-training"
    assert "comp-promote" in spec["components"]  # the compiled package, promote step included
    assert any("pipelines/runs/run-123?project=acme-ml" in line for line in lines)
    # The SDK found the pipeline root's bucket (and so created none).
    assert vertex_wire["storage"] and set(vertex_wire["storage"]) == {
        ("GET", "/b/acme-ml-pipelines")
    }


def test_vertex_submit_of_the_comparison_pipeline(vertex_wire):
    assert submit_cli.submit(_sub(pipeline="comparison"), credentials=AnonymousCredentials()) == 0
    job = vertex_wire["job"].requests[0].pipeline_job
    assert dict(job.pipeline_spec)["pipelineInfo"]["name"] == "strategist-comparison"
    assert job.labels["strategist-pipeline"] == "comparison"


def test_vertex_schedule_request(vertex_wire):
    lines = []
    code = schedule_cli.schedule(
        _sub(name="nightly-retrain", params={"promotion_target": "vertex"}),
        "TZ=Europe/Amsterdam 0 2 * * *",
        credentials=AnonymousCredentials(),
        log=lines.append,
    )
    assert code == 0
    assert not vertex_wire["job"].requests  # a schedule, not a run
    (request,) = vertex_wire["schedule"].requests
    assert request.parent == f"projects/{PROJECT}/locations/{REGION}"
    schedule = request.schedule
    assert schedule.cron == "TZ=Europe/Amsterdam 0 2 * * *"
    assert schedule.display_name == "nightly-retrain"
    assert schedule.max_concurrent_run_count == 1
    inner = schedule.create_pipeline_job_request
    assert inner.parent == request.parent
    assert _runtime_parameters(inner.pipeline_job) == {"promotion_target": "vertex"}
    assert inner.pipeline_job.runtime_config.gcs_output_directory == ROOT
    assert dict(inner.pipeline_job.pipeline_spec)["pipelineInfo"]["name"] == "strategist-training"
    assert any("schedules/456" in line for line in lines)


def test_caching_is_off_unless_asked(vertex_wire):
    submit_cli.submit(_sub(), credentials=AnonymousCredentials())
    submit_cli.submit(_sub(enable_caching=True), credentials=AnonymousCredentials())
    off, on = (dict(r.pipeline_job.pipeline_spec) for r in vertex_wire["job"].requests)
    assert not dict(off["root"]["dag"]["tasks"]["train"]["cachingOptions"]).get("enableCache")
    assert on["root"]["dag"]["tasks"]["train"]["cachingOptions"] == {"enableCache": True}


# ---------------------------------------------------------------- Kubeflow Pipelines


def test_kfp_schedule_sends_a_recurring_run_with_six_field_cron(kfp_server, capsys):
    argv = ["schedule", "--target", "kfp", "--pipeline", "training", "--host", HOST,
            "--cron", "0 3 * * 1", "--name", "weekly", "--param", "run_config.training.epochs=7",
            "--param", "promotion_root=gs://acme/promotion"]  # fmt: skip
    assert cli.main(argv) == 0
    (body,) = kfp_server.posts("/recurringruns")
    assert body["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * 1"
    assert body["display_name"] == "weekly"
    assert body["experiment_id"] == "exp-1"
    assert body["max_concurrency"] == "1" or body["max_concurrency"] == 1
    assert body["no_catchup"] is True
    assert body["mode"] == "ENABLE"
    parameters = body["runtime_config"]["parameters"]
    assert parameters["promotion_root"] == "gs://acme/promotion"
    assert parameters["run_config"]["training"]["epochs"] == 7
    assert parameters["run_config"]["cluster"]["strategy"] == "auto"  # the default, kept
    spec = body["pipeline_spec"]
    assert spec["pipeline_spec"]["pipelineInfo"]["name"] == "strategist-training"
    platform = spec["platform_spec"]["platforms"]["kubernetes"]  # kfp target: GPU node pool
    assert "exec-train" in platform["deploymentSpec"]["executors"]
    assert "recurringrun/details/rr-7" in capsys.readouterr().out


MIRRORED = {"strategy": "mirrored", "workers": 1, "ps": 0, "gpus_per_machine": 2}
CLUSTERS = "clusters=" + json.dumps([MIRRORED])


def test_kfp_submit_sends_a_run(kfp_server, capsys):
    argv = ["submit", "--target", "kfp", "--pipeline", "comparison", "--host", HOST,
            "--gpu", "none", "--param", CLUSTERS]  # fmt: skip
    assert cli.main(argv) == 0
    (body,) = kfp_server.posts("/runs")
    assert body["display_name"] == "strategist-comparison"
    assert body["runtime_config"]["parameters"] == {"clusters": [MIRRORED]}
    assert body["pipeline_spec"]["pipelineInfo"]["name"] == "strategist-comparison"
    assert f"{HOST}/#/runs/details/run-9" in capsys.readouterr().out


# ---------------------------------------------------------------- refused before sending


@pytest.fixture
def nothing_may_be_sent(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a request was sent")

    monkeypatch.setattr(urllib3.PoolManager, "request", refuse)
    for transport, name in (
        (pipeline_grpc.PipelineServiceGrpcTransport, "create_pipeline_job"),
        (schedule_grpc.ScheduleServiceGrpcTransport, "create_schedule"),
    ):
        monkeypatch.setattr(transport, name, property(lambda self: refuse))


@pytest.fixture
def no_compile(monkeypatch):
    """Compiling fails the test: refusals must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the pipeline was compiled")

    monkeypatch.setattr("pipelines.compile.compile_pipeline", refuse)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["schedule", *VERTEX, "--pipeline", "training", "--cron", "0 25 * * *"], "cron"),
        (["schedule", "--target", "kfp", "--pipeline", "training", "--cron", "* * *"], "fields"),
        (["submit", "--target", "vertex", "--pipeline", "training", "--region", REGION,
          "--pipeline-root", ROOT], "--project"),
        (["submit", "--target", "vertex", "--pipeline", "training", "--project", PROJECT,
          "--pipeline-root", ROOT], "--region"),
        (["submit", "--target", "vertex", "--pipeline", "training", "--project", PROJECT,
          "--region", REGION], "--pipeline-root gs://"),
        (["submit", *VERTEX[:-1], "/tmp/root", "--pipeline", "training"], "--pipeline-root gs://"),
        (["submit", *VERTEX, "--pipeline", "training", "--service-account", "bob"], "not an email"),
        (["schedule", "--target", "kfp", "--pipeline", "training", "--cron", "0 3 * * *"],
         "--host"),
        (["submit", "--target", "kfp", "--pipeline", "training", "--host", "kfp:8080"], "URL"),
        (["submit", *VERTEX, "--pipeline", "training", "--param", "epochs"], "NAME=VALUE"),
        (["submit", *VERTEX, "--pipeline", "training", "--name", "Bad Name"], "--name"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_before_compiling_or_sending(
    argv, message, capsys, nothing_may_be_sent, no_compile
):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_missing_google_credentials_exit_2_before_compiling_or_sending(
    monkeypatch, capsys, nothing_may_be_sent, no_compile
):
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def no_credentials(*args, **kwargs):
        raise DefaultCredentialsError("File /nowhere was not found.")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    for command in (["submit"], ["schedule", "--cron", "0 3 * * *"]):
        assert cli.main([*command, *VERTEX, "--pipeline", "training"]) == 2
        err = capsys.readouterr().err
        assert "gcloud auth application-default login" in err


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("epoch=3", "has no such parameter"),
        ("epochs=3", "has no such parameter"),
        ("run_config.training.epochs=three", "training.epochs must be int"),
        ("run_config.training.epochs=0", "--epochs must be at least 1"),
        ("run_config.trainin.epochs=3", "unknown config key 'trainin'"),
        ("run_config.cluster.strategy=horovod", "unknown strategy 'horovod'"),
        ("machines.count=3", "machines has no fields"),
        ("promotion_margin=lots", "expected number double"),
        ("run_config.model.module=/home/me/model.py", "copy it to Cloud Storage"),
    ],
)
def test_bad_parameters_exit_2_before_sending(param, message, capsys, nothing_may_be_sent):
    argv = ["submit", *VERTEX, "--pipeline", "training", "--param", param]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "components.core.launch.credentials.google_credentials", lambda: AnonymousCredentials()
        )
        assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_typed_params_follow_the_compiled_parameter_types(tmp_path):
    spec = {
        "pipelineInfo": {"name": "p"},
        "root": {
            "inputDefinitions": {
                "parameters": {
                    "n": {"parameterType": "NUMBER_INTEGER"},
                    "x": {"parameterType": "NUMBER_DOUBLE"},
                    "flag": {"parameterType": "BOOLEAN"},
                    "names": {"parameterType": "LIST"},
                    "s": {"parameterType": "STRING"},
                }
            }
        },
    }
    raw = {"n": "2", "x": "0.5", "flag": "True", "names": '["a"]', "s": "3"}
    assert submission.typed_params(spec, raw) == {
        "n": 2, "x": 0.5, "flag": True, "names": ["a"], "s": "3",
    }  # fmt: skip
    with pytest.raises(cli.ConfigError):
        submission.typed_params(spec, {"flag": "yes"})
    with pytest.raises(cli.ConfigError):
        submission.typed_params(spec, {"names": '{"a": 1}'})


def test_cloud_config_is_a_typed_parameter_set_field_by_field(tmp_path):
    """The compiled pipelines take the CloudConfig as a dict; a field of it is one --param."""
    from pipelines.compile import compile_pipeline

    path = compile_pipeline("training", "vertex", tmp_path / "t.yaml")
    spec = yaml.safe_load(path.read_text())
    typed = submission.typed_params(
        spec, {"cloud_config.project": "acme-ml", "cloud_config.region": "europe-west4"}
    )
    assert typed["cloud_config"] == {"project": "acme-ml", "region": "europe-west4"}
    with pytest.raises(cli.ConfigError, match="not a CloudConfig"):
        submission.typed_params(spec, {"cloud_config.zone": "mars-1"})


def test_help_lists_submit_and_schedule(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "submit" in out and "schedule" in out
    with pytest.raises(SystemExit):
        cli.main(["schedule", "--help"])
    assert "'0 ' prefixed" in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")


def test_compiled_package_is_removed_after_submitting(vertex_wire, monkeypatch):
    seen = []
    original = submission.compiled

    def spy(sub):
        manager = original(sub)

        class Wrapper:
            def __enter__(self):
                path, spec = manager.__enter__()
                seen.append(path)
                assert (
                    yaml.safe_load(open(path))["pipelineInfo"]["name"]
                    == spec["pipelineInfo"]["name"]
                )
                return path, spec

            def __exit__(self, *exc):
                return manager.__exit__(*exc)

        return Wrapper()

    monkeypatch.setattr(submission, "compiled", spy)
    assert submit_cli.submit(_sub(), credentials=AnonymousCredentials()) == 0
    (path,) = seen
    import os

    assert not os.path.exists(path)
