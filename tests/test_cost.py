"""Tests of cost: prices per candidate, `--prices` and `--objective cost`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from components.core import selection
from components.core.comparison.pricing import DEFAULT_PRICES_PATH
from components.core.model_profile import PUBLISHED_PROFILES, from_params
from components.core.selection import Topology, recommend
from components.core.selection.summary import as_markdown, as_text
from components.core.selection.topology import Layout
from pipelines.cli import main
from tests.selection_helpers import RESNET101, _with_spot_prices


def test_fewer_machines_of_a_mix_are_costed_priced_and_explained_on_their_own_machines():
    """8 V100 and 8 T4 machines at 8 Gbit/s, ResNet-101: all 16 scale below the floor, 2
    above it. Under the time objective all 16 train (machines of uneven speed: parameter
    servers), priced; the 2 V100 machines are the stated cheaper alternative."""
    from components.core.comparison.pricing import load_prices

    mix = Topology(16, 1, "v100", network_gbps=8, gpu_mix=(("v100", 8), ("t4", 8)))
    rec = recommend(mix, PUBLISHED_PROFILES["resnet101"], batch_size=32, prices=load_prices())
    assert (rec.strategy, rec.layout.workers) == ("parameter_server", 16)
    assert rec.chosen.usd_per_million_examples is not None
    assert (
        "All of them train, the fastest answer; 2 machines (multi_worker_mirrored)"
        in (rec.reasons[0])
    )
    # a slice of the mix that holds one GPU type has no mix's reason for parameter servers
    big = Topology(12, 8, "a100", network_gbps=15, gpu_mix=(("a100", 8), ("t4", 4)))
    options = recommend(big, PUBLISHED_PROFILES["resnet50"], batch_size=32).machine_options
    assert [st for m, st, *_ in options if 1 < m <= 8] == ["multi_worker_mirrored"] * 3


def test_a_gpu_mix_is_priced_machine_by_machine_and_objective_cost_takes_it(capsys):
    """2 A100 and 6 T4 machines: a candidate on all 8 pays for 2 A100 and 6 T4 machines
    (between 8 T4s and 8 A100s), one on 1 machine for the fastest, an A100."""
    from components.core.comparison.pricing import load_prices
    from components.core.selection.cost import usd_per_hour

    prices = load_prices()
    mix = Topology(8, 1, "a100", network_gbps=25, gpu_mix=(("a100", 2), ("t4", 6)))
    rec = recommend(mix, PUBLISHED_PROFILES["resnet50"], batch_size=32, prices=prices)
    every = [rec.chosen, *rec.alternatives]
    ps = next(p for p in every if p.strategy == "parameter_server")
    one = next(p for p in every if p.strategy == "one_device")
    hourly = {g: usd_per_hour(ps, Topology(8, 1, g), prices) for g in ("t4", "a100")}
    assert hourly["t4"] < usd_per_hour(ps, mix, prices) < hourly["a100"]
    assert usd_per_hour(one, mix, prices) == usd_per_hour(one, Topology(1, 1, "a100"), prices)
    argv = ["select", "--machines", "8", "--gpus-per-machine", "1", "--gpu", "a100:2,t4:6",
            "--network-gbps", "25", "--model", "resnet50", "--prices",
            "--objective", "cost"]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    assert "Objective cost:" in capsys.readouterr().out


def test_prices_price_every_candidate_and_name_the_cheapest():
    from components.core.comparison.pricing import load_prices

    prices = load_prices()
    topo = Topology(4, 8, "v100", network_gbps=25)
    rec = recommend(topo, RESNET101, prices=prices)
    assert rec.strategy == "multi_worker_mirrored"
    # 4 x (n1-standard-64 + 8 x V100) an hour, for the predicted examples
    hourly = 4 * (prices.machine_types["n1-standard-64"] + 8 * prices.accelerators["v100"])
    expected = hourly / (rec.chosen.examples_per_second * 3600) * 1e6
    assert rec.chosen.usd_per_million_examples == pytest.approx(expected)
    assert all(p.usd_per_million_examples is not None for p in rec.alternatives)
    assert any(r.startswith("At on-demand list prices (2026-11-22), multi_worker_mirrored costs")
               for r in rec.reasons)  # fmt: skip
    assert "USD/1M examples" in as_text(rec)
    cheap = recommend(topo, RESNET101, prices=prices, objective="cost")
    costs = [cheap.chosen.usd_per_million_examples] + [
        a.usd_per_million_examples for a in cheap.alternatives
    ]
    assert costs[0] == min(costs)
    assert cheap.reasons[0].startswith(f"Objective cost: {cheap.strategy} is the cheapest")
    assert not any("Communication would cost more" in r for r in cheap.reasons)


def test_preemptible_machines_are_priced_at_spot_prices_or_say_they_are_not(tmp_path):
    from components.core.comparison.pricing import load_prices

    topo = Topology(4, 8, "v100", network_gbps=25, preemptible=True)
    on_demand = recommend(topo, RESNET101, prices=load_prices())
    assert any(r.startswith("--preemptible: the price table has no Spot prices") and
               "on-demand list prices" in r for r in on_demand.reasons)  # fmt: skip
    machines = {"n1-standard-64": 0.6, "n1-standard-4": 0.04}
    spot = _with_spot_prices(tmp_path, machines, {"v100": 0.9})
    rec = recommend(topo, RESNET101, prices=spot)
    assert rec.strategy == on_demand.strategy
    by_strategy = {p.strategy: p for p in [rec.chosen, *rec.alternatives]}
    mwm = by_strategy["multi_worker_mirrored"]
    hourly = 4 * (0.6 + 8 * 0.9)  # four n1-standard-64 with 8 V100 each, at Spot prices
    assert mwm.usd_per_million_examples == pytest.approx(
        hourly / (mwm.rank_examples_per_second * 3600) * 1e6
    )
    # the parameter servers and their coordinator, kept off preemptible machines, on demand
    ps = by_strategy["parameter_server"]
    # on train's --ps-machine-type, n1-standard-8
    servers = (ps.layout.ps + 1) * spot.machine_types["n1-standard-8"]
    assert ps.usd_per_million_examples == pytest.approx(
        (hourly + servers) / (ps.rank_examples_per_second * 3600) * 1e6
    )
    assert rec.chosen.usd_per_million_examples < on_demand.chosen.usd_per_million_examples
    assert any(r.startswith(f"At Spot prices for the GPU machines (2026-11-22), {rec.strategy}")
               for r in rec.reasons)  # fmt: skip
    assert not any("no Spot prices" in r for r in rec.reasons)
    assert rec.to_dict()["prices"] == {"gpu_machines": "spot", "parameter_servers": "on-demand",
                                       "as_of": "2026-11-22", "currency": "USD"}  # fmt: skip
    assert on_demand.to_dict()["prices"]["gpu_machines"] == "on-demand"
    assert recommend(topo, RESNET101).to_dict()["prices"] is None
    # the same table prices machines that are not preemptible on demand
    steady = recommend(Topology(4, 8, "v100", network_gbps=25), RESNET101, prices=spot)
    assert any(r.startswith("At on-demand list prices") for r in steady.reasons)


def test_a_machine_without_a_spot_price_is_left_unpriced_not_priced_on_demand(tmp_path):
    spot = _with_spot_prices(tmp_path, {"n1-standard-32": 0.3}, {})  # no Spot V100 price
    topo = Topology(4, 4, "v100", network_gbps=25, preemptible=True)
    rec = recommend(topo, RESNET101, prices=spot, async_ok=True)
    assert all(p.usd_per_million_examples is None for p in [rec.chosen, *rec.alternatives])
    # the sentence names the entry to add
    named = ": accelerator v100 has no spot_usd_per_hour."
    assert any(r.startswith("No price for this hardware") and r.endswith(named)
               for r in rec.reasons)  # fmt: skip


def test_parameter_servers_on_one_gpu_machine_are_billed_with_the_coordinator():
    """train gives the servers and the chief CPU machines of their own with one worker
    too: the bill has them, on the machine type that holds a server's share."""
    from components.core.comparison.pricing import load_prices

    prices = load_prices()
    embedding = from_params(10_000_000, 1e8, 1e5).with_sparse_embedding(2_000_000_000)
    one_machine = prices.machine_types["n1-standard-16"] + 2 * prices.accelerators["v100"]
    # 2.01e9 parameters x 12 bytes x 1.25 = 30.2 GB: an n1-standard-16 per server
    servers = {"n1-standard-8": prices.machine_types["n1-standard-16"], None: 0.0}
    coordinator = {"n1-standard-8": prices.machine_types["n1-standard-8"], None: 0.0}
    for ps_machine_type in ("n1-standard-8",):
        topo = Topology(1, 2, "v100", ps_machine_type=ps_machine_type)
        rec = recommend(topo, embedding, prices=prices, async_ok=True)
        ps = next(p for p in [rec.chosen, *rec.alternatives] if p.strategy == "parameter_server")
        hourly = one_machine + ps.layout.ps * servers[ps_machine_type]
        hourly += coordinator[ps_machine_type]
        assert ps.usd_per_million_examples == pytest.approx(
            hourly / (ps.rank_examples_per_second * 3600) * 1e6
        )


