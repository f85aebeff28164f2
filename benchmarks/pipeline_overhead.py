"""What orchestration costs: the local comparison pipeline's wall time against its training runs.

    python -m benchmarks.pipeline_overhead [--epochs N] [--output FILE]

Runs `strategist compare --local` (the KFP comparison pipeline through
`kfp.local`: shard, one training per strategy on a localhost cluster, evaluate,
compare, report) on the offline digits dataset, timing the command from start
to exit, and reads back `comparison.json`, whose `results` carry each training
run's `launcher_wall_seconds` (cluster start to metrics, as the launcher saw
it) and `wall_seconds` (the epochs alone). Orchestration is the pipeline's wall
time minus the training runs' launcher wall time: CLI and kfp.local start-up,
task sub-processes, sharding, evaluation and the report. When the pipeline
also wrote `timings.json` (per-task wall times), they are listed too.

Exits 3 with a message when `strategist compare` is not available.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from benchmarks import common
from pipelines.cli.arg_types import positive_int

UNAVAILABLE = 3


class Unavailable(RuntimeError):
    """`strategist compare` does not exist (yet) in this checkout."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line (exits 2 on bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pipeline_overhead",
        description=(
            "Wall time of `strategist compare --local` against the sum of its training runs' "
            "wall time: what orchestration costs."
        ),
    )
    parser.add_argument("--output", help="write the results as JSON to this file")
    parser.add_argument(
        "--epochs", type=positive_int, default=3, help="epochs per training (default: 3)"
    )
    parser.add_argument(
        "--strategies",
        default=",".join(common.SHAPES),
        help="passed to `strategist compare --strategies` (default: all three)",
    )
    parser.add_argument("--model", default="mlp", help="(default: mlp, compare's default)")
    parser.add_argument(
        "--work-dir",
        default=os.path.join(common.DEFAULT_WORK_DIR, "pipeline"),
        help="TFDS data and the pipeline's output folder (default: runs/bench/pipeline)",
    )
    parser.add_argument(
        "--timeout", type=positive_int, default=1200, help="seconds (default: 1200)"
    )
    return parser.parse_args(argv)


def strategist_command() -> list[str]:
    """How to run the `strategist` CLI of this environment."""
    return [sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main())"]


def check_available() -> None:
    """Raises `Unavailable` unless `strategist compare --help` works."""
    probe = subprocess.run(
        [*strategist_command(), "compare", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0 or "kfp.local" not in probe.stdout:
        raise Unavailable(
            "`strategist compare --local` is not available in this checkout "
            f"(`strategist compare --help` exited {probe.returncode}); the comparison pipeline "
            "must exist before its orchestration cost can be measured"
        )


def run_pipeline_overhead(args: argparse.Namespace, log=print) -> dict[str, Any]:
    """Runs the comparison pipeline once; returns its wall time against its training runs.

    Raises:
        Unavailable: `strategist compare` does not exist.
        RuntimeError: the pipeline failed (with its output's tail).
    """
    check_available()
    output = os.path.abspath(os.path.join(args.work_dir, "compare"))
    data_dir = os.path.abspath(os.path.join(args.work_dir, "tfds"))
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(data_dir, exist_ok=True)
    command = [
        *strategist_command(),
        "compare",
        "--strategies",
        args.strategies,
        "--model",
        args.model,
        "--epochs",
        str(args.epochs),
        "--data-dir",
        data_dir,
        "--output",
        output,
    ]
    log(f"pipeline_overhead: {' '.join(command[3:])}")
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = time.perf_counter()
    run = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=args.timeout,
    )
    wall = time.perf_counter() - started
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-30:])
        raise RuntimeError(f"strategist compare exited {run.returncode}:\n{tail}")
    with open(os.path.join(output, "comparison.json")) as handle:
        report = json.load(handle)
    runs = []
    for record in report["results"]:
        launcher = record.get("launcher_wall_seconds")
        runs.append(
            {
                "strategy": record["strategy"],
                "launcher_wall_seconds": launcher,
                "wall_seconds": record.get("wall_seconds"),
            }
        )
    training = sum(r["launcher_wall_seconds"] or r["wall_seconds"] or 0.0 for r in runs)
    epochs = sum(r["wall_seconds"] or 0.0 for r in runs)
    result: dict[str, Any] = {
        "pipeline_wall_seconds": wall,
        "training_launcher_seconds": training,
        "training_epoch_seconds": epochs,
        "orchestration_seconds": wall - training,
        "orchestration_fraction": (wall - training) / wall,
        "runs": runs,
        "epochs": args.epochs,
        "model": args.model,
    }
    timings_path = os.path.join(output, "timings.json")
    if os.path.exists(timings_path):
        with open(timings_path) as handle:
            timings = json.load(handle)
        result["tasks"] = timings.get("tasks", [])
        result["kfp_pipeline_wall_seconds"] = timings.get("pipeline_wall_seconds")
    return result


def table(result: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    wall = result["pipeline_wall_seconds"]
    rows = [("`strategist compare --local`, start to exit", wall, 1.0)]
    for r in result["runs"]:
        seconds = r["launcher_wall_seconds"] or r["wall_seconds"] or float("nan")
        rows.append((f"training {r['strategy']} (launcher wall)", seconds, seconds / wall))
    rows.append(
        (
            "training runs, epochs only",
            result["training_epoch_seconds"],
            result["training_epoch_seconds"] / wall,
        )
    )
    rows.append(
        (
            "orchestration (wall - training runs)",
            result["orchestration_seconds"],
            result["orchestration_fraction"],
        )
    )
    for task in result.get("tasks", []):
        rows.append((f"  kfp.local task {task['name']}", task["seconds"], task["seconds"] / wall))
    return common.format_table(("part", "seconds", "share of wall"), rows)


def main(argv: list[str] | None = None) -> int:
    """Entry point; exits 3 when `strategist compare` is missing."""
    args = parse_args(argv)
    try:
        result = run_pipeline_overhead(args)
    except Unavailable as err:
        print(f"pipeline_overhead: {err}", file=sys.stderr)
        return UNAVAILABLE
    print(table(result))
    common.write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
