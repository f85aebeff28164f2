"""Tests of step_time."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest

from components.core import model_profile, selection
from components.core.config import ConfigError
from components.core.model_profile import PUBLISHED_PROFILES, from_params
from components.core.selection import (
    Topology,
    device_compute,
    machine_speeds,
    memory,
    recommend,
    step_time,
)
from pipelines.cli import main
from tests.selection_helpers import RESNET101, ROOT, _comparison, _recsys


def test_ring_allreduce_matches_hand_computation():
    # 2 (n-1)/n x bytes / bandwidth = 2 x 3/4 x 100 MB / 10 GB/s = 15 ms
    assert step_time.ring_allreduce_time(100e6, 4, 10e9) == pytest.approx(0.015)
    # plus 2 (n-1) = 6 hops of 10 us
    assert step_time.ring_allreduce_time(100e6, 4, 10e9, 10e-6) == pytest.approx(0.01506)
    assert step_time.ring_allreduce_time(100e6, 1, 10e9) == 0.0


def test_allreduce_across_machines_is_one_ring_over_every_replica():
    # 2 machines x 4 GPUs: each NIC carries 2 x 7/8 x 1e8 bytes at 1e9 B/s = 175 ms,
    # not the 100 ms of a hierarchical all-reduce (2 x 1/2 x 1e8 / 1e9)
    t = step_time.allreduce_across_machines_time(1e8, 2, 4, 1e11, 1e9)
    assert t == pytest.approx(0.175)
    # the slowest link sets the pace, whichever it is
    assert step_time.allreduce_across_machines_time(1e8, 2, 4, 1e9, 1e11) == pytest.approx(0.175)
    # of the ring's 2 x 7 steps, 2 x 2 cross the network (NCCL's nInterSteps), 10 stay inside
    with_latency = step_time.allreduce_across_machines_time(1e8, 2, 4, 1e11, 1e9, 10e-6, 50e-6)
    assert with_latency == pytest.approx(0.175 + 10 * 10e-6 + 4 * 50e-6)
    # one machine: a ring over its GPUs alone
    one = step_time.allreduce_across_machines_time(1e8, 1, 4, 1e11, 1e9)
    assert one == pytest.approx(step_time.ring_allreduce_time(1e8, 4, 1e11))


def test_parameter_server_time_splits_large_variables_over_the_servers():
    # as Strategist's MinSizePartitioner splits it: 20 MB on each of 4 servers
    # is under the 25 MB even share, so each server moves 4 x 25 MB, x2
    assert step_time.parameter_server_time(100e6, 80e6, 4, 4, 1e9) == pytest.approx(0.2)
    # a variable below 2 x 256 KiB stays one shard: 4 x 0.4 MB on the busiest of 4 servers
    assert step_time.parameter_server_time(1e6, 0.4e6, 4, 4, 1e9) == (
        pytest.approx(2 * 4 * 0.4e6 / 1e9)
    )


def test_strategist_parameter_servers_split_a_params_model_over_all_of_them(capsys):
    """A --params model (largest variable unknown, so all of it) was costed as one variable
    on one server: every server count gave the same step. Strategist's trainer partitions
    each large variable over the servers (strategies.py), and select now costs that."""
    argv = ["select", "--machines", "8", "--gpus-per-machine", "1", "--gpu", "v100",
            "--params", "100000000", "--gflops-per-example", "20", "--async-ok",
            "--network-gbps", "25", "--ps-machine-type", "n1-standard-16", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["strategy"] == "parameter_server" and out["layout"]["ps"] == 8
    mwms = next(a for a in out["alternatives"] if a["strategy"] == "multi_worker_mirrored")
    # 400 MB over 8 servers: 50 MB each, against 400 MB on one server before (97 examples/s)
    assert out["predicted"]["examples_per_second"] > 1.1 * mwms["predicted"]["examples_per_second"]


def test_compute_overlap_and_memory_formulas():
    # 3 x 1 GFLOP x 64 / 10 TFLOP/s, and the launch
    one_gflop = model_profile.ModelProfile("m", 1_000_000, 1e9)
    step = device_compute.step_compute_time(one_gflop, 64, 10.0)
    assert step == pytest.approx(0.0192 + device_compute.STEP_LAUNCH_S)
    # half of 0.1 s hides behind 0.2 s of backward
    assert step_time.exposed_communication(0.1, 0.3, 0.5) == pytest.approx(0.05)
    # at most the backward time (2/3 of 0.3 s) hides
    assert step_time.exposed_communication(1.0, 0.3, 0.5) == pytest.approx(0.8)
    model = model_profile.ModelProfile("m", 1_000_000, 1e6, activation_bytes_per_example=1000)
    # weights + gradients + 2 Adam moments = 16 bytes/param, plus 10 x 1 kB activations,
    # of which back-propagation keeps the calibrated share
    kept = selection.memory.KEPT_ACTIVATION_FRACTION
    assert memory.memory_needed_bytes(model, 10, True) == pytest.approx(16e6 + 10e3 * kept)
    # mixed precision keeps 16-bit activations; weights, gradients and Adam stay float32
    assert memory.memory_needed_bytes(model, 10, True, "mixed") == pytest.approx(16e6 + 5e3 * kept)
    fitted = device_compute.FITTED
    assert device_compute.achievable_tflops("v100") == pytest.approx(
        15.7 * fitted.achievable_fraction_cuda_cores
    )
    # TF32 (A100 in float32) and FP16 tensor cores have fractions of their own
    assert device_compute.achievable_tflops("a100") == pytest.approx(
        156 * fitted.achievable_fraction_tf32
    )
    assert device_compute.achievable_tflops("v100", "mixed") == pytest.approx(
        125 * fitted.achievable_fraction_tensor_cores
    )


def test_slow_network_makes_parameter_server_worse_than_allreduce():
    # at 1 Gbit/s every worker's pull and push of ResNet-101's 178 MB outlasts the ring
    rec = recommend(Topology(16, 1, "v100", network_gbps=1), RESNET101)
    every = [rec.chosen, *rec.alternatives]
    ps = next(a for a in every if a.strategy == "parameter_server" and a.layout.workers == 16)
    ring = next(a for a in every if a.strategy == "multi_worker_mirrored")
    assert ring.examples_per_second > ps.examples_per_second and ps.layout.ps >= 1
    said = (
        f"The fastest other strategy, parameter_server (16/{ps.layout.ps}/1 workers/ps/gpus), is "
    )
    assert any(r.startswith(said + f"predicted at {ps.rank_examples_per_second:,.0f}")
               for r in rec.reasons)  # fmt: skip


def test_tensorflows_one_pack_all_reduce_hides_nothing_with_or_without_xla(capsys):
    """Strategist's strategies all-reduce every gradient in one pack once back-propagation
    ends (bytes_per_pack 0): `select` costs all of it into the step, and says so."""
    tf_run = Topology(4, 8, "v100", network_gbps=10)
    compute, exposed, comm = step_time.predict_allreduce(tf_run, RESNET101, 64, 4, 8)
    assert exposed == pytest.approx(comm)
    argv = ["select", "--machines", "4", "--gpus-per-machine", "8", "--model", "resnet101",
            "--network-gbps", "10", "--json"]  # fmt: skip
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*argv, "--jit-compile"]) == 0
    xla = json.loads(capsys.readouterr().out)
    assert xla["strategy"] == plain["strategy"] == "multi_worker_mirrored"
    assert xla["predicted"]["communication_s"] == plain["predicted"]["communication_s"]
    assert any("all of it exposed (one pack after back-propagation" in r for r in plain["reasons"])
    assert any("--all-reduce-pack-mb splits" in r for r in plain["reasons"])
    # split into packs, multi_worker_mirrored's all-reduce overlaps back-propagation
    assert main([*argv, "--all-reduce-pack-mb", "32"]) == 0
    packed = json.loads(capsys.readouterr().out)
    assert packed["strategy"] == "multi_worker_mirrored"
    assert packed["predicted"]["communication_s"] < 0.5 * plain["predicted"]["communication_s"]
    assert any("not hidden behind back-propagation" in r for r in packed["reasons"])


def test_an_overlay_network_delivers_a_fitted_share_of_the_nics():
    c = dataclasses.replace(device_compute.FITTED, overlay_network_share=0.25)
    host = Topology(8, 8, "v100", network_gbps=25)
    overlay = dataclasses.replace(host, network_path="overlay")
    _, _, comm = step_time.predict_allreduce(host, RESNET101, 64, 8, 8, constants=c)
    _, _, comm_overlay = step_time.predict_allreduce(overlay, RESNET101, 64, 8, 8, constants=c)
    # the same bytes through a quarter of the rate: the inter-machine part takes 4x as long
    intra = step_time.ring_allreduce_time(
        RESNET101.gradient_bytes, 8, 150e9 * c.nvlink_efficiency, 10e-6
    )
    assert comm_overlay - intra > 3.5 * (comm - intra)
    # one machine has no traffic between machines: the path changes nothing
    one = dataclasses.replace(overlay, machines=1)
    assert step_time.predict_allreduce(one, RESNET101, 64, 1, 8, constants=c) == (
        step_time.predict_allreduce(dataclasses.replace(host, machines=1), RESNET101, 64, 1, 8,
                                    constants=c)
    )  # fmt: skip
    with pytest.raises(ConfigError, match="--network-path must be host or overlay, got 'vxlan'"):
        dataclasses.replace(host, network_path="vxlan").validate()


def test_an_overlay_uses_one_nic_of_several_and_host_networking_all_of_them():
    """A pod on a container overlay has one interface; --nics only helps on the host path."""
    four = Topology(8, 8, "v100", network_gbps=25, nics=4)
    one = dataclasses.replace(four, nics=1)
    assert four.machine_network_gbps == 100
    overlay_four = dataclasses.replace(four, network_path="overlay")
    overlay_one = dataclasses.replace(one, network_path="overlay")
    assert overlay_four.machine_network_gbps == 25
    assert step_time.predict_allreduce(overlay_four, RESNET101, 64, 8, 8) == (
        step_time.predict_allreduce(overlay_one, RESNET101, 64, 8, 8)
    )
    assert (
        step_time.predict_allreduce(four, RESNET101, 64, 8, 8)[2]
        < (step_time.predict_allreduce(one, RESNET101, 64, 8, 8)[2])
    )
    assert "25 Gbps network (overlay, 1 of 4 NICs)" in overlay_four.describe()
    host = selection.recommend(four, RESNET101, batch_size=64)
    assert host.strategy == "multi_worker_mirrored"
    assert any("machines on a 100 Gbps network (4 x 25):" in r for r in host.reasons)
    rec = selection.recommend(overlay_four, RESNET101, batch_size=64)
    assert any("hostNetwork gives all 4 NICs (a pod uses 1)" in r for r in rec.reasons)


def test_jit_compile_changes_parameter_servers_not_a_one_pack_all_reduce(capsys):
    """The review's case: docs/selection.md said --jit-compile 'changes no prediction'
    under the one-pack all-reduce, while parameter_server went from 3,881 to 3,057."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "4", "--gpu", "v100", "--model",
            "resnet50", "--network-gbps", "25", "--json"]  # fmt: skip

    def predicted(*extra: str) -> dict[str, float]:
        assert main([*argv, *extra]) == 0
        doc = json.loads(capsys.readouterr().out)
        return {(p["strategy"], p["layout"]["workers"]): p["predicted"]["examples_per_second"]
                for p in [doc, *doc["alternatives"]]}  # fmt: skip

    plain, xla = predicted(), predicted("--jit-compile")
    assert xla[("parameter_server", 4)] < 0.9 * plain[("parameter_server", 4)]
    for one_pack in (("multi_worker_mirrored", 4), ("mirrored", 1)):
        assert xla[one_pack] == plain[one_pack]
    packed = predicted("--all-reduce-pack-mb", "25")
    assert predicted("--all-reduce-pack-mb", "25", "--jit-compile")[
        ("multi_worker_mirrored", 4)] < packed[("multi_worker_mirrored", 4)]  # fmt: skip


