"""Measured throughput from earlier `comparison.json` files, matched to candidates.

The median of the records that ran a candidate as asked (`mismatch`) replaces its prediction.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from components.core import json_input, storage
from components.core.config import STRATEGIES, ConfigError
from components.core.hardware import catalogue_name
from components.core.model_profile import ModelProfile
from components.core.run_metrics import RunMetrics
from components.core.selection.prediction import Prediction
from components.core.selection.step_time import predict_parameter_server
from components.core.selection.topology import Topology, precision_of_policy
from components.core.strategy_spec import spec_for

SUPERLINEAR_MARGIN = 1.05  # measured above this multiple of perfect scaling: questioned
Record = Mapping[str, Any]  # a run record of a comparison.json, `_source` naming the file
_speed = itemgetter("examples_per_second")  # a record's measured throughput
_RUN_ONE = "run `strategist compare` first (it writes runs/<timestamp>-compare/), or drop --history"


def load_history(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """The run records of each comparison.json given or under a folder given, each file once.

    Raises:
        ConfigError: a folder without one, or a file unreadable or holding a bad record.
    """
    files: dict[str, str] = {}  # by a name that is the same however the file was written
    for path in map(str, paths):
        found = storage.find(path, "comparison.json") if storage.isdir(path) else [path]
        if not found:
            raise ConfigError(f"--history {path}: no comparison.json in this folder; {_RUN_ONE}")
        for file in found:
            uri = storage.is_uri(file)
            name = posixpath.normpath(file) if uri else os.path.realpath(storage.local_view(file))
            files.setdefault(name, file)
    return [record for file in files.values() for record in _records(file)]


def _records(path: str) -> list[dict[str, Any]]:
    """One comparison.json's results, each checked as a `RunMetrics` and tagged with `path`."""
    where = f"--history {path}"
    try:
        data = json_input.load(path, where, "pass a comparison.json")
    except FileNotFoundError as err:
        raise ConfigError(f"{where}: cannot read it ({err.strerror or err}); {_RUN_ONE}") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or not results:
        raise ConfigError(f"{where}: no run in its 'results' list (missing or empty); {_RUN_ONE}")
    records = []
    for raw in results:
        run = RunMetrics.from_dict(raw, where)
        if run.examples_per_second <= 0:
            raise ConfigError(
                f"{where} {run.strategy}: 'examples_per_second' is 0, no measured throughput; "
                "correct the record or remove it from the file"
            )
        records.append({**run.to_dict(), "_source": path})
    return records


def mismatch(record: Record, topology: Topology, model: ModelProfile, batch: int) -> str | None:
    """Why `record` cannot stand for a candidate here, or None when it can."""
    if record.get("strategy") not in STRATEGIES:
        return f"strategy {record.get('strategy')!r} unknown to this Strategist"
    hw = record.get("hardware") or {}
    device = str(hw["gpu"]).lower() if hw.get("gpu") and hw.get("gpus_per_machine") else "cpu"
    size = record.get("parameters") or model.params  # a record may leave it out
    ran_batch = record.get("per_replica_batch_size")  # every record Strategist wrote states it
    precision = precision_of_policy(record.get("precision") or "float32")
    xla = bool(record.get("jit_compile"))
    sparse = model.sparse_embedding_params
    checks = (  # (whether it differs, why), said in this order
        # a GPU by its catalogue name: `NVIDIA L40S` is not `l4`
        ((device if device == "cpu" else catalogue_name(device)) != topology.gpu,
         f"device {device}, not {topology.gpu}"),
        (record.get("model") != model.name,
         f"model {record.get('model') or 'unknown'}, not {model.name}"),
        (size != model.params,
         f"model {model.name} of {size:,} parameters, not {model.params:,} "
         + (f"with its {sparse:,}-parameter sparse embedding table" if sparse
            else "(another --classes or input shape)")),
        (ran_batch is None, "no per-replica batch stated"),
        (ran_batch != batch, f"batch {ran_batch} per replica, not {batch}"),
        (precision != topology.precision, f"precision {precision}, not {topology.precision}"),
        (xla != topology.jit_compile,
         f"XLA {'on' if xla else 'off'}, not as asked (--jit-compile)"),
    )  # fmt: skip
    return next((why for differs, why in checks if differs), None)


def _ran(record: Record) -> tuple[str, int, int, int]:
    """A record's strategy, workers, machines and devices per worker (more if it saw more)."""
    hw = record.get("hardware") or {}
    strategy = str(record.get("strategy"))
    gpus = max(record.get("gpus_per_machine") or 1, hw.get("gpus_per_machine") or 0)
    gpus = 1 if spec_for(strategy).single_device else gpus
    return strategy, record.get("workers") or 1, hw.get("machines") or 1, gpus


def _shape(strategy: str, workers: int, gpus: int, ps: int | None) -> str:
    """`2 worker(s) x 8 device(s)`, with `, 1 parameter server(s)` for parameter servers."""
    servers = f", {ps} parameter server(s)" if spec_for(strategy).uses_ps else ""
    return f"{workers} worker(s) x {gpus} device(s){servers}"


