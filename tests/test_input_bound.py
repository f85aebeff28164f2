"""Tests of input_bound."""

from __future__ import annotations

import dataclasses
import json

import pytest

from components.core.model_profile import PUBLISHED_PROFILES
from components.core.selection import Topology, recommend
from components.core.selection.summary import as_text
from components.core.selection.topology import Layout
from pipelines.cli import main
from tests.selection_helpers import _row


def test_input_capping_every_candidate_alike_leaves_asynchrony_nothing_to_gain(capsys):
    """Both capped at 2 x 50 examples/s by the input: parameter_server would be the same
    throughput, asynchronous; the synchronous candidate stays (it was preferred '0%
    slower, within the 25%')."""
    argv = ["select", "--machines", "2", "--gpus-per-machine", "1", "--gpu", "v100", "--model",
            "resnet50", "--heterogeneous", "3", "--input-examples-per-second", "50",
            "--network-gbps", "25", "--network-path", "host"]  # fmt: skip
    for extra in ([], ["--async-ok"]):
        assert main([*argv, *extra, "--explain"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("recommended: multi_worker_mirrored"), extra
        assert "within the" not in out
        assert ("but the input caps it at 100 examples/s, multi_worker_mirrored at 100: "
                "asynchrony gains nothing.") in out  # fmt: skip


def test_fewer_gpus_that_only_parameter_servers_keep_fed_say_why_asynchronous(capsys):
    """The reviewer's case: on 4 GPUs a machine both are capped at 400 (asynchrony gains
    nothing), but on 2 only parameter_server's workers, each at its own speed, take all of
    the input: the answer says that, and that it trains asynchronously, not '0% slower'."""
    argv = ["select", "--machines", "2", "--gpus-per-machine", "4", "--gpu", "v100", "--model",
            "resnet50", "--heterogeneous", "3", "--input-examples-per-second", "200",
            "--network-gbps", "25", "--ps-machine-type", "n1-standard-16"]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recommended: parameter_server")
    assert "layout:      workers 2, ps 2, GPUs per machine 2" in out
    assert "0% slower" not in out and "within the 25%" not in out
    assert ("on 2 GPUs per machine only its workers, each at its own speed, take all the "
            "input, not multi_worker_mirrored's. It trains asynchronously") in out  # fmt: skip


def test_each_machines_input_pipeline_caps_only_its_own_parameter_server_worker(capsys):
    """Review s13 #6: 1 A100 and 1 T4 machine, each pipeline feeding 1,500 examples/s.
    Parameter-server workers run at their own speed: the A100's takes 1,500 of its
    pipeline, the T4's computes fewer than its pipeline feeds. The cap on the cluster
    total (2 x 1,500 = 3,000) counted the A100 pipeline's surplus for the T4."""
    argv = ["select", "--machines", "2", "--gpus-per-machine", "4", "--gpu", "a100:1,t4:1",
            "--model", "resnet50", "--network-gbps", "100", "--input-examples-per-second",
            "1500", "--json"]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["layout"]["workers"]) == ("parameter_server", 2)
    predicted = doc["predicted"]
    computed = 2 * 4 * 32 / predicted["step_time_s"]
    t4 = predicted["examples_per_second"] - 1500
    assert 0 < t4 < 1500 and predicted["examples_per_second"] < 0.8 * 3000
    assert predicted["input_capped"] and "input_bound" not in predicted
    assert doc["reasons"][0] == (
        "Each machine's input pipeline feeds only its own GPUs, 1,500 examples/s: less than "
        f"the GPUs of an a100 machine ({computed - t4:,.0f}) compute, more than those of a t4 "
        f"machine ({t4:,.0f}), so parameter_server trains {1500 + t4:,.0f} examples/s where "
        f"its GPUs compute {computed:,.0f}: faster input on the a100 machines pays first."
    )
    # synchronous replicas all run at the slowest: every machine is capped alike
    mirrored = _row(doc, "mirrored", 1)["predicted"]
    assert mirrored["examples_per_second"] == 1500 and mirrored["input_bound"]
    assert main([*argv[:-1], "--explain"]) == 0  # the text table marks the capped throughput
    assert f"{predicted['examples_per_second']:,.0f} (input)" in capsys.readouterr().out


def test_an_input_pipeline_limit_caps_each_machine_and_is_named():
    topo = Topology(2, 8, "a100", network_gbps=100, input_examples_per_second=3000.0)
    rec = recommend(topo, PUBLISHED_PROFILES["resnet50"], batch_size=256)
    assert rec.chosen.examples_per_second == pytest.approx(6000.0)
    assert rec.chosen.input_bound
    # the step shown is the GPUs'; the row and the JSON say the input sets the throughput
    assert rec.to_dict()["predicted"]["input_bound"] is True
    assert "6,000 (input)" in as_text(rec)
    assert any(r.startswith(f"The input pipelines limit {rec.strategy} to 6,000 examples/s")
               for r in rec.reasons)  # fmt: skip
    free = recommend(dataclasses.replace(topo, input_examples_per_second=None),
                     PUBLISHED_PROFILES["resnet50"], batch_size=256)  # fmt: skip
    assert free.chosen.examples_per_second > 6000.0
    assert main(["select", "--machines", "2", "--gpus-per-machine", "8", "--params", "10",
                 "--input-examples-per-second", "0"]) == 2  # fmt: skip


def test_an_input_bound_answer_uses_the_fewest_gpus_per_machine_that_take_all_the_input():
    # one v100 computes 346 resnet50 examples/s at batch 32; each machine's input feeds 10
    topo = Topology(16, 8, "v100", network_gbps=25, input_examples_per_second=10.0)
    rec = recommend(topo, PUBLISHED_PROFILES["resnet50"], batch_size=32)
    assert (rec.strategy, rec.layout.gpus_per_machine) == ("multi_worker_mirrored", 1)
    assert rec.chosen.examples_per_second == pytest.approx(160.0)
    full = next(a for a in rec.alternatives if a.layout == Layout(16, 0, 8))
    assert full.examples_per_second == pytest.approx(160.0)  # all 8 GPUs: no faster
    assert any(r.startswith("More GPUs per machine buy nothing here") and
               "Use 1 GPU per machine and leave 7 free." in r for r in rec.reasons)  # fmt: skip
    # 3,000 examples/s a machine need three a100s at batch 256 (1,056 each); machine
    # types come with 1, 2, 4 or 8, so four
    topo = Topology(2, 8, "a100", network_gbps=100, input_examples_per_second=3000.0)
    rec = recommend(topo, PUBLISHED_PROFILES["resnet50"], batch_size=256)
    assert rec.layout == Layout(2, 0, 4)
    assert rec.chosen.examples_per_second == pytest.approx(6000.0)
    # one machine: one GPU takes the whole input, and the reason says that, not communication
    topo = Topology(1, 8, "v100", input_examples_per_second=100.0)
    rec = recommend(topo, PUBLISHED_PROFILES["resnet50"], batch_size=32)
    assert rec.strategy == "one_device"
    assert any("one v100 alone takes all of it, so more GPUs would wait for input" in r
               for r in rec.reasons)  # fmt: skip
    # the fewer GPUs must take all of the input: 2 v100s compute 652 examples/s, not 660
    rec = recommend(dataclasses.replace(topo, input_examples_per_second=660.0),
                    PUBLISHED_PROFILES["resnet50"], batch_size=32)  # fmt: skip
    assert rec.layout.gpus_per_machine == 4
    # and on the slowest machine too: a 3x slower v100 computes 109, so 200 a machine need 2
    slow_half = Topology(4, 4, "v100", network_gbps=100, heterogeneous=True,
                         heterogeneity_slowdown=3.0, input_examples_per_second=200.0)  # fmt: skip
    rec = recommend(slow_half, PUBLISHED_PROFILES["resnet50"], batch_size=32, async_ok=True)
    assert rec.layout.gpus_per_machine == 2
    assert any("one v100 (the slowest) alone computes 109" in r for r in rec.reasons)
    # without the cap, all 8 GPUs per machine are worth it
    free = recommend(dataclasses.replace(topo, machines=16, network_gbps=25,
                                         input_examples_per_second=None),
                     PUBLISHED_PROFILES["resnet50"], batch_size=32)  # fmt: skip
    assert free.layout.gpus_per_machine == 8