def test_tiny_model_pays_latency_not_bandwidth():
    rec = recommend(Topology(1, 8, "v100", "pcie"), from_params(17_226, 34_048.0))
    mirrored = rec.chosen if rec.strategy == "mirrored" else rec.alternatives[0]
    # 0.07 MB of gradients: 14 ring hops of 15 us and a latency per tensor
    # dominate 0.01 ms of transfer over PCIe 3 (15.8 GB/s nominal)
    fitted = device_compute.FITTED
    transfer = 2 * 7 / 8 * 17_226 * 4 / (15.8e9 * fitted.pcie_efficiency)
    latency = 14 * 15e-6 + 2 * fitted.tensor_latency_s
    assert mirrored.raw_communication_s == pytest.approx(transfer + latency, rel=1e-6)
    assert transfer < latency
    # the latency shows in the efficiency although the transfer is negligible
    assert mirrored.scaling_efficiency < 0.95


def test_a_parameter_server_record_decides_the_server_count_it_ran(tmp_path):
    topology = Topology(4, 8, "v100", network_gbps=100)
    predicted = next(p for p in recommend(topology, RESNET101).alternatives
                     if p.strategy == "parameter_server")  # fmt: skip
    path = Path(_comparison(tmp_path, "ps.json", [("parameter_server", 6000.0)]))
    doc = json.loads(path.read_text())
    doc["results"].append({**doc["results"][0], "ps": 1, "examples_per_second": 2000.0})
    path.write_text(json.dumps(doc))  # 4 servers ran at 6,000, 1 server at 2,000
    assert predicted.layout.ps != 4
    rec = recommend(topology, RESNET101, history=selection.load_history([str(path)]),
                    async_ok=True)  # fmt: skip
    ps = next(p for p in [rec.chosen, *rec.alternatives] if p.strategy == "parameter_server")
    assert (ps.layout.ps, ps.measured_examples_per_second) == (4, 6000.0)
    assert any("(4 worker(s) x 8 device(s), 4 parameter server(s))" in r
               and "(1 record)" in r for r in rec.reasons)  # fmt: skip
    assert any("4 servers as measured (" in r for r in rec.reasons)
    assert not any("match no candidate" in r for r in rec.reasons)  # the 1-server one was weighed
    # re-costed at the measured count: its prediction is that of 4 servers
    from components.core.selection import step_time

    c, e, _ = step_time.predict_parameter_server(topology, RESNET101, 64, 4, 4, 8)
    assert ps.step_time_s == pytest.approx(c + e)


