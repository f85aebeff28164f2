"""Published scaling results, their blind sets, and the prediction and choice for each."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.core import storage
from components.core.config import ConfigError
from components.core.model_profile import PUBLISHED_PROFILES
from components.core.selection.device_compute import (
    FITTED,
    FittedConstants,
    achievable_tflops,
    step_compute_time,
)
from components.core.selection.topology import Topology
from research.selection.published import (
    PublishedRun,
    published_allreduce,
    published_parameter_server,
    published_run,
)

DATA_DIR = Path(__file__).parent / "data"
EVIDENCE_PATH = DATA_DIR / "published_scaling.json"
# Each blind set's one evaluation (`record_first_look`), by the set's `split` name:
# `blind` (before any change the set prompted), `blind-2` (collected after
# those changes, to test them blind once more), `blind-3` (collected after the
# second look, frozen before the network-path term), `blind-4` (collected after
# the third look, frozen before the mixed-precision change) and `blind-5`
# (collected after the one-ring all-reduce, frozen before it was evaluated on them);
# `blind-6` (collected after the fifth look, frozen before the next change) and
# `blind-7` (collected after the sixth look, frozen before the overlap input) and
# `blind-8` (collected after the seventh look, frozen before the next change).
BLIND_RECORD_PATH = DATA_DIR / "blind_first_look.json"
BLIND_RECORD_PATHS = {
    "blind": BLIND_RECORD_PATH,
    "blind-2": DATA_DIR / "blind_2_first_look.json",
    "blind-3": DATA_DIR / "blind_3_first_look.json",
    "blind-4": DATA_DIR / "blind_4_first_look.json",
    "blind-5": DATA_DIR / "blind_5_first_look.json",
    "blind-6": DATA_DIR / "blind_6_first_look.json",
    "blind-7": DATA_DIR / "blind_7_first_look.json",
    "blind-8": DATA_DIR / "blind_8_first_look.json",
}
# One case in HELD_OUT_EVERY goes to the held-out part, by a stable hash of the
# case, so the split does not depend on the order or on who added what.
HELD_OUT_EVERY = 3
# The blind set (cases stored with `"split": "blind"`) was collected after the
# model was built and frozen before it was first evaluated on them; this digest
# (`blind_set_digest()`) pins it, so a later edit shows in the tests.
BLIND_SET_SHA256 = "2e334fd157e958d190bc276168ada09cf14770ae4d0f6782b638624e6b81d0e4"
BLIND_SET_2_SHA256 = "0141f63ec756629c4b4f43a4296a3a5cf76e562a37444710c24efff44f6f12cc"
BLIND_SET_3_SHA256 = "6f038114decaf971ff70b5a02d1c198b7aea4fa6b181852a2a98fd3c80abd7cb"
BLIND_SET_4_SHA256 = "04b10a4fce5f549b0cafb662445bc83305a4e18109980b7a75da431b06348710"
BLIND_SET_5_SHA256 = "729ec68fc80bc6d2504f2c47e0dee97c41269c7735522643ce42671aa48509fc"
BLIND_SET_6_SHA256 = "df37d7725addcf66ecd93be184f9cbd2bba80a8c9e8a521b26a9d79c0fd8efd8"
BLIND_SET_7_SHA256 = "78c37804f7398816750e5063e3617feef268a66da698244a43e8adaa15126c52"
BLIND_SET_8_SHA256 = "9d3b704a6987f5b6fa7a4516ea86347b4c0005981053593eaa3f9f8eed4fc956"
# Blind sets whose cases serve the fit once their first look is stored. `blind-3`
# joined with the mixed-precision change that its look prompted (after `blind-4`
# was frozen, so the next look is still blind); `blind-4` and `blind-5` joined
# together after the fifth look, with `blind-6` frozen before.
FITTED_BLIND_SETS = ("blind", "blind-2", "blind-3", "blind-4", "blind-5")
# How the docs name the blind sets, in the order of BLIND_RECORD_PATHS.
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def read_evidence(path: str | Path) -> dict[str, Any]:
    """The evidence file's JSON.

    Raises:
        ConfigError: when the file cannot be read.
    """
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read evidence file {path}: {err}") from None


def load_evidence(
    path: str | Path = EVIDENCE_PATH,
    first_looks: Mapping[str, str | Path] | None = None,
    measured_rates: bool = True,
) -> list[dict[str, Any]]:
    """The published scaling cases of the fit, each with its `split` (`train` or `held-out`).

    A blind set of `FITTED_BLIND_SETS` (`load_blind`) joins them, split by the
    same hash and marked `was_blind` (its name in `blind_split`), only once its
    first look is stored (`first_looks`, by set name; default
    `BLIND_RECORD_PATHS`): a set that has been looked at is blind no more, and
    its cases serve the fit.

    With `measured_rates`, a network rate a case's source measured on the wire
    (`measured_network_gbps_by_reference`) is its `network_gbps`; without, every
    case keeps its NICs' rated one.

    Raises:
        ConfigError: when the file cannot be read.
    """
    records = BLIND_RECORD_PATHS if first_looks is None else first_looks
    joined = {
        name for name in FITTED_BLIND_SETS if name in records and storage.exists(records[name])
    }
    measured = _measured_network_gbps(str(path)) if measured_rates else {}
    return [
        {
            **c,
            **_measured_rate(c, measured),
            "split": case_split(c),
            "was_blind": c.get("split") in joined,
            "blind_split": c.get("split") if c.get("split") in joined else None,
        }
        for c in read_evidence(path)["cases"]
        if not c.get("excluded")
        and (c.get("split") not in BLIND_RECORD_PATHS or c["split"] in joined)
    ]


def load_blind(path: str | Path = EVIDENCE_PATH, name: str = "blind") -> list[dict[str, Any]]:
    """The frozen blind set `name` (`blind`, `blind-2`, ...), without the excluded cases.

    The sets of `FITTED_BLIND_SETS` join the fit after their first look (`load_evidence`).
    """
    measured = _measured_network_gbps(str(path))
    return [
        {**c, **_measured_rate(c, measured)}
        for c in read_evidence(path)["cases"]
        if c.get("split") == name and not c.get("excluded")
    ]


def blind_set_digest(path: str | Path = EVIDENCE_PATH, name: str = "blind") -> str:
    """SHA-256 of blind set `name` as stored (excluded cases included), in canonical JSON."""
    blind = [c for c in read_evidence(path)["cases"] if c.get("split") == name]
    return hashlib.sha256(json.dumps(blind, sort_keys=True).encode()).hexdigest()


def excluded_cases(
    path: str | Path = EVIDENCE_PATH, blind: str | None = None
) -> list[dict[str, Any]]:
    """Cases kept for the record but left out, each with its `excluded` reason.

    Args:
        path: the evidence file.
        blind: a blind set's name (`blind`, ...) for its left-out cases instead of the fit's.
    """
    return [
        c for c in read_evidence(path)["cases"] if c.get("excluded") and c.get("split") == blind
    ]


def case_split(case: Mapping[str, Any]) -> str:
    """`held-out` for about one case in HELD_OUT_EVERY (a hash of the case), else `train`."""
    key = "|".join(
        str(case.get(k))
        for k in ("source", "model", "gpu", "machines", "gpus_per_machine", "batch_size",
                  "strategy", "precision", "detail")
    )  # fmt: skip
    digest = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    return "held-out" if digest % HELD_OUT_EVERY == 0 else "train"


def case_run(case: Mapping[str, Any]) -> PublishedRun:
    """The case as the product's inputs and what its framework did (`published.published_run`)."""
    return published_run(case, case_xla(case), case_network_path(case))


