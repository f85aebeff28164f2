"""Tests of unknown_inputs."""

from __future__ import annotations

import json

from components.core.model_profile import from_params
from components.core.selection import Topology, recommend
from pipelines.cli import main


def test_params_model_without_flops_is_estimated_and_shows_both_ends():
    """A 44.5M-parameter model without FLOPs: say it is a guess and show both answers."""
    model = from_params(44_549_160)
    rec = recommend(Topology(16, 4, "v100", network_gbps=25), model)
    # at the middle estimate all 16 machines scale below the floor and still train
    assert (rec.strategy, rec.layout.workers) == ("multi_worker_mirrored", 16)
    assert rec.reasons[0].startswith("Adding machines buys little here: all 16 machines")
    reason = next(r for r in rec.reasons if "FLOPs per example were not given" in r)
    assert "CNN-like (480 FLOPs per parameter): multi_worker_mirrored on 16 machine(s)" in reason
    assert "Give --gflops-per-example" in reason
    spot = recommend(Topology(20, 1, "t4", network_gbps=10, preemptible=True), model)
    assert (spot.strategy, spot.layout.workers) == ("parameter_server", 20)
    reason = next(r for r in spot.reasons if "FLOPs per example were not given" in r)
    # all 20: parameter servers, predicted faster and favoured on preemptible machines
    assert "CNN-like (480 FLOPs per parameter): parameter_server on 20 machine(s)" in reason
    assert any("Activation memory was not given" in r for r in rec.reasons)
    given = from_params(44_549_160, 15.7e9, 1.7e8)
    assert not any("not given" in r for r in recommend(Topology(16, 4, "v100"), given).reasons)


def test_an_unstated_network_is_assumed_out_loud_with_the_answer_at_both_ends(capsys):
    argv = ["select", "--machines", "8", "--gpus-per-machine", "8", "--gpu", "v100",
            "--model", "resnet101", "--batch-size", "64", "--json"]  # fmt: skip
    assert main(argv) == 0
    unstated = json.loads(capsys.readouterr().out)
    said = [r for r in unstated["reasons"] if r.startswith("The network was not given")]
    assert len(said) == 1
    assert "10 Gbit/s per NIC is assumed" in said[0]
    assert "at 1 Gbit/s: " in said[0] and "at 100 Gbit/s: " in said[0]
    # the two ends give different answers: fewer machines on 1 Gbit/s, all 8 on 100
    ends = {part.split(": ")[0].strip(): part.split(": ")[1] for part in
            said[0].split("depends on it: ")[1].split(". Give")[0].split("; ")}  # fmt: skip
    assert ends["at 1 Gbit/s"] != ends["at 100 Gbit/s"]
    assert ends["at 100 Gbit/s"].endswith("on 8 machine(s)")
    # given, it is the same prediction and nothing is said
    assert main([*argv, "--network-gbps", "10"]) == 0
    stated = json.loads(capsys.readouterr().out)
    assert stated["predicted"] == unstated["predicted"]
    assert not any(r.startswith("The network was not given") for r in stated["reasons"])
    # one machine has no network to assume
    assert main(["select", "--machines", "1", "--gpus-per-machine", "8", "--gpu", "v100",
                 "--model", "resnet101", "--json"]) == 0  # fmt: skip
    one = json.loads(capsys.readouterr().out)
    assert not any(r.startswith("The network was not given") for r in one["reasons"])


def test_an_unstated_network_path_is_assumed_out_loud_with_the_overlay_answer(capsys):
    argv = ["select", "--machines", "8", "--gpus-per-machine", "8", "--gpu", "v100",
            "--model", "resnet101", "--network-gbps", "25", "--json"]  # fmt: skip
    assert main(argv) == 0
    unstated = json.loads(capsys.readouterr().out)
    said = [r for r in unstated["reasons"] if r.startswith("The network path was not given")]
    assert len(said) == 1 and "(host) is assumed" in said[0]
    # the overlay answer is the one --network-path overlay gives
    assert main([*argv, "--network-path", "overlay"]) == 0
    overlay = json.loads(capsys.readouterr().out)
    answer = f"{overlay['strategy']} on {overlay['layout']['workers']} machine(s)"
    assert f"through a container overlay (kubenet, flannel VXLAN): {answer};" in said[0]
    assert overlay["predicted"] != unstated["predicted"]  # it differs here
    # given, host is the same prediction and nothing is said
    assert main([*argv, "--network-path", "host"]) == 0
    host = json.loads(capsys.readouterr().out)
    assert host["predicted"] == unstated["predicted"]
    assert not any(r.startswith("The network path was not given") for r in host["reasons"])


def test_a_model_family_replaces_the_one_size_flops_guess(capsys):
    """Issue 41: a 1.3B GPT on 8 H100 with --params alone is an estimate the answer depends
    on; --model-family transformer --sequence-length gives 2 x params x tokens, one answer."""
    argv = ["select", "--machines", "1", "--gpus-per-machine", "8", "--gpu", "h100",
            "--params", "1.3e9", "--batch-size", "4", "--json"]  # fmt: skip
    assert main(argv) == 0
    guessed = json.loads(capsys.readouterr().out)
    assert guessed["depends_on"] == ["--gflops-per-example"]
    family = ["--model-family", "transformer", "--sequence-length", "2048"]
    assert main([*argv, *family]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["model"]["flops_per_example"] == 2 * 2048 * 1.3e9
    assert doc["depends_on"] == [] and doc["strategy"] == "mirrored"
    assert main([*argv, "--model-family", "transformer"]) == 2
    assert "give --sequence-length" in capsys.readouterr().err
    assert main([*argv, "--model-family", "cnn", "--sequence-length", "8"]) == 2
    assert "--sequence-length is for transformers" in capsys.readouterr().err
