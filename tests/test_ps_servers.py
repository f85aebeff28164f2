"""Parameter servers are costed on the CPU machines `train` gives them, and billed so.

Across machines each server runs on a CPU machine of `--ps-machine-type` (train's and
select's, default n1-standard-8), whose egress Compute Engine caps at 2 Gbit/s per vCPU
and 32 in all. `select` costed them at the GPU machines' NIC rate times `--nics` while
billing them as n1-standard-4 machines: on 4 x 8 A100 with 4 x 100 Gbit/s NICs each
server moved 400 Gbit/s, 25 times what its machine sends, and the asynchronous
parameter_server came out the answer.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from components.core import model_profile
from components.core.config import ConfigError
from components.core.cpu_machine import DEFAULT_PS_MACHINE_TYPE, cpu_machine, holding
from components.core.hardware import get_gpu
from components.core.selection import Topology
from components.core.selection.device_compute import FITTED
from components.core.selection.memory import server_state_bytes
from pipelines.cli import main
from pipelines.cli.cloud_train import add_cloud_arguments

PRICES = Path(__file__).parents[1] / "components" / "core" / "data" / "prices.json"
A100_CLUSTER = ["select", "--machines", "4", "--gpus-per-machine", "8", "--gpu", "a100",
                "--network-gbps", "100", "--nics", "4", "--network-path", "host", "--model",
                "resnet50", "--heterogeneous", "1.3", "--async-ok", "--json"]  # fmt: skip


def _select(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _ps_row(doc: dict, workers: int) -> dict:
    rows = [doc, *doc["alternatives"]]
    return next(r for r in rows if r["strategy"] == "parameter_server"
                and r["layout"]["workers"] == workers)  # fmt: skip


def test_cpu_machine_types_know_their_memory_and_egress():
    assert cpu_machine("n1-standard-8").egress_gbps == 16  # the network-bandwidth page's example
    assert cpu_machine("n1-standard-8").memory_gb == 30
    assert cpu_machine("n1-standard-32").egress_gbps == 32  # the cap, not 64
    assert cpu_machine("n2-highcpu-2").egress_gbps == 4
    assert cpu_machine("n2-highmem-4").memory_gb == 32
    # a larger shape of the same family and kind, where the memory needs it
    assert holding(cpu_machine("n1-standard-8"), 37.5).name == "n1-standard-16"
    assert holding(cpu_machine("n1-standard-8"), 10).name == "n1-standard-8"
    assert holding(cpu_machine("n1-highcpu-2"), 10_000).name == "n1-highcpu-96"
    # shapes as Compute Engine offers them: no 1-vCPU highmem or highcpu, no n2-highcpu-128
    assert cpu_machine("n2-highmem-128").memory_gb == 864  # not 8 x 128
    assert holding(cpu_machine("n1-highmem-2"), 1).name == "n1-highmem-2"
    for name in ("c2-standard-8", "n1-standard-12", "n1-standard", "a2-highgpu-1g",
                 "n1-highmem-1", "n1-highcpu-1", "n2-highcpu-128"):  # fmt: skip
        with pytest.raises(ConfigError, match="--ps-machine-type"):
            cpu_machine(name)


def test_train_and_select_give_servers_the_same_machine_type_by_default():
    parser = argparse.ArgumentParser()
    add_cloud_arguments(parser)
    assert parser.parse_args([]).ps_machine_type == DEFAULT_PS_MACHINE_TYPE
    assert Topology().ps_machine_type == DEFAULT_PS_MACHINE_TYPE == "n1-standard-8"


def test_servers_move_what_their_machine_sends_not_the_gpu_machines_nics(capsys):
    doc = _select(capsys, A100_CLUSTER)
    # the synchronous ring on the A100 machines is the answer now, not 25,639 examples/s
    # of asynchronous parameter servers at 400 Gbit/s each
    assert doc["strategy"] == "multi_worker_mirrored"
    ps = _ps_row(doc, 4)
    servers = ps["layout"]["ps"]
    model = model_profile.profile_model("resnet50")
    # each server pulls and pushes its shard to 4 workers at 16 Gbit/s (fitted efficiency)
    server_bps = 16 / 8 * 1e9 * FITTED.ps_network_efficiency
    by_hand = 2 * 4 * model.gradient_bytes / servers / server_bps
    assert ps["predicted"]["communication_s"] + 1e-9 >= by_hand * 0.5  # half hidden at most
    assert ps["predicted"]["examples_per_second"] < doc["predicted"]["examples_per_second"]


def test_a_larger_ps_machine_type_reaches_the_step_time_and_the_bill(capsys):
    argv = [*A100_CLUSTER, "--prices"]
    small = _select(capsys, [*argv, "--ps-machine-type", "n1-standard-4"])
    large = _select(capsys, [*argv, "--ps-machine-type", "n1-standard-32"])
    slow, fast = _ps_row(small, 4), _ps_row(large, 4)
    assert fast["predicted"]["examples_per_second"] > 1.5 * slow["predicted"]["examples_per_second"]
    # billed as what it runs on: its servers and the coordinator on n1-standard-32
    prices = json.loads(PRICES.read_text())["machine_types"]
    gpu_machines = 4 * prices["a2-highgpu-8g"]["usd_per_hour"]
    hourly = gpu_machines + (fast["layout"]["ps"] + 1) * prices["n1-standard-32"]["usd_per_hour"]
    usd = hourly / (fast["predicted"]["examples_per_second"] * 3600) * 1e6
    assert fast["usd_per_million_examples"] == pytest.approx(usd, rel=1e-4)  # JSON keeps 6 digits


def test_the_reason_names_the_server_machine_and_its_rate(capsys):
    argv = ["select", "--machines", "4", "--gpus-per-machine", "8", "--gpu", "v100",
            "--network-gbps", "25", "--network-path", "host", "--model", "resnet50",
            "--async-ok"]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recommended: parameter_server")
    said = ("each server is costed on an n1-standard-8, which sends at most 16 Gbit/s where a "
            "worker machine moves 25 (Compute Engine allows 2 per vCPU: a larger "
            "--ps-machine-type moves up to 25); run them on non-preemptible machines")  # fmt: skip
    assert said in out


def test_servers_holding_a_large_share_are_costed_on_a_larger_shape():
    model = model_profile.from_params(10_000_000, 1e8, 1e5).with_sparse_embedding(10_000_000_000)
    # 10.01e9 parameters x 12 bytes over 4 servers: 30 GB each, 37.5 with headroom
    from components.core.selection.memory import server_machine, server_network_gbps

    topology = Topology(4, 1, "v100", network_gbps=100)
    share = server_state_bytes(model) / 4
    assert server_machine(topology, share).name == "n1-standard-16"
    assert server_network_gbps(topology, share) == 32
    # slower networks bound the servers too
    assert server_network_gbps(Topology(4, 1, "v100", network_gbps=10), share) == 10
    # one GPU machine's servers get machines of their own too, at their egress alone
    assert server_machine(Topology(1, 8, "v100"), share).name == "n1-standard-16"
    assert server_network_gbps(Topology(1, 8, "v100", network_gbps=10), share) == 32
    # only where train runs them on the worker's host do they share it
    assert server_machine(Topology(1, 8, "cpu"), share) is None


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--ps-machine-type", "c2-standard-8"], "give an N1 or N2 general-purpose type"),
        (
            ["--machines", "1", "--gpu", "cpu", "--ps-machine-type", "n1-standard-8"],
            "--ps-machine-type: on one CPU machine train runs the parameter servers on it",
        ),
    ],
)
def test_a_ps_machine_type_select_cannot_cost_exits_2(capsys, extra, says):
    argv = ["select", "--machines", "4", "--gpus-per-machine", "8", "--gpu", "v100",
            "--model", "resnet50", *extra]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_server_bound_by_the_network_is_not_told_to_grow(capsys):
    """The second reading's case: 4 machines of 4 NICs at 10 Gbit/s. A server's n1-standard-8
    sends 16 Gbit/s, but it has one NIC of 10, the rate it is costed at; a larger machine
    type would gain nothing, where the reason advised one."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "1", "--model", "resnet50",
            "--network-gbps", "10", "--nics", "4", "--async-ok"]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    out = capsys.readouterr().out
    assert ("each server is costed on an n1-standard-8, which moves 10 Gbit/s, one NIC of the "
            "network, where a worker machine moves 40;") in out  # fmt: skip
    assert "a larger --ps-machine-type" not in out