def test_the_network_caveat_follows_only_a_record_that_crossed_the_network(tmp_path):
    path = _comparison(tmp_path, "c.json", [("one_device", 9e6)])
    doc = json.loads(Path(path).read_text())
    doc["results"][0].update(workers=1, gpus_per_machine=1, num_replicas=1)
    doc["results"][0]["hardware"].update(machines=1, gpus_per_machine=1)
    Path(path).write_text(json.dumps(doc))
    topology = Topology(4, 8, "v100", network_gbps=100)
    alone = recommend(topology, RESNET101, history=selection.load_history([path]))
    assert alone.strategy == "one_device" and alone.chosen.measured_examples_per_second == 9e6
    assert not any("do not state the network" in r for r in alone.reasons)
    assert any("predicted to give" in r for r in alone.reasons)
    spread = _comparison(tmp_path, "m.json", [("multi_worker_mirrored", 9e6)])
    across = recommend(topology, RESNET101, history=selection.load_history([spread]))
    assert any("do not state the network" in r for r in across.reasons)


def test_nics_multiply_the_machine_bandwidth():
    one = Topology(4, 8, "v100", network_gbps=25)
    four = Topology(4, 8, "v100", network_gbps=25, nics=4)
    assert four.machine_network_gbps == 100
    assert "100 Gbps network (4 x 25)" in four.describe()
    slow = recommend(one, RESNET101).chosen
    fast = recommend(four, RESNET101).chosen
    assert fast.raw_communication_s < slow.raw_communication_s


