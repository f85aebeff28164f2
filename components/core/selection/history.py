"""Measured throughput from earlier `comparison.json` files, matched to candidates.

A record decides a candidate when it measured the same device, strategy, cluster shape (each
worker on a machine of its own), per-replica batch, precision and model (its parameter count
too, when stated). The median of the matching records replaces that candidate's prediction.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.core import json_input, storage
from components.core.config import STRATEGIES, ConfigError
from components.core.hardware import catalogue_name
from components.core.model_profile import ModelProfile
from components.core.run_metrics import RunMetrics
from components.core.selection.prediction import Prediction
from components.core.selection.step_time import predict_parameter_server
from components.core.selection.topology import Topology, precision_of_policy
from components.core.strategy_spec import spec_for


def load_history(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Result records of `comparison.json` files, each read as a `RunMetrics` and tagged with
    its file.

    Raises:
        ConfigError: a file that cannot be read, has no or an empty `results` list, or holds a
            record that is not a run record or measured no throughput.
    """
    records = []
    for given, p in _comparison_files(paths):
        path = p if storage.isdir(str(given)) else given  # a folder's file by its own name
        try:
            data = json_input.parse(
                storage.read_bytes(p, limit=json_input.MAX_BYTES),
                f"--history {path}",
                "pass a comparison.json",
            )
        except FileNotFoundError as err:
            raise ConfigError(
                f"--history {path}: cannot read it ({err.strerror or err}): run `strategist "
                "compare` first (it writes runs/<timestamp>-compare/comparison.json, or into "
                "--output FOLDER), or leave --history out"
            ) from None
        except OSError as err:
            raise ConfigError(f"--history {path}: cannot read it ({err.strerror or err})") from None
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise ConfigError(f"--history {path}: no 'results' list; pass a comparison.json")
        if not results:
            raise ConfigError(
                f"--history {path}: its 'results' list is empty (no run was recorded); pass "
                "the comparison.json of a `strategist compare` that ran, or leave --history out"
            )
        for r in results:
            metrics = RunMetrics.from_dict(r, f"--history {path}")
            if metrics.examples_per_second <= 0:
                raise ConfigError(
                    f"--history {path} {metrics.strategy}: 'examples_per_second' is 0, no "
                    "measured throughput; correct the record or remove it from the file"
                )
            records.append({**metrics.to_dict(), "_source": str(p)})
    return records


def _comparison_files(paths: Iterable[str | Path]) -> list[tuple[str | Path, str]]:
    """(as given, file) pairs: a file stands for itself, a folder for every comparison.json under
    it; a file reached twice is read once.

    Raises:
        ConfigError: when a folder holds no comparison.json.
    """
    files = []
    for path in paths:
        p = str(path)
        if not storage.isdir(p):
            files.append((path, p))
            continue
        found = storage.find(p, "comparison.json")
        if not found:
            raise ConfigError(
                f"--history {path}: no comparison.json in this folder; pass the folder "
                "of a `strategist compare` run (runs/<timestamp>-compare/) or its file"
            )
        files.extend((path, f) for f in found)
    seen: set[str] = set()
    once = []
    for given, f in files:
        if _identity(f) not in seen:
            seen.add(_identity(f))
            once.append((given, f))
    return once


def _identity(path: str) -> str:
    """What names one file however it was written: a local path resolved, a URI normalised."""
    if storage.is_uri(path):
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{posixpath.normpath(rest)}"
    return os.path.realpath(storage.local_view(path))


def record_device(record: Mapping[str, Any]) -> str:
    """The device a record ran on: `cpu` without GPUs, else its GPU name in lower case."""
    hw = record.get("hardware") or {}
    gpu = hw.get("gpu")
    if not gpu or not hw.get("gpus_per_machine"):
        return "cpu"
    return str(gpu).lower()


def _same_device(record: Mapping[str, Any], topology: Topology) -> bool:
    """Whether the record's device is the topology's (`a100` is `NVIDIA A100-SXM4-40GB`,
    not `NVIDIA A100-SXM4-80GB`; `l4` is not `NVIDIA L40S`)."""
    device = record_device(record)
    if topology.gpu == "cpu" or device == "cpu":
        return device == topology.gpu
    return catalogue_name(device) == topology.gpu