def case_topology(case: Mapping[str, Any]) -> tuple[Topology, dict[str, float] | None]:
    """The case's hardware, and the spec of a GPU outside the catalog (else None).

    A GPU outside the catalog is modelled as a V100 whose compute is rescaled.
    """
    run = case_run(case)
    return run.topology, case.get("gpu_spec")


def case_network_path(case: Mapping[str, Any], path: str | Path = EVIDENCE_PATH) -> str:
    """How the case's traffic between machines travelled: `host` or `overlay`.

    Its own `network_path`, else the one `network_path_by_reference` in the
    evidence file gives its reference (marked after a set was frozen), else
    `host`, as `select --network-path` defaults.
    """
    return case.get("network_path") or network_paths_by_reference(str(path)).get(
        case["reference"], "host"
    )


def _measured_rate(case: Mapping[str, Any], measured: Mapping[str, float]) -> dict[str, Any]:
    """The rate the case's source measured on the wire as its `network_gbps`, the
    NICs' rated one kept as `rated_network_gbps`; nothing when the source measured none."""
    if case["reference"] not in measured:
        return {}
    return {
        "network_gbps": float(measured[case["reference"]]),
        "rated_network_gbps": case.get("network_gbps"),
    }


@functools.cache
def _measured_network_gbps(path: str) -> dict[str, float]:
    """Network rates a case's source measured, by reference."""
    return dict(read_evidence(path).get("measured_network_gbps_by_reference", {}))