def test_many_small_tensors_cost_more_than_few_big_ones():
    """SE-ResNeXt (446 tensors) pays more per step than a model of equal bytes in 4 tensors."""
    se = PUBLISHED_PROFILES["se_resnext101_32x4d"]
    few = dataclasses.replace(se, tensors=4)
    topo = Topology(4, 8, "v100", network_gbps=100)
    many_comm = step_time.predict_allreduce(topo, se, 64, 4, 8)[2]
    few_comm = step_time.predict_allreduce(topo, few, 64, 4, 8)[2]
    assert many_comm - few_comm == pytest.approx(442 * device_compute.FITTED.tensor_latency_s)


def test_link_speed_follows_the_gpu_generation():
    from components.core.selection.step_time import link_bandwidth_gbps

    assert link_bandwidth_gbps(Topology(1, 8, "p100", "nvlink")) == 80
    assert link_bandwidth_gbps(Topology(1, 8, "v100")) == 150
    assert link_bandwidth_gbps(Topology(1, 8, "a100")) == 300
    assert link_bandwidth_gbps(Topology(1, 8, "h100")) == 450
    assert link_bandwidth_gbps(Topology(1, 4, "t4")) == pytest.approx(15.8)
    assert link_bandwidth_gbps(Topology(1, 4, "h100", "pcie")) == 63


