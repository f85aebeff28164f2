"""`train --target vertex|kubeflow --rehearse`: every replica of the exact cloud job, on 127.0.0.1.

The unit tests check each replica's environment against what Vertex AI and
training-operator v1.9 document and do (sources in components/core/launch/rehearsal.py);
the cluster tests run the exact dry-run request's replicas and check learning, the
cluster shape, the evaluator and that no process is left.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from components.core import run_metrics
from components.core.config import ClusterConfig, DataConfig, RunConfig, TrainingConfig
from components.core.launch import build_cloud_job
from components.core.launch.cloud import TRAINER_COMMAND, CloudConfig, trainer_args
from components.core.launch.local_tasks import Task
from components.core.launch.rehearsal import (
    GCS_ROOT_ENV,
    RehearsalCluster,
    launcher_config,
    localize,
)
from components.core.launch.replicas import replicas_of
from pipelines import cli
from tests.conftest import trainer_pids

BUCKET = "gs://rehearsal-bucket"
SHARDS = f"{BUCKET}/shards/digits"
EPOCHS = 2
# A rehearsal must reach Vertex AI's /gcs/ paths only through the storage layer, never
# by creating /gcs on this machine.
GCSFUSE_MOUNT_EXISTED = os.path.exists("/gcs")


def run_and_cloud(target: str, cluster: ClusterConfig, output: str = f"{BUCKET}/runs/x"):
    run = RunConfig(
        data=DataConfig(shards_dir=SHARDS),
        cluster=cluster,
        training=TrainingConfig(epochs=EPOCHS),
        output_dir=output,
    )
    cloud = CloudConfig(
        target=target,
        image="example.com/strategist/trainer:test",
        project="my-project" if target == "vertex" else None,
        region="us-central1" if target == "vertex" else None,
        job_name="rehearsed" if target == "kubeflow" else None,
    )
    return run, cloud


def replicas_for(target: str, cluster: ClusterConfig):
    run, cloud = run_and_cloud(target, cluster)
    job = build_cloud_job(run, cloud)
    return job, replicas_of(job, target), run, cloud


def env_json(replica, name: str) -> dict:
    return json.loads(replica.env[name])


# -- Vertex AI's environment ------------------------------------------------------------

PS_WITH_EVALUATOR = ClusterConfig("parameter_server", 2, 1, evaluator=True)


def test_vertex_replicas_get_cluster_spec_and_tf_config_as_documented():
    job, replicas, run, cloud = replicas_for("vertex", PS_WITH_EVALUATOR)
    assert [(r.pool, r.name) for r in replicas] == [
        ("workerpool0", "chief-0"),
        ("workerpool1", "worker-0"),
        ("workerpool1", "worker-1"),
        ("workerpool2", "ps-0"),
        ("workerpool3", "evaluator-0"),
    ]
    job_spec = json.loads(
        type(job.job_spec).to_json(job.job_spec, preserving_proto_field_name=True)
    )
    for replica in replicas:
        spec = env_json(replica, "CLUSTER_SPEC")
        assert set(spec) == {"cluster", "environment", "task", "job"}
        assert spec["environment"] == "cloud"
        assert spec["task"] == {"type": replica.pool, "index": replica.index, "trial": ""}
        assert list(spec["cluster"]) == [f"workerpool{p}" for p in range(4)]
        assert [len(v) for v in spec["cluster"].values()] == [1, 2, 1, 1]
        assert spec["cluster"]["workerpool1"][1] == "cmle-training-workerpool1-rehearsal-1:2222"
        # `job` is the CustomJobSpec as a dictionary, proto field names.
        assert spec["job"]["worker_pool_specs"][1]["replica_count"] == "2"
        assert spec["job"]["base_output_directory"] == job_spec["base_output_directory"]
        tf_config = env_json(replica, "TF_CONFIG")
        assert set(tf_config) == {"cluster", "environment", "task", "job"}
        assert tf_config["environment"] == "cloud"
        assert tf_config["task"] == {"type": replica.task_type, "index": replica.index}
        assert tf_config["job"] == spec["job"]
        # Pools 0-2 by task type; the evaluator is never in the cluster.
        assert tf_config["cluster"] == {
            "chief": spec["cluster"]["workerpool0"],
            "worker": spec["cluster"]["workerpool1"],
            "ps": spec["cluster"]["workerpool2"],
        }
        assert replica.env["AIP_MODEL_DIR"] == f"{BUCKET}/runs/x/model/"
        assert replica.env["AIP_CHECKPOINT_DIR"] == f"{BUCKET}/runs/x/checkpoints/"
        assert replica.env["AIP_TENSORBOARD_LOG_DIR"] == f"{BUCKET}/runs/x/logs/"
        # The container's own command, args and env, from the request.
        assert replica.command == TRAINER_COMMAND
        assert list(replica.args) == trainer_args(run, cloud)
        assert replica.env[run_metrics.PLATFORM_ENV] == "vertex"


def test_a_single_replica_vertex_job_gets_no_tf_config():
    _, replicas, _, _ = replicas_for("vertex", ClusterConfig("mirrored", gpus_per_machine=2))
    (chief,) = replicas
    assert "TF_CONFIG" not in chief.env  # "not set for single-replica training jobs"
    assert env_json(chief, "CLUSTER_SPEC")["task"]["type"] == "workerpool0"


def test_reduction_server_cannot_be_rehearsed(capsys):
    code = cli.main(
        [
            "train",
            "--target",
            "vertex",
            "--rehearse",
            "--strategy",
            "multi_worker_mirrored",
            "--workers",
            "2",
            "--gpu",
            "a100",
            "--reduction-server",
            "--image",
            "example.com/strategist/trainer:test",
            "--project",
            "my-project",
            "--region",
            "us-central1",
            "--output",
            f"{BUCKET}/runs/x",
            "--shards-dir",
            SHARDS,
        ]
    )
    assert code == 2
    assert "drop --reduction-server to rehearse" in capsys.readouterr().err


# -- training operator v1.9's environment ----------------------------------------------


def test_tfjob_replicas_get_the_operators_tf_config():
    _, replicas, _, _ = replicas_for("kubeflow", PS_WITH_EVALUATOR)
    assert [(r.pool, r.name) for r in replicas] == [
        ("Chief", "chief-0"),
        ("Worker", "worker-0"),
        ("Worker", "worker-1"),
        ("PS", "ps-0"),
        ("Evaluator", "evaluator-0"),
    ]
    host = "rehearsed-{}-{}.default.svc:2222"
    cluster = (
        f'{{"chief":["{host.format("chief", 0)}"],"evaluator":["{host.format("evaluator", 0)}"],'
        f'"ps":["{host.format("ps", 0)}"],'
        f'"worker":["{host.format("worker", 0)}","{host.format("worker", 1)}"]}}'
    )
    # Go's json.Marshal of TFConfig{Cluster, Task, Environment}: no spaces, map keys sorted,
    # the evaluator inside the cluster.
    assert replicas[3].env["TF_CONFIG"] == (
        f'{{"cluster":{cluster},"task":{{"type":"ps","index":0}},"environment":"cloud"}}'
    )
    assert "CLUSTER_SPEC" not in replicas[3].env
    assert all(r.env[run_metrics.PLATFORM_ENV] == "kubeflow" for r in replicas)


def test_a_single_replica_tfjob_gets_no_tf_config():
    _, replicas, _, _ = replicas_for("kubeflow", ClusterConfig("mirrored", gpus_per_machine=2))
    (chief,) = replicas
    assert "TF_CONFIG" not in chief.env  # isDistributed: one replica in all


# -- what the rehearsal changes ------------------------------------------------------------


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_only_the_addresses_move_to_127_0_0_1(target):
    _, replicas, _, _ = replicas_for(target, PS_WITH_EVALUATOR)
    localized, mapping = localize(replicas)
    assert len(set(mapping.values())) == len(mapping) == 5
    assert all(local.startswith("127.0.0.1:") for local in mapping.values())
    for before, after in zip(replicas, localized, strict=True):
        assert dataclasses.replace(after, env=before.env) == before
        for name in ("TF_CONFIG", "CLUSTER_SPEC"):
            if name not in before.env:
                continue
            old, new = env_json(before, name), env_json(after, name)
            assert {k: v for k, v in new.items() if k != "cluster"} == {
                k: v for k, v in old.items() if k != "cluster"
            }
            assert new["cluster"] == {k: [mapping[a] for a in v] for k, v in old["cluster"].items()}


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_the_rehearsal_claims_no_cloud_machine(target, tmp_path):
    run, cloud = run_and_cloud(target, ClusterConfig("multi_worker_mirrored", 2))
    cloud = dataclasses.replace(cloud, gpu="t4")
    replicas = replicas_of(build_cloud_job(run, cloud), target)
    assert replicas[0].env[run_metrics.ACCELERATOR_ENV] == "t4"  # the request names it
    config = launcher_config(replicas, str(tmp_path))
    assert config.output_dir == str(tmp_path / "rehearsal-bucket/runs/x")
    cluster = RehearsalCluster(replicas, target, config, str(tmp_path))
    cluster.plan()
    env = cluster.environment(cluster._started_replicas["chief-0"])
    assert env[run_metrics.PLATFORM_ENV] == f"rehearsal of {target}"
    for name in (
        run_metrics.MACHINE_TYPE_ENV,
        run_metrics.ACCELERATOR_ENV,
        run_metrics.ACCELERATORS_ENV,
    ):
        assert name not in env
    assert env[GCS_ROOT_ENV] == str(tmp_path)
    # The container's command and args, with `python` this interpreter, in the source root.
    command, _, cwd = cluster.process(Task("chief", 0, None))
    assert command == [sys.executable, *TRAINER_COMMAND[1:], *trainer_args(run, cloud)]
    assert (Path(cwd) / "components" / "core" / "trainer.py").is_file()
    assert json.loads(env["TF_CONFIG"])["cluster"]["chief"][0].startswith("127.0.0.1:")
    if target == "vertex":  # as Vertex AI sets it; the storage layer maps it
        assert env["AIP_TENSORBOARD_LOG_DIR"] == f"{BUCKET}/runs/x/logs/"


# -- refused before anything starts ------------------------------------------------------


def cloud_argv(target: str, *flags: str, output: str = f"{BUCKET}/runs/x") -> list[str]:
    where = ["--project", "my-project", "--region", "us-central1"] if target == "vertex" else []
    return [
        "train",
        "--target",
        target,
        "--image",
        "example.com/strategist/trainer:test",
        *where,
        "--output",
        output,
        "--shards-dir",
        SHARDS,
        *flags,
    ]


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            [
                "--rehearse",
                "--strategy",
                "multi_worker_mirrored",
                "--workers",
                "2",
                "--gpus-per-machine",
                "2",
            ],
            "one device per worker",
        ),
        (
            [
                "--rehearse",
                "--strategy",
                "parameter_server",
                "--workers",
                "2",
                "--gpus-per-machine",
                "2",
            ],
            "one device per worker",
        ),
        (["--rehearse", "--dry-run"], "pass one of them"),
        (["--rehearse", "--precision", "mixed_float16", "--gpu", "t4"], "mixed_float16"),
    ],
    ids=["mwms-2-devices", "ps-2-devices", "with-dry-run", "float16-without-gpus"],
)
def test_shapes_a_local_run_refuses_are_refused_before_anything_starts(
    target, flags, message, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(GCS_ROOT_ENV, str(tmp_path))
    assert cli.main(cloud_argv(target, *flags)) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # no shards prepared, no output
    assert not trainer_pids(str(tmp_path))


def test_rehearse_needs_a_target(capsys):
    assert cli.main(["train", "--rehearse"]) == 2
    assert "--rehearse apply to cloud runs" in capsys.readouterr().err


# -- real rehearsals -----------------------------------------------------------------------


def chief_config(target: str, request: str) -> dict:
    """The RunConfig in the chief's container args of a printed dry-run request."""
    if target == "vertex":
        pool = json.loads(request)["jobSpec"]["workerPoolSpecs"][0]
        args = pool["containerSpec"]["args"]
    else:
        import yaml

        chief = yaml.safe_load(request)["spec"]["tfReplicaSpecs"]["Chief"]
        args = chief["template"]["spec"]["containers"][0]["args"]
    return json.loads(args[1])


