"""Tests of machine_subsets: parts of a cluster, and a mix's faster machines alone."""

from __future__ import annotations

import dataclasses
import json

import pytest

from components.core import model_profile, selection
from components.core.model_profile import PUBLISHED_PROFILES
from components.core.selection import (
    Topology,
    device_compute,
    recommend,
    step_time,
)
from pipelines.cli import main
from tests.selection_helpers import MIX_A100_4_T4_1, RESNET101, _row


@pytest.mark.parametrize(
    ("flags", "word"),
    [
        ({"preemptible": True}, "preemptible"),
        ({"heterogeneous": True}, "differ in speed"),
    ],
)
def test_unreliable_or_mixed_hardware_favours_parameter_server(flags, word):
    topology = Topology(4, 8, "v100", network_gbps=100, **flags)
    rec = recommend(topology, RESNET101)
    assert rec.strategy == "parameter_server"
    assert rec.layout.workers == 4 and rec.layout.ps >= 1
    assert any(word in r for r in rec.reasons)
    # the same hardware without the flag stays synchronous
    assert recommend(Topology(4, 8, "v100", network_gbps=100), RESNET101).strategy == (
        "multi_worker_mirrored"
    )


@pytest.mark.parametrize("gpu", ["p100", "cpu"])
def test_mixed_precision_is_no_faster_without_tensor_cores_and_says_so(gpu):
    """TensorFlow's guide: below compute capability 7.0 mixed precision brings no math speed."""
    model = model_profile.profile_model("resnet50")

    def recommend_at(device_name, precision):
        topology = selection.Topology(1, 2, device_name, precision=precision)
        return selection.recommend(topology, model, batch_size=32)

    fp32, mixed = recommend_at(gpu, "fp32"), recommend_at(gpu, "mixed")
    assert mixed.chosen.single_gpu_step_s == pytest.approx(fp32.chosen.single_gpu_step_s)
    assert any(f"Mixed precision computes no faster than fp32 on {gpu}" in r for r in mixed.reasons)
    assert not any("computes no faster" in r for r in fp32.reasons)
    v100_fp32, v100_mixed = recommend_at("v100", "fp32"), recommend_at("v100", "mixed")
    assert v100_mixed.chosen.single_gpu_step_s < v100_fp32.chosen.single_gpu_step_s / 2
    assert not any("computes no faster" in r for r in v100_mixed.reasons)


def test_a_gpu_mix_is_worth_its_machines_by_their_own_speeds():
    """2 A100 and 6 T4 machines: parameter servers on all 8 give 2.1x one A100, 68 % of what
    the 8 machines give alone (2 A100s and 6 T4s at a sixth of the speed), above the floor;
    against 8 A100s it would be 26 %, and the floor would send the user to one A100."""
    mix = Topology(8, 1, "a100", network_gbps=25, gpu_mix=(("a100", 2), ("t4", 6)))
    rec = recommend(mix, PUBLISHED_PROFILES["resnet50"], batch_size=32)
    assert (rec.strategy, rec.layout.workers) == ("parameter_server", 8)
    assert rec.machine_options == []
    one_a100 = next(a for a in rec.alternatives if a.strategy == "one_device")
    # each machine's step: its GPU's compute, the same launch cost
    compute = selection.device_compute.step_compute_share(one_a100.single_gpu_step_s)
    alone = sum(1 / s for s in selection.machine_speeds.machine_slowdowns(mix, 8, compute))
    share = rec.chosen.examples_per_second / (alone * one_a100.examples_per_second)
    assert 0.5 < share < 0.8
    # the table's efficiency, too, is against what its GPUs give alone
    assert rec.chosen.scaling_efficiency == pytest.approx(share)
    # favoured for the mix, but asynchronous, and the reasons say what that costs
    favoured = next(r for r in rec.reasons if r.startswith("parameter_server is both"))
    assert "It trains asynchronously" in favoured and "about 7 updates after" in favoured