def test_an_empty_ps_machine_type_is_refused_not_taken_as_the_default(capsys):
    argv = ["select", "--machines", "4", "--gpus-per-machine", "8", "--gpu", "v100",
            "--model", "resnet50", "--ps-machine-type", ""]  # fmt: skip
    assert main(argv) == 2
    assert "--ps-machine-type ''" in capsys.readouterr().err


def _hourly(doc: dict) -> float:
    """The chosen candidate's price per hour, from its price per million examples."""
    return doc["usd_per_million_examples"] * doc["predicted"]["examples_per_second"] * 3600 / 1e6


def test_one_gpu_machines_servers_run_on_cpu_machines_of_their_own(capsys):
    """train gives the ps and chief pools CPU machines of --ps-machine-type with one
    worker too (launch.cloud.layout). select had the servers share the T4's n1-standard-4
    (30 GB; they need 60) and exited 2: "no strategy runs on 1 x 1 t4 ...
    its servers need 60 GB"."""
    argv = ["select", "--machines", "1", "--gpus-per-machine", "1", "--gpu", "t4", "--model",
            "mlp", "--sparse-embedding-params", "4e9", "--prices", "--objective", "cost",
            "--json"]  # fmt: skip
    doc = _select(capsys, argv)
    assert (doc["strategy"], doc["layout"]["workers"], doc["layout"]["ps"]) == (
        "parameter_server", 1, 1)  # fmt: skip
    # 4.00002e9 parameters x 12 bytes x 1.25 = 60.0003 GB: more than an n1-standard-16's 60
    assert any("each server is costed on an n1-standard-32" in r for r in doc["reasons"])
    prices = json.loads(PRICES.read_text())
    machines, accelerators = prices["machine_types"], prices["accelerators"]
    worker = (
        machines[get_gpu("t4").machine_type(1)]["usd_per_hour"] + accelerators["t4"]["usd_per_hour"]
    )
    servers = machines["n1-standard-32"]["usd_per_hour"] + machines["n1-standard-8"]["usd_per_hour"]
    assert _hourly(doc) == pytest.approx(worker + servers, rel=1e-4)