@pytest.fixture(scope="module")
def gcs_root(tmp_path_factory) -> Path:
    """One local bucket folder: the first rehearsal prepares the shards, the others reuse them."""
    return tmp_path_factory.mktemp("gcs")


MODULE = Path(__file__).resolve().parents[1] / "examples" / "digits_cnn_module.py"
CASES = {
    "vertex-mirrored-1x2": ("vertex", ["--strategy", "mirrored", "--gpus-per-machine", "2"]),
    # A user's model module rides along on one case per target: staged as submission stages it.
    "vertex-mwms-2-evaluator-module": (
        "vertex",
        ["--strategy", "multi_worker_mirrored", "--workers", "2", "--evaluator"],
    ),
    "vertex-ps-2+1": ("vertex", ["--strategy", "parameter_server", "--workers", "2", "--ps", "1"]),
    "kubeflow-mirrored-1x2": ("kubeflow", ["--strategy", "mirrored", "--gpus-per-machine", "2"]),
    "kubeflow-mwms-2-module": (
        "kubeflow",
        ["--strategy", "multi_worker_mirrored", "--workers", "2"],
    ),
    "kubeflow-ps-2+1-evaluator": (
        "kubeflow",
        ["--strategy", "parameter_server", "--workers", "2", "--ps", "1", "--evaluator"],
    ),
}
# What each case must run, worked out by hand (32 examples per replica, the default):
# (num_replicas, replicas_in_sync, global_batch_size, processes).
# mirrored 1 machine x 2 devices: 2 replicas in sync, 64 a step; one process.
# multi_worker_mirrored 2 workers x 1 device: the same; chief + worker (+ evaluator).
# parameter_server 2 workers + 1 ps: 2 replicas, but a step runs on one worker's one device
# (in sync: 1) and the global batch is both workers' steps (64); chief + 2 workers + ps
# (+ evaluator).
EXPECTED = {
    "vertex-mirrored-1x2": (2, 2, 64, 1),
    "vertex-mwms-2-evaluator-module": (2, 2, 64, 3),
    "vertex-ps-2+1": (2, 1, 64, 4),
    "kubeflow-mirrored-1x2": (2, 2, 64, 1),
    "kubeflow-mwms-2-module": (2, 2, 64, 2),
    "kubeflow-ps-2+1-evaluator": (2, 1, 64, 5),
}