def test_logical_cpu_devices_share_the_machines_cores():
    """Two logical CPU devices on one machine share its cores: each replica's step takes as
    long as both on one device (a local mirrored run measures about one device's throughput,
    docs/benchmarks.md section 5), while two CPU machines each compute alone; and TensorFlow
    gives a multi-worker strategy's workers one CPU device each."""
    mlp = model_profile.profile_model("mlp")
    one_machine = recommend(Topology(1, 2, "cpu"), mlp, batch_size=32)
    mirrored = next(a for a in one_machine.alternatives if a.strategy == "mirrored")
    single = one_machine.chosen.single_gpu_step_s
    assert one_machine.strategy == "one_device"
    assert mirrored.compute_s >= 2 * single
    assert mirrored.examples_per_second < one_machine.chosen.examples_per_second
    assert any(r.startswith("The 2 logical CPU devices share this machine's cores")
               for r in one_machine.reasons)  # fmt: skip
    two_machines = step_time.predict_allreduce(Topology(2, 1, "cpu"), mlp, 32, 2, 1)[0]
    assert two_machines < 1.1 * single
    rec = recommend(Topology(4, 4, "cpu", network_gbps=100), RESNET101, batch_size=32)
    layouts = {p.strategy: p.layout for p in [rec.chosen, *rec.alternatives]}
    assert layouts["multi_worker_mirrored"].gpus_per_machine == 1
    assert layouts["parameter_server"].gpus_per_machine == 1


