"""The comparison report: derived numbers, winner rules, prices, files and their agreement."""

from __future__ import annotations

import copy
import json
import math
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from components.core import comparison
from components.core.comparison import (
    PLOT_FILES,
    PriceTable,
    ReportError,
    build_report,
    estimate_cost,
    load_prices,
    summary_markdown,
    summary_table,
    time_to_target,
    write_report,
)

PRICES = PriceTable(
    as_of="2026-01-01",
    source="test table",
    machine_types={"n1-standard-4": 0.20, "n1-standard-8": 0.40, "a2-highgpu-1g": 3.60},
    bundled_gpus={"a2-highgpu-1g": 1},
    accelerators={"t4": 0.35},
    default_machine_type="n1-standard-4",
)


def record(
    strategy: str,
    eps: float,
    *,
    replicas: int = 1,
    workers: int = 1,
    ps: int = 0,
    accuracy: tuple[float, ...] = (0.5, 0.85, 0.9, 0.95),
    epoch_seconds: tuple[float, ...] = (2.0, 1.0, 1.0, 1.0),
    eval_accuracy: float = 0.95,
    processes: int = 1,
    hardware: dict | None = None,
) -> dict:
    """A metrics.json record; elapsed_at_epoch_end is the running sum of epoch_seconds."""
    elapsed, total = [], 0.0
    for seconds in epoch_seconds:
        total += seconds
        elapsed.append(total)
    return {
        "strategy": strategy,
        "model": "mlp",
        "dataset": "digits",
        "num_replicas": replicas,
        "workers": workers,
        "ps": ps,
        "gpus_per_machine": replicas if strategy == "mirrored" else 1,
        "per_replica_batch_size": 32,
        "global_batch_size": 32 * replicas,
        "epochs": len(epoch_seconds),
        "steps_per_epoch": 22,
        "epoch_seconds": list(epoch_seconds),
        "epoch_examples_per_second": [eps] * len(epoch_seconds),
        "examples_per_second": eps,
        "wall_seconds": total,
        "elapsed_at_epoch_end": elapsed,
        "history": {"loss": [1.0 - a for a in accuracy], "accuracy": list(accuracy)},
        "eval_accuracy": eval_accuracy,
        "eval_loss": 0.17,
        "restarts": 0,
        "hardware": hardware
        or {
            "platform": "local",
            "machines": 1,
            "processes": processes,
            "gpu": None,
            "gpus_per_machine": 0,
            "machine_type": None,
        },
    }


def four_runs() -> list[dict]:
    return [
        record("parameter_server", 1200.0, replicas=2, workers=2, ps=1, processes=4),
        record("one_device", 1000.0),
        record("mirrored", 1800.0, replicas=2, epoch_seconds=(1.5, 0.5, 0.5, 0.5)),
        record("multi_worker_mirrored", 1500.0, replicas=2, workers=2, processes=2),
    ]


def by_name(report: dict) -> dict[str, dict]:
    return {r["name"]: r for r in report["results"]}


# --------------------------------------------------------------------------- numbers


def test_speedup_and_efficiency_against_one_device():
    report = build_report(four_runs(), prices=PRICES)
    runs = by_name(report)
    # Hand-computed: speed-up = eps / 1000; efficiency = speed-up / replicas.
    assert runs["one_device"]["speedup"] == 1.0
    assert runs["one_device"]["scaling_efficiency"] == 1.0
    assert runs["mirrored"]["speedup"] == 1.8
    assert runs["mirrored"]["scaling_efficiency"] == 0.9
    assert runs["multi_worker_mirrored"]["speedup"] == 1.5
    assert runs["multi_worker_mirrored"]["scaling_efficiency"] == 0.75
    assert runs["parameter_server"]["speedup"] == 1.2
    assert runs["parameter_server"]["scaling_efficiency"] == 0.6
    assert report["baseline"]["kind"] == "one_device"
    assert report["baseline"]["name"] == "one_device"


