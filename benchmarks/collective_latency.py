"""What one ring hop of TensorFlow's collective all-reduce costs between CPU workers.

    python -m benchmarks.collective_latency [--workers 2,3] [--tensors 6] [--steps 300]

For each worker count N, N processes on 127.0.0.1 (the `TF_CONFIG`s and
environment Strategist's launcher gives its tasks) build a
`MultiWorkerMirroredStrategy` and time `--steps` steps that do nothing but
all-reduce `--tensors` small float32 tensors (the gradients of a small
model), then as many steps that only make the tensors, after a warm-up each.
On CPUs the collective runs as a ring over gRPC
(`CommunicationImplementation.RING`), 2 (N-1) hops a step, so the difference
of the two step times over 2 (N-1) is the cost of one hop: what the cost
model charges a ring hop between CPU workers (`links.CPU_RING_HOP_S`).
The table gives the model's figure beside the measured one and their ratio.

`--output FILE` gets `{"results": [{"workers", "tensors", "step_ms", "base_ms",
"hop_ms"}], "model_hop_ms", "machine"}`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from benchmarks import common
from components.core.config import ClusterConfig
from pipelines.cli.arg_types import positive_int

WARMUP_STEPS = 20
# Floats per tensor: small enough that latency, not bandwidth, is measured.
TENSOR_FLOATS = 1000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.collective_latency",
        description=__doc__.split("\n\n")[0],
        epilog="example: python -m benchmarks.collective_latency --workers 2,3 --steps 300",
    )
    parser.add_argument("--workers", default="2,3", help="worker counts, comma-separated")
    parser.add_argument("--tensors", type=positive_int, default=6, help="tensors per step")
    parser.add_argument("--steps", type=positive_int, default=300, help="timed steps")
    parser.add_argument("--output", help="write the results as JSON here")
    parser.add_argument("--task-output", help=argparse.SUPPRESS)  # a worker's own result
    return parser.parse_args(argv)


def worker(tensors: int, steps: int, output: str) -> None:
    """One task (role from `TF_CONFIG`): times `steps` steps that all-reduce `tensors`
    tensors and as many that only make them; the chief writes both."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    def make(reduce: bool):
        @tf.function
        def step():
            def replica_step():
                grads = [tf.ones([TENSOR_FLOATS]) for _ in range(tensors)]
                if not reduce:
                    return grads
                return tf.distribute.get_replica_context().all_reduce("sum", grads)

            return strategy.run(replica_step)

        return step

    timed = {}
    for name, step in (("step_s", make(True)), ("base_s", make(False))):
        for _ in range(WARMUP_STEPS):
            step()
        started = time.perf_counter()
        for _ in range(steps):
            step()
        timed[name] = (time.perf_counter() - started) / steps
    if strategy.cluster_resolver.task_type == "chief":
        common.write_json(output, timed)


def measure(workers: int, tensors: int, steps: int, folder: str) -> dict[str, Any]:
    """Step and hop time of `workers` CPU workers all-reducing `tensors` tensors."""
    output = os.path.join(folder, f"workers-{workers}.json")
    command = [sys.executable, "-m", "benchmarks.collective_latency", "--tensors",
               str(tensors), "--steps", str(steps), "--task-output", output]  # fmt: skip
    cluster = ClusterConfig("multi_worker_mirrored", workers=workers)
    common.run_cluster(command, cluster, folder, f"{workers} workers")
    with open(output) as handle:
        timed = json.load(handle)
    # the same step without the all-reduce: tf.function dispatch, which the cost model
    # charges apart (`STEP_LAUNCH_S`)
    collective_s = max(timed["step_s"] - timed["base_s"], 0.0)
    hops = 2 * (workers - 1)
    return {"workers": workers, "tensors": tensors, "step_ms": timed["step_s"] * 1e3,
            "base_ms": timed["base_s"] * 1e3, "hop_ms": collective_s / hops * 1e3}  # fmt: skip


def table(results: list[dict[str, Any]], model_hop_ms: float) -> str:
    """The measured step and hop times beside the cost model's hop."""
    lines = [
        "| workers | tensors | step ms | without all-reduce ms | ring hops | hop ms "
        "| model hop ms | measured / model |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['workers']} | {r['tensors']} | {r['step_ms']:.2f} | {r['base_ms']:.2f} "
            f"| {2 * (r['workers'] - 1)} "
            f"| {r['hop_ms']:.2f} | {model_hop_ms:.2f} | **{r['hop_ms'] / model_hop_ms:.2f}** |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.task_output:
        worker(args.tensors, args.steps, args.task_output)
        return 0
    try:
        counts = [int(n) for n in args.workers.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 2:
        print("--workers: give worker counts of 2 or more, e.g. --workers 2,3", file=sys.stderr)
        return 2
    from components.core.selection.step_time import CPU_RING_HOP_S

    folder = tempfile.mkdtemp(prefix="collective-latency-")
    try:
        results = []
        for n in counts:
            print(f"{n} workers: {args.steps} all-reduce steps of {args.tensors} tensors ...",
                  file=sys.stderr, flush=True)  # fmt: skip
            results.append(measure(n, args.tensors, args.steps, folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(table(results, CPU_RING_HOP_S * 1e3))
    if args.output:
        doc = {"results": results, "model_hop_ms": CPU_RING_HOP_S * 1e3,
               "machine": common.machine_info()}  # fmt: skip
        common.write_json(args.output, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
