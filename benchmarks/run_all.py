"""Runs every benchmark and prints one table: what `make bench` calls.

    python -m benchmarks.run_all [--rounds N] [--steps N] [--epochs N] [--output FILE]

1. `overhead`: Strategist's trainer against the bare hand-written script, per
   strategy, alternating runs (ratio = ours / bare examples per second);
2. `options`: the same, with each GPU-speed option (precision, XLA, steps per
   execution, all-reduce) on both sides;
3. `input_pipeline`: the shard reader alone against the fastest trainer
   (headroom);
4. `pipeline_overhead`: the local comparison pipeline's wall time against its
   training runs (skipped, with the reason, when `strategist compare` is missing);
5. `checkpointing`: the step time with a checkpoint every N steps against one
   per epoch (`--checkpoint-every`).

The full results, with the machine they came from, go to `--output`
(default `runs/bench/results.json`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from benchmarks import (
    checkpointing,
    common,
    input_pipeline,
    options,
    overhead,
    pipeline_overhead,
)
from pipelines.cli.arg_types import positive_int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line (exits 2 on bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run_all",
        description=(
            "Run the overhead, input-pipeline and pipeline-overhead benchmarks and print one "
            "table (what `make bench` runs)."
        ),
    )
    parser.add_argument(
        "--output",
        default=os.path.join(common.DEFAULT_WORK_DIR, "results.json"),
        help="JSON file for all results and the machine (default: runs/bench/results.json)",
    )
    parser.add_argument(
        "--rounds", type=positive_int, default=2, help="A/B rounds per strategy (default: 2)"
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=300,
        help=f"global-batch ({common.GLOBAL_BATCH}) steps per epoch (default: 300)",
    )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        default=3,
        help="epochs per overhead run, the first is warm-up (default: 3)",
    )
    parser.add_argument(
        "--pipeline-epochs",
        type=positive_int,
        default=3,
        help="epochs per training of the comparison pipeline (default: 3)",
    )
    parser.add_argument(
        "--creator-baseline",
        action="store_true",
        help="also run the bare script through a DatasetCreator (Strategist's input path) "
        "under the mirrored strategies: a stricter second baseline, about 1.5x the run time",
    )
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated benchmarks to skip: "
        "overhead,options,input_pipeline,pipeline_overhead,checkpointing",
    )
    parser.add_argument("--work-dir", default=common.DEFAULT_WORK_DIR, help="(default: runs/bench)")
    args = parser.parse_args(argv)
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    known = {"overhead", "options", "input_pipeline", "pipeline_overhead", "checkpointing"}
    if args.skip - known:
        parser.error(f"--skip: unknown {sorted(args.skip - known)}; choose from {sorted(known)}")
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the first epoch is warm-up")
    return args


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(benchmark, measure, value) rows for the one table."""
    rows: list[tuple[str, str, Any]] = []
    for strategy, r in results.get("overhead", {}).items():
        rows.append(("overhead", f"{strategy}: ours ex/s", r["ours"]))
        rows.append(("overhead", f"{strategy}: bare ex/s", r["bare"]))
        rows.append(("overhead", f"{strategy}: ours / bare", r["ratio"]))
        if "ours_run_seconds" in r:
            rows.append(("overhead", f"{strategy}: ours run s (whole run)", r["ours_run_seconds"]))
            rows.append(("overhead", f"{strategy}: bare run s (whole run)", r["bare_run_seconds"]))
        if "ratio_creator" in r:
            rows.append(("overhead", f"{strategy}: bare+DatasetCreator ex/s", r["bare_creator"]))
            rows.append(("overhead", f"{strategy}: ours / bare+DatasetCreator", r["ratio_creator"]))
    for option, per_strategy in results.get("options", {}).items():
        for strategy, r in per_strategy.items():
            value = r.get("ratio", f"not run: {r.get('refused', '')[:60]}")
            rows.append(("options", f"{option} {strategy}: ours / bare", value))
    ip = results.get("input_pipeline")
    if ip:
        rows.append(("input_pipeline", "reader ex/s, first epoch", ip["reader_cold"]))
        rows.append(("input_pipeline", "reader ex/s, cached epochs", ip["reader_warm"]))
        rows.append(("input_pipeline", f"trainer ex/s ({ip['trainer_strategy']})", ip["trainer"]))
        rows.append(("input_pipeline", "headroom, first epoch", ip["headroom_cold"]))
        rows.append(("input_pipeline", "headroom, cached epochs", ip["headroom_warm"]))
        rows.append(
            ("input_pipeline", "batched-parse reader ex/s, first", ip["batched_parse_cold"])
        )
    po = results.get("pipeline_overhead")
    if po and "skipped" in po:
        rows.append(("pipeline_overhead", "skipped", po["skipped"]))
    elif po:
        rows.append(("pipeline_overhead", "compare wall s", po["pipeline_wall_seconds"]))
        rows.append(("pipeline_overhead", "training runs wall s", po["training_launcher_seconds"]))
        rows.append(("pipeline_overhead", "orchestration s", po["orchestration_seconds"]))
        rows.append(("pipeline_overhead", "orchestration share", po["orchestration_fraction"]))
    for strategy, per_interval in results.get("checkpointing", {}).items():
        if strategy == "machine":
            continue
        for interval, r in per_interval.items():
            rows.append(
                (
                    "checkpointing",
                    f"{strategy} every {interval}: share of step",
                    r["share_over_epoch"],
                )
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = time.perf_counter()
    results: dict[str, Any] = {"machine": common.machine_info()}
    overhead_path = os.path.join(args.work_dir, "overhead.json")
    common_args = [f"--steps={args.steps}", f"--work-dir={os.path.join(args.work_dir, 'overhead')}"]
    if "overhead" not in args.skip:
        ov_args = overhead.parse_args(
            [
                *common_args,
                f"--rounds={args.rounds}",
                f"--epochs={args.epochs}",
                *([] if args.creator_baseline else ["--no-creator-baseline"]),
            ]
        )
        results["overhead"] = overhead.run_overhead(ov_args)
        common.write_json(overhead_path, results["overhead"])
        print(overhead.table(results["overhead"]), flush=True)
        print(overhead.time_table(results["overhead"]), flush=True)
    if "options" not in args.skip:
        results["options"] = options.run_options(
            options.parse_args(
                [
                    f"--steps={args.steps}",
                    f"--rounds={args.rounds}",
                    f"--epochs={args.epochs}",
                    f"--work-dir={os.path.join(args.work_dir, 'options')}",
                ]
            )
        )
        print(options.table(results["options"]), flush=True)
    if "input_pipeline" not in args.skip:
        ip_argv = list(common_args)
        if "overhead" in results:
            ip_argv.append(f"--trainer-from={overhead_path}")
        results["input_pipeline"] = input_pipeline.run_input_pipeline(
            input_pipeline.parse_args(ip_argv)
        )
        print(input_pipeline.table(results["input_pipeline"]), flush=True)
    if "pipeline_overhead" not in args.skip:
        po_args = pipeline_overhead.parse_args(
            [
                f"--epochs={args.pipeline_epochs}",
                f"--work-dir={os.path.join(args.work_dir, 'pipeline')}",
            ]
        )
        try:
            results["pipeline_overhead"] = pipeline_overhead.run_pipeline_overhead(po_args)
            print(pipeline_overhead.table(results["pipeline_overhead"]), flush=True)
        except pipeline_overhead.Unavailable as err:
            print(f"pipeline_overhead: {err}", file=sys.stderr)
            results["pipeline_overhead"] = {"skipped": str(err)}
    if "checkpointing" not in args.skip:
        results["checkpointing"] = checkpointing.run_checkpointing(
            checkpointing.parse_args(
                [
                    f"--steps={args.steps}",
                    f"--rounds={args.rounds}",
                    f"--epochs={args.epochs}",
                    f"--work-dir={os.path.join(args.work_dir, 'checkpointing')}",
                ]
            )
        )
        print(checkpointing.table(results["checkpointing"]), flush=True)
    results["seconds"] = time.perf_counter() - started
    machine = results["machine"]
    print()
    print(
        f"Strategist benchmarks on {machine['nproc']} x {machine['cpu_model']}, "
        f"{machine['memory_gb']} GB, TensorFlow {machine.get('tensorflow')} "
        f"({results['seconds']:.0f} s)"
    )
    print(common.format_table(("benchmark", "measure", "value"), summary_rows(results)))
    common.write_json(args.output, results)
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