def test_parameter_servers_are_billed_on_machines_that_hold_their_share():
    from components.core.comparison.pricing import load_prices
    from components.core.selection.cost import server_machine_type, usd_per_hour

    prices = load_prices()
    topo = Topology(4, 1, "v100", network_gbps=25)
    embedding = from_params(10_000_000, 1e8, 1e5).with_sparse_embedding(10_000_000_000)
    rec = recommend(topo, embedding, prices=prices, async_ok=True)
    ps = next(p for p in [rec.chosen, *rec.alternatives]
              if p.strategy == "parameter_server" and p.layout.workers == 4)  # fmt: skip
    # 10.01e9 parameters x 12 bytes (with Adam) over 4 servers: 30 GB each, 37.5 with
    # headroom, more than n1-standard-8's 30 GB
    assert ps.layout.ps == 4
    assert server_machine_type(ps, topo) == "n1-standard-16"
    gpu_machine = prices.machine_types["n1-standard-8"] + prices.accelerators["v100"]
    servers = 4 * prices.machine_types["n1-standard-16"]
    # the coordinator on the type train gives it, --ps-machine-type's default
    coordinator = prices.machine_types["n1-standard-8"]
    assert usd_per_hour(ps, topo, prices) == pytest.approx(4 * gpu_machine + servers + coordinator)
    # a dense model's servers hold little: train's default machine, or the one given
    dense = recommend(topo, RESNET101, prices=prices, async_ok=True)
    dense_ps = next(p for p in [dense.chosen, *dense.alternatives]
                    if p.strategy == "parameter_server")  # fmt: skip
    assert server_machine_type(dense_ps, topo) == "n1-standard-8"
    small = dataclasses.replace(topo, ps_machine_type="n2-standard-4")
    assert server_machine_type(dense_ps, small) == "n2-standard-4"


