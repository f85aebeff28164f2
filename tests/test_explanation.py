"""Tests of explanation."""

from __future__ import annotations

import json

import pytest

from components.core import model_profile
from components.core.model_profile import PUBLISHED_PROFILES, from_params
from components.core.selection import (
    Topology,
    device_compute,
    recommend,
)
from components.core.selection.summary import as_markdown, as_text
from pipelines.cli import main
from tests.selection_helpers import RESNET101


def test_select_network_path_overlay_changes_the_answer_and_says_why(capsys):
    # 8 machines x 8 V100 at 10 Gbit/s, ResNet-101 at batch 64: the overlay's 40 % of the
    # NIC (4 Gbit/s) takes the machines below the floor
    argv = ["select", "--machines", "8", "--gpus-per-machine", "8", "--gpu", "v100",
            "--model", "resnet101", "--batch-size", "64", "--network-gbps", "10",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    host = json.loads(capsys.readouterr().out)
    assert main([*argv, "--network-path", "overlay"]) == 0
    overlay = json.loads(capsys.readouterr().out)
    assert main([*argv[:-1], "--network-path", "host", "--json"]) == 0
    stated = json.loads(capsys.readouterr().out)
    for key in ("strategy", "layout", "predicted", "alternatives"):
        assert stated[key] == host[key]  # host is the default
    assert stated["reasons"] == [r for r in host["reasons"] if "network path was not" not in r]
    # on the host network all 64 GPUs are worth it; through the overlay they scale below
    # the floor, and still train (the fastest answer), fewer machines the stated alternative
    assert host["strategy"] == "multi_worker_mirrored" and host["layout"]["workers"] == 8
    assert overlay["layout"]["workers"] == 8
    assert any("All of them train, the fastest answer" in r for r in overlay["reasons"])
    efficiency = {o["machines"]: o["machine_efficiency"] for o in overlay["machine_options"]}
    assert efficiency[8] < 0.5 < host["predicted"]["scaling_efficiency"]
    share = f"{device_compute.FITTED.overlay_network_share:.0%} of the 10 Gbps"
    assert not any("overlay" in r for r in stated["reasons"])
    assert any("container overlay network (--network-path overlay)" in r and share in r
               for r in overlay["reasons"])  # fmt: skip
    # a path that is neither is refused by the flag, before any model is built
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--network-path", "vxlan"])
    assert exit_info.value.code == 2


def test_markdown_and_text_hold_the_same_content():
    rec = recommend(Topology(4, 8, "v100", network_gbps=100), RESNET101)
    md = as_markdown(rec)
    assert md.startswith("## Recommended strategy: `multi_worker_mirrored`")
    assert "| > multi_worker_mirrored | 4/0/8 |" in md
    for reason in rec.reasons:
        assert reason in md and reason in as_text(rec)


def test_infeasible_rows_are_marked():
    model = PUBLISHED_PROFILES["resnet50"].with_sparse_embedding(2_000_000_000)
    rec = recommend(Topology(4, 8, "v100", network_gbps=100), model)
    text = as_text(rec)
    assert "(infeasible: sparse embedding table does not fit one GPU)" in text
    assert "(infeasible:" in as_markdown(rec)


def test_parameter_server_sentences_fit_their_layout():
    table = from_params(50_000_000, 1e9, 1e6).with_sparse_embedding(5_000_000_000)
    # one machine: one worker (no staleness), servers on CPU machines of their own as
    # train runs them, and the table's size said once, apart from what a replica needs
    one = recommend(Topology(1, 4, "v100"), table, batch_size=32)
    assert (one.strategy, one.layout.workers) == ("parameter_server", 1)
    said = " ".join(one.reasons)
    assert "with 1 worker and 1 parameter server (plus" in said
    assert (
        "each server is costed on an n1-standard-32 (--ps-machine-type n1-standard-8 does "
        "not hold its share), sending at most 32 Gbit/s to the worker; run them on "
        "non-preemptible machines" in said
    )
    assert "share the worker's machine" not in said
    assert "updates after the weights" not in said and "update after the weights" not in said
    assert "(80.8 GB with gradients, Adam state and activations)" in said
    # servers sharing one CPU machine's host, whose count host memory set, say what it
    # must hold: 50e9 parameters x 12 bytes x 1.25 = 750 GB
    big = from_params(100_000, 1e6, 1e4).with_sparse_embedding(50_000_000_000)
    rec = recommend(Topology(1, 4, "cpu"), big, batch_size=32)
    assert any("they share the worker's machine, whose host memory must then hold the "
               "750 GB they need" in r for r in rec.reasons), rec.reasons  # fmt: skip
    # a table that needs 19 servers' host memory says so, not that the step chose 19
    huge = from_params(1_000_000, 1e9, 1e6).with_sparse_embedding(100_000_000_000)
    rec = recommend(Topology(2, 2, "t4", network_gbps=10), huge)
    assert rec.layout.ps == 19
    assert any("19 servers are the fewest whose 64 GB of host memory each hold" in r
               for r in rec.reasons)  # fmt: skip
    # a sub-millisecond step is said to a tenth of a millisecond
    small = recommend(Topology(2, 2, "a100", network_gbps=10), model_profile.profile_model("mlp"))
    assert any("(a step of 1.2 ms against 1.5: 0.3 ms less exposed communication" in r
               for r in small.reasons)  # fmt: skip
