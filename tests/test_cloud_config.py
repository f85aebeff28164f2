"""CloudConfig validation: impossible combinations are refused before any request."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from components.core.config import ClusterConfig, ConfigError, DataConfig, RunConfig
from components.core.launch import cloud as cloudlib
from components.core.launch.cloud import CloudConfig
from components.core.launch.cloud_checks import validate_cloud

IMAGE = "us-docker.pkg.dev/proj/strategist/strategist-trainer:1"


def make_run(strategy: str = "multi_worker_mirrored", **cluster) -> RunConfig:
    defaults = {
        "one_device": {"workers": 1, "gpus_per_machine": 1},
        "mirrored": {"workers": 1, "gpus_per_machine": 4},
        "multi_worker_mirrored": {"workers": 3},
        "parameter_server": {"workers": 2, "ps": 1},
    }[strategy]
    return RunConfig(
        cluster=ClusterConfig(strategy=strategy, **{**defaults, **cluster}),
        data=DataConfig(shards_dir="gs://bucket/shards/digits"),
        output_dir="/home/me/runs/x",
    )


def make_cloud(**overrides) -> CloudConfig:
    base = {
        "target": "vertex",
        "image": IMAGE,
        "project": "my-project",
        "region": "us-central1",
        "gpu": "t4",
        "base_output_dir": "gs://bucket/runs/x",
    }
    return CloudConfig(**{**base, **overrides})


def test_a_good_config_passes_for_both_targets():
    """Passes, and is judged: the same config one GPU count over the machine's is refused."""
    for cloud in (make_cloud(), make_cloud(target="kubeflow", project=None, region=None)):
        assert validate_cloud(make_run(), cloud) is None, cloud.target
        too_many = dataclasses.replace(cloud, gpus_per_machine=8)  # T4 machines: 1, 2 or 4
        with pytest.raises(ConfigError, match="--gpus-per-machine 1, 2 or 4"):
            validate_cloud(make_run(), too_many)


@pytest.mark.parametrize(
    ("run", "cloud", "says"),
    [
        (make_run("mirrored"), make_cloud(gpus_per_machine=8), "--gpus-per-machine 1, 2 or 4"),
        (
            make_run("mirrored"),
            make_cloud(target="kubeflow", project=None, gpus_per_machine=8),
            "t4 machines take 1, 2, 4",
        ),
        (make_run("one_device"), make_cloud(gpus_per_machine=2), "--gpus-per-machine 1"),
        (make_run(), make_cloud(gpu=None, gpus_per_machine=2), "needs a GPU type"),
        (make_run(), make_cloud(gpu="k40"), "unknown GPU 'k40'"),
        (make_run(), make_cloud(project=None), "--project"),
        (make_run(), make_cloud(region=None), "--region"),
        (make_run(), make_cloud(image=None), "--image"),
        (make_run(), make_cloud(target="aws"), "--target vertex or kubeflow"),
        (make_run("parameter_server"), make_cloud(reduction_server=True), "multi_worker_mirrored"),
        (make_run(), make_cloud(reduction_server=True, gpu=None), "NCCL"),
        (
            make_run(all_reduce="ring"),
            make_cloud(reduction_server=True),
            "Reduction Server works through NCCL, not the ring all-reduce",
        ),
        (make_run(all_reduce="nccl"), make_cloud(gpu=None), "--all-reduce nccl needs GPUs"),
        (
            make_run(),
            make_cloud(target="kubeflow", reduction_server=True),
            "Vertex AI only",
        ),
        (make_run(), make_cloud(reduction_server=True, reduction_server_replicas=0), "at least 1"),
        (
            make_run(),
            make_cloud(reduction_server=True, image=IMAGE + "-cpu"),
            "needs the GPU image",
        ),
        (make_run(), make_cloud(base_output_dir=None), "--output gs://"),
        (make_run(), make_cloud(base_output_dir="/tmp/out"), "--output gs://"),
        (
            dataclasses.replace(make_run(), data=DataConfig(shards_dir="/data/shards")),
            make_cloud(),
            "--shards-dir gs://",
        ),
        (
            dataclasses.replace(make_run(), data=DataConfig()),
            make_cloud(),
            "--shards-dir gs://",
        ),
        (make_run(), make_cloud(timeout_s=0), "--timeout"),
        (make_run(), make_cloud(service_account="trainer"), "not an email"),
        (make_run(), make_cloud(network="default"), "projects/PROJECT_NUMBER"),
        (make_run(), make_cloud(tensorboard="tb"), "tensorboards/ID"),
        (
            make_run(),
            make_cloud(
                tensorboard="projects/p/locations/europe-west4/tensorboards/1",
                service_account="sa@proj.iam.gserviceaccount.com",
            ),
            "job's region",
        ),
        (
            make_run(),
            make_cloud(tensorboard="projects/p/locations/us-central1/tensorboards/1"),
            "--service-account",
        ),
        (make_run(), make_cloud(target="kubeflow", namespace="My_NS"), "--namespace"),
        (make_run(), make_cloud(target="kubeflow", job_name="Big_Job"), "--job-name"),
        (make_run(), make_cloud(target="kubeflow", restart_policy="Sometimes"), "ExitCode"),
        (make_run(), make_cloud(target="kubeflow", clean_pod_policy="Some"), "Running"),
        (make_run(), make_cloud(target="kubeflow", backoff_limit=-1), "--backoff-limit"),
        (
            make_run(),
            make_cloud(target="kubeflow", service_account="sa@p.iam.gserviceaccount.com"),
            "Vertex AI only",
        ),
    ],
)
def test_impossible_combinations_are_refused_with_what_to_do(run, cloud, says):
    with pytest.raises(ConfigError) as err:
        validate_cloud(run, cloud)
    assert says in str(err.value)