# `make test-heavy`; each is covered in `make test`: a rehearsed Vertex AI parameter-server
# job learns in test_adapt_once_cloud (its vertex case); multi-worker mirrored is rehearsed as
# vertex-mwms-2-evaluator-module, which stages the module; a TFJob's replicas take a staged
# gs:// module in test_adapt_once_cloud's storage-server test.
HEAVY = {"vertex-ps-2+1", "kubeflow-mwms-2-module"}


@pytest.mark.cluster
@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.heavy) if c in HEAVY else c for c in CASES]
)
def test_the_dry_run_request_rehearsed_learns(case, gcs_root, monkeypatch, capsys):
    target, flags = CASES[case]
    module = case.endswith("-module")
    epochs = EPOCHS + 1 if module else EPOCHS  # the CNN needs one more epoch than the MLP
    if module:
        flags = [*flags, "--model-module", str(MODULE)]
    monkeypatch.setenv(GCS_ROOT_ENV, str(gcs_root))
    output = f"{BUCKET}/runs/{case}"
    argv = cloud_argv(target, *flags, "--epochs", str(epochs), output=output)
    assert cli.main([*argv, "--dry-run"]) == 0
    request = capsys.readouterr().out
    code = cli.main([*argv, "--rehearse"])
    out, err = capsys.readouterr()
    assert code == 0, f"{out[-3000:]}\n{err[-3000:]}"
    local = gcs_root / "rehearsal-bucket" / "runs" / case
    assert f"outputs in {local}" in out
    metrics = json.loads((local / "metrics.json").read_text())
    assert metrics["eval_accuracy"] >= 0.85
    cluster = RunConfig.from_dict(metrics["run_config"]).cluster
    replicas, in_sync, global_batch, processes = EXPECTED[case]
    assert metrics["num_replicas"] == replicas
    assert metrics["replicas_in_sync"] == in_sync
    assert metrics["global_batch_size"] == global_batch
    assert metrics["hardware"]["platform"] == f"rehearsal of {target}"
    assert metrics["hardware"]["machine_type"] is None
    # The trainer ran the request's own config, paths and all (gs:// or Vertex AI's /gcs/).
    assert metrics["run_config"] == chief_config(target, request)
    started = [line for line in out.splitlines() if line.startswith("[launcher] started")]
    assert len(started) == 1 and started[0].startswith(
        f"[launcher] started {processes} process(es) "
    ), started
    if cluster.evaluator:
        evaluations = metrics["sidecar_evaluations"]
        assert [e["epoch"] for e in evaluations][-1] == epochs
        assert evaluations[-1]["accuracy"] >= 0.85
    assert (gcs_root / "rehearsal-bucket" / "shards" / "digits" / "manifest.json").exists()
    assert os.path.exists("/gcs") == GCSFUSE_MOUNT_EXISTED
    if module:  # every replica was told the staged copy (Vertex AI: its /gcs/ mount)
        assert (local / "model_module" / MODULE.name).read_bytes() == MODULE.read_bytes()
        read_from = metrics["run_config"]["model"]["module"]
        assert read_from.endswith(f"rehearsal-bucket/runs/{case}/model_module/{MODULE.name}")
    assert not trainer_pids(f"rehearsal-bucket/runs/{case}")