def test_objective_cost_weighs_fewer_machines_and_the_sentences_name_the_cheapest(capsys):
    """Parameter servers for one machine (one n1-standard-16 server, 3.01e9 parameters x
    12 bytes x 1.25 headroom = 45 GB, and the coordinator) are far cheaper per example
    than for four at 10 Gbit/s."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "2", "--gpu", "v100",
            "--params", "1e7", "--gflops-per-example", "0.1",
            "--sparse-embedding-params", "3000000000", "--embedding-lookups-per-example",
            "100", "--network-gbps", "10", "--network-path", "host", "--prices",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    timed = json.loads(capsys.readouterr().out)
    assert main([*argv, "--objective", "cost"]) == 0
    cheap = json.loads(capsys.readouterr().out)
    costs = [cheap["usd_per_million_examples"]] + [
        a["usd_per_million_examples"] for a in cheap["alternatives"]
        if a.get("feasible", True) and a["usd_per_million_examples"] is not None
    ]  # fmt: skip
    assert cheap["usd_per_million_examples"] == min(costs)
    assert cheap["layout"]["workers"] < 4  # fewer machines were weighed, and won
    # the time objective trains on all 4 machines, the faster answer, and says the price
    assert timed["layout"]["workers"] == 4
    assert timed["usd_per_million_examples"] > cheap["usd_per_million_examples"]


def test_a_negative_spot_price_is_refused(tmp_path):
    from components.core.comparison.errors import ReportError

    with pytest.raises(ReportError, match="'t4' \\(Spot\\): price must be a number"):
        _with_spot_prices(tmp_path, {}, {"t4": -1})


def test_objective_cost_pays_for_no_gpu_the_input_cannot_keep_busy():
    from components.core.comparison.pricing import load_prices

    topo = Topology(4, 8, "v100", network_gbps=25, input_examples_per_second=100.0)
    rec = recommend(topo, PUBLISHED_PROFILES["resnet50"], batch_size=32,
                    prices=load_prices(), objective="cost")  # fmt: skip
    # 1 GPU per machine costs an eighth of 8 for the same examples; at the same price per
    # example, 4 machines train 4x as fast as one
    assert rec.layout == Layout(4, 0, 1)
    eight = next(a for a in rec.alternatives if a.layout == Layout(4, 0, 8))
    assert eight.usd_per_million_examples > 5 * rec.chosen.usd_per_million_examples
    assert rec.reasons[1].startswith("More GPUs per machine buy nothing here")
    # explained on the machines it runs on: one GPU each, so no NVLink inside them
    assert "ring all-reduce across machines" in rec.reasons[3]
    assert "nvlink" not in rec.reasons[3]
    layouts = [(a.strategy, a.layout) for a in rec.alternatives]
    assert len(layouts) == len(set(layouts))  # mirrored on one GPU is the one_device row


def test_objective_cost_weighs_a_slower_gpu_of_a_mix_alone(tmp_path):
    from components.core.comparison.pricing import load_prices

    table = json.loads(Path(selection.__file__).parent.parent.joinpath(
        "data", "prices.json").read_text())  # fmt: skip
    table["accelerators"]["t4"]["usd_per_hour"] = 0.05
    (tmp_path / "prices.json").write_text(json.dumps(table))
    mix = Topology(5, 1, "a100", gpu_mix=(("a100", 1), ("t4", 4)), network_gbps=25)
    resnet50 = PUBLISHED_PROFILES["resnet50"]
    bundled = recommend(mix, resnet50, batch_size=32, prices=load_prices(), objective="cost")
    # at list prices the a100 is cheaper per example than a t4 machine (0.99 against 1.13)
    assert (bundled.chosen.label, bundled.chosen.machines_gpu) == ("one_device", "")
    t4_alone = next(a for a in bundled.alternatives if a.label == "one_device on t4")
    assert t4_alone.usd_per_million_examples > bundled.chosen.usd_per_million_examples
    # a cheaper t4 is weighed alone, though the mix's first machine is the a100
    cheap = load_prices(tmp_path / "prices.json")
    rec = recommend(mix, resnet50, batch_size=32, prices=cheap, objective="cost")
    assert (rec.strategy, rec.chosen.machines_gpu) == ("one_device", "t4")
    assert rec.chosen.usd_per_million_examples < t4_alone.usd_per_million_examples
    assert "GPUs per machine 1, on the t4 machines" in as_text(rec)
    assert rec.to_dict()["machines_gpu"] == "t4"
    assert "one t4 computes a step" in rec.reasons[1]  # explained on the t4 machine
    # the time objective names it as the cheapest, as --objective cost picks it
    fastest = recommend(mix, resnet50, batch_size=32, prices=cheap)
    assert fastest.to_dict()["machines_gpu"] is None
    assert any(r.startswith("--objective cost picks one_device on t4 (1/0/1)")
               for r in fastest.reasons)  # fmt: skip
    # and the hardware line names both types
    assert "1 x 1 a100 + 4 x 1 t4, 25 Gbps network" in as_markdown(rec)
    # a record of a t4 alone is matched on the t4 machines, and the tally says so
    record = {"strategy": "one_device", "examples_per_second": 400.0, "workers": 1, "ps": 0,
              "gpus_per_machine": 1, "per_replica_batch_size": 32, "num_replicas": 1,
              "eval_accuracy": 0.7,
              "model": "resnet50", "hardware": {"platform": "vertex", "gpu": "t4",
                                               "gpus_per_machine": 1, "machines": 1}}  # fmt: skip
    (tmp_path / "t4.json").write_text(json.dumps({"results": [record]}))
    history = selection.load_history([str(tmp_path / "t4.json")])
    rec = recommend(mix, resnet50, batch_size=32, prices=cheap, objective="cost", history=history)
    assert rec.chosen.measured_examples_per_second == 400.0
    assert any(r.startswith("On the t4 machines: Measured: one_device") for r in rec.reasons)
    assert not any(r.startswith("None of the") for r in rec.reasons)


T4X4 = ["--machines", "4", "--gpus-per-machine", "1", "--gpu", "t4", "--network-gbps", "10",
        "--network-path", "host"]  # fmt: skip


def _price_file(tmp_path, change) -> str:
    """A copy of the bundled price table, changed by `change(raw)`, as a path."""
    raw = json.loads(DEFAULT_PRICES_PATH.read_text())
    change(raw)
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(raw))
    return str(path)


def _table_rows(text: str) -> list[str]:
    """The candidate rows of `select`'s text table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("strategy "))
    end = lines.index("", start)
    return lines[start + 1 : end]


