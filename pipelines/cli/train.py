"""`strategist train`: one training run, on a localhost cluster or in the cloud."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from components.core.config import STRATEGIES, RunConfig
from pipelines.cli import common


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train one model with one strategy",
        description=(
            "Train a Keras model with a tf.distribute strategy. With --local (the default) "
            "the chief, workers and parameter servers run as real TensorFlow processes on "
            "127.0.0.1 with TF_CONFIG set as Vertex AI and Kubeflow set it. Writes "
            "OUTPUT/metrics.json, OUTPUT/config.json and the exported OUTPUT/model/."
        ),
    )
    parser.add_argument(
        "--local",
        action="store_true",
        help="run on a localhost cluster of real TensorFlow processes (the default)",
    )
    parser.add_argument(
        "--strategy",
        default="mirrored",
        help=f"{', '.join(STRATEGIES)} (default: mirrored)",
    )
    common.add_data_model_arguments(parser)
    common.add_cluster_arguments(parser)
    parser.add_argument(
        "--restarts",
        type=common.non_negative_int,
        default=0,
        help="whole-cluster restarts allowed after a task fails; training resumes from the "
        "last finished epoch (default: 0)",
    )
    parser.add_argument("--output", help="output folder (default: runs/<timestamp>-train)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from components.core.launch.local import ClusterFailed, RestartPolicy, run_local

    output = args.output or common.default_output_dir("train")
    config = common.build_run_config(args, args.strategy, output)
    config = prepare_shards(config, log=print)
    print(f"train: {config.cluster.strategy} on a localhost cluster, output {config.output_dir}")
    try:
        metrics = run_local(config, restart=RestartPolicy(cluster_restarts=args.restarts))
    except ClusterFailed as err:
        print(f"strategist train: error: {err}", file=sys.stderr)
        return 1
    print_summary(metrics, config.output_dir)
    return 0


def prepare_shards(config: RunConfig, log=print) -> RunConfig:
    """Shards the dataset (or reuses its shards) and returns the config pointing at them.

    Raises:
        ConfigError: unknown dataset, no label, unreachable download, bad data dir.
    """
    from components.core import datasets

    data = config.data
    shards_dir = data.shards_dir or datasets.default_shards_dir(
        data.data_dir, data.dataset, data.num_shards
    )
    datasets.shard_dataset(
        data.dataset, shards_dir, num_shards=data.num_shards, data_dir=data.data_dir, log=log
    )
    return dataclasses.replace(config, data=dataclasses.replace(data, shards_dir=shards_dir))


def print_summary(metrics: dict, output_dir: str) -> None:
    rows = [
        ("strategy", metrics["strategy"]),
        ("replicas", metrics["num_replicas"]),
        ("workers / ps", f"{metrics['workers']} / {metrics['ps']}"),
        ("global batch", metrics["global_batch_size"]),
        ("epoch seconds", " ".join(f"{s:.2f}" for s in metrics["epoch_seconds"])),
        ("examples/s", f"{metrics['examples_per_second']:.0f} (median after epoch 1)"),
        ("final train accuracy", f"{metrics['history']['accuracy'][-1]:.4f}"),
        ("test accuracy", f"{metrics['eval_accuracy']:.4f}"),
        ("test loss", f"{metrics['eval_loss']:.4f}"),
        ("restarts", metrics.get("restarts", 0)),
    ]
    width = max(len(name) for name, _ in rows)
    print("\nsummary")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    print(f"\nmetrics: {os.path.join(output_dir, 'metrics.json')}")
    print(f"model:   {os.path.join(output_dir, 'model')}")