def test_without_one_device_speedup_and_efficiency_are_na_with_the_reason():
    """Against another multi-replica run "efficiency" went above 100 %: it is not shown."""
    runs = [r for r in four_runs() if r["strategy"] != "one_device"]
    report = build_report(runs, prices=PRICES)
    assert report["baseline"]["kind"] == "none" and report["baseline"]["name"] is None
    assert "No one_device run" in report["baseline"]["description"]
    assert "n/a" in report["baseline"]["description"]
    for r in report["results"]:
        assert r["speedup"] is None and r["scaling_efficiency"] is None
    text = summary_markdown(report)
    assert report["baseline"]["description"] in text
    row = next(line for line in text.splitlines() if line.startswith("| parameter_server "))
    assert row.split(" | ")[3:5] == ["n/a", "n/a"]  # speed-up, scaling efficiency
    assert not re.search(r"\b\d{3,}\.\d%", text)  # no efficiency of 100 % or more
    console = summary_table(report)
    row = next(line for line in console.splitlines() if line.startswith("parameter_server "))
    assert row.split()[3] == "n/a"  # speed-up


def test_the_report_states_the_hardware_and_what_a_cpu_rehearsal_predicts():
    hw = {
        "platform": "local",
        "processes": 4,
        "cpu_model": "AMD EPYC",
        "cpu_cores": 2,
        "memory_gb": 23.5,
        "logical_devices_per_machine": 0,
    }
    runs = [
        record(
            "mirrored",
            1800.0,
            replicas=2,
            epoch_seconds=(1.5, 0.5, 0.5, 0.5),
            hardware={**hw, "processes": 1},
        ),
        record("parameter_server", 1200.0, replicas=2, workers=2, ps=1, hardware=hw),
    ]
    rec = {"strategy": "mirrored", "inputs": {"topology": {"gpu": "t4", "gpus_per_machine": 2}}}
    for run in runs:
        run["schema_version"] = 2  # hardware detected
    report = build_report(runs, prices=PRICES, recommendation=rec)
    assert [g["runs"] for g in report["measured_on"]] == [["mirrored"], ["parameter_server"]]
    assert all(g["cpu_rehearsal"] for g in report["measured_on"])
    text = summary_markdown(report)
    assert "Measured on local: 1 machine(s), AMD EPYC (2 cores, 23.5 GB), no GPU" in text
    assert "4 processes: parameter_server." in text
    note = report["rehearsal_note"]
    assert note.startswith("Every run was a local CPU rehearsal") and "does not predict" in note
    assert note in text
    # The prediction is for 2 x t4, the runs measured a CPU: no "agrees with the winner".
    assert "Predicted for 2 x t4" in text and "agrees" not in text.lower()
    on_gpu = {**hw, "platform": "vertex", "gpu": "NVIDIA Tesla T4", "gpus_per_machine": 2}
    for run in runs:
        run["hardware"] = on_gpu
    report = build_report(runs, prices=PRICES, recommendation=rec)
    assert report["rehearsal_note"] is None
    assert "Agrees with the measured winner." in summary_markdown(report)


def test_time_to_target_is_the_first_epoch_end_at_or_above_the_target():
    run = record("mirrored", 1.0, accuracy=(0.5, 0.85, 0.9, 0.95), epoch_seconds=(2, 1, 1, 1))
    assert time_to_target(run, 0.9) == 4.0  # reached exactly at epoch 3, which ends at 4 s
    assert time_to_target(run, 0.86) == 4.0
    assert time_to_target(run, 0.5) == 2.0
    assert time_to_target(run, 0.951) is None
    del run["elapsed_at_epoch_end"]  # falls back to the running sum of epoch_seconds
    assert time_to_target(run, 0.95) == 5.0
    run["history"] = {"loss": [1, 1], "sparse_categorical_accuracy": [0.2, 0.97]}
    assert time_to_target(run, 0.9) == 3.0


def test_a_loss_or_error_target_is_reached_from_above():
    """--target-metric: losses and errors count lower as better (evaluation.lower_is_better)."""
    run = record("mirrored", 1.0, accuracy=(0.5, 0.85, 0.9, 0.95), epoch_seconds=(2, 1, 1, 1))
    assert time_to_target(run, 0.15, "loss") == 4.0  # loss 0.5, 0.15, 0.1, 0.05
    run["history"]["mae"] = [3.0, 2.0, 1.2, 0.9]
    assert time_to_target(run, 1.0, "mae") == 5.0
    assert time_to_target(run, 0.5, "mae") is None
    run["history"]["auc"] = [0.6, 0.8, 0.9, 0.92]
    assert time_to_target(run, 0.8, "auc") == 3.0  # higher is better