@functools.cache
def network_paths_by_reference(path: str) -> dict[str, str]:
    """Network paths known for a reference, added after its set was frozen."""
    return dict(read_evidence(path).get("network_path_by_reference", {}))


def case_xla(case: Mapping[str, Any], path: str | Path = EVIDENCE_PATH) -> bool:
    """Whether the case's source compiled the step with XLA.

    Its own `xla` when it has one (a detail may say "no XLA"), else its detail
    says `XLA`, or its source's scripts enable XLA by default (`xla_sources` in
    the evidence file).
    """
    if "xla" in case:
        return bool(case["xla"])
    return "XLA" in case.get("detail", "") or case["source"] in _xla_sources(str(path))


@functools.cache
def _xla_sources(path: str) -> frozenset[str]:
    """Sources whose published runs used XLA by their scripts' default."""
    return frozenset(read_evidence(path).get("xla_sources", {}))


def case_tflops(case: Mapping[str, Any], constants: FittedConstants) -> float:
    """Sustained TFLOP/s the cost model gives the case's GPU."""
    topo, spec = case_topology(case)
    if spec:
        return spec["peak_tflops_fp32"] * constants.achievable_fraction_cuda_cores
    return achievable_tflops(topo.gpu, topo.precision, constants)


def predict_case(case: Mapping[str, Any], constants: FittedConstants | None = None) -> float:
    """Predicted scaling efficiency (0-1) of one published case (compute from FLOPs).

    Efficiency is the time per example of the case's baseline (one GPU, or
    `efficiency_baseline`: one machine with its own gradient accumulation)
    over the case's own.
    """
    c = constants or FITTED
    run = case_run(case)
    topo, spec = run.topology, run.gpu_spec
    model = PUBLISHED_PROFILES[case["model"]]
    if spec:  # a GPU outside the catalog: scale compute by its peak
        ratio = achievable_tflops(topo.gpu, topo.precision, c) / case_tflops(case, c)
        model = dataclasses.replace(model, flops_per_example=model.flops_per_example * ratio)
    baseline = case.get("efficiency_baseline") or {"machines": 1, "gpus_per_machine": 1}
    base = _time_per_example(
        case, run, model, c,
        baseline["machines"],
        baseline.get("gpus_per_machine", topo.gpus_per_machine),
        baseline.get("gradient_accumulation", 1),
    )  # fmt: skip
    own = _time_per_example(
        case, run, model, c,
        topo.machines, topo.gpus_per_machine, case.get("gradient_accumulation", 1),
    )  # fmt: skip
    return base / own


def _time_per_example(
    case: Mapping[str, Any],
    run: PublishedRun,
    model: Any,
    c: FittedConstants,
    machines: int,
    gpus: int,
    accumulation: int,
) -> float:
    """Seconds per example of one replica on machines x gpus with the case's strategy.

    With gradient accumulation, a replica computes `accumulation` micro-batches
    per exchange, and only the last one's back-propagation can hide it.
    """
    batch = int(case["batch_size"])
    topo = run.topology
    if machines * gpus == 1:
        single = step_compute_time(model, batch, achievable_tflops(topo.gpu, topo.precision, c))
        return single / batch
    if case["strategy"] == "parameter_server":
        local = case.get("local_aggregation", True)
        parts = published_parameter_server(
            run, model, batch, machines, int(case["ps"]), gpus if local else 1,
            1 if local else gpus, constants=c,
        )  # fmt: skip
    else:
        parts = published_allreduce(run, model, batch, machines, gpus, constants=c)
    compute, exposed, _ = parts
    return (accumulation * compute + exposed) / (accumulation * batch)