@pytest.mark.parametrize(
    ("strategy", "cluster", "says"),
    [
        ("mirrored", {"workers": 1, "ps": 2}, "has no parameter servers"),
        ("mirrored", {"workers": 3}, "runs on one machine"),
        ("parameter_server", {"workers": 2, "ps": 0}, "at least one parameter server"),
    ],
)
def test_run_layouts_the_strategy_cannot_use_are_refused(strategy, cluster, says):
    run = RunConfig(
        cluster=ClusterConfig(strategy=strategy, **cluster),
        data=DataConfig(shards_dir="gs://b/s"),
    )
    with pytest.raises(ConfigError) as err:
        validate_cloud(run, make_cloud())
    assert says in str(err.value)


def test_layouts_follow_the_vertex_pool_order():
    def shape(run, cloud):
        return [(p.role, p.replicas, p.gpus, p.machine_type) for p in cloudlib.layout(run, cloud)]

    assert shape(make_run("one_device"), make_cloud()) == [("chief", 1, 1, "n1-standard-8")]
    assert shape(make_run("mirrored"), make_cloud()) == [("chief", 1, 4, "n1-standard-32")]
    assert shape(make_run(), make_cloud(reduction_server=True, reduction_server_replicas=2)) == [
        ("chief", 1, 1, "n1-standard-8"),
        ("worker", 2, 1, "n1-standard-8"),
        ("reduction_server", 2, 0, "n1-highcpu-16"),
    ]
    assert shape(make_run("parameter_server", workers=3, ps=2), make_cloud(gpu="a100")) == [
        ("chief", 1, 0, "n1-standard-8"),
        ("worker", 3, 1, "a2-highgpu-1g"),
        ("ps", 2, 0, "n1-standard-8"),
    ]
    assert shape(make_run(evaluator=True), make_cloud(gpu=None))[-1] == (
        "evaluator",
        1,
        0,
        "n1-standard-8",
    )


def test_trainer_config_gets_gcsfuse_paths_on_vertex_and_gs_on_kubeflow():
    run = make_run("mirrored")
    vertex_args = cloudlib.trainer_args(run, make_cloud(gpus_per_machine=2))
    assert vertex_args[0] == "--config-json"
    sent = RunConfig.from_json(vertex_args[1])
    assert sent.output_dir == "/gcs/bucket/runs/x"
    assert sent.data.shards_dir == "/gcs/bucket/shards/digits"
    assert sent.cluster.gpus_per_machine == 2  # the GPU count wins under mirrored
    assert sent.backup_dir is None
    kube = RunConfig.from_json(
        cloudlib.trainer_args(run, make_cloud(target="kubeflow", project=None))[1]
    )
    assert kube.output_dir == "gs://bucket/runs/x"
    assert kube.data.shards_dir == "gs://bucket/shards/digits"
    # The sent JSON is RunConfig.to_json()'s content.
    assert json.loads(vertex_args[1]) == json.loads(sent.to_json())


def test_job_names_are_dns_labels():
    import datetime

    same_second = datetime.datetime(2026, 11, 3, 14, 15, 16)
    names = {
        cloudlib.job_name(make_run("parameter_server"), make_cloud(), same_second)
        for _ in range(20)
    }
    assert len(names) == 20  # two submissions in one second get two names
    for name in names:
        assert re.fullmatch(r"strategist-parameter-server-261103-141516-[a-z0-9]{4}", name)
    assert cloudlib.job_name(make_run(), make_cloud(job_name="mine")) == "mine"


