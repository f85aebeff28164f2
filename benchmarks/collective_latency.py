"""What one ring hop of TensorFlow's collective all-reduce costs between CPU workers.

    python -m benchmarks.collective_latency [--workers 2,3] [--tensors 6] [--steps 300]

For each worker count N, N processes on 127.0.0.1 (the `TF_CONFIG`s and
environment Strategist's launcher gives its tasks) build a
`MultiWorkerMirroredStrategy` and time `--steps` steps that do nothing but
all-reduce `--tensors` small float32 tensors (the gradients of a small
model), after a warm-up. On CPUs the collective runs as a ring over gRPC
(`CommunicationImplementation.RING`), 2 (N-1) hops a step, so the step time
over 2 (N-1) is the cost of one hop: what the cost model charges a ring hop
between CPU workers (`cost_model.CPU_RING_HOP_S`). The table gives the
model's figure beside the measured one and their ratio.

`--output FILE` gets `{"results": [{"workers", "tensors", "step_ms", "hop_ms"}],
"model_hop_ms", "machine"}`.
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
from pipelines.cli.common import positive_int

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
    """One worker (role from `TF_CONFIG`): times `steps` all-reduce steps; the chief writes."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    @tf.function
    def step():
        def all_reduce():
            grads = [tf.ones([TENSOR_FLOATS]) for _ in range(tensors)]
            return tf.distribute.get_replica_context().all_reduce("sum", grads)

        return strategy.run(all_reduce)

    for _ in range(WARMUP_STEPS):
        step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    step_s = (time.perf_counter() - started) / steps
    if strategy.cluster_resolver.task_id == 0:
        with open(output, "w") as handle:
            json.dump({"step_s": step_s}, handle)


def measure(workers: int, tensors: int, steps: int, folder: str) -> dict[str, Any]:
    """Step and hop time of `workers` CPU workers all-reducing `tensors` tensors."""
    output = os.path.join(folder, f"workers-{workers}.json")
    command = [sys.executable, "-m", "benchmarks.collective_latency", "--tensors",
               str(tensors), "--steps", str(steps), "--task-output", output]  # fmt: skip
    cluster = ClusterConfig("multi_worker_mirrored", workers=workers)
    common.run_cluster(command, cluster, folder, f"{workers} workers")
    with open(output) as handle:
        step_s = json.load(handle)["step_s"]
    hops = 2 * (workers - 1)
    return {"workers": workers, "tensors": tensors, "step_ms": step_s * 1e3,
            "hop_ms": step_s / hops * 1e3}  # fmt: skip


def table(results: list[dict[str, Any]], model_hop_ms: float) -> str:
    """The measured step and hop times beside the cost model's hop."""
    lines = [
        "| workers | tensors | step ms | ring hops | hop ms | model hop ms | measured / model |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['workers']} | {r['tensors']} | {r['step_ms']:.2f} | {2 * (r['workers'] - 1)} "
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
    from components.core.selection.cost_model import CPU_RING_HOP_S

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
