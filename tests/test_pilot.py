"""A pilot (`compare --max-steps N`, the comparison pipeline's `max_steps`): each strategy
trains N steps after a warm-up, and its steady throughput excludes the warm-up."""

from __future__ import annotations

import json
import statistics

import pytest

from components.core.config import ConfigError
from pipelines.cli import main

STRATEGIES = ("mirrored", "multi_worker_mirrored", "parameter_server")


@pytest.mark.parametrize("steps", ["7", "-5"])
def test_a_step_count_no_window_plan_takes_exits_2_before_anything_starts(steps, tmp_path, capsys):
    out = tmp_path / "out"
    try:
        code = main(["compare", "--max-steps", steps, "--output", str(out)])
    except SystemExit as stop:  # argparse refuses a negative count itself
        code = stop.code
    assert code == 2
    assert not out.exists()  # nothing was claimed or started
    err = capsys.readouterr().err
    assert "--max-steps" in err and "Traceback" not in err


def test_submit_refuses_a_pipeline_max_steps_the_trainer_would_refuse():
    from pipelines.submission import _validate_run

    with pytest.raises(ConfigError, match="multiple of 5"):
        _validate_run({}, {"max_steps": 12})


@pytest.mark.cluster
def test_a_pilot_through_kfp_local_stops_each_strategy_at_n_steps(tmp_path, capsys):
    """Mirrored, multi-worker and parameter-server training each stop at 10 steps after 2 of
    warm-up; the verdict's scalars exist; `select --history` reads the records."""
    from pipelines.cli import build_parser
    from pipelines.cli.compare import pipeline_arguments
    from pipelines.comparison import build_comparison_pipeline
    from pipelines.local_run import run_locally

    tfds = tmp_path / "tfds"
    tfds.mkdir()
    args = build_parser().parse_args(
        ["compare", "--strategies", ",".join(STRATEGIES), "--max-steps", "10",
         "--workers", "2", "--ps", "1", "--num-shards", "2", "--seed", "7",
         "--data-dir", str(tfds)]
    )  # fmt: skip
    arguments = pipeline_arguments(args)
    assert arguments["max_steps"] == 10  # the pipeline's parameter, not folded away
    result, _ = run_locally(
        build_comparison_pipeline(), arguments, str(tmp_path / "root"), log_path=None
    )
    with open(result.outputs["comparison"].path) as handle:
        report = json.load(handle)
    runs = {r["strategy"]: r for r in report["results"]}
    assert set(runs) == set(STRATEGIES)
    for name, run in runs.items():
        # 44 steps make one epoch of digits here: the pilot stopped far short of it.
        assert (run["max_steps"], run["warmup_steps"], run["steps_per_epoch"]) == (10, 2, 2), name
        assert run["optimizer_steps"] == 12, name  # warm-up + N: the stop reached fit
        assert run["epochs"] == 6 and len(run["epoch_examples_per_second"]) == 6, name
        steady = run["epoch_examples_per_second"][1:]  # the warm-up window is left out
        assert run["examples_per_second"] == pytest.approx(statistics.median(steady)), name
    assert "judges speed alone" in report["winner_reason"]
    winner = result.outputs["winner"]
    assert winner == (report["winner"] or "")
    assert result.outputs["speedup_over_runner_up"] >= 1.0
    # The records are what `select --history` reads: mirrored on 1 machine x 2 CPU devices.
    comparison = tmp_path / "comparison.json"
    comparison.write_text(json.dumps(report))
    capsys.readouterr()
    argv = ["select", "--gpu", "cpu", "--machines", "1", "--gpus-per-machine", "2",
            "--model", "mlp", "--batch-size", "32", "--json",
            "--history", str(comparison)]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    measured = doc["measured"] or next(
        a["measured"] for a in doc["alternatives"] if a["strategy"] == "mirrored"
    )
    assert measured["examples_per_second"] == pytest.approx(
        runs["mirrored"]["examples_per_second"], rel=1e-4
    )


