"""Tests of prediction: the candidates, at a per-replica batch that fits the GPUs' memory."""

from __future__ import annotations

import json

import pytest

from components.core import model_profile, selection
from components.core.model_profile import PUBLISHED_PROFILES, from_params
from components.core.selection import (
    Topology,
    memory,
    recommend,
)
from components.core.selection.summary import as_markdown
from pipelines.cli import main
from tests.selection_helpers import MIX_A100_4_T4_1, _row


def test_model_that_cannot_fit_one_gpu_needs_model_parallelism():
    rec = recommend(Topology(8, 8, "a100", network_gbps=100), from_params(5_000_000_000))
    doc = rec.to_dict()
    assert doc["strategy"] == "model_parallelism"
    assert doc["supported"] is False
    assert doc["layout"] is None and doc["predicted"] is None
    assert any("80.0 GB" in r for r in doc["reasons"])
    assert "not supported" in as_markdown(rec)


def test_oversized_batch_is_reduced_with_a_reason():
    rec = recommend(Topology(1, 8, "v100"), PUBLISHED_PROFILES["resnet50"], batch_size=512)
    assert rec.strategy == "mirrored"
    assert rec.chosen.per_replica_batch < 512
    assert any("use at most" in r for r in rec.reasons)


def test_mixed_precision_fits_twice_the_activations_per_gpu():
    """A batch refused in fp32 for its activations fits twice over under `mixed`."""
    model = model_profile.profile_model("resnet50")
    fp32 = memory.max_batch_that_fits(model, 16, True)
    mixed = memory.max_batch_that_fits(model, 16, True, "mixed")
    assert mixed >= 2 * fp32 - 1
    topology = selection.Topology(machines=1, gpus_per_machine=8, gpu="v100", precision="mixed")
    rec = selection.recommend(topology, model, batch_size=fp32 + 50)
    assert rec.batch_size == fp32 + 50  # no "use at most" reduction
    assert not any("use at most" in reason for reason in rec.reasons)


def test_a_given_activation_figure_is_what_back_propagation_keeps(capsys):
    """Review s14 #5: --activation-bytes-per-example is the bytes one example keeps
    (its help says so), but the cost model cut it by the 15 % calibrated on summed layer
    outputs: 1e9 bytes x 32 read 27.2 GB, and batch 16 (16 GB) passed on a 14.4 GB V100."""
    given = from_params(1000, 1e10, activation_bytes_per_example=1e9)
    assert memory.memory_needed_bytes(given, 32, True) == pytest.approx(16_000 + 32e9)
    assert memory.max_batch_that_fits(given, 16, True) == 14
    # Strategist's own figure sums every layer's output: the calibrated share still applies
    estimated = from_params(1000, 1e10)
    kept = selection.memory.KEPT_ACTIVATION_FRACTION
    summed = model_profile.ACTIVATION_BYTES_PER_FLOP * 1e10
    assert memory.memory_needed_bytes(estimated, 32, True) == pytest.approx(
        16_000 + 32 * summed * kept
    )
    argv = ["select", "--machines", "1", "--gpus-per-machine", "1", "--gpu", "v100",
            "--params", "1000", "--gflops-per-example", "10",
            "--activation-bytes-per-example", "1e9"]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "A per-GPU batch of 32 needs 32.0 GB" in out
    assert "use at most 14 per GPU" in out


def test_a_mix_whose_slow_machine_cannot_hold_a_replica_trains_on_its_fast_machines(capsys):
    """Review s13 #1: BERT-large does not fit the T4 of 4 A100 machines and 1 T4 machine.
    The 4 A100 machines alone train it as 4 A100 machines would, synchronously (not
    mirrored on one machine), and the reasons say to leave the T4 free and why."""
    assert main([*MIX_A100_4_T4_1, "--model", "bert_large_squad"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["layout"]) == (
        "multi_worker_mirrored",
        {"workers": 4, "ps": 0, "gpus_per_machine": 8},
    )
    assert not _row(doc, "multi_worker_mirrored", 5).get("feasible", True)
    assert doc["reasons"][0] == (
        "Use the 4 a100 machines alone and leave the t4 machine free: a replica of "
        "bert_large_squad at a per-GPU batch of 16 does not fit a t4 (16 GB), so "
        "multi_worker_mirrored and parameter_server on all 5 machines cannot run."
    )
    assert main(["select", "--machines", "4", "--gpus-per-machine", "8", "--gpu", "a100",
                 "--batch-size", "16", "--network-gbps", "100", "--nics", "4", "--network-path",
                 "host", "--model", "bert_large_squad", "--json"]) == 0  # fmt: skip
    plain = json.loads(capsys.readouterr().out)
    assert (plain["strategy"], plain["layout"]) == (doc["strategy"], doc["layout"])
    assert doc["predicted"] == plain["predicted"]


def test_a_mix_checks_a_replicas_memory_on_its_smallest_gpu():
    """1.5B parameters need 24 GB for weights, gradients and Adam state: an A100 80GB holds
    them, a 16 GB T4 does not, so nothing that puts a replica on a T4 is feasible."""
    mix = Topology(8, 1, "a100-80gb", network_gbps=100, gpu_mix=(("a100-80gb", 2), ("t4", 6)))
    model = from_params(1_500_000_000, 3e9, 1e6)
    rec = recommend(mix, model, batch_size=8)
    assert rec.strategy == "one_device"
    notes = {a.strategy: a.note for a in rec.alternatives if not a.feasible}
    assert notes["multi_worker_mirrored"] == "a replica does not fit a t4"


def test_params_model_counts_activation_memory():
    """0.9B parameters at batch 100,000 no longer passes the memory check."""
    rec = recommend(Topology(1, 8, "a100"), from_params(900_000_000), batch_size=100_000)
    assert rec.batch_size < 100_000
    assert any("A per-GPU batch of 100000 needs" in r for r in rec.reasons)
    # the estimated activations decide that cap, so the low end's cap is shown beside it
    estimate = next(r for r in rec.reasons if r.startswith("Activation memory was not given"))
    assert f"The estimate decides the batch: {rec.batch_size:,} per GPU fits at it" in estimate
    low = int(estimate.split("fits at it, ")[1].split(" at the low end")[0].replace(",", ""))
    assert rec.batch_size * 2 < low < 100_000
    small = from_params(900_000_000, 1.8e9, activation_bytes_per_example=1000.0)
    given = recommend(Topology(1, 8, "a100"), small, batch_size=100_000)
    assert given.batch_size == 100_000
    assert not any("The estimate decides the batch" in r for r in given.reasons)