def test_a_regression_comparison_is_judged_on_its_target_metric():
    """Regression records (no accuracy) compete on the test value of --target-metric."""
    runs = four_runs()
    for r, test_mae in zip(runs, (0.50, 0.49, 0.60, 0.494), strict=True):
        r.update(task="regression", eval_accuracy=None, eval_metrics={"mae": test_mae})
        r["history"] = {"loss": [4.0, 2.0, 1.0, 0.5], "mae": [1.6, 1.1, 0.7, 0.5]}
    runs[3]["elapsed_at_epoch_end"] = [2.0, 3.0, 3.8, 4.8]  # ahead of one_device, not tied
    report = build_report(runs, target_value=0.8, target_metric="mae", prices=PRICES)
    assert report["target_metric"] == "mae"
    times = {r["name"]: r["time_to_target_s"] for r in report["results"]}
    assert times["one_device"] == 4.0  # mae 0.7 <= 0.8 at epoch 3
    # mirrored is the fastest but its test MAE 0.60 is more than 1 % worse than 0.49 (these
    # records carry no per-example errors, so no standard error: the 1 % rule).
    assert report["winner"] != "mirrored"
    reason = report["winner_reason"]
    assert "with test mae 0.494, within 1 % of the best (0.49)" in reason
    # Within 1 % of the best competes; farther does not.
    assert "mirrored (0.6) is more than 1 % from the best and did not compete" in reason
    assert "parameter_server (0.5) is more than 1 % from the best" in reason
    assert "training mae of 0.8 was reached" in summary_markdown(report)
    files = comparison.render_files(report)  # the HTML page and the plots take it too
    assert "target training mae of 0.8" in files["report.html"].decode()


def test_time_to_target_in_the_report_uses_elapsed_time_not_epoch_count():
    report = build_report(four_runs(), target_value=0.9, prices=PRICES)
    runs = by_name(report)
    assert runs["one_device"]["time_to_target_s"] == 4.0
    assert runs["mirrored"]["time_to_target_s"] == 2.5  # 1.5 + 0.5 + 0.5
    never = build_report(four_runs(), target_value=0.99, prices=PRICES)
    assert all(r["time_to_target_s"] is None for r in never["results"])


def test_local_cost_is_one_default_machine_per_process():
    run = record("multi_worker_mirrored", 1.0, workers=2, processes=2, epoch_seconds=(36.0,))
    cost = estimate_cost(run, PRICES)
    # 2 processes x n1-standard-4 at $0.20/h for 36 s = 2 * 0.2 * 0.01 h.
    assert cost.usd == pytest.approx(0.004)
    assert cost.usd_per_hour == pytest.approx(0.40)
    assert "2 × n1-standard-4" in cost.priced_as and cost.note is None


def test_local_cost_uses_the_machine_type_in_the_hardware_record():
    hw = {"platform": "local", "processes": 3, "machine_type": "n1-standard-8"}
    run = record("parameter_server", 1.0, epoch_seconds=(90.0,), hardware=hw)
    assert estimate_cost(run, PRICES).usd == pytest.approx(3 * 0.40 * 90 / 3600)


def test_cloud_cost_adds_attached_gpus_but_not_bundled_ones():
    hw = {
        "platform": "vertex",
        "machines": 2,
        "processes": 2,
        "machine_type": "n1-standard-8",
        "gpu": "NVIDIA_TESLA_T4",
        "gpus_per_machine": 2,
    }
    run = record("multi_worker_mirrored", 1.0, epoch_seconds=(360.0,), hardware=hw)
    # 2 machines x (0.40 + 2 x 0.35) = $2.20/h for 0.1 h.
    assert estimate_cost(run, PRICES).usd == pytest.approx(0.22)
    hw = {"platform": "vertex", "machines": 1, "machine_type": "a2-highgpu-1g", "gpu": "a100"}
    hw["gpus_per_machine"] = 1
    run = record("mirrored", 1.0, epoch_seconds=(1800.0,), hardware=hw)
    assert estimate_cost(run, PRICES).usd == pytest.approx(1.80)