def evidence_rows(
    cases: Sequence[Mapping[str, Any]] | None = None, constants: FittedConstants | None = None
) -> list[dict[str, Any]]:
    """Each case with its prediction and signed and absolute error in percentage points."""
    rows = []
    for case in cases if cases is not None else load_evidence():
        predicted = predict_case(case, constants)
        signed = (predicted - case["published_efficiency"]) * 100
        rows.append(
            {
                **case,
                "predicted_efficiency": predicted,
                "signed_pp": signed,
                "error_pp": abs(signed),
            }
        )
    return rows


def median_absolute_error_pp(rows: Sequence[Mapping[str, Any]] | None = None) -> float:
    """Median absolute error of predicted scaling efficiency, percentage points."""
    rows = rows if rows is not None else evidence_rows()
    return statistics.median(r["error_pp"] for r in rows)


@dataclass(frozen=True)
class ErrorSummary:
    """How well predictions match published efficiencies on a set of cases.

    Attributes:
        cases: how many.
        median_abs_pp: median absolute error, percentage points.
        bias_pp: mean signed error (predicted - published); positive over-predicts.
        spread_pp: interquartile range of the signed error.
        correlation: Pearson correlation of predicted and published.
        over_predicted: cases predicted above their published figure.
        baseline_pp: median absolute error of the constant guess.
        mean_abs_pp: mean absolute error, percentage points.
        baseline_mean_pp: mean absolute error of the constant guess.
    """

    cases: int
    median_abs_pp: float
    bias_pp: float
    spread_pp: float
    correlation: float
    over_predicted: int
    baseline_pp: float
    mean_abs_pp: float = 0.0
    baseline_mean_pp: float = 0.0

    @property
    def improvement(self) -> float:
        """How much smaller the error is than the constant guess's (0.3 = 30 % smaller)."""
        return 1 - self.median_abs_pp / self.baseline_pp if self.baseline_pp else 0.0