def test_embedding_model_on_one_machine_uses_same_machine_servers_and_names_sharding():
    """10B embedding parameters on one 8 x A100: no network between machines in the
    answer, sharding named. train's servers, on CPU machines of their own, move at
    their egress alone."""
    topo = Topology(1, 8, "a100", network_gbps=10)
    rec = recommend(topo, _recsys(), batch_size=512)
    assert rec.strategy == "parameter_server" and rec.layout.workers == 1
    one = next(a for a in rec.alternatives if a.strategy == "one_device")
    assert not one.feasible
    # on one machine the network flag does not matter, wherever the servers run
    for ps_machine_type in ("n1-standard-8", "n1-standard-32"):
        on = dataclasses.replace(topo, ps_machine_type=ps_machine_type)
        slow = dataclasses.replace(on, network_gbps=1)
        step = recommend(on, _recsys(), batch_size=512).chosen.step_time_s
        assert recommend(slow, _recsys(), batch_size=512).chosen.step_time_s == pytest.approx(step)
    assert any(r.startswith("The table (160 GB") and
               "fits the 8 GPUs' 288 GB" in r for r in rec.reasons)  # fmt: skip
    # a table too big for all the GPUs together gets no such advice
    huge = recommend(topo, _recsys(40_000_000_000), batch_size=512)
    assert not any(r.startswith("The table (") for r in huge.reasons)


def test_more_lookups_per_example_cost_more_parameter_server_traffic():
    topo = Topology(4, 8, "a100", network_gbps=25)
    few = from_params(100_000_000, 0.2e9, 1e5).with_sparse_embedding(10**10, 64, 1)
    many = from_params(100_000_000, 0.2e9, 1e5).with_sparse_embedding(10**10, 64, 100)
    ps = [next(p for p in selection.candidates(topo, m, 512) if p.strategy == "parameter_server")
          for m in (few, many)]  # fmt: skip
    assert ps[1].raw_communication_s > ps[0].raw_communication_s


def test_cpu_workers_pay_a_grpc_call_per_ring_hop():
    """Between CPU workers TensorFlow's ring all-reduce is a gRPC call per hop (about 1 ms on
    127.0.0.1, benchmarks/collective_latency.py), not an NCCL send of tens of microseconds:
    a tiny MLP on two CPU machines trains fastest on one, as a local compare measures."""
    from components.core.selection import step_time

    mlp = model_profile.profile_model("mlp")
    cpu, gpu = Topology(2, 1, "cpu", network_gbps=10), Topology(2, 1, "t4", network_gbps=10)
    _, _, cpu_comm = step_time.predict_allreduce(cpu, mlp, 32, 2, 1)
    _, _, gpu_comm = step_time.predict_allreduce(gpu, mlp, 32, 2, 1)
    # two workers, one ring for the gradients and one for each of Keras's per-step scalars:
    # 2 (N-1) = 2 hops each, every one across the network
    latency = mlp.tensors * device_compute.FITTED.tensor_latency_s
    rings = 1 + step_time.keras_step_scalar_all_reduces()
    assert cpu_comm - latency == pytest.approx(rings * 2 * step_time.CPU_RING_HOP_S, rel=0.05)
    assert gpu_comm < cpu_comm / 5  # NCCL's hops: tens of microseconds
    assert step_time.allreduce_across_machines_time(0, 2, 1, 1e9, 1e9, 1.0, 10.0) == 20.0
    assert step_time.allreduce_across_machines_time(0, 2, 8, 1e9, 1e9, 1.0, 10.0) == 40 + 26
    # parameter servers pay a round trip for the pull and one for the push
    _, _, ps_comm = step_time.predict_parameter_server(cpu, mlp, 32, 2, 2, 1)
    assert ps_comm > 2 * step_time.CPU_RING_HOP_S
    rec = recommend(cpu, mlp)
    assert rec.strategy == "one_device"
    assert any(
        "Communication would cost more than the extra CPU devices give" in r for r in rec.reasons
    )


