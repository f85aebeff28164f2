"""Strategist's trainer against a bare hand-written `tf.distribute` script, A B A B.

    python -m benchmarks.overhead [--output FILE] [--rounds N] [--steps N] [--epochs N]

For each strategy (`mirrored`, `multi_worker_mirrored`, `parameter_server`), each
round runs Strategist's trainer through the real launcher (`run_local`; the
throughput comes from the `metrics.json` it writes) and `benchmarks/bare_tf.py`
started with the same `TF_CONFIG`s on 127.0.0.1 (`plan_tasks`) and the same
environment (`task_environment`), on the same TFRecord shards, model, batch,
cluster shape and steps. The order alternates
each round (ours, bare, then bare, ours, ...), so a load change on the machine
hits both sides equally. Each run's throughput is the median of its epochs
after the first (warm-up: tracing, first reads into the cache); the report
gives the median over rounds of each side and their ratio.

Beside throughput, each run's whole wall time is kept, with the part of `fit`
outside the timed epochs (checkpoints, input set-up and teardown) for both
sides and Strategist's phases (start-up, set-up, export, evaluation), so time
that per-epoch throughput cannot see is in the report too.

`--output FILE` gets `{strategy: {"ours": eps, "bare": eps, "ratio": ours/bare,
"rounds": n, "ours_run_seconds", "bare_run_seconds", "machine", ...}}`; `machine` is
`common.machine_info()` (CPU model, cores, memory, TensorFlow version).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Any

from benchmarks import common
from components.core.config import (
    ClusterConfig,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainingConfig,
)
from pipelines.cli.arg_types import positive_int

BARE_MODULE = "benchmarks.bare_tf"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line (exits 2 on bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.overhead",
        description=(
            "Throughput of Strategist's trainer against a bare hand-written tf.distribute "
            "script, alternating runs, same shards, model, batch, cluster and steps."
        ),
    )
    parser.add_argument("--output", help="write the results as JSON to this file")
    parser.add_argument(
        "--rounds", type=positive_int, default=3, help="A/B rounds per strategy (default: 3)"
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=500,
        help=f"global-batch ({common.GLOBAL_BATCH}) steps per epoch (default: 500)",
    )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        default=3,
        help="epochs per run; the first is warm-up and not counted (default: 3)",
    )
    parser.add_argument(
        "--strategies",
        default=",".join(common.SHAPES),
        help=f"comma-separated subset of {','.join(common.SHAPES)} (default: all)",
    )
    parser.add_argument("--model", default="cnn", choices=("cnn", "mlp"), help="(default: cnn)")
    parser.add_argument(
        "--work-dir",
        default=os.path.join(common.DEFAULT_WORK_DIR, "overhead"),
        help="shards and run folders (default: runs/bench/overhead)",
    )
    parser.add_argument(
        "--no-creator-baseline",
        dest="creator_baseline",
        action="store_false",
        help="skip the second baseline (the bare script fed through a DatasetCreator, "
        "Strategist's input path) under the mirrored strategies",
    )
    parser.add_argument(
        "--timeout", type=positive_int, default=600, help="seconds per run (default: 600)"
    )
    args = parser.parse_args(argv)
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in args.strategies if s not in common.SHAPES]
    if unknown or not args.strategies:
        parser.error(f"--strategies: unknown {unknown}; choose from {', '.join(common.SHAPES)}")
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the first epoch is warm-up")
    return args


def run_ours(
    strategy: str,
    shards: str,
    model: str,
    epochs: int,
    output_dir: str,
    *,
    cluster: ClusterConfig | None = None,
    training_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Trains with Strategist's launcher and returns its `metrics.json`.

    Args:
        strategy: a key of `common.SHAPES`, the cluster unless `cluster` is given.
        shards: the benchmark's shards folder.
        model: `cnn` or `mlp`.
        epochs: epochs of the run.
        output_dir: the run's folder (replaced).
        cluster: the cluster shape, when not `common.SHAPES[strategy]`.
        training_options: further `TrainingConfig` fields (precision, XLA, ...).
    """
    from components.core.launch.local import run_local

    shutil.rmtree(output_dir, ignore_errors=True)
    config = RunConfig(
        data=DataConfig(dataset=common.DATASET_NAME, shards_dir=shards),
        model=ModelConfig(model),
        training=TrainingConfig(
            epochs=epochs,
            per_replica_batch_size=common.PER_REPLICA_BATCH,
            **(training_options or {}),
        ),
        cluster=cluster or common.SHAPES[strategy],
        output_dir=output_dir,
    )
    lines: list[str] = []
    try:
        run_local(config, log=lines.append)
    except Exception:
        sys.stderr.write("\n".join(lines[-40:]) + "\n")
        raise
    with open(os.path.join(output_dir, "metrics.json")) as handle:
        return json.load(handle)