def test_unknown_machine_type_or_gpu_gives_no_cost_and_a_note():
    hw = {"platform": "vertex", "machines": 1, "machine_type": "z9-imaginary-4"}
    unknown = record("mirrored", 1800.0, replicas=2, hardware=hw)
    report = build_report([record("one_device", 1000.0), unknown], prices=PRICES)
    run = by_name(report)["mirrored"]
    assert run["estimated_cost_usd"] is None
    assert "z9-imaginary-4" in run["cost_note"]
    assert "z9-imaginary-4" in summary_markdown(report)
    hw = {"platform": "vertex", "machines": 1, "machine_type": "n1-standard-8", "gpu": "k80"}
    hw["gpus_per_machine"] = 1
    cost = estimate_cost(record("mirrored", 1.0, hardware=hw), PRICES)
    assert cost.usd is None and "k80" in cost.note


def test_bundled_price_table_loads_and_documents_itself():
    prices = load_prices()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", prices.as_of)
    assert "us-central1" in prices.source
    assert prices.default_machine_type == "n1-standard-4"
    assert prices.machine_types["n1-standard-4"] > 0
    assert "local" in prices.convention.lower() and "default" in prices.convention
    assert prices.accelerator_price("t4") == prices.accelerator_price("NVIDIA_TESLA_T4") > 0
    report = build_report(four_runs())
    assert report["prices_as_of"] == prices.as_of
    assert all(r["estimated_cost_usd"] > 0 for r in report["results"])


def test_load_prices_refuses_bad_files(tmp_path):
    with pytest.raises(ReportError, match="file not found"):
        load_prices(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"as_of": "2026-01-01", "source": "x", "machine_types": {"n1": "cheap"}}')
    with pytest.raises(ReportError, match="n1"):
        load_prices(bad)


# --------------------------------------------------------------------------- report fields


def test_report_fields_and_pass_through():
    runs = four_runs()
    before = copy.deepcopy(runs)
    rec = {"strategy": "mirrored", "reasons": ["one machine"]}
    report = build_report(runs, prices=PRICES, recommendation=rec, generated_at="2026-01-02T00:00Z")
    assert runs == before  # inputs untouched
    assert report["recommendation"] == rec
    assert report["target_value"] == 0.9
    assert report["generated_at"] == "2026-01-02T00:00Z"
    assert report["prices_as_of"] == "2026-01-01"
    assert report["dataset"] == "digits" and report["model"] == "mlp"
    assert [r["strategy"] for r in report["results"]] == [
        "one_device",
        "mirrored",
        "multi_worker_mirrored",
        "parameter_server",
    ]
    for r in report["results"]:
        for key in ("scaling_efficiency", "time_to_target_s", "estimated_cost_usd"):
            assert key in r
        assert r["history"] and r["epoch_seconds"]  # the input record is kept whole
    json.dumps(report, allow_nan=False)


def test_invalid_records_are_refused_with_the_field_named():
    runs = four_runs()
    del runs[1]["eval_accuracy"]
    with pytest.raises(ReportError, match="one_device: missing 'eval_accuracy'"):
        build_report(runs, prices=PRICES)
    with pytest.raises(ReportError, match="target accuracy"):
        build_report(four_runs(), target_value=90, prices=PRICES)


def test_nan_becomes_null_and_repeated_strategies_are_named_by_shape():
    runs = four_runs()
    runs[0]["history"]["loss"][-1] = float("nan")
    runs.append(record("parameter_server", 900.0, replicas=3, workers=3, ps=1, processes=5))
    report = build_report(runs, prices=PRICES)
    names = [r["name"] for r in report["results"]]
    assert "parameter_server (workers=2, ps=1, replicas=2)" in names
    assert "parameter_server (workers=3, ps=1, replicas=3)" in names
    assert report["results"][-2]["history"]["loss"][-1] is None
    json.dumps(report, allow_nan=False)


# --------------------------------------------------------------------------- repeats