def mismatch(
    record: Mapping[str, Any], topology: Topology, model: ModelProfile, batch: int
) -> str | None:
    """Why `record` cannot stand for a candidate here, or None when it can."""
    if record.get("strategy") not in STRATEGIES:
        return f"strategy {record.get('strategy')!r} unknown to this Strategist"
    if not _same_device(record, topology):
        return f"device {record_device(record)}, not {topology.gpu}"
    if record.get("model") != model.name:
        return f"model {record.get('model') or 'unknown'}, not {model.name}"
    if record.get("parameters") is not None and record["parameters"] != model.params:
        return _other_size(record["parameters"], model)
    rec_batch = record.get("per_replica_batch_size")
    if rec_batch is None:
        # every record Strategist wrote states its batch
        return "no per-replica batch stated"
    if rec_batch != batch:
        return f"batch {rec_batch} per replica, not {batch}"
    precision = precision_of_policy(record.get("precision") or "float32")
    if precision != topology.precision:
        return f"precision {precision}, not {topology.precision}"
    if bool(record.get("jit_compile")) != topology.jit_compile:
        ran, asked = ("on", "without") if record.get("jit_compile") else ("off", "with")
        return f"XLA {ran}, not as asked {asked} --jit-compile"
    return None


def _other_size(parameters: int, model: ModelProfile) -> str:
    """Why a record of `model`'s name but `parameters` parameters measured another model."""
    said = f"model {model.name} of {parameters:,} parameters, not {model.params:,}"
    if model.sparse_embedding_params:
        return f"{said} with its {model.sparse_embedding_params:,}-parameter sparse embedding table"
    return f"{said} (another --classes or input shape)"


def _gpus_per_machine(record: Mapping[str, Any]) -> int:
    """Devices each worker of the record computed on: the configured ones, or the GPUs it
    detected on each machine when more (a worker uses every GPU it sees)."""
    if spec_for(str(record.get("strategy"))).single_device:
        return 1
    hw = record.get("hardware") or {}
    return max(record.get("gpus_per_machine") or 1, hw.get("gpus_per_machine") or 0)


def _fits(record: Mapping[str, Any], candidate: Prediction) -> bool:
    """Whether the record ran the candidate's strategy on its cluster shape, each worker on a
    machine of its own (a local run's workers share one)."""
    hw = record.get("hardware") or {}
    return (
        record.get("strategy") == candidate.strategy
        and (record.get("workers") or 1) == candidate.layout.workers
        and (hw.get("machines") or 1) == candidate.layout.workers
        and _gpus_per_machine(record) == candidate.layout.gpus_per_machine
    )


def _at_one_server_count(
    candidate: Prediction,
    mine: list[Mapping[str, Any]],
    topology: Topology,
    model: ModelProfile,
    batch: int,
) -> list[Mapping[str, Any]]:
    """A parameter_server candidate's records at the server count that ran fastest (median),
    the candidate re-predicted at it; other candidates' records unchanged."""
    if not mine or not spec_for(candidate.strategy).uses_ps:
        return mine
    by_count: dict[int, list[Mapping[str, Any]]] = {}
    for r in mine:
        by_count.setdefault(int(r.get("ps") or 0), []).append(r)
    ps, records = max(
        by_count.items(), key=lambda kv: statistics.median(r["examples_per_second"] for r in kv[1])
    )
    if ps >= 1 and ps != candidate.layout.ps:
        layout = candidate.layout
        candidate.layout = dataclasses.replace(layout, ps=ps)
        parts = predict_parameter_server(
            topology, model, batch, layout.workers, ps, layout.gpus_per_machine
        )
        candidate.compute_s, candidate.communication_s, candidate.raw_communication_s = parts
    return records


@dataclass(frozen=True)
class HistoryFindings:
    """What the history records said about the candidates, as sentences by kind.

    Attributes:
        measured: one per candidate a measurement now ranks.
        questioned: measurements above perfect scaling, questioned.
        ignored: the records that matched no candidate, and why.
        network: the caveat that records state no network between machines.
    """

    measured: tuple[str, ...] = ()
    questioned: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    network: tuple[str, ...] = ()

    @property
    def sentences(self) -> list[str]:
        """Every finding, in the order the answer gives them."""
        return [*self.measured, *self.questioned, *self.ignored, *self.network]

    @property
    def about_the_measured(self) -> list[str]:
        """The findings about the candidates measured: what ran, and on which network."""
        return [*self.measured, *self.network]