def test_machine_speeds_are_counted_by_group_alike_for_any_machine_count():

    mix = Topology(9, 8, "a100", gpu_mix=(("t4", 6), ("a100", 3)))
    half = Topology(9, 8, "v100", heterogeneous=True, heterogeneity_slowdown=3.0)
    for topology in (mix, half, Topology(9, 8, "v100")):
        for k in range(1, 10):
            slowdowns = machine_speeds.machine_slowdowns(topology, k)
            assert len(slowdowns) == k
            assert machine_speeds.mean_machine_speed(topology, k) == pytest.approx(
                sum(1 / s for s in slowdowns) / k
            )
    assert machine_speeds.machine_slowdowns(mix, 4)[2:] == [
        1.0,
        pytest.approx(24.5 / 4.2, rel=0.05),
    ]
    assert machine_speeds.machine_slowdowns(half, 9)[4:6] == [1.0, 3.0]  # the faster 5 first
    # twenty thousand machines answer (grouped: no list per machine in each prediction)
    rec = recommend(dataclasses.replace(half, machines=20_000), RESNET101)
    assert rec.layout.workers < 20_000


def test_a_multi_worker_step_pays_for_the_scalars_keras_all_reduces():
    """Keras all-reduces its loss and metric across the workers every step, each in a
    collective of its own: a ring of gRPC calls between CPU workers, NCCL's small-message
    tree between GPU machines. Within one machine it sums them locally, and the published
    runs' frameworks (Horovod, PyTorch, MXNet) reduce no metric every step."""
    from components.core.selection import step_time

    mlp = model_profile.profile_model("mlp")
    cpu = Topology(2, 1, "cpu", network_gbps=10)
    compute, exposed, _ = step_time.predict_allreduce(cpu, mlp, 32, 2, 1)
    exposed_quiet = exposed - step_time.step_scalar_seconds(cpu, mlp, 2, 1)
    # 6 rings of 2 hops each, none hidden
    assert exposed - exposed_quiet == pytest.approx(6 * 2 * step_time.CPU_RING_HOP_S)
    assert step_time.keras_step_scalar_all_reduces() == 6
    # the two-worker step a local run measures, about 13 ms (docs/benchmarks.md
    # section 8), and not the 2-3 ms the gradients' one ring alone would give
    assert 0.008 < compute + exposed < 0.016 and compute + exposed_quiet < 0.004
    # GPUs: NCCL's tree latency, tens of microseconds, far below the gradients' ring
    gpus = Topology(6, 8, "a100", network_gbps=100)
    tree = step_time.NCCL_TREE_LL_BASE_S + 2 * (
        7 * step_time.NCCL_TREE_LL_HOP_S["nvlink"] + 2 * step_time.NCCL_TREE_LL_HOP_S["network"]
    )  # floor(log2 6) = 2 hops across
    assert step_time.step_scalar_seconds(gpus, mlp, 6, 8) == pytest.approx(6 * tree)
    assert 20e-6 < tree < 60e-6
    # one machine sums locally
    assert step_time.step_scalar_seconds(gpus, mlp, 1, 8) == 0
    # the reason says where the time goes
    rec = recommend(Topology(4, 8, "a100", network_gbps=100), PUBLISHED_PROFILES["resnet50"])
    assert rec.strategy == "multi_worker_mirrored"
    why = next(r for r in rec.reasons if "homogeneous machines" in r)
    assert "in the 6 scalar all-reduces Keras runs every step" in why


