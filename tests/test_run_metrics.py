"""RunMetrics: the one record of a run, its versions, and the hardware it states."""

from __future__ import annotations

import json

import pytest

from components.core import run_metrics
from components.core.comparison import build_report, estimate_cost, load_prices
from components.core.config import ClusterConfig, ConfigError
from components.core.launch import cloud as cloudlib
from components.core.model_profile import profile_model
from components.core.run_metrics import Hardware, RunMetrics
from components.core.selection import Topology, load_history, recommend
from tests.selection_helpers import RESNET101
from tests.test_cloud_config import make_cloud, make_run


def a_record(**overrides) -> RunMetrics:
    values = dict(
        strategy="multi_worker_mirrored",
        num_replicas=4,
        examples_per_second=5000.0,
        eval_accuracy=0.93,
        model="resnet101",
        dataset="digits",
        workers=2,
        epoch_seconds=[2.0, 1.0],
        wall_seconds=3.0,
        history={"loss": [0.5, 0.2], "accuracy": [0.8, 0.9]},
        hardware=Hardware(platform="local", processes=2, cpu_model="Test CPU", cpu_cores=2),
    )
    return RunMetrics(**{**values, **overrides})


def test_round_trip_through_json_is_exact():
    record = a_record(phase_seconds={"startup": 1.5, "fit": 3.2}, failures=[{"task": "w"}])
    text = json.dumps(record.to_dict())
    assert RunMetrics.from_json(text) == record
    assert json.loads(text)["schema_version"] == run_metrics.SCHEMA_VERSION


def test_a_version_1_record_is_read_with_its_hardware_marked_assumed():
    old = a_record().to_dict()
    del old["schema_version"]
    old["hardware"] = {"platform": "local", "machines": 1, "processes": 2, "gpu": None}
    record = RunMetrics.from_dict(old)
    assert record.hardware.detected is False and record.hardware.platform == "local"
    assert record.schema_version == run_metrics.SCHEMA_VERSION
    assert record.eval_accuracy == 0.93


def test_a_newer_version_is_refused_with_what_to_do():
    newer = {**a_record().to_dict(), "schema_version": run_metrics.SCHEMA_VERSION + 1}
    with pytest.raises(ConfigError, match="newer than this Strategist reads.*upgrade"):
        RunMetrics.from_dict(newer, "runs/x/metrics.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"eval_accuracy": None}, "missing 'eval_accuracy'"),
        ({"num_replicas": "two"}, "'num_replicas' must be a int"),
        ({"num_replicas": 0}, "'num_replicas' must be a whole number of at least 1"),
        ({"examples_per_second": -1.0}, "'examples_per_second' must be a finite number"),
        ({"examples_per_second": float("nan")}, "'examples_per_second' must be a finite number"),
        ({"examples_per_second": float("inf")}, "'examples_per_second' must be a finite number"),
        ({"workers": 1.5}, "'workers' must be a whole number of at least 1, got 1.5"),
        ({"ps": -1}, "'ps' must be a whole number of at least 0"),
        ({"gpus_per_machine": True}, "'gpus_per_machine' must be a whole number"),
        ({"per_replica_batch_size": "32"}, "'per_replica_batch_size' must be a whole number"),
        ({"hardware": {"machines": "two"}}, "'hardware.machines' must be a whole number"),
        ({"hardware": {"gpus_per_machine": -8}}, "'hardware.gpus_per_machine' must be a whole"),
        ({"precision": "fp16"}, "unknown 'precision' 'fp16'.*float32, mixed_float16"),
    ],
)
def test_a_broken_record_is_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        RunMetrics.from_dict({**a_record().to_dict(), **change})


def test_a_record_stating_fp32_reads_as_the_float32_policy():
    record = RunMetrics.from_dict({**a_record().to_dict(), "precision": "fp32"})
    assert record.precision == "float32"