def summarize(rows: Sequence[Mapping[str, Any]], constant_guess: float) -> ErrorSummary:
    """The error summary of `rows`, against guessing `constant_guess` for every case."""
    signed = [r["signed_pp"] for r in rows]
    predicted = [r["predicted_efficiency"] for r in rows]
    published = [r["published_efficiency"] for r in rows]
    q = statistics.quantiles(signed, n=4) if len(signed) > 1 else [0.0, 0.0, 0.0]
    return ErrorSummary(
        cases=len(rows),
        median_abs_pp=statistics.median(abs(x) for x in signed),
        bias_pp=statistics.fmean(signed),
        spread_pp=q[2] - q[0],
        correlation=_correlation(predicted, published),
        over_predicted=sum(x > 0 for x in signed),
        baseline_pp=statistics.median(abs(constant_guess - p) * 100 for p in published),
        mean_abs_pp=statistics.fmean(abs(x) for x in signed),
        baseline_mean_pp=statistics.fmean(abs(constant_guess - p) * 100 for p in published),
    )


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson correlation (0 when either side is constant)."""
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return 0.0


def best_constant(cases: Sequence[Mapping[str, Any]]) -> float:
    """The constant efficiency with the least absolute error on `cases` (their median)."""
    return statistics.median(c["published_efficiency"] for c in cases)


def split_summaries(
    constants: FittedConstants | None = None,
) -> tuple[ErrorSummary, ErrorSummary, float, list[dict[str, Any]]]:
    """(training summary, held-out summary, the constant guess, all rows).

    The constant guess is fitted on the training part only.
    """
    rows = evidence_rows(constants=constants)
    train = [r for r in rows if r["split"] == "train"]
    held = [r for r in rows if r["split"] == "held-out"]
    guess = best_constant(train)
    return summarize(train, guess), summarize(held, guess), guess, rows


def blind_summary(
    constants: FittedConstants | None = None, name: str = "blind"
) -> tuple[ErrorSummary, float, list[dict[str, Any]]]:
    """(blind-set summary, the constant guess, rows with predictions and choices).

    The constant guess is the median of the training part, as for the held-out
    part (at the first look, a training part without the blind set).
    """
    guess = best_constant([c for c in load_evidence() if c["split"] == "train"])
    rows = choice_rows(evidence_rows(load_blind(name=name), constants))
    return summarize(rows, guess), guess, rows


def load_first_look(path: str | Path = BLIND_RECORD_PATH) -> dict[str, Any] | None:
    """The stored first look at the blind set, or None before it is made."""
    if not storage.exists(path):
        return None
    return json.loads(storage.read_text(path))


def record_first_look(name: str = "blind") -> dict[str, Any]:
    """Evaluates the fitted model on blind set `name` and stores the result, once.

    Raises:
        ConfigError: when a first look is already stored (the blind figure is
            only blind the first time).
    """
    path = BLIND_RECORD_PATHS[name]
    if storage.exists(path):
        raise ConfigError(f"{path} exists: the blind set was already looked at once")
    summary, guess, rows = blind_summary(name=name)
    record = {
        "made_by": f"python -m research.selection.fit --first-look {name}",
        "blind_set_sha256": blind_set_digest(name=name),
        "constants": dataclasses.asdict(FITTED),
        "constant_guess": guess,
        "summary": dataclasses.asdict(summary),
        "cases": [
            {
                k: r.get(k)
                for k in (
                    "source",
                    "model",
                    "gpu",
                    "machines",
                    "gpus_per_machine",
                    "network_gbps",
                    "batch_size",
                    "precision",
                    "published_efficiency",
                    "predicted_efficiency",
                    "chosen",
                    "right",
                )
            }  # fmt: skip
            | {"network_path": case_network_path(r)}
            for r in rows
        ],
    }
    storage.write_text(path, json.dumps(record, indent=1) + "\n")
    return record


def _family(strategy: str) -> str:
    """`allreduce` for the synchronous all-reduce strategies, else the name."""
    synchronous = ("allreduce", "mirrored", "multi_worker_mirrored")
    return "allreduce" if strategy in synchronous else strategy


def choice_rows(rows: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """What `recommend` picks on each case's hardware and model, and whether it is right.

    Right means: it uses every GPU of the case (the published cases scale well
    enough with their best strategy to be worth them all), and where the source
    published both all-reduce and parameter servers on the same hardware, it
    picks the family that published the higher efficiency. Where the source
    measured its machines against one machine and the best of them stayed below
    `EFFICIENCY_FLOOR` (two machines barely faster than one), right means fewer
    machines than the case has, as `select`'s floor advises.
    """
    from components.core.selection.machine_floor import EFFICIENCY_FLOOR
    from components.core.selection.recommendation import recommend

    rows = rows if rows is not None else load_evidence()
    best: dict[tuple, tuple[float, str]] = {}
    for r in rows:
        key = _group(r)
        if r["published_efficiency"] > best.get(key, (-1.0, ""))[0]:
            best[key] = (r["published_efficiency"], _family(r["strategy"]))
    families: dict[tuple, set[str]] = {}
    for r in rows:
        families.setdefault(_group(r), set()).add(_family(r["strategy"]))
    out = []
    for r in rows:
        topo, spec = case_topology(r)
        model = PUBLISHED_PROFILES[r["model"]]
        if spec:
            ratio = achievable_tflops(topo.gpu, topo.precision) / case_tflops(r, FITTED)
            model = dataclasses.replace(model, flops_per_example=model.flops_per_example * ratio)
        rec = recommend(topo, model, batch_size=int(r["batch_size"]))
        expected = best[_group(r)][1] if len(families[_group(r)]) > 1 else None
        used = rec.chosen.replicas if rec.chosen is not None else 0
        if _per_machine(r) and best[_group(r)][0] < EFFICIENCY_FLOOR:
            expected, right = "fewer machines", 0 < used < topo.total_gpus
        else:
            uses_all = used == topo.total_gpus
            right = uses_all and (expected is None or _family(rec.strategy) == expected)
        out.append({**r, "chosen": rec.strategy, "expected_family": expected, "right": right})
    return out


def _per_machine(case: Mapping[str, Any]) -> bool:
    """Whether the case's efficiency is per machine against one machine (not per GPU)."""
    baseline = case.get("efficiency_baseline") or {}
    return case["machines"] > 1 and baseline.get("machines") == 1


def _group(case: Mapping[str, Any]) -> tuple:
    """Cases on the same hardware, model, batch and precision from the same source."""
    return tuple(
        case.get(k)
        for k in ("source", "model", "gpu", "machines", "gpus_per_machine", "network_gbps",
                  "batch_size", "precision")
    )  # fmt: skip