def run_bare(
    strategy: str,
    shards: str,
    model: str,
    epochs: int,
    output_dir: str,
    *,
    extra_args: tuple[str, ...] = (),
    timeout_s: float = 600,
    cluster: ClusterConfig | None = None,
) -> dict[str, Any]:
    """Runs `bare_tf.py` on a localhost cluster of the same shape; returns its timings.

    `cluster` is the shape when it is not `common.SHAPES[strategy]`.

    Raises:
        RuntimeError: a task failed or the run timed out (with its log's tail).
    """
    cluster = cluster or common.SHAPES[strategy]
    shutil.rmtree(output_dir, ignore_errors=True)
    os.makedirs(output_dir)
    result_path = os.path.join(output_dir, "bare.json")
    command = [
        sys.executable,
        "-m",
        BARE_MODULE,
        "--shards",
        shards,
        "--strategy",
        strategy,
        "--model",
        model,
        "--epochs",
        str(epochs),
        "--batch-size",
        str(common.PER_REPLICA_BATCH),
        "--replicas",
        str(cluster.spec.num_replicas(cluster)),
        "--output",
        result_path,
        *extra_args,
    ]
    common.run_cluster(command, cluster, output_dir, f"bare {strategy}", timeout_s)
    with open(result_path) as handle:
        return json.load(handle)


def sides_for(strategy: str, creator_baseline: bool) -> list[str]:
    """The runs of one round: ours, the canonical bare script, and optionally its variant.

    `bare_creator` is the bare script fed through a `DatasetCreator`, the input path
    Strategist's trainer uses; under parameter_server `bare` already is.
    """
    sides = ["ours", "bare"]
    if creator_baseline and not common.SHAPES[strategy].spec.uses_ps:
        sides.append("bare_creator")
    return sides


def run_overhead(args: argparse.Namespace, log=print) -> dict[str, dict[str, Any]]:
    """Runs the A/B rounds; returns `{strategy: {"ours", "bare", "ratio", "rounds", ...}}`."""
    shards = os.path.join(args.work_dir, f"shards-{args.steps}-steps")
    log(f"overhead: shards {shards} ({common.train_examples_for(args.steps)} training examples)")
    common.make_shards(shards, common.train_examples_for(args.steps))
    # The gap under parameter_server followed the machine kind (docs/benchmarks.md), so
    # every record says which machine it was measured on.
    machine = common.machine_info()
    log(f"overhead: machine {machine['cpu_model']}, {machine['nproc']} cores")
    results: dict[str, dict[str, Any]] = {}
    for strategy in args.strategies:
        sides = sides_for(strategy, args.creator_baseline)
        per_round: dict[str, list[float]] = {side: [] for side in sides}
        run_seconds: dict[str, list[float]] = {side: [] for side in sides}
        outside_epochs: dict[str, list[float]] = {side: [] for side in sides}
        phases: list[dict[str, float]] = []
        for round_index in range(args.rounds):
            # A B, then B A: a drift in the machine's load hits every side equally.
            order = sides if round_index % 2 == 0 else sides[::-1]
            for side in order:
                folder = os.path.join(args.work_dir, strategy, f"{side}-{round_index}")
                started = time.perf_counter()
                if side == "ours":
                    metrics = run_ours(strategy, shards, args.model, args.epochs, folder)
                else:
                    extra = ("--input", "creator") if side == "bare_creator" else ()
                    metrics = run_bare(
                        strategy,
                        shards,
                        args.model,
                        args.epochs,
                        folder,
                        extra_args=extra,
                        timeout_s=args.timeout,
                    )
                wall = time.perf_counter() - started
                eps = common.median(common.steady(metrics["epoch_examples_per_second"]))
                outside = fit_outside_epochs(metrics)
                per_round[side].append(eps)
                run_seconds[side].append(wall)
                outside_epochs[side].append(outside)
                if side == "ours":
                    phases.append(metrics["phase_seconds"])
                log(
                    f"overhead: {strategy} round {round_index + 1}/{args.rounds} {side}: "
                    f"{eps:,.0f} examples/s (epochs "
                    + ", ".join(f"{s:.2f}" for s in metrics["epoch_seconds"])
                    + f" s; fit outside epochs {outside:.1f} s; run {wall:.0f} s)"
                )
                shutil.rmtree(folder, ignore_errors=True)
        ours = per_round["ours"]
        record: dict[str, Any] = {
            "ours": common.median(ours),
            "bare": common.median(per_round["bare"]),
            "rounds": args.rounds,
        }
        record["ratio"] = record["ours"] / record["bare"]
        record["ours_per_round"] = ours
        record["bare_per_round"] = per_round["bare"]
        record["ratio_per_round"] = [o / b for o, b in zip(ours, per_round["bare"], strict=True)]
        if "bare_creator" in per_round:
            record["bare_creator"] = common.median(per_round["bare_creator"])
            record["ratio_creator"] = record["ours"] / record["bare_creator"]
            record["bare_creator_per_round"] = per_round["bare_creator"]
            record["ratio_creator_per_round"] = [
                o / b for o, b in zip(ours, per_round["bare_creator"], strict=True)
            ]
        record.update(
            ours_run_seconds=common.median(run_seconds["ours"]),
            bare_run_seconds=common.median(run_seconds["bare"]),
            run_seconds_per_round=run_seconds,
            fit_outside_epochs_seconds_per_round=outside_epochs,
            ours_phase_seconds=median_phases(phases),
            steps_per_epoch=args.steps,
            epochs=args.epochs,
            model=args.model,
            global_batch_size=common.GLOBAL_BATCH,
            machine=machine,
        )
        results[strategy] = record
    return results