def repeated(strategy: str, paces: tuple[float, ...], eval_accuracy: float = 0.95, **kw) -> list:
    """One record per repeat of `strategy`, each epoch taking `pace` seconds."""
    return [
        record(
            strategy,
            1000.0 / pace,
            epoch_seconds=(pace,) * 4,
            eval_accuracy=eval_accuracy,
            **kw,
        )
        for pace in paces
    ]


def interleave(*strategies: list) -> list:
    """s1, s2, s1, s2, ...: the order `--repeats` runs them in."""
    return [run for runs in zip(*strategies, strict=True) for run in runs]


def test_repeats_are_one_result_each_with_the_median_and_the_spread():
    runs = interleave(
        repeated("one_device", (1.0, 1.2, 0.9)),
        repeated("mirrored", (0.5, 0.6, 0.55), replicas=2),
    )
    report = build_report(runs, prices=PRICES)
    assert report["repeats"] == 3
    assert [r["name"] for r in report["results"]] == ["one_device", "mirrored"]
    one = by_name(report)["one_device"]
    assert one["repeats"] == 3
    spread = one["spread"]
    assert spread["seconds_per_epoch"] == {
        "median": 1.0,
        "min": 0.9,
        "max": 1.2,
        "n": 3,
        "values": [1.0, 1.2, 0.9],
    }
    assert one["seconds_per_epoch"] == 1.0 and one["wall_seconds"] == 4.0
    assert one["examples_per_second"] == pytest.approx(1000.0)  # the median, 1000 / 1.0
    assert spread["time_to_target_s"]["min"] == pytest.approx(2.7)  # 0.9 reached at 3
    assert spread["time_to_target_s"]["max"] == pytest.approx(3.6)
    assert spread["eval_quality"]["median"] == 0.95
    # Speed-up is of the medians: 1000/0.55 against 1000/1.0.
    assert by_name(report)["mirrored"]["speedup"] == pytest.approx(1 / 0.55, rel=1e-3)


def test_the_spread_table_shows_median_min_max_and_n():
    runs = interleave(
        repeated("one_device", (1.0, 1.2, 0.9)),
        repeated("mirrored", (0.5, 0.6, 0.55), replicas=2),
    )
    report = build_report(runs, prices=PRICES)
    text = summary_table(report)
    assert "Spread over" not in text  # the console keeps to the table and the verdict
    markdown = summary_markdown(report)
    assert "Spread over repeated runs (median, min–max over N interleaved runs" in markdown
    assert "| one_device | 3 | 1.00 (0.90–1.20) | 1,000 (833–1,111) |" in markdown
    page = comparison.render_html(report, plots={})  # no plots: the table is the point
    assert '<table id="spread">' in page and "<td>1.00 (0.90–1.20)</td>" in page
    saved = json.loads(json.dumps(report, allow_nan=False))
    assert saved["results"][0]["spread"]["seconds_per_epoch"]["n"] == 3
    # Without repeats there is no spread table, and the reason says so.
    single = build_report(four_runs(), prices=PRICES)
    assert "Spread over" not in summary_markdown(single)


# --------------------------------------------------------------------------- files


