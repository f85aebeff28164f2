"""The shard reader alone against the trainer's consumption: is training ever input-bound?

    python -m benchmarks.input_pipeline [--steps N] [--trainer-from OVERHEAD.json]

Iterates `datasets.make_dataset_fn(...)` output (the trainer's own input
pipeline: interleaved TFRecord reads, parsing, cache, shuffle, batch, prefetch)
with nothing else running, for one cold epoch (files read and parsed) and then
warm epochs (served from the cache, as in every epoch after the first of a
training run). The trainer's consumption is the fastest strategy's
examples/second, read from an `overhead.py` results file or measured by one
`mirrored` training run through the launcher. The headroom is reader
examples/second over trainer examples/second: above 1 means the reader can feed
the trainer faster than it trains, so training is not input-bound. The reader
is measured as one pipeline at the global batch, feeding all replicas, which is
what `mirrored` asks of it; under the multi-worker strategies each worker's
pipeline only supplies its own share.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from benchmarks import common
from pipelines.cli.arg_types import positive_int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line (exits 2 on bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.input_pipeline",
        description=(
            "Examples/second of the shard reader (make_dataset_fn) alone against the trainer's "
            "consumption; prints the headroom ratio."
        ),
    )
    parser.add_argument("--output", help="write the results as JSON to this file")
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=500,
        help=f"global-batch ({common.GLOBAL_BATCH}) steps per epoch of the shards (default: 500)",
    )
    parser.add_argument(
        "--warm-epochs",
        type=positive_int,
        default=3,
        help="cached epochs to time after the cold one (default: 3)",
    )
    parser.add_argument(
        "--trainer-from",
        metavar="OVERHEAD_JSON",
        help="take the trainer's examples/s from this overhead.py --output file instead of "
        "training once",
    )
    parser.add_argument("--model", default="cnn", choices=("cnn", "mlp"), help="(default: cnn)")
    parser.add_argument(
        "--work-dir",
        default=os.path.join(common.DEFAULT_WORK_DIR, "overhead"),
        help="shards and run folders (default: runs/bench/overhead, shared with overhead.py)",
    )
    return parser.parse_args(argv)


def batched_parse_dataset(manifest, global_batch_size: int, *, seed: int = 0):
    """`make_dataset_fn`'s pipeline with parsing vectorised: the proposed change.

    Records are grouped 256 at a time and parsed with one `tf.io.parse_example`
    call instead of one `parse_single_example` per record, then unbatched before
    the cache, so shuffling, batches and the cached elements are unchanged.
    """
    import tensorflow as tf

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    shape = tuple(manifest.image_shape)
    files = manifest.file_paths("train")
    num_examples = manifest.split("train").num_examples

    def parse_batch(records):
        example = tf.io.parse_example(records, spec)
        images = tf.reshape(tf.io.decode_raw(example["image"], tf.uint8), (-1, *shape))
        return tf.cast(images, tf.float32) / 255.0, example["label"]

    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(4, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,
    )
    ds = ds.batch(256).map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE).unbatch().cache()
    ds = ds.shuffle(min(num_examples, 10_000), seed=seed).repeat()
    return ds.batch(global_batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def reader_throughput(dataset, steps: int, warm_epochs: int) -> dict[str, Any]:
    """Examples/second of an input pipeline alone, cold and warm, with no training.

    Args:
        dataset: a repeated dataset of global batches.
        steps: global batches per epoch.
        warm_epochs: epochs timed after the first (cold) one.

    Returns:
        `cold` (the first epoch: reads, parses, fills the shuffle buffer),
        `warm` (median of the cached epochs) examples/second, and `epochs`.
    """
    iterator = iter(dataset)
    epochs = []
    for _ in range(1 + warm_epochs):
        started = time.perf_counter()
        for _ in range(steps):
            next(iterator)
        epochs.append(steps * common.GLOBAL_BATCH / (time.perf_counter() - started))
    return {"cold": epochs[0], "warm": common.median(epochs[1:]), "epochs": epochs}


def trainer_throughput(args: argparse.Namespace, shards: str) -> tuple[str, float]:
    """The fastest strategy's training examples/second, and its name."""
    if args.trainer_from:
        with open(args.trainer_from) as handle:
            results = json.load(handle)
        name = max(results, key=lambda s: results[s]["ours"])
        return name, float(results[name]["ours"])
    from benchmarks.overhead import run_ours

    folder = os.path.join(args.work_dir, "input_pipeline_trainer")
    metrics = run_ours("mirrored", shards, args.model, 3, folder)
    return "mirrored", common.median(common.steady(metrics["epoch_examples_per_second"]))


def run_input_pipeline(args: argparse.Namespace, log=print) -> dict[str, Any]:
    """Measures the reader and the trainer; returns both and the headroom."""
    shards = os.path.join(args.work_dir, f"shards-{args.steps}-steps")
    manifest = common.make_shards(shards, common.train_examples_for(args.steps))
    from components.core import datasets

    reader = reader_throughput(
        datasets.make_dataset_fn(manifest, "train", common.GLOBAL_BATCH)(None),
        args.steps,
        args.warm_epochs,
    )
    log(f"input_pipeline: reader cold {reader['cold']:,.0f}, warm {reader['warm']:,.0f} ex/s")
    batched = reader_throughput(
        batched_parse_dataset(manifest, common.GLOBAL_BATCH), args.steps, args.warm_epochs
    )
    log(
        f"input_pipeline: batched-parse reader cold {batched['cold']:,.0f}, "
        f"warm {batched['warm']:,.0f} ex/s"
    )
    strategy, trainer = trainer_throughput(args, shards)
    log(f"input_pipeline: trainer ({strategy}) {trainer:,.0f} ex/s")
    return {
        "reader_cold": reader["cold"],
        "reader_warm": reader["warm"],
        "trainer": trainer,
        "trainer_strategy": strategy,
        "headroom_cold": reader["cold"] / trainer,
        "headroom_warm": reader["warm"] / trainer,
        "batched_parse_cold": batched["cold"],
        "batched_parse_warm": batched["warm"],
        "steps_per_epoch": args.steps,
        "global_batch_size": common.GLOBAL_BATCH,
    }


def table(result: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    rows = [
        ("reader, first epoch (read + parse)", result["reader_cold"], result["headroom_cold"]),
        ("reader, cached epochs", result["reader_warm"], result["headroom_warm"]),
        (
            "reader with batched parsing, first epoch",
            result["batched_parse_cold"],
            result["batched_parse_cold"] / result["trainer"],
        ),
        (
            "reader with batched parsing, cached",
            result["batched_parse_warm"],
            result["batched_parse_warm"] / result["trainer"],
        ),
        (f"trainer ({result['trainer_strategy']}, fastest)", result["trainer"], 1.0),
    ]
    return common.format_table(("pipeline", "examples/s", "headroom"), rows)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    result = run_input_pipeline(args)
    print(table(result))
    print(
        f"headroom: after the first epoch the reader delivers {result['headroom_warm']:.1f}x "
        f"what the fastest trainer consumes; in the first epoch {result['headroom_cold']:.2f}x"
    )
    common.write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