def test_a_mixs_fast_machines_alone_are_weighed_against_parameter_servers_on_all(capsys):
    """Review s13 #1: VGG-16 on 4 A100 machines and 1 T4. Every synchronous step on all 5
    waits for the T4; multi_worker_mirrored on the A100s alone was never weighed, and an
    asynchronous parameter_server on all 5 was chosen while predicted slower than it. Now it
    is weighed, and it is the answer: parameter servers on all 5, each on an n1-standard-8
    that sends 16 Gbit/s of VGG-16's 553 MB where the GPU machines move 400, are slower."""
    assert main([*MIX_A100_4_T4_1, "--model", "vgg16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["layout"]["workers"]) == ("multi_worker_mirrored", 4)
    alone = doc["predicted"]["examples_per_second"]
    ps_all = _row(doc, "parameter_server", 5)["predicted"]["examples_per_second"]
    sync_all = _row(doc, "multi_worker_mirrored", 5)["predicted"]["examples_per_second"]
    assert sync_all < ps_all < alone
    assert any(r.startswith("Use the 4 a100 machines alone and leave the t4 machine free")
               and f"examples/s against {alone:,.0f}." in r
               for r in doc["reasons"])  # fmt: skip


def test_the_faster_half_of_heterogeneous_machines_is_weighed_alone(capsys):
    """Review s13 #1, `--heterogeneous`: of 5 T4 machines the faster 3 (not a power of two)
    train ResNet-101 synchronously faster than all 5, which wait for the slower 2; that
    candidate is weighed and listed, and parameter servers, whose workers each run at their
    own speed, are faster still on all 5."""
    argv = ["select", "--machines", "5", "--gpus-per-machine", "8", "--gpu", "t4", "--model",
            "resnet101", "--batch-size", "32", "--network-gbps", "25", "--network-path", "host",
            "--heterogeneous", "3", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["layout"]["workers"]) == ("parameter_server", 5)
    faster_3 = _row(doc, "multi_worker_mirrored", 3)["predicted"]["examples_per_second"]
    all_5 = _row(doc, "multi_worker_mirrored", 5)["predicted"]["examples_per_second"]
    assert all_5 < faster_3 < doc["predicted"]["examples_per_second"]


def test_the_order_a_mix_is_written_in_never_changes_the_answer(capsys):
    """Review s13 #3: 2 A100 80GB and 2 A100 40GB machines compute alike, so the order
    they were listed in broke the tie: 80GB first gave mirrored, 40GB first gave
    model_parallelism (48 GB of weights and Adam state checked on a 40 GB A100 only).
    Of equal speed the larger GPU comes first, whatever the order."""
    from pipelines.cli.select import parse_gpu

    argv = ["select", "--machines", "4", "--gpus-per-machine", "8", "--params", "3e9",
            "--gflops-per-example", "600", "--activation-bytes-per-example", "1e8",
            "--batch-size", "8", "--network-gbps", "100", "--network-path", "host",
            "--json", "--gpu"]  # fmt: skip
    docs = []
    for mix in ("a100-80gb:2,a100:2", "a100:2,a100-80gb:2"):
        assert parse_gpu(mix)[0] == "a100-80gb"
        assert main([*argv, mix]) == 0
        doc = json.loads(capsys.readouterr().out)
        del doc["inputs"]["topology"]["gpu_mix"]  # as written
        docs.append(doc)
    assert docs[0] == docs[1]
    assert (docs[0]["strategy"], docs[0]["layout"]["workers"]) == ("mirrored", 1)
    assert "at batch 8 one a100-80gb computes a step" in docs[0]["reasons"][0]
    notes = {r["note"] for r in docs[0]["alternatives"] if "note" in r}
    assert notes == {"a replica does not fit an a100"}
    for written in ((("a100", 2), ("a100-80gb", 2)), (("a100-80gb", 2), ("a100", 2))):
        topology = Topology(4, 8, "a100-80gb", gpu_mix=written)
        assert (
            selection.machine_speeds.machine_gpus(topology, 4) == ["a100-80gb"] * 2 + ["a100"] * 2
        )


def test_a_rings_pace_on_a_mix_is_its_slowest_machines_link(capsys):
    """Review s13 #11: one all-reduce ring through 2 A100 (NVLink) and 2 T4 (PCIe 3)
    machines of 4 GPUs each at 2 x 200 Gbit/s runs at the T4s' PCIe, not at NVLink:
    the same time as on 4 T4 machines. One A100 machine alone keeps its NVLink."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "4", "--gpu", "a100:2,t4:2",
            "--model", "resnet50", "--network-gbps", "200", "--nics", "2", "--network-path",
            "host", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    # the 2 a100 machines alone: a ring through the t4s waits for them and runs at their PCIe
    assert (doc["strategy"], doc["layout"]["workers"]) == ("multi_worker_mirrored", 2)
    ring = _row(doc, "multi_worker_mirrored", 4)["predicted"]
    model = model_profile.profile_model("resnet50")
    cm = selection.step_time
    pcie = cm.PCIE3_GBPS * 1e9 * cm.FITTED.pcie_efficiency  # a T4's PCIe 3 x16
    assert ring["communication_s"] > 2 * 15 / 16 * model.gradient_bytes / pcie
    mix = Topology(4, 4, "a100", network_gbps=200, nics=2, gpu_mix=(("a100", 2), ("t4", 2)))
    t4s = dataclasses.replace(mix, gpu="t4", gpu_mix=(), heterogeneous=False)
    predict = step_time.predict_allreduce
    assert predict(mix, model, 32, 4, 4)[2] == pytest.approx(predict(t4s, model, 32, 4, 4)[2])
    a100 = Topology(1, 4, "a100")
    assert predict(mix, model, 32, 1, 4)[2] == pytest.approx(predict(a100, model, 32, 1, 4)[2])


def test_a_gpu_mix_slows_synchronous_steps_to_the_slowest_and_ps_workers_to_their_own():
    mix = Topology(8, 1, "a100", network_gbps=100, gpu_mix=(("a100", 2), ("t4", 6)))
    mix.validate()
    assert mix.heterogeneous
    slow = selection.machine_speeds.machine_slowdowns(mix, 8)
    ratio = device_compute.achievable_tflops("a100") / device_compute.achievable_tflops("t4")
    assert slow == [1.0, 1.0] + [pytest.approx(ratio)] * 6
    same = Topology(8, 1, "a100", network_gbps=100)
    sync_mix = step_time.predict_allreduce(mix, RESNET101, 64, 8, 1)[0]
    sync_same = step_time.predict_allreduce(same, RESNET101, 64, 8, 1)[0]
    # a step waits for the slowest GPU's compute; the launch cost is the same on any GPU
    t4s = Topology(8, 1, "t4", network_gbps=100)
    assert sync_mix == pytest.approx(step_time.predict_allreduce(t4s, RESNET101, 64, 8, 1)[0])
    assert sync_same * max(slow) * 0.99 < sync_mix < sync_same * max(slow)
    ps_mix = step_time.predict_parameter_server(mix, RESNET101, 64, 8, 2, 1)[0]
    ps_same = step_time.predict_parameter_server(same, RESNET101, 64, 8, 2, 1)[0]
    assert ps_same < ps_mix < sync_mix  # slowed too, but by the harmonic mean only


def test_a_mixs_slower_gpus_slow_the_compute_of_a_step_not_its_launch(capsys):
    """Review s13 #2, the README's mix: the tiny cnn's step is nearly all the fixed 1 ms
    launch cost, which a T4 pays as fast as an A100. Scaled by the GPUs' 5.9x throughput
    ratio it made 2 A100 machines beside 6 T4s slower than the 6 T4s alone."""
    argv = ["select", "--machines", "8", "--gpus-per-machine", "1", "--gpu", "a100:2,t4:6",
            "--model", "cnn", "--preemptible", "--json"]  # fmt: skip
    assert main(argv) == 0
    mix = json.loads(capsys.readouterr().out)
    assert (mix["strategy"], mix["layout"]["workers"]) == ("parameter_server", 8)
    assert main(["select", "--machines", "6", "--gpus-per-machine", "1", "--gpu", "t4",
                 "--model", "cnn", "--preemptible", "--json"]) == 0  # fmt: skip
    t4s = json.loads(capsys.readouterr().out)
    for strategy in ("parameter_server", "multi_worker_mirrored"):
        with_a100s = _row(mix, strategy, 8)["predicted"]
        alone = _row(t4s, strategy, 6)["predicted"]
        assert with_a100s["examples_per_second"] > alone["examples_per_second"]
    # every synchronous step waits for a T4's compute and the same launch cost
    sync = _row(mix, "multi_worker_mirrored", 8)["predicted"]
    assert sync["compute_s"] < 1.1 * _row(t4s, "multi_worker_mirrored", 6)["predicted"]["compute_s"]
    assert f"{sync['compute_s'] * 1e3:.1f}" == "1.1"


def test_heterogeneous_flag_alone_slows_parameter_server_workers_too():
    flagged = Topology(4, 8, "v100", network_gbps=100, heterogeneous=True)
    plain = Topology(4, 8, "v100", network_gbps=100)
    predict = step_time.predict_parameter_server
    assert predict(flagged, RESNET101, 64, 4, 2, 8)[0] > predict(plain, RESNET101, 64, 4, 2, 8)[0]


def test_heterogeneous_factor_sets_the_slowdown_and_alone_shows_the_range(capsys):
    """`--heterogeneous 3` slows the slower half 3x: synchronous steps wait for it, so
    multi_worker_mirrored is predicted slower than at the 1.5x `--heterogeneous` assumes;
    alone, the reasons say 1.5x is an assumption and give the answer at 1.1x and 3x."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "8", "--gpu", "v100",
            "--network-gbps", "100", "--network-path", "host", "--model", "resnet101",
            "--json", "--heterogeneous"]  # fmt: skip

    def mwms(doc):  # on all 4 machines (the faster 2 alone are weighed too)
        rows = [{"strategy": doc["strategy"], **doc}, *doc["alternatives"]]
        return next(r for r in rows if r["strategy"] == "multi_worker_mirrored"
                    and r["layout"]["workers"] == 4)["predicted"]  # fmt: skip

    assert main(argv) == 0
    assumed = json.loads(capsys.readouterr().out)
    assert main([*argv, "3"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert given["inputs"]["topology"]["heterogeneity_slowdown"] == 3.0
    slower = mwms(assumed)["examples_per_second"] / mwms(given)["examples_per_second"]
    assert slower == pytest.approx(3 / 1.5, rel=0.05)  # compute waits for the slowest
    ranged = [r for r in assumed["reasons"] if r.startswith("How much slower")]
    assert len(ranged) == 1 and "assumed 1.5x slower" in ranged[0]
    assert "at 1.1x: " in ranged[0] and "; at 3x: " in ranged[0]
    assert not any(r.startswith("How much slower") for r in given["reasons"])
    assert any("half the machines are 3x slower than the rest" in r for r in given["reasons"])
    for bad, message in ((["1"], "drop the flag"), (["0.5"], "above 1"),
                         (["2", "--gpu", "a100:2,t4:2"], "drop the factor")):  # fmt: skip
        assert main([*argv[:-2], "--heterogeneous", *bad]) == 2
        assert message in capsys.readouterr().err


def test_a_mix_of_one_speed_is_not_heterogeneous(capsys):
    """`--gpu v100:2` names identical machines: plain hardware, trained synchronously, as
    without the mix; an A100 40GB beside an 80GB differs in memory, not speed. The
    parameter-server step is explained by what it saves: communication first."""
    assert Topology(2, 8, "v100", gpu_mix=(("v100", 2),)) == Topology(2, 8, "v100")
    merged = Topology(2, 8, "t4", gpu_mix=(("t4", 1), ("T4", 1)))
    assert (merged.gpu, merged.gpu_mix, merged.heterogeneous) == ("t4", (), False)
    memory_only = Topology(4, 8, "a100", gpu_mix=(("a100", 2), ("a100-80gb", 2)))
    assert memory_only.gpu_mix and not memory_only.heterogeneous
    assert Topology(4, 8, "a100", gpu_mix=(("a100", 2), ("t4", 2))).heterogeneous
    for gpu in ("v100:2", "v100"):
        assert main(["select", "--machines", "2", "--gpus-per-machine", "8", "--gpu", gpu,
                     "--model", "resnet50", "--network-gbps", "25", "--network-path", "host",
                     "--ps-machine-type", "n1-standard-16", "--json"]) == 0  # fmt: skip
        doc = json.loads(capsys.readouterr().out)
        assert doc["strategy"] == "multi_worker_mirrored"
        why = next(r for r in doc["reasons"] if r.startswith("parameter_server is predicted"))
        assert "ms less exposed communication (the servers receive each gradient" in why


def test_a_mix_whose_step_is_its_launch_cost_does_not_differ_in_speed(capsys):
    """The README's tiny cnn on 2 A100 and 6 T4 machines: a step is about 1 ms of fixed
    launch cost on either GPU (T4 1.004 ms, A100 1.001 ms), so the reasons said 'the
    slowest is 5.9x slower than one a100: every synchronous step takes that much longer'
    by the GPUs' TFLOP/s alone. The machines' speeds are no case for parameter servers for
    it; for ResNet-50, whose 31 ms A100 step is nearly all compute, they are, at nearly
    the GPUs' full ratio of 5.9."""
    argv = ["select", "--machines", "8", "--gpus-per-machine", "1", "--gpu", "a100:2,t4:6",
            "--preemptible", "--network-gbps", "100", "--network-path", "host", "--json",
            "--model"]  # fmt: skip
    assert main([*argv, "cnn"]) == 0
    cnn = json.loads(capsys.readouterr().out)
    assert not any("differ in speed" in r for r in cnn["reasons"])
    assert main([*argv, "resnet50"]) == 0
    resnet = json.loads(capsys.readouterr().out)
    assert any("the slowest is 5.7x slower than one a100" in r for r in resnet["reasons"])


def test_a_ring_through_a_mix_is_explained_on_the_links_it_crosses():
    """The multi-worker sentence named only the fastest GPU's link ('over nvlink within a
    machine') for a ring through A100 (NVLink) and T4 (PCIe) machines, paced by the T4s."""
    from components.core.selection.explanation import explain

    model = model_profile.profile_model("resnet50")
    mix = Topology(4, 4, "a100", network_gbps=200, nics=2, gpu_mix=(("a100", 2), ("t4", 2)))
    rec = recommend(mix, model, batch_size=32)
    ring = next(p for p in [rec.chosen, *rec.alternatives]
                if p.strategy == "multi_worker_mirrored" and p.layout.workers == 4)  # fmt: skip
    said = explain(ring, [ring], mix, model, 32)
    assert any("(over each machine's nvlink or pcie, at the pace of the slowest, the network "
               "between them)" in r for r in said)  # fmt: skip
    a100s = Topology(2, 4, "a100", network_gbps=200, nics=2)
    alike = recommend(a100s, model, batch_size=32)
    assert any("(over nvlink within a machine, the network between them)" in r
               for r in explain(alike.chosen, [alike.chosen], a100s, model, 32))  # fmt: skip