def fit_outside_epochs(metrics: dict[str, Any]) -> float:
    """Seconds of `fit` spent outside the timed epochs: checkpoints, input set-up and teardown.

    Strategist's `metrics.json` has `phase_seconds`; the bare script has `fit_seconds`.
    """
    if "phase_seconds" in metrics:
        return metrics["phase_seconds"]["fit"] - metrics["phase_seconds"]["epochs"]
    return metrics["fit_seconds"] - sum(metrics["epoch_seconds"])


def median_phases(phases: list[dict[str, float | None]]) -> dict[str, float]:
    """Per phase, the median over runs (phases a run could not measure are left out)."""
    names = dict.fromkeys(name for p in phases for name in p)
    return {
        name: common.median([p[name] for p in phases if p.get(name) is not None]) for name in names
    }


def time_table(results: dict[str, dict[str, Any]]) -> str:
    """Where a whole run's time goes, ours against bare (medians over rounds, max in brackets)."""
    # Phases only Strategist's trainer reports; the bare script's cells stay empty.
    phase_names = ("startup", "setup", "export", "evaluate")
    rows = []
    for name, r in results.items():
        outside = r["fit_outside_epochs_seconds_per_round"]
        for side in ("ours", "bare"):
            phases = r["ours_phase_seconds"] if side == "ours" else {}
            rows.append(
                (
                    name,
                    side,
                    common.median(r["run_seconds_per_round"][side]),
                    f"{common.median(outside[side]):.1f} ({max(outside[side]):.1f})",
                    *(phases.get(phase, float("nan")) for phase in phase_names),
                )
            )
    headers = (
        "strategy",
        "side",
        "run s",
        "fit outside epochs s (max)",
        *(f"{phase} s" for phase in ("start-up", "set-up", "export", "evaluate")),
    )
    return common.format_table(headers, rows)


def table(results: dict[str, dict[str, Any]]) -> str:
    """The results as a Markdown table: ratios against both baselines where there are two."""
    rows = []
    for name, r in results.items():
        spread = r["ratio_per_round"]
        rows.append(
            (
                name,
                r["ours"],
                r["bare"],
                r["ratio"],
                f"{min(spread):.3f}-{max(spread):.3f}",
                r.get("bare_creator", float("nan")),
                r.get("ratio_creator", float("nan")),
                r["rounds"],
            )
        )
    headers = (
        "strategy",
        "ours ex/s",
        "bare ex/s",
        "ours/bare",
        "per round",
        "bare+DatasetCreator ex/s",
        "ours/that",
        "rounds",
    )
    return common.format_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    results = run_overhead(args)
    print(table(results))
    print()
    print(time_table(results))
    common.write_json(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
