"""What the benchmarks share: the workload's shards, cluster shapes, machine facts, tables.

The workload is real handwritten digits (scikit-learn's bundled 8x8 images,
the data of the offline `digits` dataset) grown to any number of examples by
shifting each copy by up to one pixel, written as TFRecord shards with a
Strategist `manifest.json` by the shard writer `datasets.shard_dataset` uses
(`datasets.write_shards`), so the trainer and the bare script read the very
same files. 1,437 training examples make epochs of a fraction of a
second; a benchmark needs epochs of seconds so that steady-state throughput,
not start-up, is measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Iterable, Sequence
from typing import Any

from components.core import atomic, datasets
from components.core.config import ClusterConfig, ConfigError

# The cluster shapes compared, as in tests/test_cluster_training.py and `make run`.
SHAPES: dict[str, ClusterConfig] = {
    "mirrored": ClusterConfig("mirrored", gpus_per_machine=2),
    "multi_worker_mirrored": ClusterConfig("multi_worker_mirrored", workers=2),
    "parameter_server": ClusterConfig("parameter_server", workers=2, ps=1),
}
# Per-replica batch; every shape above has two replicas, so the global batch is 64.
PER_REPLICA_BATCH = 32
REPLICAS = 2
GLOBAL_BATCH = PER_REPLICA_BATCH * REPLICAS
DATASET_NAME = "digits_bench"
DEFAULT_WORK_DIR = os.path.join("runs", "bench")


def make_shards(
    folder: str,
    train_examples: int,
    *,
    test_examples: int = 1024,
    num_shards: int = 8,
    seed: int = 0,
) -> datasets.Manifest:
    """Writes (or reuses) the benchmark shards: digits grown to `train_examples` examples.

    Args:
        folder: shards folder; reused when its manifest already has these counts.
        train_examples: examples in the `train` split.
        test_examples: examples in the `test` split.
        num_shards: TFRecord files per split (at least the number of workers).
        seed: seed of the pixel shifts.

    Returns:
        The manifest, read back and checked by `datasets.load_manifest`.
    """
    import numpy as np
    from sklearn.datasets import load_digits

    if os.path.exists(os.path.join(folder, datasets.MANIFEST_NAME)):
        try:
            manifest = datasets.load_manifest(folder)
        except ConfigError:  # written by an older Strategist: write them again
            manifest = None
        if (
            manifest is not None
            and manifest.dataset == DATASET_NAME
            and manifest.split("train").num_examples == train_examples
            and manifest.split("test").num_examples == test_examples
            and len(manifest.split("train").files) == num_shards
        ):
            return manifest

    bunch = load_digits()
    # Pixel values are 0..16; stretched to 0..255 as the `digits` builder does.
    base = np.clip(bunch.images * 16, 0, 255).astype(np.uint8)
    labels = bunch.target.astype(np.int64)
    rng = np.random.default_rng(seed)

    def examples(count: int) -> Iterable[tuple[np.ndarray, int]]:
        for index in rng.integers(0, len(labels), size=count):
            dy, dx = rng.integers(-1, 2, size=2)
            image = np.roll(base[index], (int(dy), int(dx)), axis=(0, 1))
            yield image[..., np.newaxis], int(labels[index])

    splits = {}
    with atomic.staged_dir(folder) as staging:
        for split, count in (("train", train_examples), ("test", test_examples)):
            splits[split] = datasets.write_shards(examples(count), split, staging, num_shards)
        manifest = datasets.Manifest.of_images(
            DATASET_NAME, "1.0.0", (8, 8, 1), 10, splits, root=folder
        )
        atomic.write_json(os.path.join(staging, datasets.MANIFEST_NAME), manifest.to_dict())
    return datasets.load_manifest(folder)


def train_examples_for(steps: int) -> int:
    """Training examples giving `steps` global-batch steps per epoch."""
    return steps * GLOBAL_BATCH


def median(values: Sequence[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")


def steady(epoch_eps: Sequence[float], warmup_epochs: int = 1) -> list[float]:
    """Per-epoch throughputs after the warm-up epochs (tracing, first reads)."""
    return list(epoch_eps[warmup_epochs:]) or list(epoch_eps)


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, memory, Python and TensorFlow versions of this machine."""
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu_model": None,
        "memory_gb": None,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    info["memory_gb"] = round(int(line.split()[1]) / 1024**2, 1)
                    break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        info["tensorflow"] = version("tensorflow")
        info["tf_keras"] = version("tf-keras")
    except Exception:  # noqa: BLE001  (a missing distribution only loses a table row)
        info["tensorflow"] = None
    return info


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table (also readable as plain text); numbers right-aligned."""
    raw = [list(row) for row in rows]
    cells = [[_cell(v) for v in row] for row in raw]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def fit(value: Any, text: str, width: int) -> str:
        return text.rjust(width) if isinstance(value, (int, float)) else text.ljust(width)

    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "| " + " | ".join("-" * w for w in widths) + " |"
    body = [
        "| " + " | ".join(fit(v, c, w) for v, c, w in zip(row, r, widths, strict=True)) + " |"
        for row, r in zip(raw, cells, strict=True)
    ]
    return "\n".join([line, rule, *body])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.3f}" if abs(value) < 10 else f"{value:,.0f}"
    return str(value)


def write_json(path: str | None, payload: Any) -> None:
    """Writes `payload` atomically when `path` is given."""
    if path:
        atomic.write_json(path, payload)


def dumps(payload: Any) -> str:
    return json.dumps(payload, indent=2, sort_keys=True)


def run_cluster(
    command: Sequence[str],
    cluster: ClusterConfig,
    output_dir: str,
    what: str,
    timeout_s: float = 600,
) -> None:
    """Runs `command` as every task of `cluster` on 127.0.0.1 and waits for the primary ones.

    Each task gets the `TF_CONFIG` and environment Strategist's launcher gives its
    tasks (`plan_tasks`, `task_environment`) and its log in `output_dir`; the
    servers (parameter servers, parameter-server workers) are stopped when the
    primary tasks are done, and every task is killed on failure.

    Raises:
        RuntimeError: a task failed or the run timed out (with its log's tail).
    """
    from components.core.launch.local_tasks import plan_tasks, task_environment

    processes: list[tuple[str, subprocess.Popen, str]] = []
    try:
        for task in plan_tasks(cluster):
            log_path = os.path.join(output_dir, f"{task.name}.log")
            with open(log_path, "w") as log:
                process = subprocess.Popen(
                    list(command),
                    env=task_environment(task.tf_config),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            processes.append((task.name, process, log_path))
        primary_roles = cluster.spec.primary_roles
        primary = {name for name, _, _ in processes if name.split("-")[0] in primary_roles}
        deadline = time.monotonic() + timeout_s
        while True:
            for name, process, log_path in processes:
                code = process.poll()
                if code is not None and (code != 0 or name not in primary):
                    raise RuntimeError(f"{what} {name} exited {code}:\n{_tail(log_path)}")
            if all(p.poll() == 0 for name, p, _ in processes if name in primary):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} timed out after {timeout_s}s")
            time.sleep(0.1)
    finally:
        for _, process, _ in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # it exited since the poll
                    os.killpg(process.pid, 9)
                process.wait()


def _tail(path: str, lines: int = 30) -> str:
    """The last `lines` lines of a log."""
    with open(path, errors="replace") as handle:
        return "".join(handle.readlines()[-lines:])
