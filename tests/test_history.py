"""Tests of history."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from components.core import model_profile, selection
from components.core.model_profile import PUBLISHED_PROFILES, from_params
from components.core.selection import Topology, recommend
from components.core.selection.summary import candidate_rows
from components.core.selection.topology import Layout
from pipelines.cli import main
from tests.selection_helpers import (
    HISTORY_ARGV,
    RESNET101,
    T4_ARGV,
    _comparison,
    _cpu_records,
    _mlp_on_four_t4,
    _one_record,
    _review_history,
    _two_machine_record,
)


def test_history_measurement_outranks_prediction(tmp_path):
    topology = Topology(4, 8, "v100", network_gbps=100)
    assert recommend(topology, RESNET101).strategy == "multi_worker_mirrored"
    path = _comparison(
        tmp_path,
        "comparison.json",
        [("parameter_server", 6000.0), ("multi_worker_mirrored", 3000.0)],
    )
    rec = recommend(topology, RESNET101, history=selection.load_history([path]))
    assert rec.strategy == "parameter_server"
    assert rec.to_dict()["measured"]["examples_per_second"] == 6000.0
    assert any("Measured" in r and "6,000" in r and "replacing" in r and path in r
               for r in rec.reasons)  # fmt: skip


def test_a_measured_alternative_shows_its_measurement_apart_from_the_predicted_step(tmp_path):
    """Review #10: a measured alternative's step breakdown read as if the measurement timed
    the step. Its table row shows the measurement in its own column, the predicted step beside."""
    measured = [("parameter_server", 6000.0), ("multi_worker_mirrored", 3000.0)]
    path = _comparison(tmp_path, "comparison.json", measured)
    topology = Topology(4, 8, "v100", network_gbps=100)
    rec = recommend(topology, RESNET101, history=selection.load_history([path]))
    mwm = next(p for p in rec.alternatives if p.strategy == "multi_worker_mirrored")
    row = next(r for r in candidate_rows(rec) if r[0] == "multi_worker_mirrored")
    assert row[2] == f"{mwm.step_time_s * 1e3:,.1f}" and row[5] == f"{mwm.examples_per_second:,.0f}"
    assert row[7] == "3,000"
    unmeasured = next(r for r in candidate_rows(recommend(topology, RESNET101)) if r[7] == "-")
    assert unmeasured[2] != "-"


def test_a_measurement_bears_the_preemption_losses_a_prediction_does(tmp_path):
    # 4 machines at 1 preemption an hour, 600 s a restart: a synchronous run loses 67%
    topology = Topology(4, 8, "v100", network_gbps=100, preemptible=True,
                        preemptions_per_machine_hour=1.0)  # fmt: skip
    path = _comparison(tmp_path, "c.json", [("multi_worker_mirrored", 6000.0)])
    rec = recommend(topology, RESNET101, history=selection.load_history([path]))
    mwm = next(a for a in [rec.chosen, *rec.alternatives] if a.strategy == "multi_worker_mirrored")
    assert mwm.rank_examples_per_second == pytest.approx(6000.0 * (1 - 4 * 600 / 3600))
    # 2,000 a synchronous run keeps is less than parameter servers, which lose one machine's
    assert rec.strategy == "parameter_server"
    row = next(r for r in candidate_rows(rec) if r[0] == "multi_worker_mirrored")
    assert row[7] == "6,000 less 67%"


def test_a_measured_asynchronous_choice_still_says_it_trains_asynchronously(tmp_path, capsys):
    """Measured parameter_server at 2,600 examples/s wins for a dense model without
    --async-ok: it said nothing of asynchrony, and quoted the predicted 50% efficiency
    where 2,600 over 8 x one_device's measured 300 is 108%."""
    path = _review_history(tmp_path, "Tesla V100-SXM2-16GB", [
        ("one_device", 300.0, 1, 0, 1), ("mirrored", 1500.0, 1, 0, 4),
        ("multi_worker_mirrored", 2000.0, 2, 0, 4), ("multi_worker_mirrored", 1000.0, 2, 0, 4),
        ("parameter_server", 2600.0, 2, 1, 4),
    ])  # fmt: skip
    argv = ["select", "--machines", "2", "--gpus-per-machine", "4", "--gpu", "v100", "--model",
            "resnet50", "--network-gbps", "25", "--history", path]  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recommended: parameter_server")
    assert (
        "parameter_server is chosen on its measured 2,600 examples/s against mirrored's 1,500 "
        "(measured), but examples/s is not time to train here. It trains asynchronously: TF2's "
        "ParameterServerStrategy applies each worker's gradients about 1 update after the "
        "weights they were computed on were read"
    ) in out
    said = next(line for line in out.splitlines() if "- parameter_server with 2 workers" in line)
    assert (
        ": 108% scaling efficiency as measured (2,600 examples/s over 8 x one_device's "
        "measured 300)." in said
    )
    assert "50%" not in said
    # accepting asynchronous updates drops the warning, not the measured efficiency
    assert main([*argv, "--async-ok", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "is not time to train here" not in out and "108% scaling efficiency" in out


def test_a_measured_part_of_the_cluster_is_priced_and_speed_ups_are_over_the_measured_gpu(
    tmp_path, capsys
):
    """The review's h2 records: the measured 2 x 8 a100 row had no price though the table
    prices a2-highgpu-8g, and the machine options divided by the predicted 1,026 examples/s
    of one a100 (6.3x) while the cost sentence used its measured 900 (7.2x)."""
    path = _review_history(tmp_path, "NVIDIA A100-SXM4-40GB", [
        ("multi_worker_mirrored", 9000.0, 4, 0, 8), ("multi_worker_mirrored", 3000.0, 2, 0, 8),
        ("mirrored", 6500.0, 1, 0, 8), ("one_device", 900.0, 1, 0, 1),
    ])  # fmt: skip
    argv = ["select", "--machines", "4", "--gpus-per-machine", "8", "--gpu", "a100", "--model",
            "resnet50", "--network-gbps", "25", "--history", path, "--prices"]  # fmt: skip
    assert main([*argv, "--json", "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the 4 measured machines are the fastest (9,000 against one machine's 6,500)
    assert (doc["strategy"], doc["layout"]["workers"]) == ("multi_worker_mirrored", 4)
    two = next(a for a in doc["alternatives"] if a["layout"]["workers"] == 2)
    four = doc
    # the same machines' hourly price: 4 at 9,000 examples/s, 2 at 3,000
    hourly = four["usd_per_million_examples"] * 9000 / 4
    assert two["usd_per_million_examples"] == pytest.approx(hourly * 2 / 3000, rel=1e-4)
    speedups = {o["machines"]: o["speedup"] for o in doc["machine_options"]}
    assert speedups == {1: pytest.approx(6500 / 900, abs=1e-3),
                        2: pytest.approx(3000 / 900, abs=1e-3),
                        4: pytest.approx(9000 / 900, abs=1e-3)}  # fmt: skip
    assert main([*argv, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "all 4 machines (multi_worker_mirrored) are measured at 35%" in out
    assert ("Speed-up by machine count (predicted unless measured; measured counts over one "
            "a100's measured 900 examples/s): 1 machine (mirrored, measured): 7.2x one "
            "a100") in out  # fmt: skip
    row = next(line for line in out.splitlines() if "multi_worker_mirrored" in line
               and "2/0/8" in line)  # fmt: skip
    assert row.split()[-1] == f"{two['usd_per_million_examples']:,.2f}" != "-"


def test_measurements_far_below_their_predictions_are_said_with_enough_digits(tmp_path):
    """Measured at a fraction of a percent of their predictions: it said 'ran at 0%-0%'.
    Under preemption a measurement, too brief to be preempted, is held to the prediction
    before the expected losses (it was held to the one after them, and half looked 1.5x)."""
    topology = Topology(2, 4, "v100", network_gbps=25)
    resnet50 = PUBLISHED_PROFILES["resnet50"]
    v100 = "Tesla V100-SXM2-16GB"
    path = _review_history(tmp_path, v100, [("one_device", 1.0, 1, 0, 1),
                                            ("mirrored", 2.0, 1, 0, 4)])  # fmt: skip
    rec = recommend(topology, resnet50, batch_size=32, history=selection.load_history([path]))
    said = next(r for r in rec.reasons if "is chosen on its prediction alone" in r)
    assert re.search(r"ran at 0\.\d\d%-0\.\d\d% of their predictions", said), said
    path = _review_history(tmp_path, v100, [("one_device", 1.0, 1, 0, 1)])
    rec = recommend(topology, resnet50, batch_size=32, history=selection.load_history([path]))
    said = next(r for r in rec.reasons if "is chosen on its prediction alone" in r)
    assert re.search(r"ran at 0\.\d\d% of their predictions", said), said
    # 4 preemptible machines at 1 an hour: multi_worker_mirrored measured at half its
    # prediction before losses (67% of them)
    spot = Topology(4, 1, "v100", network_gbps=25, preemptible=True,
                    preemptions_per_machine_hour=1.0)  # fmt: skip
    plain = recommend(spot, resnet50, batch_size=32)
    mwm = next(p for p in plain.alternatives if p.strategy == "multi_worker_mirrored")
    before_losses = mwm.examples_per_second / (1 - mwm.overhead_fraction)
    path = _review_history(tmp_path, v100, [("multi_worker_mirrored", before_losses / 2, 4, 0, 1)])
    rec = recommend(spot, resnet50, batch_size=32, history=selection.load_history([path]))
    assert rec.chosen.measured_examples_per_second is None
    assert any("ran at 50% of their predictions" in r for r in rec.reasons)


def test_a_measured_part_of_the_cluster_outranks_one_machine(tmp_path):
    history = _two_machine_record(tmp_path)
    slow = Topology(4, 8, "v100", network_gbps=1)
    assert recommend(slow, RESNET101).layout.workers == 1  # predicted: one machine
    rec = recommend(slow, RESNET101, history=history)
    # the 2 machines measured 2,500, about twice mirrored's predicted 1,272 on one
    assert (rec.strategy, rec.layout) == ("multi_worker_mirrored", Layout(2, 0, 8))
    assert rec.reasons[0].startswith("Measured on 2 of the 4 machines, multi_worker_mirrored "
                                     "ran at 2,500 examples/s")  # fmt: skip
    assert "2 homogeneous machines on a 1 Gbps network" in rec.reasons[2]
    assert any(r.startswith("Measured: multi_worker_mirrored (2 worker(s)") for r in rec.reasons)
    assert not any(r.startswith("None of the") for r in rec.reasons)
    # --objective cost weighs it too, and its tally says so
    from components.core.comparison.pricing import load_prices

    cost = recommend(Topology(8, 8, "v100", network_gbps=5), RESNET101, history=history,
                     prices=load_prices(), objective="cost")  # fmt: skip
    assert any(r.startswith("Measured: multi_worker_mirrored (2 worker(s)") for r in cost.reasons)
    assert not any(r.startswith("None of the") for r in cost.reasons)


def test_a_measurement_above_perfect_scaling_is_questioned(tmp_path):
    path = Path(_comparison(tmp_path, "c.json", [("multi_worker_mirrored", 6000.0)]))
    doc = json.loads(path.read_text())
    one = {**doc["results"][0], "strategy": "one_device", "workers": 1, "gpus_per_machine": 1,
           "num_replicas": 1, "examples_per_second": 150.0}  # fmt: skip
    one["hardware"] = {**one["hardware"], "gpus_per_machine": 1, "machines": 1}
    doc["results"].append(one)
    path.write_text(json.dumps(doc))
    topology = Topology(4, 8, "v100", network_gbps=100)
    rec = recommend(topology, RESNET101, history=selection.load_history([str(path)]))
    # 32 replicas x 150 = 4,800 examples/s at best; 6,000 were measured
    assert any(r.startswith("multi_worker_mirrored measured 6,000 examples/s, 1.25x perfect "
                            "scaling of one_device's measured 150 over 32 replicas (4,800)")
               for r in rec.reasons)  # fmt: skip
    doc["results"][0]["examples_per_second"] = 4500.0  # below perfect scaling: unquestioned
    path.write_text(json.dumps(doc))
    rec = recommend(topology, RESNET101, history=selection.load_history([str(path)]))
    assert not any("perfect scaling" in r for r in rec.reasons)


def test_ignored_history_records_are_named_by_file_and_why_and_a_file_counts_once(tmp_path):
    """Review #10: "4 history record(s) on other hardware, models, batches, precisions or
    cluster shapes were ignored" named neither files nor reasons, and a file passed twice
    (or as a folder's and on its own) counted its records twice, in the tally and in the
    median."""
    folder = tmp_path / "runs" / "a-compare"
    folder.mkdir(parents=True)
    ours = _comparison(folder, "comparison.json", [("multi_worker_mirrored", 5000.0)])
    doc = json.loads(Path(ours).read_text())
    doc["results"].append({**doc["results"][0], "hardware": {**doc["results"][0]["hardware"],
                                                             "gpu": "t4"}})  # fmt: skip
    Path(ours).write_text(json.dumps(doc))
    other = _comparison(tmp_path, "other.json", [("mirrored", 900.0)])
    doc = json.loads(Path(other).read_text())
    doc["results"][0]["per_replica_batch_size"] = 32
    Path(other).write_text(json.dumps(doc))
    given = [tmp_path / "runs", ours, other, str(tmp_path / "." / "other.json")]
    records = selection.load_history(given)
    assert len(records) == 3  # each file's records once
    rec = recommend(Topology(4, 8, "v100", network_gbps=100), RESNET101, history=records)
    assert any(r.startswith("Measured: multi_worker_mirrored") and "(1 record)" in r
               for r in rec.reasons)  # fmt: skip
    assert (f"2 of the 3 history records match no candidate here: {other} (1 record): batch 32 per "
            f"replica, not 64; {ours} (1 record): device t4, not v100.") in rec.reasons  # fmt: skip
    # a record that matches all but the cluster shape says which shape it ran
    local = _cpu_records(tmp_path, {"multi_worker_mirrored": 1e6}, local=True)
    rec = recommend(Topology(2, 1, "cpu", network_gbps=1), model_profile.profile_model("mlp"),
                    batch_size=32, history=selection.load_history([local]))  # fmt: skip
    shape = (f"{local} (1 record): multi_worker_mirrored on 2 worker(s) x 1 device(s) across "
             "1 machine(s), no candidate's shape.")  # fmt: skip
    assert any(r.startswith("None of the 1 history records") and r.endswith(shape)
               for r in rec.reasons)  # fmt: skip


def test_history_confirming_the_choice_is_reported(tmp_path):
    topology = Topology(4, 8, "v100", network_gbps=100)
    path = _comparison(tmp_path, "c.json", [("multi_worker_mirrored", 5000.0)])
    rec = recommend(topology, RESNET101, history=selection.load_history([path]))
    assert rec.strategy == "multi_worker_mirrored"
    assert any("Measured" in r and "5,000" in r for r in rec.reasons)
    # the unmeasured candidates keep their own predictions
    ps = next(a for a in rec.alternatives if a.strategy == "parameter_server")
    assert ps.measured_examples_per_second is None
    assert ps.rank_examples_per_second == ps.examples_per_second


def test_a_bad_comparison_json_in_a_history_folder_is_named_by_its_file(tmp_path, capsys):
    """It was reported under the folder's name, which holds no hint of which file."""
    (tmp_path / "runs" / "a-compare").mkdir(parents=True)
    _comparison(tmp_path / "runs" / "a-compare", "comparison.json", [("mirrored", 100.0)])
    bad = tmp_path / "runs" / "b-compare" / "sub" / "comparison.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("not json")
    argv = ["select", "--machines", "2", "--gpus-per-machine", "4", "--params", "1000",
            "--history", str(tmp_path / "runs")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"strategist select: error: --history {bad} is not valid JSON")
    record = {"strategy": "mirrored", "examples_per_second": "fast", "num_replicas": 2,
              "eval_accuracy": 0.5}  # fmt: skip
    bad.write_text(json.dumps({"results": [record]}))
    assert main(argv) == 2
    assert f"--history {bad} mirrored: 'examples_per_second'" in capsys.readouterr().err
    # a file given by name keeps its name as given
    assert main([*argv[:-1], str(bad)]) == 2
    assert f"--history {bad} mirrored" in capsys.readouterr().err


def test_a_history_folder_is_every_comparison_json_under_it(tmp_path, capsys):
    # `--history runs/` reads each run's comparison.json, however deep, sorted by path.
    for run, eps in (("b-compare/nested", 3000.0), ("a-compare", 6000.0)):
        (tmp_path / "runs" / run).mkdir(parents=True)
        _comparison(tmp_path / "runs" / run, "comparison.json", [("parameter_server", eps)])
    (tmp_path / "runs" / "a-compare" / "other.json").write_text("not json")
    records = selection.load_history([tmp_path / "runs"])
    assert [r["examples_per_second"] for r in records] == [6000.0, 3000.0]
    assert records[1]["_source"].endswith("b-compare/nested/comparison.json")
    # A folder with none exits 2 saying what to pass.
    (tmp_path / "empty").mkdir()
    assert main([*HISTORY_ARGV, "--history", str(tmp_path / "empty")]) == 2
    assert "no comparison.json in this folder" in capsys.readouterr().err
    # A folder not yet written (README's `--history runs/` on a fresh checkout) says what to run.
    assert main([*HISTORY_ARGV, "--history", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert f"--history {tmp_path / 'none'}: cannot read it (No such file or directory)" in err
    assert "run `strategist compare` first" in err and "or drop --history" in err


def test_history_on_other_hardware_is_ignored(tmp_path):
    path = _comparison(tmp_path, "c.json", [("parameter_server", 1e9)], gpu="t4")
    rec = recommend(
        Topology(4, 8, "v100", network_gbps=100),
        RESNET101,
        history=selection.load_history([path]),
    )
    assert rec.strategy == "multi_worker_mirrored"
    assert any("None of the 1 history records matches" in r and "device t4" in r
               for r in rec.reasons)  # fmt: skip


@pytest.mark.parametrize(
    ("detected", "matches"),
    [("Tesla V100-SXM2-16GB", True), ("NVIDIA_TESLA_V100", True),
     ("Tesla V100S-PCIE-32GB", False), ("NVIDIA L40S", False)],
)  # fmt: skip
def test_history_matches_the_gpu_by_its_whole_name(detected, matches, tmp_path):
    """`l4` is not `NVIDIA L40S`, nor `v100` a V100S: a name is matched word by word."""
    path = _comparison(tmp_path, "c.json", [("parameter_server", 1e9)], gpu=detected)
    rec = recommend(Topology(4, 8, "v100", network_gbps=100), RESNET101,
                    history=selection.load_history([path]))  # fmt: skip
    assert (rec.chosen.measured_examples_per_second == 1e9) is matches
    for name, measured in (("NVIDIA L40S", None), ("NVIDIA L4", 1e9)):
        path = _comparison(tmp_path, "l4.json", [("parameter_server", 1e9)], gpu=name)
        rec = recommend(Topology(4, 8, "l4", network_gbps=100), RESNET101,
                        history=selection.load_history([path]))  # fmt: skip
        assert rec.chosen.measured_examples_per_second == measured


def test_history_of_another_xla_setting_does_not_match(tmp_path):
    path = _comparison(tmp_path, "c.json", [("parameter_server", 1e9)])
    doc = json.loads(Path(path).read_text())
    doc["results"][0]["jit_compile"] = True
    Path(path).write_text(json.dumps(doc))
    history = selection.load_history([path])
    topology = Topology(4, 8, "v100", network_gbps=100)
    plain = recommend(topology, RESNET101, history=history)
    assert plain.chosen.measured_examples_per_second is None
    assert any("XLA on, not as asked" in r for r in plain.reasons)
    compiled = recommend(dataclasses.replace(topology, jit_compile=True), RESNET101,
                         history=history)  # fmt: skip
    assert compiled.chosen.measured_examples_per_second == 1e9


def test_history_takes_the_median_of_the_matching_records(tmp_path):
    path = _comparison(
        tmp_path,
        "c.json",
        [("multi_worker_mirrored", 9000.0), ("multi_worker_mirrored", 1000.0),
         ("multi_worker_mirrored", 5000.0)],
    )  # fmt: skip
    rec = recommend(
        Topology(4, 8, "v100", network_gbps=100), RESNET101, history=selection.load_history([path])
    )
    assert rec.chosen.measured_examples_per_second == 5000.0
    assert any("(median of 3 records, 1,000-9,000)" in r for r in rec.reasons)
    two = _comparison(
        tmp_path, "d.json", [("multi_worker_mirrored", 9000.0), ("multi_worker_mirrored", 1000.0)]
    )
    rec = recommend(
        Topology(4, 8, "v100", network_gbps=100), RESNET101, history=selection.load_history([two])
    )
    assert rec.chosen.measured_examples_per_second == 5000.0  # between the two, not the slower


def test_the_floor_weighs_a_measured_machine_count_by_what_it_ran_at(tmp_path):
    """16 x 8 V100 on 1 Gbit/s: predicted, all 16 machines give about 2x one machine, so all
    train. A record of two machines at 2.5x one machine's prediction is what that count ran
    at, faster than all 16: the floor takes two, and says which record decided."""
    topology = Topology(16, 8, "v100", network_gbps=1)
    predicted = recommend(topology, RESNET101)
    assert (predicted.strategy, predicted.layout.workers) == ("multi_worker_mirrored", 16)
    one_machine = next(
        a for a in predicted.alternatives if a.strategy == "mirrored"
    ).examples_per_second
    hardware = {"platform": "vertex", "gpu": "v100", "gpus_per_machine": 8, "machines": 2}
    record = {"strategy": "multi_worker_mirrored", "examples_per_second": 2.5 * one_machine,
              "workers": 2, "ps": 0, "gpus_per_machine": 8, "per_replica_batch_size": 64,
              "num_replicas": 16, "eval_accuracy": 0.76, "model": "resnet101",
              "hardware": hardware}  # fmt: skip
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"results": [record]}))
    rec = recommend(topology, RESNET101, history=selection.load_history([str(path)]))
    assert (rec.strategy, rec.layout.workers) == ("multi_worker_mirrored", 2)
    assert rec.chosen.measured_examples_per_second == pytest.approx(2.5 * one_machine)
    assert rec.reasons[0].startswith("Measured on 2 of the 16 machines, multi_worker_mirrored")
    assert "use 2 machines and leave the rest free" in rec.reasons[0]
    assert any(r.startswith("Measured: multi_worker_mirrored (2 worker(s) x 8 device(s)")
               and str(path) in r for r in rec.reasons)  # fmt: skip
    assert not any(r.startswith("None of the") for r in rec.reasons)  # the record did decide


def test_a_record_the_floor_weighed_is_counted_though_another_count_is_chosen(tmp_path):
    """16 T4 machines on 5 Gbit/s: a record of 2 machines below one machine's speed is
    weighed by the floor though all 16 train; its "Measured:" line says so, and no tally
    claims nothing matched."""
    hardware = {"platform": "vertex", "gpu": "t4", "gpus_per_machine": 1, "machines": 2}
    record = {"strategy": "multi_worker_mirrored", "examples_per_second": 150.0, "workers": 2,
              "ps": 0, "gpus_per_machine": 1, "per_replica_batch_size": 32,
              "num_replicas": 2, "eval_accuracy": 0.7, "model": "resnet50",
              "hardware": hardware}  # fmt: skip
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"results": [record]}))
    topology = Topology(16, 1, "t4", network_gbps=5)
    rec = recommend(topology, PUBLISHED_PROFILES["resnet50"], batch_size=32,
                    history=selection.load_history([str(path)]))  # fmt: skip
    assert (rec.strategy, rec.layout.workers) == ("multi_worker_mirrored", 16)
    assert "2 machines (multi_worker_mirrored, measured): 0.9x" in rec.reasons[0]
    assert any(r.startswith("Measured: multi_worker_mirrored (2 worker(s)") for r in rec.reasons)
    assert not any(r.startswith("None of the") for r in rec.reasons)


def test_a_measured_machine_is_no_baseline_for_predicted_machine_counts(tmp_path, capsys):
    """Review #6: 4 T4 machines at 3 Gbit/s are predicted 32% efficient (all 4 still train,
    1.3x one machine). One T4 measured at 90 examples/s, half its predicted 180, made the
    floor divide multi_worker_mirrored's predicted 226 by 4 x 90 (63%); a predicted count
    is over one machine's prediction, as if every count fell short alike."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "1", "--gpu", "t4", "--model",
            "resnet50", "--classes", "10", "--network-gbps", "3", "--network-path", "host",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    predicted = json.loads(capsys.readouterr().out)
    path = _review_history(tmp_path, "Tesla T4", [("one_device", 90.0, 1, 0, 1)])
    assert main([*argv, "--history", path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["layout"]["workers"]) == ("multi_worker_mirrored", 4)
    one = next(a for a in doc["alternatives"] if a["strategy"] == "one_device")
    assert one["measured"]["examples_per_second"] == 90.0
    options = {o["machines"]: o for o in doc["machine_options"]}
    before = {o["machines"]: o for o in predicted["machine_options"]}
    assert options[4]["machine_efficiency"] == pytest.approx(0.315, abs=0.005)
    assert options[4]["machine_efficiency"] == before[4]["machine_efficiency"]
    assert options[4]["speedup"] == before[4]["speedup"]  # 226 over the predicted 180
    floor = doc["reasons"][0]
    assert floor.startswith("Adding machines buys little here: all 4 machines")
    assert ("measured counts over one t4's measured 90 examples/s, predicted counts over its "
            "predicted 180 and one machine's prediction") in floor  # fmt: skip
    assert "4 machines (multi_worker_mirrored): 1.3x one t4, 32% machine efficiency" in floor


def test_the_answers_at_both_ends_keep_the_objective_prices_and_history(capsys):
    """Under --objective cost the answer at 1 and 100 Gbit/s, and through an overlay, is the
    cheapest there too, not the fastest (it used to be recommended for time)."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "4", "--gpu", "t4",
            "--model", "resnet50", "--prices", "--objective", "cost", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["strategy"] == "one_device"
    network = next(r for r in doc["reasons"] if r.startswith("The network was not given"))
    assert "The answer is the same at both ends: at 1 Gbit/s: one_device" in network
    assert "at 100 Gbit/s: one_device" in network
    overlay = next(r for r in doc["reasons"] if r.startswith("The network path was not given"))
    assert "through a container overlay (kubenet, flannel VXLAN): one_device" in overlay


def test_a_local_multi_worker_run_is_no_measurement_of_two_machines(tmp_path):
    """A local compare's two workers shared one machine over loopback: no record of what
    two machines on a network do, so `select --gpu cpu --machines 2` does not take it."""
    mlp = model_profile.profile_model("mlp")
    two = Topology(2, 1, "cpu", network_gbps=1)
    local = _cpu_records(tmp_path, {"multi_worker_mirrored": 1e6}, local=True)
    rec = recommend(two, mlp, batch_size=32, history=selection.load_history([local]))
    assert rec.strategy != "multi_worker_mirrored"
    assert any("None of the 1 history records matches" in r and "no candidate's shape" in r
               for r in rec.reasons)  # fmt: skip
    on_two = _cpu_records(tmp_path, {"multi_worker_mirrored": 1e6})
    rec = recommend(two, mlp, batch_size=32, history=selection.load_history([on_two]))
    assert rec.strategy == "multi_worker_mirrored"  # two machines did measure it


@pytest.mark.parametrize(("value", "word"), [(float("nan"), "NaN"), (float("inf"), "Infinity")])
def test_a_non_finite_history_figure_exits_2_naming_the_file(tmp_path, capsys, value, word):
    path = _one_record(tmp_path, examples_per_second=value)
    assert main([*HISTORY_ARGV, "--history", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert f"--history {path} holds {word}, which is not a JSON number" in captured.err


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"examples_per_second": 0}, "'examples_per_second' is 0, no measured throughput"),
        ({"workers": "two"}, "'workers' must be a whole number of at least 1, got 'two'"),
        ({"workers": True}, "'workers' must be a whole number of at least 1, got True"),
        ({"hardware": {"machines": "two"}}, "'hardware.machines' must be a whole number"),
        ({"gpus_per_machine": "x"}, "'gpus_per_machine' must be a whole number"),
        ({"per_replica_batch_size": "32"}, "'per_replica_batch_size' must be a whole number"),
        ({"precision": "fp16"}, "unknown 'precision' 'fp16'"),
        ({"parameters": "17k"}, "'parameters' must be a whole number of at least 1"),
    ],
)
def test_a_bad_history_record_exits_2_naming_the_file_record_and_field(
    tmp_path, capsys, change, fragment
):
    path = _one_record(tmp_path, **change)
    assert main([*HISTORY_ARGV, "--history", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before any prediction
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"--history {path} parameter_server: " in err and fragment in err
    assert "correct the record or remove it from the file" in err


def test_an_empty_history_exits_2_saying_what_to_pass(tmp_path, capsys):
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"results": []}))
    assert main([*HISTORY_ARGV, "--history", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert f"--history {path}: no run in its 'results' list (missing or empty)" in err
    assert "run `strategist compare` first" in err


def test_history_precision_names_map_to_the_selectors_precision(tmp_path):
    """`fp32` (the selector's word) and `float32` are fp32; the mixed policies are mixed."""
    topology = Topology(4, 8, "v100", network_gbps=100)
    for name in ("fp32", "float32"):
        rec = recommend(topology, RESNET101, history=selection.load_history(
            [_one_record(tmp_path, precision=name)]))  # fmt: skip
        assert rec.strategy == "parameter_server"  # the measurement decided
    record = selection.load_history([_one_record(tmp_path, precision="mixed_bfloat16")])[0]
    why = selection.history.mismatch(record, topology, RESNET101, 64)
    assert why == "precision mixed, not fp32"


def test_a_history_record_without_its_batch_does_not_match(tmp_path):
    """Every metrics.json Strategist wrote (version 1 on) states its per-replica batch, so a
    record without one measured an unknown batch: it decides nothing."""
    path = _one_record(tmp_path, per_replica_batch_size=None)
    rec = recommend(
        Topology(4, 8, "v100", network_gbps=100), RESNET101, history=selection.load_history([path])
    )
    assert rec.strategy == "multi_worker_mirrored"  # the prediction, not the 6,000/s record
    assert any("None of the 1 history records matches" in r and "no per-replica batch stated" in r
               for r in rec.reasons)  # fmt: skip


def test_select_on_cpu_takes_strategists_own_records_and_a_measurement_flips_the_ranking(
    tmp_path, capsys
):
    argv = ["select", "--gpu", "cpu", "--machines", "2", "--gpus-per-machine", "1",
            "--model", "mlp", "--json"]  # fmt: skip
    assert main(argv) == 0
    predicted = json.loads(capsys.readouterr().out)
    # on paper, two CPU workers' ring (two gRPC hops of about a millisecond) costs more than
    # the MLP's whole step: one device
    assert predicted["strategy"] == "one_device"
    # measured on two machines whose workers did beat one device
    path = _cpu_records(
        tmp_path,
        {"one_device": 4000.0, "multi_worker_mirrored": 9000.0, "parameter_server": 3000.0},
    )
    assert main(argv + ["--history", path]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["strategy"] == "multi_worker_mirrored"
    assert measured["measured"] == {"examples_per_second": 9000.0, "source": path}
    assert any(
        r.startswith("Measured: multi_worker_mirrored") and path in r for r in measured["reasons"]
    )
    assert not any("None of the" in r for r in measured["reasons"])


def test_history_of_another_model_batch_or_precision_does_not_match(tmp_path):
    path = _cpu_records(tmp_path, {"one_device": 9000.0})
    records = selection.load_history([path])
    topo = Topology(2, 1, "cpu")
    mlp = model_profile.profile_model("mlp")
    # Strategist's own records and select share the default batch (32 per replica).
    assert selection.history.mismatch(records[0], topo, mlp, 32) is None
    assert "batch 32" in selection.history.mismatch(records[0], topo, mlp, 64)
    assert "precision fp32" in selection.history.mismatch(
        records[0], Topology(2, 1, "cpu", precision="mixed"), mlp, 32
    )
    assert "model mlp" in selection.history.mismatch(records[0], topo, from_params(1000), 32)
    assert "device cpu" in selection.history.mismatch(records[0], Topology(2, 1, "t4"), mlp, 32)


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (["--sparse-embedding-params", "1e8"], "model mlp of 17,226 parameters, not "
         "100,017,226 with its 100,000,000-parameter sparse embedding table"),
        (["--classes", "11"], "model mlp of 17,226 parameters, not 17,291 (another --classes "
         "or input shape)"),
    ],
)  # fmt: skip
def test_a_history_record_of_another_model_size_does_not_match(tmp_path, capsys, flags, why):
    """Review #4: a record matched on the model's name alone, so a 17,226-parameter mlp's
    measurement decided for the mlp with a 1e8-parameter embedding table (parameter servers
    flipped to multi_worker_mirrored) or with another classifier head."""
    path = _mlp_on_four_t4(tmp_path, model_profile.profile_model("mlp").params)
    assert main([*T4_ARGV, "--history", path]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["measured"] == {"examples_per_second": 1e6, "source": path}
    assert main([*T4_ARGV, *flags]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert main([*T4_ARGV, *flags, "--history", path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["strategy"], doc["measured"]) == (predicted["strategy"], None)
    assert all(a.get("measured") is None for a in doc["alternatives"])
    assert (f"None of the 1 history records matches a candidate here: {path} (1 record): "
            f"{why}.") in doc["reasons"]  # fmt: skip
    # a record that states no size (written by hand) still matches on the name
    no_size = _mlp_on_four_t4(tmp_path, None)
    model = model_profile.profile_model("mlp", num_classes=11)
    record = selection.load_history([no_size])[0]
    assert selection.history.mismatch(record, Topology(4, 1, "t4"), model, 32) is None


@pytest.mark.heavy  # `make test-heavy`: a whole comparison; the pilot tests cover the path
@pytest.mark.cluster
def test_a_real_local_compare_then_select_history_on_this_cpu(tmp_path, capsys):
    """Strategist's own records from a real local compare decide `select` on this CPU."""
    out = tmp_path / "compare"
    tfds = tmp_path / "tfds"
    tfds.mkdir()
    code = main(["compare", "--local", "--strategies", "one_device,mirrored",
                 "--gpus-per-machine", "2", "--epochs", "2", "--num-shards", "2", "--seed", "7",
                 "--warmup-epochs", "0",
                 "--data-dir", str(tfds), "--output", str(out)])  # fmt: skip
    assert code == 0
    capsys.readouterr()
    results = json.loads((out / "comparison.json").read_text())["results"]
    assert {r["hardware"]["gpu"] for r in results} == {None}  # a CPU machine, as detected
    measured = {r["strategy"]: r["examples_per_second"] for r in results}
    argv = ["select", "--gpu", "cpu", "--machines", "1", "--gpus-per-machine", "2",
            "--model", results[0]["model"], "--batch-size",
            str(results[0]["per_replica_batch_size"]), "--json"]  # fmt: skip
    assert main(argv) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert predicted["measured"] is None
    assert main(argv + ["--history", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    winner = max(measured, key=measured.get)
    assert doc["strategy"] == winner  # the measured winner outranks the predictions
    # JSON keeps six significant digits
    assert doc["measured"]["examples_per_second"] == pytest.approx(measured[winner], rel=1e-4)
    for other in doc["alternatives"]:
        expected = pytest.approx(measured[other["strategy"]], rel=1e-4)
        assert other["measured"]["examples_per_second"] == expected
    for strategy in measured:
        assert any(r.startswith(f"Measured: {strategy}") and str(out) in r
                   for r in doc["reasons"])  # fmt: skip
    print("predicted:", predicted["strategy"], "measured:", measured)