# --- CLI glue: `train`'s flags plus add_cloud_arguments, dry runs and credentials ---


def cli(argv: list[str]):
    """Parses argv with the real `strategist train` parser; returns the flags and the run."""
    import argparse

    from pipelines.cli import common
    from pipelines.cli import train as train_cli

    parser = argparse.ArgumentParser(prog="strategist")
    train_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["train", *argv])
    run = common.build_run_config(args, args.strategy, args.output or "runs/cloud")
    return args, run


VERTEX_FLAGS = [
    "--target", "vertex", "--project", "my-project", "--region", "us-central1",
    "--image", IMAGE, "--base-output-dir", "gs://bucket/runs/x",
    "--shards-dir", "gs://bucket/shards/digits",
]  # fmt: skip


def test_vertex_dry_run_prints_the_exact_custom_job(capsys):
    from google.cloud import aiplatform_v1

    from components.core.launch import vertex
    from pipelines.cli.cloud_train import run_cloud_training

    argv = VERTEX_FLAGS + [
        "--strategy", "multi_worker_mirrored", "--workers", "4", "--gpu", "v100",
        "--gpus-per-machine", "2", "--reduction-server", "--spot", "--timeout", "2h",
        "--job-name", "dry", "--dry-run",
    ]  # fmt: skip
    args, run = cli(argv)
    assert run_cloud_training(args, run) == 0
    out, err = capsys.readouterr()
    job = aiplatform_v1.CustomJob.from_json(out, ignore_unknown_fields=False)
    assert job == vertex.build_custom_job(run, cloud_config_of(args))
    counts = [p.replica_count for p in job.job_spec.worker_pool_specs]
    assert counts == [1, 3, 1]
    assert job.job_spec.scheduling.timeout.total_seconds() == 7200
    assert job.job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    assert '"acceleratorType": "NVIDIA_TESLA_V100"' in out  # enum names, not numbers
    assert "nothing was sent" in err


def cloud_config_of(args):
    from pipelines.cli.cloud_train import cloud_config

    return cloud_config(args)


def test_kubeflow_dry_run_prints_the_exact_tfjob_yaml(capsys):
    import yaml

    from components.core.launch import kubeflow
    from pipelines.cli.cloud_train import run_cloud_training

    argv = [
        "--target", "kubeflow", "--image", IMAGE, "--output", "gs://bucket/runs/k",
        "--shards-dir", "gs://bucket/shards/digits", "--strategy", "parameter_server",
        "--workers", "3", "--ps", "2", "--gpu", "t4", "--namespace", "ml", "--job-name", "k",
        "--dry-run",
    ]  # fmt: skip
    args, run = cli(argv)
    assert run_cloud_training(args, run) == 0
    out, err = capsys.readouterr()
    job = yaml.safe_load(out)
    assert job == kubeflow.build_tfjob(run, cloud_config_of(args))
    spec = job["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in spec.items()} == {"Chief": 1, "Worker": 3, "PS": 2}
    sent = RunConfig.from_json(spec["Worker"]["template"]["spec"]["containers"][0]["args"][1])
    assert sent.output_dir == "gs://bucket/runs/k"  # --output gs://... is the output folder
    assert "namespace ml" in err and "nothing was sent" in err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--gpu", "t4", "--gpus-per-machine", "8"], "--gpus-per-machine 1, 2 or 4"),
        (["--strategy", "parameter_server", "--reduction-server", "--gpu", "t4"], "Reduction"),
        (["--strategy", "mirrored", "--ps", "1"], "has no parameter servers"),
    ],
)
def test_dry_run_refuses_impossible_combinations(extra, says, capsys):
    from pipelines.cli.cloud_train import run_cloud_training

    with pytest.raises(ConfigError, match=says):
        args, run = cli(VERTEX_FLAGS + ["--dry-run", *extra])
        run_cloud_training(args, run)
    assert capsys.readouterr().out == ""