def _at_one_server_count(
    p: Prediction, mine: list[Record], topology: Topology, model: ModelProfile, batch: int
) -> list[Record]:
    """A parameter_server candidate's records at its fastest server count, re-predicted there."""
    if not mine or not spec_for(p.strategy).uses_ps:
        return mine
    by_count: dict[int, list[Record]] = {}
    for r in mine:
        by_count.setdefault(int(r.get("ps") or 0), []).append(r)
    ps = max(by_count, key=lambda n: statistics.median(map(_speed, by_count[n])))
    if ps >= 1 and ps != p.layout.ps:
        p.layout = dataclasses.replace(p.layout, ps=ps)
        p.compute_s, p.communication_s, p.raw_communication_s = predict_parameter_server(
            topology, model, batch, p.layout.workers, ps, p.layout.gpus_per_machine
        )
    return by_count[ps]


class HistoryFindings(NamedTuple):
    """What the history records said about the candidates, as sentences by kind."""

    measured: tuple[str, ...] = ()  # one per candidate a measurement now ranks
    questioned: tuple[str, ...] = ()  # measurements above perfect scaling
    ignored: tuple[str, ...] = ()  # the records that matched no candidate, and why
    network: tuple[str, ...] = ()  # that records state no network between machines

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
    records: Sequence[Record],
    topology: Topology,
    model: ModelProfile,
    batch: int = 64,
) -> HistoryFindings:
    """Gives each candidate measured the median of its matching records; says what it found."""
    matching = [r for r in records if mismatch(r, topology, model, batch) is None]
    measured, used, network = [], set(), ()  # used: the ids of the records weighed
    for p in preds:
        shape = (p.strategy, p.layout.workers, p.layout.workers, p.layout.gpus_per_machine)
        fitting = [r for r in matching if _ran(r) == shape]
        mine = sorted(_at_one_server_count(p, fitting, topology, model, batch), key=_speed)
        if not mine:
            continue
        used.update(map(id, fitting))  # another server count's records: weighed and slower
        speed = p.measured_examples_per_second = float(statistics.median(map(_speed, mine)))
        p.measured_source = mine[(len(mine) - 1) // 2]["_source"]  # the lower middle's file
        n, low, high = len(mine), _speed(mine[0]), _speed(mine[-1])
        spread = f"median of {n} records, {low:,.0f}-{high:,.0f}" if n > 1 else "1 record"
        layout = _shape(p.strategy, p.layout.workers, p.layout.gpus_per_machine, p.layout.ps)
        measured.append(
            f"Measured: {p.strategy} ({layout}) ran at {speed:,.0f} examples/s in "
            f"{p.measured_source} ({spread}), replacing the {p.examples_per_second:,.0f} predicted."
        )
        if p.layout.workers > 1:
            network = (
                "History records do not state the network between machines: taken as the "
                f"{topology.machine_network_gbps:g} Gbps asked about.",
            )
    ignored = [r for r in records if id(r) not in used]
    count: Counter[tuple[str, str]] = Counter()  # the ignored records by file and why
    for r in ignored:
        why = mismatch(r, topology, model, batch)
        if why is None:  # all matches but the cluster shape
            strategy, workers, machines, gpus = _ran(r)
            shape = _shape(strategy, workers, gpus, r.get("ps"))
            why = f"{strategy} on {shape} across {machines} machine(s), no candidate's shape"
        count[(r["_source"], why)] += 1
    said = "; ".join(f"{f} ({n} record{'s' * (n > 1)}): {w}" for (f, w), n in sorted(count.items()))
    lead = f"{len(ignored)} of the {len(records)} history records match no candidate here"
    if not used:
        lead = f"None of the {len(records)} history records matches a candidate here"
    tally = (f"{lead}: {said}.",) if ignored else ()
    return HistoryFindings(tuple(measured), tuple(_above_perfect_scaling(preds)), tally, network)


def _above_perfect_scaling(preds: Sequence[Prediction]) -> list[str]:
    """A warning for each measured candidate faster than its replicas times one measured device."""
    ones = [p for p in preds if p.strategy == "one_device" and p.measured_examples_per_second]
    out = []
    for p in preds if ones else ():
        one, speed = ones[0], p.measured_examples_per_second
        perfect = p.replicas * one.measured_examples_per_second
        if p is not one and speed is not None and speed > perfect * SUPERLINEAR_MARGIN:
            files = " and ".join(sorted({p.measured_source, one.measured_source}))
            out.append(
                f"{p.strategy} measured {speed:,.0f} examples/s, {speed / perfect:.2f}x perfect "
                f"scaling of one_device's measured {one.measured_examples_per_second:,.0f} over "
                f"{p.replicas} replicas ({perfect:,.0f}): faster than linear is rare; check that "
                f"{files} ran alike."
            )
    return out
