"""The comparison's price on Spot: the table's Spot prices and the work expected
preemptions throw away, from each run's checkpoint interval and measured step time
(`compare --preemptible --preemptions-per-machine-hour --prices`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from components.core.checkpoint_interval import (
    PREEMPTIONS_PER_MACHINE_HOUR,
    RESTART_S,
    CheckpointInterval,
    preemption_loss_seconds,
)
from components.core.comparison import (
    DEFAULT_PRICES_PATH,
    Capacity,
    build_report,
    estimate_cost,
    load_prices,
    summary_markdown,
    summary_table,
)
from components.core.run_metrics import RunMetrics
from pipelines.cli import build_parser, main
from tests.test_schedule_submit import VERTEX, nothing_may_be_sent  # noqa: F401  (fixture)

# n1-standard-4's Spot price in us-central1 from the Cloud Billing Catalog (the
# compilation in github.com/Cyclenerd/google-cloud-pricing-cost-calculator, generated
# 2026-07-30); the bundled table gives its on-demand 0.19.
N1_STANDARD_4_SPOT = 0.06701
EPOCH_S = 1800.0
STEPS = 1000
EPOCHS = 5
BATCH = 32


def spot_table(tmp_path: Path, machine_types: dict | None = None) -> Path:
    """A copy of the bundled table with Spot prices added."""
    raw = json.loads(DEFAULT_PRICES_PATH.read_text())
    for name, usd in (machine_types or {"n1-standard-4": N1_STANDARD_4_SPOT}).items():
        raw["machine_types"][name]["spot_usd_per_hour"] = usd
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(raw))
    return path


def long_run(strategy: str = "mirrored", checkpoint_every: str = "epoch", **extra) -> dict:
    """A record of 5 epochs of 30 min, 1,000 steps each (1.8 s a step), on one local process."""
    record = {
        "strategy": strategy,
        "num_replicas": 1,
        "examples_per_second": STEPS * BATCH / EPOCH_S,
        "eval_accuracy": 0.9,
        "workers": 1,
        "ps": 0,
        "steps_per_epoch": STEPS,
        "examples_per_epoch": STEPS * BATCH,
        "epoch_seconds": [EPOCH_S] * EPOCHS,
        "wall_seconds": EPOCH_S * EPOCHS,
        "history": {"accuracy": [0.5, 0.7, 0.8, 0.9, 0.95]},
        "checkpoint_every": checkpoint_every,
        "hardware": {"platform": "local", "machines": 1, "processes": 1},
    }
    return {**record, **extra}


def expected_spot_usd(loss_s: float, rate: float, machines: int = 1) -> float:
    """Spot price x the time in epochs stretched by the hourly share preemptions take."""
    share = machines * rate * loss_s / 3600
    wall = EPOCH_S * EPOCHS
    return N1_STANDARD_4_SPOT * wall / (1 - share) / 3600


def test_on_demand_is_the_list_price_of_the_time_in_epochs(tmp_path):
    cost = estimate_cost(long_run(), load_prices(spot_table(tmp_path)))
    assert cost.priced_on == "on-demand" and cost.preemption is None
    assert cost.usd == pytest.approx(0.19 * EPOCH_S * EPOCHS / 3600)


@pytest.mark.parametrize(
    ("interval", "redone_s"),
    [("epoch", EPOCH_S / 2), ("20", 20 * EPOCH_S / STEPS / 2)],
)
def test_spot_charges_the_restart_and_half_the_checkpoint_interval(tmp_path, interval, redone_s):
    """Each preemption costs RESTART_S and half the interval, timed by the measured step
    time (1.8 s): 900 s a preemption per epoch, 18 s every 20 steps."""
    prices = load_prices(spot_table(tmp_path))
    for rate in (PREEMPTIONS_PER_MACHINE_HOUR, 0.5):
        cost = estimate_cost(long_run(checkpoint_every=interval), prices, Capacity(True, rate))
        assert cost.priced_on == "spot"
        assert cost.usd_per_hour == pytest.approx(N1_STANDARD_4_SPOT)
        p = cost.preemption
        assert p["loss_seconds"] == pytest.approx(RESTART_S + redone_s)
        assert p["redone_seconds"] == pytest.approx(redone_s)
        assert cost.usd == pytest.approx(expected_spot_usd(RESTART_S + redone_s, rate))
        # the one function `select --preemptible` prices a preemption with
        step_s = EPOCH_S / STEPS
        shared = preemption_loss_seconds(CheckpointInterval.parse(interval), EPOCH_S, step_s)
        assert p["loss_seconds"] == pytest.approx(shared)
        assert p["usd"] == pytest.approx(cost.usd - N1_STANDARD_4_SPOT * EPOCH_S * EPOCHS / 3600)


def test_the_rate_and_the_interval_change_the_cost(tmp_path):
    prices = load_prices(spot_table(tmp_path))

    def usd(interval: str, rate: float) -> float:
        return estimate_cost(long_run(checkpoint_every=interval), prices, Capacity(True, rate)).usd

    assert usd("epoch", 0.5) > usd("epoch", PREEMPTIONS_PER_MACHINE_HOUR)
    assert usd("20", 0.5) < usd("epoch", 0.5)
    assert usd("epoch", 0.0) == pytest.approx(N1_STANDARD_4_SPOT * EPOCH_S * EPOCHS / 3600)
    on_demand = estimate_cost(long_run(), prices).usd
    assert usd("epoch", 0.5) < on_demand  # Spot at 0.35 x on-demand outweighs the losses


def test_the_step_interval_a_duration_became_is_what_is_priced(tmp_path):
    """A `10m` interval that ran as 100 steps (`checkpoint_steps`) loses 50 steps."""
    record = long_run(checkpoint_every="10m", checkpoint_steps=100)
    cost = estimate_cost(record, load_prices(spot_table(tmp_path)), Capacity(True))
    assert cost.preemption["redone_seconds"] == pytest.approx(50 * EPOCH_S / STEPS)
    assert cost.preemption["checkpoint_every"] == "every 100 steps and at each epoch's end"


def test_synchronous_workers_each_count_and_parameter_server_counts_one(tmp_path):
    prices = load_prices(spot_table(tmp_path))
    hardware = {"platform": "local", "machines": 1, "processes": 3}
    sync = estimate_cost(
        long_run("multi_worker_mirrored", workers=3, hardware=hardware), prices, Capacity(True)
    )
    ps = estimate_cost(
        long_run("parameter_server", workers=2, ps=1, hardware=hardware), prices, Capacity(True)
    )
    assert sync.preemption["machines"] == 3 and ps.preemption["machines"] == 1
    assert sync.preemption["share"] == pytest.approx(3 * ps.preemption["share"])


def test_without_spot_prices_preemptible_runs_are_priced_on_demand_with_the_losses():
    cost = estimate_cost(long_run(), load_prices(), Capacity(True))
    assert cost.priced_on == "on-demand"
    assert "no spot_usd_per_hour" in cost.note
    loss = RESTART_S + EPOCH_S / 2
    share = PREEMPTIONS_PER_MACHINE_HOUR * loss / 3600
    assert cost.usd == pytest.approx(0.19 * EPOCH_S * EPOCHS / (1 - share) / 3600)


def test_a_cloud_run_on_spot_is_priced_on_spot_and_a_missing_gpu_price_says_so(tmp_path):
    """`hardware.spot` (a `--spot` job) prices it on Spot whatever the comparison asks;
    a GPU without a Spot price leaves it unpriced, naming the entry to add."""
    hardware = {"platform": "vertex", "machines": 2, "machine_type": "n1-standard-4",
                "gpu": "t4", "gpus_per_machine": 1, "spot": True}  # fmt: skip
    record = RunMetrics.from_dict(long_run(hardware=hardware)).to_dict()
    assert record["hardware"]["spot"] is True
    cost = estimate_cost(record, load_prices(spot_table(tmp_path)))
    assert cost.usd is None and cost.priced_on == "spot"
    assert "GPU 't4' has no spot_usd_per_hour" in cost.note
    # an older record without the field ran on demand
    old = long_run(hardware={k: v for k, v in hardware.items() if k != "spot"})
    assert RunMetrics.from_dict(old).hardware.spot is False


def test_losses_that_fill_every_hour_leave_the_run_unpriced(tmp_path):
    cost = estimate_cost(long_run(), load_prices(spot_table(tmp_path)), Capacity(True, 11.0))
    assert cost.usd is None and "fill every hour" in cost.note


def test_the_report_states_the_prices_and_the_preemption_assumption(tmp_path):
    prices = load_prices(spot_table(tmp_path))
    runs = [long_run("one_device"), long_run("mirrored", checkpoint_every="20")]
    on_demand = build_report(runs, prices=prices)
    spot = build_report(runs, prices=prices, capacity=Capacity(True, 0.5))
    for a, b in zip(on_demand["results"], spot["results"], strict=True):
        assert a["priced_on"] == "on-demand" and b["priced_on"] == "spot"
        assert b["estimated_cost_usd"] < a["estimated_cost_usd"]
        assert b["cost_usd_per_million_examples"] == pytest.approx(
            b["estimated_cost_usd"] / (STEPS * BATCH * EPOCHS) * 1e6
        )
    assert spot["capacity"] == {"preemptible": True, "preemptions_per_machine_hour": 0.5,
                                "rate_given": True, "restart_seconds": RESTART_S}  # fmt: skip
    assert "Cost: on-demand list prices" in summary_table(on_demand)
    console = summary_table(spot)
    assert "Spot prices" in console and "0.5 per machine-hour (given" in console
    assert max(map(len, console.splitlines())) <= 100
    assert (
        max(
            map(
                len,
                summary_table(
                    build_report(runs, prices=prices, capacity=Capacity(True))
                ).splitlines(),
            )
        )
        <= 100
    )
    markdown = summary_markdown(spot)
    assert "one_device on Spot: " in markdown and "checkpoints written every 20 steps" in markdown


def _parse(*flags: str):
    args = build_parser().parse_args(["compare", *flags])
    from pipelines.cli import common

    common.apply_network_exposure(args)
    return args


def test_compare_flags_reach_the_comparison_record(tmp_path):
    """`compare --preemptible --preemptions-per-machine-hour --prices` become the
    pipeline's parameters, which the compare step prices every run with."""
    from components.compare import compare_strategies
    from pipelines.cli import compare

    table = spot_table(tmp_path)
    costs = {}
    for flags in ([], ["--preemptible"], ["--preemptible", "--preemptions-per-machine-hour", "1"]):
        arguments = compare.settings(_parse("--prices", str(table), *flags))
        out = tmp_path / "-".join(flags or ["on-demand"])
        out.mkdir()
        metrics = out / "metrics.json"
        metrics.write_text(json.dumps(long_run()))
        artifact = SimpleNamespace
        compare_strategies(
            runs=[artifact(path=str(metrics))],
            comparison=artifact(path=str(out / "comparison.json")),
            report=artifact(path=str(out / "report.html")),
            summary=artifact(path=str(out / "summary.md")),
            plots=artifact(path=str(out / "plots")),
            target_value=arguments["target_value"],
            target_metric=arguments["target_metric"],
            preemptible=arguments["preemptible"],
            preemptions_per_machine_hour=arguments["preemptions_per_machine_hour"],
            prices=arguments["prices"],
        )
        result = json.loads((out / "comparison.json").read_text())["results"][0]
        costs[tuple(flags)] = (result["priced_on"], result["estimated_cost_usd"])
    assert costs[()] == ("on-demand", pytest.approx(0.475))
    assert costs[("--preemptible",)] == (
        "spot",
        pytest.approx(expected_spot_usd(RESTART_S + EPOCH_S / 2, PREEMPTIONS_PER_MACHINE_HOUR)),
    )
    rate_1 = costs[("--preemptible", "--preemptions-per-machine-hour", "1")]
    assert rate_1 == ("spot", pytest.approx(expected_spot_usd(RESTART_S + EPOCH_S / 2, 1.0)))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--preemptions-per-machine-hour", "1"], "applies to preemptible machines"),
        (["--preemptible", "--preemptions-per-machine-hour", "12"], "leave"),
        (["--preemptible", "--preemptions-per-machine-hour", "-1"], "a number from 0 up"),
        (["--prices", ""], "--prices is empty"),
        (["--prices", "/dev/null"], "price table"),
    ],
)
def test_bad_price_flags_exit_2_in_one_line_before_anything_starts(
    tmp_path, capsys, flags, message
):
    out = tmp_path / "out"
    assert main(["compare", *flags, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_a_spot_job_records_spot_and_its_rehearsal_does_not(target, tmp_path, monkeypatch):
    """`--spot` reaches every replica's environment, so the record says the machines were
    Spot VMs; a rehearsal runs them on this machine and says it did not."""
    from components.core import run_metrics
    from components.core.config import ClusterConfig
    from components.core.launch import build_cloud_job
    from components.core.launch.rehearsal import RehearsalCluster, launcher_config
    from components.core.launch.replicas import replicas_of
    from tests.test_rehearsal import run_and_cloud

    run, cloud = run_and_cloud(target, ClusterConfig("multi_worker_mirrored", 2))
    for spot in (False, True):
        job = build_cloud_job(run, dataclasses.replace(cloud, spot=spot))
        replicas = replicas_of(job, target)
        assert all((r.env.get(run_metrics.SPOT_ENV) == "1") == spot for r in replicas)
        for name, value in replicas[0].env.items():
            monkeypatch.setenv(name, value)
        hardware = run_metrics.detect_hardware(run.cluster, gpus_seen=[])
        assert hardware.platform == target and hardware.spot is spot
        assert (", Spot" in hardware.describe()) is spot
    cluster = RehearsalCluster(replicas, target, launcher_config(replicas, str(tmp_path)),
                               str(tmp_path))  # fmt: skip
    cluster.plan()
    assert run_metrics.SPOT_ENV not in cluster.environment(cluster._started_replicas["chief-0"])


def test_the_comparison_pipelines_select_step_takes_the_same_rate():
    """The recommendation a comparison records charges the rate its prices use."""
    from components.core.config import ModelConfig, RunConfig
    from components.core.strategy_choice import choose_for_pipeline

    def choose(**rate):
        run = RunConfig(model=ModelConfig("resnet50"))
        choice = choose_for_pipeline(
            run_config=run.to_pipeline_parameter(), machines=4, gpus_per_machine=1,
            gpu="v100", interconnect=None, network_gbps=25.0, preemptible=True, **rate,
        )  # fmt: skip
        return json.loads(choice.recommendation_json)["predicted"], choice.markdown

    default, default_reasons = choose()
    often, often_reasons = choose(preemptions_per_machine_hour=1.0)
    assert "0.042 (default: one a day) preemptions per machine-hour" in default_reasons
    assert "1.000 (given) preemptions per machine-hour" in often_reasons
    assert often["examples_per_second"] < default["examples_per_second"]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        (["preemptions_per_machine_hour=1"], "applies to preemptible machines"),
        (["preemptible=true", "preemptions_per_machine_hour=12"], "leave"),
        (["prices={}"], "missing 'as_of'"),
        (['prices={"as_of": "x", "source": "y", "machine_types": {"n1-standard-4": -1}}'],
         "must be a number of USD per hour"),
    ],
)  # fmt: skip
def test_submit_checks_the_price_parameters_before_sending(
    params,
    says,
    capsys,
    nothing_may_be_sent,  # noqa: F811
):
    from google.auth.credentials import AnonymousCredentials

    argv = ["submit", *VERTEX, "--pipeline", "comparison"]
    for param in params:
        argv += ["--param", param]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "components.core.launch.credentials.google_credentials", lambda: AnonymousCredentials()
        )
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err, err