def test_read_refuses_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        run_metrics.read(str(path))
    run_metrics.write(str(path), a_record())
    assert run_metrics.read(str(path)) == a_record()


def test_local_hardware_is_this_machine(monkeypatch):
    for name in (run_metrics.PLATFORM_ENV, run_metrics.ACCELERATOR_ENV):
        monkeypatch.delenv(name, raising=False)
    hardware = run_metrics.detect_hardware(ClusterConfig("mirrored", gpus_per_machine=2), [])
    assert hardware.platform == "local" and hardware.detected
    with open("/proc/cpuinfo") as handle:
        assert hardware.cpu_model and hardware.cpu_model in handle.read()
    assert hardware.cpu_cores >= 1 and hardware.memory_gb > 0
    assert hardware.gpu is None and hardware.gpus_per_machine == 0
    assert hardware.logical_devices_per_machine == 2  # CPU stand-ins, said as such
    assert "no GPU, 2 logical CPU devices" in hardware.describe()


def vertex_record(monkeypatch, run, cloud) -> RunMetrics:
    """The record a chief of this Vertex AI job writes: the job's real environment."""
    for name, value in cloudlib.trainer_env(run, cloud).items():
        monkeypatch.setenv(name, value)
    hardware = run_metrics.detect_hardware(run.cluster, gpus_seen=[])
    return a_record(
        strategy=run.cluster.strategy,
        num_replicas=run.cluster.num_replicas,
        workers=run.cluster.workers,
        hardware=hardware,
    )


def test_a_cloud_record_states_the_jobs_machines(monkeypatch):
    run = make_run("multi_worker_mirrored", workers=4, gpus_per_machine=8)
    record = vertex_record(monkeypatch, run, make_cloud(gpu="v100"))
    hardware = record.hardware
    assert hardware.platform == "vertex"
    assert (hardware.gpu, hardware.gpus_per_machine, hardware.machines) == ("v100", 8, 4)
    assert hardware.machine_type == "n1-standard-64"
    cost = estimate_cost(record.to_dict(), load_prices())
    assert cost.priced_as.startswith("4 × (n1-standard-64 + 8 × v100)"), cost


def test_select_history_matches_records_strategist_wrote(monkeypatch, tmp_path):
    """A cloud comparison's own comparison.json is evidence for the same hardware."""
    records = []
    for strategy, ps, examples_per_second in (
        ("parameter_server", 4, 6000.0),
        ("multi_worker_mirrored", 0, 3000.0),
    ):
        run = make_run(strategy, workers=4, ps=ps, gpus_per_machine=8)
        record = vertex_record(monkeypatch, run, make_cloud(gpu="v100"))
        # the trainer states the batch it ran (select's default, 64 per replica)
        records.append({**record.to_dict(), "examples_per_second": examples_per_second,
                        "per_replica_batch_size": 64})  # fmt: skip
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(build_report(records)))
    topology = Topology(4, 8, "v100", network_gbps=100)
    assert recommend(topology, RESNET101).strategy == "multi_worker_mirrored"  # predicted
    rec = recommend(topology, RESNET101, history=load_history([path]))
    assert any(reason.startswith("Measured: parameter_server") for reason in rec.reasons)
    assert rec.strategy == "parameter_server"  # the measurement outranks the prediction
    assert rec.to_dict()["measured"]["examples_per_second"] == 6000.0


def test_a_local_cpu_run_matches_no_gpu_topology(tmp_path):
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(build_report([a_record().to_dict()])))
    topology = Topology(1, 2, "t4")
    rec = recommend(topology, profile_model("mlp"), history=load_history([path]))
    assert "None of the 1 history records matches" in " ".join(rec.reasons)


def test_a_local_cpu_run_is_priced_as_a_cpu_rehearsal():
    cost = estimate_cost(a_record().to_dict(), load_prices())
    assert "local rehearsal" in cost.priced_as and "×" in cost.priced_as
    assert "t4" not in cost.priced_as and "gpu" not in cost.priced_as.lower()