def test_the_dry_run_of_a_cloud_comparison_prices_its_pilot(monkeypatch, capsys):
    """machines x minutes x price, per strategy, from the price table; nothing is sent."""
    from components.core.launch import credentials
    from components.core.prices import load_prices
    from pipelines.pilot_cost import STARTUP_MINUTES

    def no_credentials():
        raise AssertionError("a dry run asked for credentials")

    monkeypatch.setattr(credentials, "google_credentials", no_credentials)
    job = {
        "gpu": "t4",
        "project": "my-proj",
        "region": "us-central1",
        "base_output_dir": "gs://b/r",
    }
    argv = ["submit", "--pipeline", "comparison", "--target", "vertex", "--project", "my-proj",
            "--region", "us-central1", "--pipeline-root", "gs://b/root", "--dry-run",
            "--param", f"cloud_config={json.dumps(job)}"]  # fmt: skip
    assert main([*argv, "--param", "max_steps=500"]) == 0
    out = capsys.readouterr().out
    assert "nothing was sent" in out
    lines = {line.split(":")[0].strip(): line for line in out.splitlines() if " min x " in line}
    assert set(lines) == set(STRATEGIES)  # the default comparison, one job each
    prices = load_prices()
    t4_machine = prices.machine_price("n1-standard-8") + prices.accelerator_price("t4")
    hourly = {"mirrored": t4_machine, "multi_worker_mirrored": 2 * t4_machine}
    hourly["parameter_server"] = 2 * t4_machine + 2 * prices.machine_price("n1-standard-8")
    for name, line in lines.items():
        machines = int(line.split(": ", 1)[1].split()[0])
        assert machines == {"mirrored": 1, "multi_worker_mirrored": 2}.get(name, 4)
        minutes = float(line.split(" min x ")[0].rsplit(" x ", 1)[1])
        assert minutes >= STARTUP_MINUTES
        usd = float(line.rsplit("= ", 1)[1].split()[0])
        assert usd == pytest.approx(hourly[name] * minutes / 60, abs=6e-4), line
    assert main([*argv, "--param", "max_steps=7"]) == 2  # refused before anything is printed
    assert "multiple of 5" in capsys.readouterr().err


@pytest.mark.cluster
@pytest.mark.slow
def test_a_rehearsed_vertex_comparison_pilot_stops_its_cloud_job_at_n_steps(tmp_path, monkeypatch):
    """The pipeline's max_steps reaches every replica of the CustomJob the train step builds."""
    import dataclasses
    import io

    from components.core.config import ClusterConfig, DataConfig, RunConfig
    from components.core.launch.rehearsal import GCS_ROOT_ENV
    from pipelines.comparison import build_comparison_pipeline
    from pipelines.local_run import run_locally

    bucket = "gs://pilot-bucket"
    monkeypatch.setenv(GCS_ROOT_ENV, str(tmp_path / "gcs"))
    (tmp_path / "tfds").mkdir()
    run_config = RunConfig(
        data=DataConfig(data_dir=str(tmp_path / "tfds"), num_shards=2)
    ).to_pipeline_parameter()
    run_config.pop("cluster")
    cloud = {
        "image": "us-docker.pkg.dev/p/strategist/trainer:1.0",
        "project": "my-proj",
        "region": "us-central1",
        "base_output_dir": f"{bucket}/runs/pipeline",
        "shards_dir": f"{bucket}/shards/digits",
    }
    result, _ = run_locally(
        build_comparison_pipeline(),
        {
            "run_config": run_config,
            "clusters": [dataclasses.asdict(ClusterConfig("multi_worker_mirrored", workers=2))],
            "backend": "vertex",
            "cloud_config": cloud,
            "rehearse": True,
            "max_steps": 5,
        },
        str(tmp_path / "root"),
        log_path=str(tmp_path / "pipeline.log"),
        console=io.StringIO(),
    )
    assert "rehearsal of vertex: 2 replica(s)" in (tmp_path / "pipeline.log").read_text()
    with open(result.outputs["comparison"].path) as handle:
        (run,) = json.load(handle)["results"]
    assert run["hardware"]["platform"] == "rehearsal of vertex"
    assert (run["max_steps"], run["warmup_steps"], run["optimizer_steps"]) == (5, 1, 6)
    assert result.outputs["winner"] == "multi_worker_mirrored"  # the only one compared