# -- the pipeline's train step -------------------------------------------------------------


def test_the_train_step_refuses_to_rehearse_the_local_backend(tmp_path):
    from components.core.config import ConfigError
    from components.core.launch import train_to_artifacts

    with pytest.raises(ConfigError, match="use backend vertex or kubeflow"):
        train_to_artifacts(
            run_config={},
            cluster={"strategy": "mirrored"},
            shards_dir=str(tmp_path),
            model_dir=str(tmp_path / "model"),
            metrics_path=str(tmp_path / "metrics.json"),
            backend="local",
            rehearse=True,
        )


def test_the_compiled_pipelines_pass_the_switch_to_the_train_step(tmp_path):
    from kfp import compiler

    from pipelines.comparison import build_comparison_pipeline
    from pipelines.training import build_training_pipeline

    for build in (build_comparison_pipeline, build_training_pipeline):
        path = tmp_path / f"{build.__name__}.json"
        compiler.Compiler().compile(build(), str(path))
        spec = json.loads(path.read_text())
        root = spec["root"]["inputDefinitions"]["parameters"]["rehearse"]
        assert root["defaultValue"] is False and root["parameterType"] == "BOOLEAN"
        train = spec["components"]["comp-train"]["inputDefinitions"]["parameters"]["rehearse"]
        assert train["defaultValue"] is False
        assert '"rehearse"' in json.dumps(spec["root"]["dag"])  # wired from the root