def apply_history(
    preds: list[Prediction],
    records: Sequence[Mapping[str, Any]],
    topology: Topology,
    model: ModelProfile,
    batch: int = 64,
) -> HistoryFindings:
    """Attaches the median of its matching records to each candidate they measured; returns
    what it found."""
    matching = [r for r in records if mismatch(r, topology, model, batch) is None]
    measured = []
    used: set[int] = set()  # ids of the records weighed
    across_machines = False  # whether a record that decided ran over the network
    for p in preds:
        fitting = [r for r in matching if _fits(r, p)]
        mine = _at_one_server_count(p, fitting, topology, model, batch)
        if not mine:
            continue
        used.update(map(id, fitting))  # another server count's records: weighed and slower
        across_machines |= p.layout.workers > 1
        mine.sort(key=lambda r: r["examples_per_second"])
        median = mine[(len(mine) - 1) // 2]  # the lower middle names the file
        p.measured_examples_per_second = float(
            statistics.median(r["examples_per_second"] for r in mine)
        )
        p.measured_source = median["_source"]
        spread = (
            f"the median of {len(mine)} matching records, "
            f"{mine[0]['examples_per_second']:,.0f}-{mine[-1]['examples_per_second']:,.0f}"
            if len(mine) > 1
            else "1 matching record"
        )
        measured.append(
            f"Measured: {p.strategy} ({p.layout.workers} worker(s) x "
            f"{p.layout.gpus_per_machine} device(s){_servers(p)}, batch {batch}, "
            f"{topology.precision}, "
            f"{model.name}) ran at {p.measured_examples_per_second:,.0f} examples/s in "
            f"{median['_source']} ({spread}) against "
            f"{p.examples_per_second:,.0f} predicted; the measurement replaces the prediction."
        )
    ignored = [r for r in records if id(r) not in used]
    tally = []
    if records and not used:
        tally.append(
            f"None of the {len(records)} history records matches a candidate here, so the "
            f"choice rests on the step-time model: {_why_ignored(ignored, topology, model, batch)}."
        )
    elif ignored:
        tally.append(
            f"{len(ignored)} of the {len(records)} history records "
            f"{'was' if len(ignored) == 1 else 'were'} ignored: "
            f"{_why_ignored(ignored, topology, model, batch)}."
        )
    network = ()
    if across_machines:
        network = (
            "History records do not state the network between machines; they are taken "
            f"as measured on the {topology.machine_network_gbps:g} Gbps asked about.",
        )
    return HistoryFindings(
        tuple(measured), tuple(_above_perfect_scaling(preds)), tuple(tally), network
    )


def _why_ignored(
    ignored: Sequence[Mapping[str, Any]], topology: Topology, model: ModelProfile, batch: int
) -> str:
    """Each file's ignored records and why, for a sentence: `a.json (2 records): device t4, ...`."""
    count: dict[tuple[str, str], int] = {}
    for r in ignored:
        why = mismatch(r, topology, model, batch) or _no_candidates_shape(r)
        count[(r["_source"], why)] = count.get((r["_source"], why), 0) + 1
    return "; ".join(
        f"{source} ({n} record{'s' if n > 1 else ''}): {why}"
        for (source, why), n in sorted(count.items())
    )


def _no_candidates_shape(record: Mapping[str, Any]) -> str:
    """Why a record that matches the device, model, batch and precision decides nothing."""
    hw = record.get("hardware") or {}
    workers, machines = record.get("workers") or 1, hw.get("machines") or 1
    servers = f", {record.get('ps')} server(s)" if spec_for(record["strategy"]).uses_ps else ""
    return (
        f"{record['strategy']} on {workers} worker(s) x {_gpus_per_machine(record)} "
        f"device(s){servers} across {machines} machine(s): the cluster shape or machines of "
        "no candidate here"
    )


def _servers(candidate: Prediction) -> str:
    """`, 4 parameter server(s)` for a parameter_server candidate, else nothing."""
    if not spec_for(candidate.strategy).uses_ps:
        return ""
    return f", {candidate.layout.ps} parameter server(s)"


# Measured above this multiple of perfect scaling, records are questioned.
SUPERLINEAR_MARGIN = 1.05


def _above_perfect_scaling(preds: Sequence[Prediction]) -> list[str]:
    """A warning for each measured candidate faster than its replicas times one measured device."""
    one = next(
        (p for p in preds if p.strategy == "one_device" and p.measured_examples_per_second), None
    )
    if one is None:
        return []
    out = []
    for p in preds:
        if p is one or p.measured_examples_per_second is None:
            continue
        perfect = p.replicas * one.measured_examples_per_second
        if p.measured_examples_per_second > perfect * SUPERLINEAR_MARGIN:
            out.append(
                f"{p.strategy} measured {p.measured_examples_per_second:,.0f} examples/s, "
                f"{p.measured_examples_per_second / perfect:.2f}x perfect scaling of "
                f"one_device's measured {one.measured_examples_per_second:,.0f} over "
                f"{p.replicas} replicas ({perfect:,.0f}): faster than linear is rare, and more "
                "often the runs differed (data, input caching, step count, other load); check "
                f"{' and '.join(sorted({p.measured_source, one.measured_source}))} before "
                "relying on them."
            )
    return out
