"""Models, records and tables the selector's tests share."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from components.core import selection
from components.core.model_profile import PUBLISHED_PROFILES, from_params
from components.core.selection.topology import Topology

ROOT = Path(__file__).resolve().parents[1]
RESNET101 = PUBLISHED_PROFILES["resnet101"]


BERT_LARGE = PUBLISHED_PROFILES["bert_large_pretrain_seq128"]


def _comparison(tmp_path: Path, name: str, results: list[tuple[str, float]], gpu="v100") -> str:
    hardware = {"platform": "vertex", "gpu": gpu, "gpus_per_machine": 8, "machines": 4}
    doc = {
        "results": [
            {
                "strategy": s,
                "examples_per_second": eps,
                "workers": 4,
                "ps": 4 if s == "parameter_server" else 0,
                "gpus_per_machine": 8,
                "per_replica_batch_size": 64,
                "num_replicas": 32,
                "eval_accuracy": 0.76,
                "model": "resnet101",
                "hardware": hardware,
            }
            for s, eps in results
        ],
        "winner": results[0][0],
    }
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _review_history(tmp_path: Path, gpu: str, runs: list[tuple]) -> str:
    """A comparison.json of resnet50 runs at batch 32 in fp32 on `gpu` (as the select
    review's records under /tmp/review_select): each run is (strategy, examples/s,
    workers, ps, devices per worker)."""
    results = [
        {
            "schema_version": 2, "strategy": strategy, "examples_per_second": eps,
            "workers": workers, "ps": ps, "gpus_per_machine": devices,
            "per_replica_batch_size": 32, "num_replicas": workers * devices,
            "eval_accuracy": 0.7, "model": "resnet50", "precision": "float32",
            "hardware": {"platform": "vertex", "gpu": gpu, "gpus_per_machine": devices,
                         "machines": workers},
        }
        for strategy, eps, workers, ps, devices in runs
    ]  # fmt: skip
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"results": results}))
    return str(path)


def _two_machine_record(tmp_path: Path) -> list:
    """multi_worker_mirrored measured on 2 machines x 8 v100 at 2,500 examples/s."""
    path = Path(_comparison(tmp_path, "two.json", [("multi_worker_mirrored", 2500.0)]))
    doc = json.loads(path.read_text())
    doc["results"][0].update(workers=2, num_replicas=16)
    doc["results"][0]["hardware"]["machines"] = 2
    path.write_text(json.dumps(doc))
    return selection.load_history([str(path)])


def _one_record(tmp_path: Path, strategy: str = "parameter_server", eps: float = 6000.0,
                **change) -> str:  # fmt: skip
    """A comparison.json of one 4 x 8 V100 resnet101 record with `change` applied: a value
    of None drops the key; `hardware` updates the record's hardware."""
    path = _comparison(tmp_path, "comparison.json", [(strategy, eps)])
    doc = json.loads(Path(path).read_text())
    record = doc["results"][0]
    record["hardware"].update(change.pop("hardware", {}))
    for key, value in change.items():
        if value is None:
            record.pop(key)
        else:
            record[key] = value
    Path(path).write_text(json.dumps(doc))  # NaN and Infinity as JSON's NaN and Infinity
    return path


HISTORY_ARGV = ["select", "--machines", "4", "--gpus-per-machine", "8", "--network-gbps", "100",
                "--gpu", "v100", "--batch-size", "64", "--model", "resnet101"]  # fmt: skip


def _rows(doc):
    """The chosen candidate and the alternatives of a `select --json` document."""
    return [{"strategy": doc["strategy"], **doc}, *doc["alternatives"]]


def _row(doc, strategy, workers):
    """The row of `strategy` on `workers` machines."""
    return next(r for r in _rows(doc) if r["strategy"] == strategy
                and r["layout"]["workers"] == workers)  # fmt: skip


def _cpu_records(tmp_path: Path, measured: dict[str, float], local: bool = False) -> str:
    """A comparison.json of runs on this CPU (RunMetrics v2): one machine per worker, as a
    cluster of CPU machines records it, or with `local` every worker on this one machine,
    as a local compare records it."""
    from components.core.config import ClusterConfig
    from components.core.run_metrics import RunMetrics, detect_hardware

    results = []
    for strategy, eps in measured.items():
        workers = 2 if strategy in ("multi_worker_mirrored", "parameter_server") else 1
        cluster = ClusterConfig(strategy=strategy, workers=workers,
                                ps=1 if strategy == "parameter_server" else 0)  # fmt: skip
        hardware = detect_hardware(cluster, [])  # the real hardware of this machine
        if not local:
            hardware = dataclasses.replace(hardware, machines=workers)
        record = RunMetrics(
            strategy=strategy, num_replicas=workers, examples_per_second=eps,
            eval_accuracy=0.9, model="mlp", workers=workers,
            ps=1 if strategy == "parameter_server" else 0,
            per_replica_batch_size=32, hardware=hardware,
        )  # fmt: skip
        results.append(record.to_dict())
    path = tmp_path / ("local.json" if local else "comparison.json")
    path.write_text(json.dumps({"results": results}))
    return str(path)


def _mlp_on_four_t4(tmp_path: Path, parameters: int | None) -> str:
    """A comparison.json of multi_worker_mirrored measured on 4 x 1 T4 at a million
    examples/s for the registry mlp (as the review's mlp_fast.json), with `parameters`."""
    record = {"strategy": "multi_worker_mirrored", "examples_per_second": 1e6, "workers": 4,
              "ps": 0, "gpus_per_machine": 1, "per_replica_batch_size": 32,
              "num_replicas": 4, "eval_accuracy": 0.9, "model": "mlp",
              "parameters": parameters,
              "hardware": {"platform": "vertex", "gpu": "Tesla T4", "gpus_per_machine": 1,
                           "machines": 4}}  # fmt: skip
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"results": [record]}))
    return str(path)


def _recsys(params=10_000_000_000):
    return from_params(100_000_000, 0.2e9, 100_000.0).with_sparse_embedding(params, 64, 26)


def _with_spot_prices(tmp_path, machine_types, accelerators):
    """A copy of the bundled price table with the given Spot prices added."""
    from components.core.comparison.pricing import DEFAULT_PRICES_PATH, load_prices

    raw = json.loads(DEFAULT_PRICES_PATH.read_text())
    for name, usd in machine_types.items():
        raw["machine_types"][name]["spot_usd_per_hour"] = usd
    for name, usd in accelerators.items():
        raw["accelerators"][name]["spot_usd_per_hour"] = usd
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(raw))
    return load_prices(path)


# 16 x 8 V100 at 25 Gbit/s: parameter servers on their own n1-standard-8 machines are
# predicted about 20 % faster than multi_worker_mirrored for BERT-large and ResNet-101
# (their workers wait for no slowest replica).
V100_16X8_25G = Topology(16, 8, "v100", network_gbps=25)


MIX_A100_4_T4_1 = ["select", "--machines", "5", "--gpus-per-machine", "8", "--gpu", "a100:4,t4:1",
                   "--batch-size", "16", "--network-gbps", "100", "--nics", "4",
                   "--network-path", "host", "--json"]  # fmt: skip


T4_ARGV = ["select", "--machines", "4", "--gpus-per-machine", "1", "--gpu", "t4",
           "--network-gbps", "10", "--network-path", "host", "--model", "mlp",
           "--json"]  # fmt: skip