@pytest.mark.heavy  # `make test-heavy`: a whole comparison; the pilot tests cover the path
@pytest.mark.cluster
@pytest.mark.slow
def test_a_comparison_pipeline_rehearses_a_vertex_comparison_under_kfp_local(tmp_path, monkeypatch):
    import io

    from pipelines.comparison import build_comparison_pipeline
    from pipelines.local_run import run_locally

    monkeypatch.setenv(GCS_ROOT_ENV, str(tmp_path / "gcs"))
    (tmp_path / "tfds").mkdir()
    run_config = RunConfig(
        data=DataConfig(data_dir=str(tmp_path / "tfds"), num_shards=2),
        training=TrainingConfig(epochs=EPOCHS),
    ).to_pipeline_parameter()
    cloud = {
        "image": "example.com/strategist/trainer:test",
        "project": "my-project",
        "region": "us-central1",
        "base_output_dir": f"{BUCKET}/runs/pipeline",
        "shards_dir": SHARDS,
    }
    run_locally(
        build_comparison_pipeline(),
        {
            "run_config": run_config,
            "clusters": [dataclasses.asdict(ClusterConfig("mirrored", gpus_per_machine=2))],
            "backend": "vertex",
            "cloud_config": cloud,
            "rehearse": True,
        },
        str(tmp_path / "root"),
        log_path=str(tmp_path / "pipeline.log"),
        console=io.StringIO(),
    )
    log = (tmp_path / "pipeline.log").read_text()
    assert "rehearsal of vertex: 1 replica(s) (chief-0)" in log
    metrics = json.loads(next((tmp_path / "root").rglob("metrics_json")).read_text())
    assert metrics["hardware"]["platform"] == "rehearsal of vertex"
    assert metrics["eval_accuracy"] >= 0.85 and metrics["num_replicas"] == 2
    local = tmp_path / "gcs" / "rehearsal-bucket"
    assert (local / "runs" / "pipeline" / "metrics.json").exists()
    assert (local / "shards" / "digits" / "manifest.json").exists()  # prepared there
    compared = [p for p in (tmp_path / "root").rglob("comparison") if p.is_file()]
    report = json.loads(compared[0].read_text())
    assert [r["strategy"] for r in report["results"]] == ["mirrored"]
    assert not trainer_pids("rehearsal-bucket/runs/pipeline")


def test_readers_take_a_rehearsal_for_a_run_on_this_machine():
    """A report prices and describes a rehearsal as the local CPU run it was."""
    from components.core.comparison.measured_on import is_cpu_rehearsal
    from components.core.comparison.pricing import estimate_cost, load_prices

    hardware = run_metrics.Hardware(platform="rehearsal of kubeflow", processes=4)
    assert hardware.is_local and is_cpu_rehearsal(hardware)
    assert not run_metrics.Hardware(platform="kubeflow").is_local
    record = {
        "strategy": "parameter_server",
        "workers": 2,
        "ps": 1,
        "wall_seconds": 60.0,
        "hardware": dataclasses.asdict(hardware),
    }
    assert (
        "local rehearsal: one machine per process" in estimate_cost(record, load_prices()).priced_as
    )