def test_one_gpu_machines_price_has_the_servers_and_the_chief(capsys):
    """On 1 x 4 T4 parameter_server was priced as the GPU machine alone (2.92 USD/h) with
    its transfers over PCIe; its servers and coordinator are billed now, and it moves
    at the servers' egress."""
    argv = ["select", "--machines", "1", "--gpus-per-machine", "4", "--gpu", "t4", "--model",
            "mlp", "--sparse-embedding-params", "4e9", "--prices", "--json"]  # fmt: skip
    doc = _select(capsys, argv)
    assert doc["strategy"] == "parameter_server"
    prices = json.loads(PRICES.read_text())
    machines, accelerators = prices["machine_types"], prices["accelerators"]
    worker = machines[get_gpu("t4").machine_type(4)]["usd_per_hour"]
    worker += 4 * accelerators["t4"]["usd_per_hour"]
    assert worker == pytest.approx(2.92, abs=0.01)  # what it was priced at alone
    servers = machines["n1-standard-32"]["usd_per_hour"] + machines["n1-standard-8"]["usd_per_hour"]
    assert _hourly(doc) == pytest.approx(worker + servers, rel=1e-4)
    # a --ps-machine-type reaches one machine's servers too
    big = _select(capsys, [*argv, "--ps-machine-type", "n1-standard-64"])
    servers = machines["n1-standard-64"]["usd_per_hour"] * 2  # servers and chief
    assert _hourly(big) == pytest.approx(worker + servers, rel=1e-4)