def test_timeout_accepts_units_and_refuses_nonsense():
    import argparse

    from pipelines.cli.cloud_train import duration_seconds

    assert [duration_seconds(t) for t in ("90", "90s", "15m", "2h", "1d")] == [
        90, 90, 900, 7200, 86400,
    ]  # fmt: skip
    for bad in ("0", "-5", "two hours", "5w"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration_seconds(bad)


def test_cloud_flags_do_not_clash_with_train_flags():
    args, _ = cli(VERTEX_FLAGS + ["--strategy", "one_device", "--gpu", "t4"])
    assert args.target == "vertex" and args.strategy == "one_device"


def test_missing_google_credentials_stop_before_anything_is_sent(tmp_path, monkeypatch):
    from pipelines.cli.cloud_train import run_cloud_training

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    args, run = cli(VERTEX_FLAGS + ["--gpu", "t4"])
    with pytest.raises(ConfigError, match="gcloud auth application-default login"):
        run_cloud_training(args, run)


def test_missing_kube_config_stops_before_anything_is_sent(tmp_path, monkeypatch):
    from pipelines.cli.cloud_train import run_cloud_training

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    argv = [
        "--target", "kubeflow", "--image", IMAGE, "--base-output-dir", "gs://b/o",
        "--shards-dir", "gs://b/s",
    ]  # fmt: skip
    args, run = cli(argv)
    with pytest.raises(ConfigError, match="get-credentials"):
        run_cloud_training(args, run)


def test_submission_failure_returns_1_with_the_error(capsys):
    from google.cloud import aiplatform_v1

    from pipelines.cli.cloud_train import run_cloud_training

    class Failing:
        def create_custom_job(self, parent, custom_job):
            job = aiplatform_v1.CustomJob(name="projects/p/locations/r/customJobs/1")
            job.state = aiplatform_v1.JobState.JOB_STATE_FAILED
            job.error.message = "Quota exceeded for NVIDIA_TESLA_T4"
            return job

    args, run = cli(VERTEX_FLAGS + ["--gpu", "t4"])
    assert run_cloud_training(args, run, client=Failing()) == 1
    assert "Quota exceeded for NVIDIA_TESLA_T4" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_docs_dry_run_examples_are_the_real_output(target, capsys):
    """docs/cloud.md shows each dry run's command and output: they must still agree."""
    import re
    import shlex
    from pathlib import Path

    from pipelines.cli.cloud_train import run_cloud_training

    doc = (Path(__file__).resolve().parents[1] / "docs" / "cloud.md").read_text()
    blocks = re.findall(r"```console\n\$ (strategist train .*?)\n```", doc, re.DOTALL)
    (block,) = [b for b in blocks if f"--target {target} --dry-run" in b]
    lines = block.split("\n")
    command_lines = [lines[0]]
    while command_lines[-1].endswith("\\"):
        command_lines.append(lines[len(command_lines)])
    shown = "\n".join(lines[len(command_lines) :])
    argv = shlex.split(" ".join(line.rstrip("\\") for line in command_lines))[2:]
    args, run = cli(argv)
    assert run_cloud_training(args, run) == 0
    out, err = capsys.readouterr()
    assert shown == (out + err).rstrip("\n"), f"refresh the {target} dry run in docs/cloud.md"


# --- the real `strategist train` entry point with --target ---


def strategist(argv: list[str]) -> int:
    from pipelines import cli as strategist_cli

    try:
        return strategist_cli.main(argv)
    except SystemExit as exit_:
        return exit_.code


def test_strategist_train_target_vertex_dry_run_prints_the_custom_job(capsys, tmp_path):
    from google.cloud import aiplatform_v1

    argv = [
        "train", "--target", "vertex", "--project", "my-project", "--region", "us-central1",
        "--image", IMAGE, "--output", "gs://bucket/runs/x", "--shards-dir", "gs://bucket/shards",
        "--strategy", "parameter_server", "--workers", "2", "--ps", "1", "--dry-run",
    ]  # fmt: skip
    assert strategist(argv) == 0
    out, err = capsys.readouterr()
    job = aiplatform_v1.CustomJob.from_json(out, ignore_unknown_fields=False)
    assert [p.replica_count for p in job.job_spec.worker_pool_specs] == [1, 2, 1]
    assert job.job_spec.base_output_directory.output_uri_prefix == "gs://bucket/runs/x"
    assert "nothing was sent" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--gpu", "t4"], "--gpu apply to cloud runs: add --target"),
        (["--dry-run"], "--dry-run apply to cloud runs"),
        (["--target", "vertex", "--local", "--image", IMAGE], "--local and --target"),
        (["--target", "kubeflow", "--image", IMAGE, "--output", "/tmp/x"], "--output gs://"),
    ],
)
def test_strategist_train_cloud_flags_misused_exit_2(argv, says, capsys):
    assert strategist(["train", *argv]) == 2
    captured = capsys.readouterr()
    assert says in captured.err
    assert captured.out == ""
