"""`select --preemptible --checkpoint-every`: a preemption costs the restart and half the
checkpoint interval, which the predicted throughput and price carry."""

from __future__ import annotations

import json

import pytest

from components.core.checkpoint_interval import CheckpointInterval
from components.core.model_profile import PUBLISHED_PROFILES
from components.core.selection import Topology, recommend
from components.core.selection.prediction import preemption_share
from components.core.selection.topology import ASSUMED_EPOCH_S, RESTART_S
from pipelines.cli import main

QUESTION = ["select", "--machines", "4", "--gpus-per-machine", "1", "--model", "resnet50",
            "--preemptible", "--preemptions-per-machine-hour", "1",
            "--prices", "components/core/data/prices.json", "--json"]  # fmt: skip


def _select(capsys, *extra: str) -> dict:
    assert main([*QUESTION, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_checkpoints_every_100_steps_predict_more_throughput_at_a_lower_price(capsys):
    """The same preemptible question: `epoch` loses the restart and half an (assumed) epoch
    a preemption, `100` the restart and 50 predicted steps, so it trains faster and costs
    less, and the reason says what one preemption costs with each."""
    per_epoch = _select(capsys, "--checkpoint-every", "epoch")
    every_100 = _select(capsys, "--checkpoint-every", "100")
    assert per_epoch["strategy"] == every_100["strategy"]
    assert every_100["predicted"]["step_time_s"] == per_epoch["predicted"]["step_time_s"]
    fast, slow = every_100["predicted"], per_epoch["predicted"]
    assert fast["examples_per_second"] > slow["examples_per_second"] * 1.05
    assert every_100["usd_per_million_examples"] < per_epoch["usd_per_million_examples"]

    epoch_reason = next(r for r in per_epoch["reasons"] if "preemption losses" in r)
    assert f"each costing about {RESTART_S + ASSUMED_EPOCH_S / 2:,.0f} s" in epoch_reason
    assert "written at each epoch's end" in epoch_reason
    assert "--checkpoint-every 60s) would cut that to" in epoch_reason
    reason_100 = next(r for r in every_100["reasons"] if "preemption losses" in r)
    assert "written every 100 steps and at each epoch's end" in reason_100


@pytest.mark.parametrize("interval", ["100", "epoch", "30s"])
def test_the_loss_per_preemption_is_the_restart_and_half_the_interval(interval):
    """From the chosen candidate's own predicted step time (a parameter-server run counts
    the coordinator's steps, one per worker step), and the epoch from --examples-per-epoch."""
    topology = Topology(4, 1, "v100", network_gbps=25, preemptible=True,
                        preemptions_per_machine_hour=1.0, checkpoint_every=interval,
                        examples_per_epoch=200_000)  # fmt: skip
    rec = recommend(topology, PUBLISHED_PROFILES["resnet50"], batch_size=32)
    for c in [a for a in rec.alternatives if a.feasible]:
        ps = c.strategy == "parameter_server"
        step_s = c.step_time_s / (c.layout.workers if ps else 1)
        epoch_s = 200_000 / c.computed_examples_per_second
        redone = {"100": 100 * step_s, "epoch": epoch_s, "30s": int(30 / step_s) * step_s}
        expected = RESTART_S + min(redone[interval], epoch_s) / 2
        assert c.preemption_loss_s == pytest.approx(expected)
        machines = 1 if ps else c.layout.workers
        assert c.overhead_fraction == pytest.approx(machines * expected / 3600)
        assert c.preemption_loss_s == pytest.approx(
            preemption_share(c, topology, CheckpointInterval.parse(interval))[0]
        )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--preemptible", "--checkpoint-every", "0"], "--checkpoint-every takes 1 to"),
        (["--preemptible", "--checkpoint-every", "often"], "--checkpoint-every takes 'epoch'"),
        (["--preemptible", "--checkpoint-every", "0s"], "a duration of 1s to 168h"),
        (["--checkpoint-every", "100"], "--checkpoint-every prices the work a preemption"),
        (["--preemptible", "--examples-per-epoch", "0"], "--examples-per-epoch"),
        (["--examples-per-epoch", "5000", "--checkpoint-every", "9"], "price the work"),
    ],
)  # fmt: skip
def test_bad_checkpoint_values_exit_2_with_one_line(extra, message, capsys):
    argv = ["select", "--machines", "2", "--gpus-per-machine", "1", "--model", "resnet50"]
    try:
        code = main([*argv, *extra])
    except SystemExit as exit_:  # argparse's own refusals exit
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err


def test_the_pipelines_select_step_prices_the_runs_checkpoint_interval():
    """`training.checkpoint_every` of the pipeline's run config reaches the selector when
    the machines are preemptible: the predicted throughput rises from `epoch` to `100`."""
    from components.core.config import ModelConfig, RunConfig, TrainingConfig
    from components.core.strategy_choice import choose_for_pipeline

    def predicted(every: str, preemptible: bool = True) -> tuple[float, str]:
        run = RunConfig(
            model=ModelConfig("resnet50"), training=TrainingConfig(checkpoint_every=every)
        )
        choice = choose_for_pipeline(
            run_config=run.to_pipeline_parameter(), machines=4, gpus_per_machine=1,
            gpu="v100", interconnect=None, network_gbps=25.0, preemptible=preemptible,
        )  # fmt: skip
        return json.loads(choice.recommendation_json)["predicted"]["examples_per_second"], (
            choice.markdown
        )

    per_epoch, _ = predicted("epoch")
    every_100, markdown = predicted("100")
    assert every_100 > per_epoch
    assert "written every 100 steps" in markdown
    # on machines never taken back the interval prices nothing (and is not refused)
    _, markdown = predicted("100", preemptible=False)
    assert "written every" not in markdown