@pytest.mark.cluster
@pytest.mark.parametrize("pack_mb", [0.0, 0.02])
def test_strategists_multi_worker_mirrored_all_reduces_every_gradient_in_one_pack(
    tmp_path, pack_mb
):
    """What `select` costs as no overlap is what TensorFlow does with the strategy Strategist
    builds: two real workers train a Keras step, and TensorFlow logs one pack holding every
    gradient; with `--all-reduce-pack-mb` the same gradients go in several packs, which
    start as their gradients appear (about 15 s each)."""
    from benchmarks.common import run_cluster
    from components.core.config import ClusterConfig

    probe = ROOT / "tests" / "allreduce_pack_probe.py"
    cluster = ClusterConfig("multi_worker_mirrored", workers=2)
    command = [sys.executable, str(probe), str(pack_mb)]
    run_cluster(command, cluster, str(tmp_path), "pack probe", 300)
    log = (tmp_path / "worker-0.log").read_text()
    tensors = int(log.split("trainable tensors: ")[1].split()[0])
    packed = [line for line in log.splitlines() if "Collective all_reduce tensors" in line]
    gradients = next(line for line in packed if f": {tensors} all_reduces" in line)
    packs = int(gradients.rsplit("num_packs = ", 1)[1])
    assert tensors > 1
    # the MLP's 69 KB of gradients: one pack by default, several of 0.02 MB
    assert packs == 1 if pack_mb == 0 else 1 < packs <= tensors, gradients
    # besides the packs, every step all-reduces the scalars `select` charges a multi-worker
    # step: 3 for the loss and 3 for the one metric, each an op of its own
    step = int(log.split("all-reduces in the train step: ")[1].split()[0])
    assert step == packs + step_time.keras_step_scalar_all_reduces()


def test_a_pack_holds_whole_tensors_and_one_pack_hides_nothing():
    """TensorFlow's `group_by_size` fills a pack past its size before starting the next
    and never splits a tensor: a pack larger than ResNet-50's 94 MB of gradients is one
    pack, sent after back-propagation as with no packs at all; a tiny pack size makes at
    most one pack per tensor (it used to charge about 90,000 rings for 0.001 MB)."""
    from components.core.selection import step_time

    resnet50 = PUBLISHED_PROFILES["resnet50"]
    plain = Topology(4, 4, "v100", network_gbps=10)
    at = {mb: dataclasses.replace(plain, all_reduce_pack_mb=mb) for mb in (0.001, 25, 1000)}
    assert step_time.step_all_reduce_packs(at[0.001], resnet50, 4) == resnet50.tensors
    assert step_time.step_all_reduce_packs(at[1000], resnet50, 4) == 1
    assert step_time.step_all_reduce_packs(at[25], resnet50, 4) == 4
    assert not step_time.all_reduce_overlaps(at[1000], resnet50, 4)
    one_pack = step_time.predict_allreduce(at[1000], resnet50, 32, 4, 4)
    assert one_pack == step_time.predict_allreduce(plain, resnet50, 32, 4, 4)
    packed = step_time.predict_allreduce(at[25], resnet50, 32, 4, 4)
    assert sum(packed[:2]) < sum(one_pack[:2])  # 4 packs: 3 of them overlap
    # at most (packs - 1) / packs hides: the last pack's gradients come last
    hidden = packed[2] - packed[1]
    assert hidden <= 0.75 * packed[2] + 1e-9


def test_each_all_reduce_pack_pays_the_rings_latency_again():
    """Packs let the all-reduce overlap back-propagation, but each is one more ring: on two
    CPU workers a tiny MLP in 0.02 MB packs is predicted slower than in one pack, as it
    trained (4,663-5,118 against 5,725-5,756 examples/s on this project's 2-core machine;
    the model's penalty is an upper bound, `step_time.step_all_reduce_packs`)."""
    from components.core.selection import step_time

    mlp = model_profile.profile_model("mlp")
    one = Topology(2, 1, "cpu", network_gbps=10)
    packed = dataclasses.replace(one, all_reduce_pack_mb=0.02)
    packs = step_time.step_all_reduce_packs(packed, mlp, 2)
    assert packs == math.ceil(mlp.gradient_bytes / (0.02 * 2**20)) and packs > 1
    assert step_time.step_all_reduce_packs(packed, mlp, 1) == 1  # one machine
    compute, exposed_one, raw_one = step_time.predict_allreduce(one, mlp, 32, 2, 1)
    _, exposed_packed, raw_packed = step_time.predict_allreduce(packed, mlp, 32, 2, 1)
    assert raw_packed - raw_one == pytest.approx((packs - 1) * 2 * step_time.CPU_RING_HOP_S)
    assert compute + exposed_packed > compute + exposed_one