class TableParser(HTMLParser):
    """Collects {row name: {column key: visible text}} from table#results."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.images: list[dict[str, str]] = []
        self.ids: dict[str, str] = {}
        self._row: str | None = None
        self._key: str | None = None
        self._id: str | None = None
        self._in_table = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id") == "results":
            self._in_table = True
        elif tag == "tr" and self._in_table and "data-name" in a:
            self._row = a["data-name"]
            self.rows[self._row] = {}
        elif tag == "td" and self._row is not None:
            self._key = a["data-key"]
            self.rows[self._row][self._key] = ""
        elif tag == "img":
            self.images.append(a)
        if a.get("id"):
            self._id = a["id"]
            self.ids[self._id] = ""

    def handle_endtag(self, tag):
        if tag == "td":
            self._key = None
        elif tag == "tr":
            self._row = None
        elif tag == "table":
            self._in_table = False
        elif tag == "p":
            self._id = None

    def handle_data(self, data):
        if self._key is not None:
            self.rows[self._row][self._key] += data
        if self._id is not None:
            self.ids[self._id] += data


def as_number(text: str) -> float:
    scale = 0.01 if text.endswith("%") else 1.0
    return float(re.sub(r"[,$%×\s]", "", text)) * scale


def assert_cell_matches(key: str, text: str, value) -> None:
    if value is None:
        assert text in ("–", "not reached"), (key, text)
        return
    if key == "name":
        assert text.strip() == value
        return
    places = comparison.DISPLAY_PRECISION[key]
    if key == "estimated_cost_usd" and value >= 1:
        places = 2
    shown = as_number(text)
    assert math.isclose(shown, value, abs_tol=0.5 * 10**-places + 1e-12), (key, text, value)


def test_numbers_in_the_html_table_equal_those_in_the_json(tmp_path):
    runs = four_runs()
    runs[3]["hardware"]["machine_type"] = "unknown-1"  # one cost shown as missing
    report = build_report(runs, target_value=0.93, prices=PRICES)
    paths = write_report(report, tmp_path)
    saved = json.loads(Path(paths["comparison.json"]).read_text())
    parser = TableParser()
    parser.feed(Path(paths["report.html"]).read_text())
    assert set(parser.rows) == {r["name"] for r in saved["results"]}
    checked = 0
    for r in saved["results"]:
        cells = parser.rows[r["name"]]
        assert set(cells) == {key for key, _, _ in comparison._TEXT_COLUMNS}
        for key, text in cells.items():
            assert_cell_matches(key, text, r.get(key))
            checked += 1
    assert checked == 4 * len(comparison._TEXT_COLUMNS)
    assert parser.ids["winner"] == saved["winner"]
    assert parser.ids["winner-reason"] == saved["winner_reason"]
    assert parser.ids["baseline"] == saved["baseline"]["description"]


def test_numbers_in_the_markdown_summary_equal_those_in_the_json(tmp_path):
    report = build_report(four_runs(), prices=PRICES)
    text = Path(write_report(report, tmp_path)["summary.md"]).read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    keys = [key for key, _, _ in comparison._TEXT_COLUMNS]
    assert len(rows) == len(report["results"])
    for line, r in zip(rows, report["results"], strict=True):
        cells = [c.strip().strip("*") for c in line.strip("|").split(" | ")]
        for key, cell in zip(keys, cells, strict=True):
            assert_cell_matches(key, cell, r.get(key))
    assert f"**Winner: {report['winner']}.**" in text


def test_the_page_is_self_contained(tmp_path):
    report = build_report(four_runs(), prices=PRICES)
    page = Path(write_report(report, tmp_path)["report.html"]).read_text()
    parser = TableParser()
    parser.feed(page)
    assert [img["data-plot"] for img in parser.images] == list(PLOT_FILES)
    assert all(img["src"].startswith("data:image/png;base64,iVBORw0KGgo") for img in parser.images)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", page)
    assert "<link" not in page and "<script" not in page and "@import" not in page


def test_write_report_writes_every_file_and_no_temporaries(tmp_path):
    report = build_report(four_runs(), prices=PRICES)
    out = tmp_path / "nested" / "out"
    paths = write_report(report, out)
    expected = {"comparison.json", "report.html", "summary.md", *PLOT_FILES}
    assert set(paths) == expected
    assert sorted(os.listdir(out)) == sorted(expected)
    assert json.loads(Path(paths["comparison.json"]).read_text()) == report
    for name in PLOT_FILES:
        import matplotlib.image

        pixels = matplotlib.image.imread(paths[name])
        assert pixels.shape[0] > 200 and pixels.shape[1] > 600, name
        assert pixels.std() > 0.05, f"{name} looks blank"


def test_an_interrupted_write_leaves_the_old_file_and_no_temporaries(tmp_path, monkeypatch):
    first = build_report(four_runs(), prices=PRICES, generated_at="first")
    write_report(first, tmp_path)
    second = build_report(four_runs(), prices=PRICES, generated_at="second")

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write_report(second, tmp_path)
    assert json.loads((tmp_path / "comparison.json").read_text())["generated_at"] == "first"
    assert not [p for p in Path(tmp_path).iterdir() if p.name.startswith(".")]


def test_summary_table_lists_every_run_and_the_winner_in_100_columns():
    report = build_report(four_runs(), prices=PRICES)
    text = summary_table(report)
    lines = text.splitlines()
    assert lines[0].startswith("Strategy") and "Steady ex/s" in lines[0]
    for r in report["results"]:
        row = next(line for line in lines if line.startswith(r["name"] + " "))
        assert f"{r['examples_per_second']:,.0f}" in row
        assert f"{r['speedup']:.2f}×" in row
    winner = [line for line in lines if line.startswith("Winner: ")]
    assert winner == [report["winner_line"]] and winner[0].startswith("Winner: mirrored, ")
    widths = {len(line) for line in lines[:6]}
    assert len(widths) == 1, "columns are not aligned"
    # The longest strategy name and the rehearsal's cost label still fit 100 columns.
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    assert "Cost*" in lines[0] and lines[-1].startswith("* a local CPU rehearsal")


def test_a_run_a_stalled_task_held_up_is_called_not_clean_in_every_report_form():
    """A stall a parameter-server run absorbs leaves the epoch times clean-looking; the record's
    `stalls` (written by the local launcher) make the report say the numbers are not clean."""
    from components.core.comparison.html import render_html

    stalled = record("parameter_server", 1200.0, replicas=2, workers=2, ps=1)
    stalled["stalls"] = [{"task": "worker-1", "epoch": 2, "seconds": 2.5, "how": "resumed"}]
    report = build_report([record("mirrored", 1800.0, replicas=2), stalled], prices=PRICES)
    expected = (
        "parameter_server: not a clean measurement: stalled by worker-1 for 2.5 s in epoch 2 "
        "(resumed)."
    )
    assert report["stall_notes"] == [expected]
    assert expected in summary_table(report) and expected in summary_markdown(report)
    assert expected in render_html(report)
    clean = build_report([record("mirrored", 1800.0, replicas=2)], prices=PRICES)
    assert clean["stall_notes"] == [] and "not a clean measurement" not in summary_table(clean)


def test_every_report_form_states_the_speed_options_the_runs_trained_with():
    runs = four_runs()
    for run in runs:
        run.update(precision="mixed_bfloat16", jit_compile=True, steps_per_execution=4)
        run["xla_scope"] = "train_step" if run["strategy"] == "one_device" else "model"
        run["all_reduce"] = {"multi_worker_mirrored": "ring"}.get(run["strategy"], "auto")
    report = build_report(runs, prices=PRICES)
    model_only = "XLA on (forward and backward passes; all-reduce and update outside XLA)"
    one_device = "Speed options (one_device): mixed_bfloat16, XLA on, 4 steps per execution."
    others = (
        f"Speed options (mirrored, multi_worker_mirrored, parameter_server): mixed_bfloat16, "
        f"{model_only}, 4 steps per execution; all-reduce auto (mirrored), "
        "ring (multi_worker_mirrored)."
    )
    for form in (summary_markdown(report), comparison.render_html(report)):
        assert one_device in form and others in form, form
    # One set of options for the whole comparison: one sentence; old records ran float32.
    report = build_report(four_runs(), prices=PRICES)
    assert (
        "Speed options (every run): float32, XLA off, 1 step per execution; all-reduce auto "
        "(mirrored), auto (multi_worker_mirrored)." in summary_markdown(report)
    )


def test_the_report_states_each_strategys_learning_rate_when_they_differ():
    runs = four_runs()
    for run, rate in zip(runs, (0.001, 0.001, 0.002, 0.002), strict=True):
        run["compile_settings"] = {"learning_rate": rate}
    markdown = summary_markdown(build_report(runs, prices=PRICES))
    (line,) = [line for line in markdown.splitlines() if "Learning rates differ" in line]
    for name, rate in (("parameter_server", "0.001"), ("one_device", "0.001")):
        assert f"{name} {rate}" in line
    assert "mirrored 0.002" in line and "multi_worker_mirrored 0.002" in line
    for run in runs:
        run["compile_settings"] = {"learning_rate": 0.001}
    assert "Learning rates differ" not in summary_markdown(build_report(runs, prices=PRICES))