# ------------------------------------------------------------------ bad price files


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda raw: raw["machine_types"]["a2-highgpu-1g"].update(bundled_gpus="x"),
            "machine type 'a2-highgpu-1g': bundled_gpus must be the whole number of GPUs its "
            "price includes, got 'x'",
        ),
        (
            lambda raw: raw.update(machine_types=[1, 2]),
            '"machine_types" must be an object of machine type -> price',
        ),
        (
            lambda raw: raw.update(local_rehearsal=None),
            '"local_rehearsal" must be an object ({"default_machine_type": ..., '
            '"convention": ...}), got null',
        ),
        (
            lambda raw: raw.update(accelerators=["t4"]),
            '"accelerators" must be an object of GPU name (t4) -> price',
        ),
        # a currency that is no code printed "1.13 None per million examples"
        (lambda raw: raw.update(currency=None), '"currency" must be a three-letter code'),
        (lambda raw: raw.update(currency=""), '"currency" must be a three-letter code'),
        (lambda raw: raw.update(currency=5), '"currency" must be a three-letter code'),
    ],
)
def test_a_price_file_of_the_wrong_shape_is_refused_in_one_line(tmp_path, capsys, change, said):
    path = _price_file(tmp_path, change)
    assert main(["select", *T4X4, "--model", "resnet50", "--prices", path]) == 2
    err = capsys.readouterr().err
    assert f"--prices: {path}: {said}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_directory_given_as_prices_is_called_a_directory(tmp_path, capsys):
    assert main(["select", *T4X4, "--model", "resnet50", "--prices", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"price table {tmp_path}: cannot read it (a directory, not a file)" in err


# ------------------------------------------------------------------ missing prices


def test_a_gpu_sold_only_in_its_machines_is_not_asked_an_accelerator_price(tmp_path, capsys):
    """L4 comes only inside g2 machine types: a price of its own would count it twice."""
    argv = ["select", "--machines", "2", "--gpu", "l4", "--gpus-per-machine", "2",
            "--model", "resnet50", "--network-gbps", "10", "--network-path", "host"]  # fmt: skip
    assert main([*argv, "--prices", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "machine type g2-standard-24 has no usd_per_hour" in out
    assert '(with its l4: "bundled_gpus": 2)' in out
    assert "accelerator l4" not in out
    # given the machine type, without the flag, it is priced without an accelerator
    path = _price_file(tmp_path, lambda raw: raw["machine_types"].update({"g2-standard-24": 2.0}))
    assert main([*argv, "--prices", path, "--json", "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    mirrored = next(a for a in [doc, *doc["alternatives"]] if a["strategy"] == "mirrored")
    examples_per_second = mirrored["predicted"]["examples_per_second"]
    assert mirrored["usd_per_million_examples"] == pytest.approx(
        2.0 / (examples_per_second * 3600) * 1e6, rel=1e-3
    )


def test_objective_cost_refusing_unpriced_hardware_names_the_missing_entries(tmp_path, capsys):
    path = _price_file(tmp_path, lambda raw: raw["accelerators"].pop("t4"))
    assert main(["select", *T4X4, "--model", "resnet50", "--objective", "cost",
                 "--prices", path]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "have no price for 4 x 1 t4, 10 Gbps network: accelerator t4 has no usd_per_hour;" in err
    assert "add them to it (--prices FILE), or use --objective time" in err
    assert main(["select", "--machines", "2", "--gpus-per-machine", "1", "--gpu", "cpu",
                 "--params", "1000", "--objective", "cost"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "CPU machines (--gpu cpu) are not priced; use --objective time" in err


# ------------------------------------------------------------------ how prices read


def test_prices_read_in_the_tables_currency_with_three_significant_digits(tmp_path, capsys):
    """The mlp's candidates cost 0.0063 to 0.013 a million examples: each shows its own."""
    path = _price_file(tmp_path, lambda raw: raw.update(currency="EUR"))
    argv = ["select", *T4X4, "--model", "mlp", "--objective", "cost", "--prices", path]
    assert main([*argv, "--explain"]) == 0
    text = capsys.readouterr().out
    assert "EUR/1M examples" in text and "USD" not in text
    assert "at on-demand list prices (2026-11-22): 0.00634 EUR per million examples." in text
    shown = [row.split()[-1] for row in _table_rows(text)]
    assert shown == ["0.00634", "0.00838", "0.0103", "0.0107", "0.0130"]
    assert main([*argv, "--markdown", "--explain"]) == 0
    markdown = capsys.readouterr().out
    assert "| EUR/1M examples |" in markdown and "USD" not in markdown
    assert main([*argv, "--json", "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["prices"]["currency"] == "EUR"
    assert doc["usd_per_million_examples"] == pytest.approx(0.00634, rel=1e-2)  # the key stays


def test_a_candidate_that_cannot_run_has_no_price(capsys):
    argv = ["select", "--machines", "2", "--gpus-per-machine", "2", "--gpu", "t4",
            "--params", "3e8", "--gflops-per-example", "10", "--sparse-embedding-params", "1e9",
            "--network-gbps", "10", "--network-path", "host", "--prices"]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    rows = [row for row in _table_rows(capsys.readouterr().out) if "(infeasible:" in row]
    assert len(rows) == 3
    assert all(row.split()[-1] == "-" for row in rows)
    assert main([*argv, "--json", "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    infeasible = [a for a in doc["alternatives"] if not a.get("feasible", True)]
    assert infeasible and all(a.get("usd_per_million_examples") is None for a in infeasible)


# ------------------------------------------------------------------ candidates no price weighs


def test_objective_cost_names_the_candidates_it_cannot_price_and_a_faster_one(capsys):
    """An H100 (in a3 machine types the bundled table lacks) beside two T4s: the H100's
    candidates cannot be priced, and its one_device is 16.9x the T4's."""
    argv = ["select", "--machines", "3", "--gpus-per-machine", "1", "--gpu", "h100:1,t4:2",
            "--model", "resnet50", "--network-gbps", "10", "--network-path", "host",
            "--objective", "cost", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    reasons = doc["reasons"]
    assert doc["strategy"] == "one_device" and doc["machines_gpu"] == "t4"
    assert reasons[0].startswith(
        "Objective cost: one_device on t4 is the cheapest per example of the candidates priced"
    )
    unpriced = next(r for r in reasons if r.startswith("Not priced, so not weighed: "))
    for named in ["one_device (1/0/1)", "multi_worker_mirrored (3/0/1)",
                  "parameter_server (3/3/1)"]:  # fmt: skip
        assert named in unpriced
    assert unpriced.endswith(': machine type a3-highgpu-1g has no usd_per_hour (with its h100: '
                             '"bundled_gpus": 1).')  # fmt: skip
    h100 = next(a for a in doc["alternatives"]
                if a["strategy"] == "one_device" and not a.get("machines_gpu"))  # fmt: skip
    speed = h100["predicted"]["examples_per_second"]
    even = doc["usd_per_million_examples"] * speed * 3600 / 1e6
    faster = "The unpriced one_device (1/0/1) is predicted "
    sentence = next(r for r in reasons if r.startswith(faster))
    assert f"as fast as one_device on t4 ({speed:,.0f} examples/s)" in sentence
    assert f"under {even:,.2f} USD an hour" in sentence


def test_objective_cost_says_nothing_of_unpriced_candidates_when_all_are_priced(capsys):
    assert main(["select", *T4X4, "--model", "resnet50", "--objective", "cost"]) == 0
    out = capsys.readouterr().out
    assert "Not priced" not in out and "of the candidates priced" not in out


# ------------------------------------------------------------------ the machines priced


def test_a_candidate_priced_on_smaller_machines_than_those_given_names_them(capsys):
    """one_device on 2 x 4 V100 is priced on an n1-standard-8 with 1 V100 (2.29 a million
    examples); on one of the n1-standard-32 machines given it costs 9.18."""
    argv = ["select", "--machines", "2", "--gpus-per-machine", "4", "--gpu", "v100",
            "--model", "resnet50", "--classes", "10", "--network-gbps", "10",
            "--network-path", "host"]  # fmt: skip
    assert main([*argv, "--objective", "cost", "--explain"]) == 0
    out = capsys.readouterr().out
    assert (
        "Objective cost: one_device is the cheapest per example at on-demand list prices "
        "(2026-11-22): 2.29 USD per million examples on 1 GPU per machine (n1-standard-8; "
        "9.18 USD per million examples on the 4 given)." in out
    )
    # the time objective's sentence naming the cheapest says it too; mirrored uses all 4
    assert main([*argv, "--prices", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "mirrored costs 2.47 USD per million examples.\n" in out
    assert "--objective cost picks one_device (1/0/1), 3.7x slower, at 2.29 USD per million " \
        "examples on 1 GPU per machine (n1-standard-8; 9.18 USD" in out  # fmt: skip


# ------------------------------------------------------------------ asynchrony


def _t4_history(tmp_path, runs: list[tuple]) -> str:
    """A comparison.json of resnet50 runs at batch 32 in fp32 on t4 machines with one GPU:
    each run is (strategy, examples/s, workers, ps)."""
    results = [
        {
            "schema_version": 2, "strategy": strategy, "examples_per_second": eps,
            "workers": workers, "ps": ps, "gpus_per_machine": 1,
            "per_replica_batch_size": 32, "num_replicas": workers, "eval_accuracy": 0.7,
            "model": "resnet50", "precision": "float32",
            "hardware": {"platform": "vertex", "gpu": "t4", "gpus_per_machine": 1,
                         "machines": workers},
        }
        for strategy, eps, workers, ps in runs
    ]  # fmt: skip
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"results": results}))
    return str(path)


def test_objective_cost_warns_of_a_measured_asynchronous_choice(tmp_path, capsys):
    """parameter_server measured at 1,100 examples/s on 4 x t4 costs 1.03 a million examples
    against one_device's 1.13: chosen, as under the time objective, with its warning."""
    path = _t4_history(tmp_path, [("parameter_server", 1100.0, 4, 2)])
    argv = ["select", *T4X4, "--model", "resnet50", "--classes", "10", "--history", path, "--json"]
    assert main([*argv, "--objective", "cost"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["strategy"] == "parameter_server" and doc["layout"]["workers"] == 4
    assert any(
        r.startswith("parameter_server is chosen on its measured 1,100 examples/s against "
                     "one_device's 180 (predicted), but examples/s is not time to train here")
        for r in doc["reasons"]
    )  # fmt: skip
    assert main([*argv, "--objective", "cost", "--async-ok"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not any("examples/s is not time to train" in r for r in doc["reasons"])


def test_objective_cost_keeps_a_dense_model_synchronous_without_a_reason(tmp_path, capsys):
    """The synchronous candidates measured slow (one_device 40, multi_worker_mirrored 80 and
    150 examples/s) leave the unmeasured parameter_server 4/4/1 cheapest at 2.86 a million
    examples against 5.07: asynchronous for a dense model without --async-ok, it gives way
    to the cheapest synchronous one, as the time objective's rules have it."""
    path = _t4_history(tmp_path, [
        ("one_device", 40.0, 1, 0), ("multi_worker_mirrored", 80.0, 2, 0),
        ("multi_worker_mirrored", 150.0, 4, 0),
    ])  # fmt: skip
    argv = ["select", *T4X4, "--model", "resnet50", "--classes", "10", "--history", path]
    assert main([*argv, "--objective", "cost", "--json", "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["layout"]["workers"]) == ("multi_worker_mirrored", 2)
    assert doc["reasons"][0].startswith(
        "Objective cost: multi_worker_mirrored is the cheapest per example of the synchronous "
        "candidates at on-demand list prices (2026-11-22): 5.07 USD per million examples."
    )
    assert any(
        r.startswith("parameter_server is predicted the cheapest per example, 2.86 USD per "
                     "million examples against multi_worker_mirrored's 5.07, but asynchronous "
                     "examples are worth less to a dense model")
        for r in doc["reasons"]
    )  # fmt: skip
    cheapest = doc["alternatives"][0]
    assert (cheapest["strategy"], cheapest["usd_per_million_examples"]) == (
        "parameter_server", pytest.approx(2.86, abs=0.005))  # fmt: skip
    # the time objective's sentence names what --objective cost picks
    assert main([*argv, "--prices", "--explain"]) == 0
    picks = capsys.readouterr().out.split("--objective cost picks ")[1].split("\n")[0]
    assert picks.startswith("multi_worker_mirrored (2/0/1), ")
    assert "at 5.07 USD per million examples" in picks
    # --async-ok is a reason: the cheapest stays
    assert main([*argv, "--objective", "cost", "--async-ok", "--json", "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["layout"]["workers"]) == ("parameter_server", 4)
    assert "parameter_server is both the cheapest and favoured: asynchronous updates are " \
        "acceptable." in doc["reasons"]  # fmt: skip
