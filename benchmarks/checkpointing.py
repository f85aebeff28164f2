"""What `--checkpoint-every N` costs: the time of a step, checkpointing every N steps or per epoch.

    python -m benchmarks.checkpointing [--rounds N] [--steps N] [--epochs N] [--every A,B,...]

For each strategy (`mirrored`, `multi_worker_mirrored`) and each interval
(`epoch`, then every N steps), Strategist's trainer runs through the real
launcher (`overhead.run_ours`) on the benchmark's shards; the order of the
intervals rotates each round, so a load change on the machine hits every
interval alike. A run's step time is the global batch over its steady
examples/second (the median of its epochs after the first). The report gives,
per interval, the median step time over rounds, the checkpoints one epoch
writes, and the share of step time the checkpoints add over `epoch` (the
default: one checkpoint per epoch, which the epochs' times also include), with
the milliseconds one checkpoint costs.

`--output FILE` gets `{strategy: {interval: {"step_ms", "checkpoints_per_epoch",
"share_over_epoch", "ms_per_checkpoint", "rounds"}}, "machine": ...}`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from benchmarks import common, overhead
from pipelines.cli.arg_types import positive_int

STRATEGIES = ("mirrored", "multi_worker_mirrored")
EPOCH = "epoch"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line (exits 2 on bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.checkpointing",
        description="Step time with a checkpoint every N steps against one per epoch.",
    )
    parser.add_argument("--output", help="write the results as JSON to this file")
    parser.add_argument("--rounds", type=positive_int, default=2, help="(default: 2)")
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=200,
        help=f"global-batch ({common.GLOBAL_BATCH}) steps per epoch (default: 200)",
    )
    parser.add_argument(
        "--epochs", type=positive_int, default=3, help="epochs per run, the first is warm-up"
    )
    parser.add_argument(
        "--every",
        default="100,20,5",
        help="step intervals to time against epoch (default: 100,20,5)",
    )
    parser.add_argument("--model", default="mlp", choices=("cnn", "mlp"), help="(default: mlp)")
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        help="(default: mirrored,multi_worker_mirrored)",
    )
    parser.add_argument("--work-dir", default=common.DEFAULT_WORK_DIR, help="(default: runs/bench)")
    args = parser.parse_args(argv)
    try:
        args.every = [int(v) for v in args.every.split(",") if v.strip()]
    except ValueError:
        parser.error(f"--every takes step counts separated by commas, got {args.every!r}")
    if not args.every or min(args.every) < 1:
        parser.error("--every takes step counts of at least 1")
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = set(args.strategies) - set(STRATEGIES)
    if unknown:
        parser.error(f"--strategies: unknown {sorted(unknown)}; choose from {list(STRATEGIES)}")
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the first epoch is warm-up")
    return args


def run_checkpointing(args: argparse.Namespace, log=print) -> dict[str, Any]:
    """Runs every strategy at every interval, `args.rounds` times; returns the results."""
    shards = os.path.join(args.work_dir, "shards")
    common.make_shards(shards, common.train_examples_for(args.steps))
    intervals = [EPOCH, *(str(n) for n in args.every)]
    results: dict[str, Any] = {}
    for strategy in args.strategies:
        steps: dict[str, list[float]] = {interval: [] for interval in intervals}
        for round_index in range(args.rounds):
            shift = round_index % len(intervals)
            for interval in intervals[shift:] + intervals[:shift]:
                metrics = overhead.run_ours(
                    strategy,
                    shards,
                    args.model,
                    args.epochs,
                    os.path.join(args.work_dir, f"checkpoint-{strategy}-{interval}"),
                    training_options={"checkpoint_every": interval},
                )
                eps = common.median(common.steady(metrics["epoch_examples_per_second"]))
                steps[interval].append(1000.0 * metrics["global_batch_size"] / eps)
                log(f"{strategy} every {interval}: {steps[interval][-1]:.2f} ms a step")
        base = common.median(steps[EPOCH])
        per_epoch = metrics["steps_per_epoch"]
        results[strategy] = {}
        for interval in intervals:
            step_ms = common.median(steps[interval])
            # Saves an epoch writes: every N steps, plus the epoch's end when N does not divide it.
            saves = (
                1
                if interval == EPOCH
                else per_epoch // int(interval) + bool(per_epoch % int(interval))
            )
            extra_ms = (step_ms - base) * per_epoch
            results[strategy][interval] = {
                "step_ms": step_ms,
                "checkpoints_per_epoch": saves,
                "share_over_epoch": (step_ms - base) / base,
                "ms_per_checkpoint": None if saves == 1 else extra_ms / (saves - 1),
                "rounds": args.rounds,
            }
    results["machine"] = common.machine_info()
    return results


def table(results: dict[str, Any]) -> str:
    """The results as one text table."""
    rows = []
    for strategy, per_interval in results.items():
        if strategy == "machine":
            continue
        for interval, r in per_interval.items():
            rows.append(
                (
                    strategy,
                    interval,
                    r["step_ms"],
                    r["checkpoints_per_epoch"],
                    f"{100 * r['share_over_epoch']:+.1f}%",
                    "-" if r["ms_per_checkpoint"] is None else r["ms_per_checkpoint"],
                )
            )
    return common.format_table(
        ("strategy", "checkpoint every", "ms/step", "saves/epoch", "vs epoch", "ms/save"), rows
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    results = run_checkpointing(args, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(table(results))
    common.write_json(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
