"""`strategist train`: one training run, on a localhost cluster or in the cloud."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from components.core import batching, datasets, model_preflight, run_folder, storage, storage_access
from components.core.config import STRATEGIES, ConfigError, RunConfig
from components.core.errors import printable
from pipelines.cli import arg_types, cloud_train, common
from pipelines.cli.train_summary import print_summary

# Whole-cluster restarts a run may take: each costs a start-up and a redone epoch.
MAX_RESTARTS = 100


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train one model with one strategy",
        description=(
            "Train a Keras model with a tf.distribute strategy. With --local (the default) "
            "the chief, workers and parameter servers run as real TensorFlow processes on "
            "127.0.0.1 with TF_CONFIG set as Vertex AI and Kubeflow set it. Writes "
            "OUTPUT/metrics.json, OUTPUT/config.json and the exported OUTPUT/model/. With "
            "--target vertex|kubeflow the same trainer runs as a Vertex AI CustomJob or a "
            "Kubeflow TFJob on GPU node pools; --dry-run prints the exact request instead, "
            "--rehearse runs every replica of it on 127.0.0.1."
        ),
        epilog=(
            "examples:\n"
            "  strategist train --strategy multi_worker_mirrored --workers 2\n"
            "  strategist train --strategy mirrored --gpus-per-machine 3\n"
            "  strategist train --target vertex --dry-run --strategy multi_worker_mirrored "
            "--workers 4 --gpu a100 --gpus-per-machine 2 --image "
            "us-docker.pkg.dev/my-project/strategist/trainer:1.0 --project P "
            "--region us-central1 --output gs://BUCKET/runs/x --shards-dir gs://BUCKET/shards\n"
            "  (the same with --rehearse instead of --dry-run runs every replica of that job "
            "here; --gpus-per-machine is the local cluster's devices per machine and the job's "
            "GPUs per machine alike)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    common.add_cluster_arguments(
        parser, gpus_elsewhere="With --target and --gpu: the GPUs of each training machine."
    )
    parser.add_argument(
        "--restarts",
        type=arg_types.bounded_int(0, MAX_RESTARTS),
        default=0,
        help="whole-cluster restarts allowed after a task fails, 0 to "
        f"{MAX_RESTARTS}; training resumes from the last finished epoch (default: 0)",
    )
    parser.add_argument(
        "--stall-timeout",
        type=arg_types.bounded_int(0, 7 * 24 * 3600),
        default=3600,
        help="seconds a local run may go without progress before its first epoch ends, "
        "counted from the chief's TensorFlow import (which may take up to 600 s); after it, "
        "10 x the slowest epoch (at least 120 s). A stalled run is failed naming "
        "the stopped task, or restarted within --restarts. 0: never; at most 604,800 (a week) "
        "(default: 3600)",
    )
    parser.add_argument(
        "--shards-dir",
        help="train on existing shards (a folder with manifest.json, written by an earlier run "
        "or the shard component) instead of sharding --dataset; every record is checked first. "
        "With --target: the gs:// folder of the shards",
    )
    parser.add_argument(
        "--output",
        help="output folder: new, empty, or an earlier run's (whose unfinished run resumes) "
        "(default: runs/<timestamp>-train); with --target a gs:// folder",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished run (or a run of another configuration) in --output "
        "instead of refusing",
    )
    cloud_train.add_cloud_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Trains on a localhost cluster; 0 on success, 1 if the cluster failed.

    Ctrl-C or SIGTERM, at any moment, stops every process started, leaves the
    output folder with `status.json` saying `interrupted` (and the backup of
    the finished epochs, from which the same command resumes), and returns
    130 or 143.

    Raises:
        ConfigError: bad input, found before anything is launched (exit 2).
    """
    from components.core.signals import exit_code, signal_name, sigterm_raises

    if args.target:
        if args.local:
            raise ConfigError("--local and --target exclude each other: pass one of them")
        config = common.build_run_config(args, args.strategy, args.output or "")
        return cloud_train.run_cloud_training(args, config)
    cloud_only = cloud_train.cloud_flags_given(args)
    if cloud_only:
        raise ConfigError(
            f"{', '.join(cloud_only)} apply to cloud runs: add --target vertex or "
            "--target kubeflow, or drop them"
        )
    from components.core.launch import reaper

    try:
        # Every process started below (a module's detached child too) is gone at the end.
        with sigterm_raises(), reaper.descendants_die_with_this_process():
            return _run_local(args)
    except KeyboardInterrupt as interrupt:
        output = args.output or "the output folder"
        # Said only of a run that has a backup: an interruption before training started has none.
        kept = (
            f" Finished epochs are kept in {output}/backup: run the same command again to resume"
            if args.output and os.path.isdir(os.path.join(args.output, "backup"))
            else " No training had started."
        )
        print(
            f"strategist train: interrupted ({signal_name(interrupt)}); every process was "
            f"stopped.{kept}",
            file=sys.stderr,
        )
        return exit_code(interrupt)


def _run_local(args: argparse.Namespace) -> int:
    from components.core.launch.cluster_failure import ClusterFailed
    from components.core.launch.liveness import Liveness
    from components.core.launch.local import RestartPolicy, run_local
    from components.core.launch.preflight import check_rehearsal

    output = common.default_output_dir("train") if args.output is None else args.output
    run_folder.check_destination(output)
    common.apply_network_exposure(args)
    config = common.build_run_config(args, args.strategy, output)
    check_rehearsal(config)
    common.check_machine_size(args, config)
    if args.shards_dir:
        if args.data:
            raise ConfigError("--shards-dir and --data exclude each other: pass one of them")
        config, _ = use_shards(config, args.shards_dir, args.dataset, verify_records=False)
    else:
        common.check_data(config)
        config = with_shards_dir(config)
    # The run's configuration is whole now: a folder holding a finished run, or another
    # run, is refused before the records are read back, the data sharded or the model built.
    run_folder.check_reusable(config.output_dir, config.to_json(), overwrite=args.overwrite)
    if args.shards_dir:
        manifest = read_shards(args.shards_dir, verify_records=True)
    else:
        manifest = datasets.shard_data(config.data, config.data.shards_dir, log=print)
    batching.check_fits(config, manifest)
    from components.core import model_module, user_code

    # Every model, built-in ones too: one that does not take the data exits 2 here, before
    # a cluster starts to say the same. The user's code runs in a child process
    # (`user_code`), Strategist's own here.
    if config.model.module:
        model_module.check_isolated_import(config.model.module)
        seconds = user_code.check("model", config.model.module, config.to_json())["seconds"]
    else:
        seconds = model_preflight.preflight(config, manifest)
    model = config.model.module or config.model.name
    print(f"train: {model} builds and takes the data ({seconds:.1f}s check)")
    print(f"train: {config.cluster.strategy} on a localhost cluster, output {config.output_dir}")
    try:
        metrics = run_local(
            config,
            restart=RestartPolicy(cluster_restarts=args.restarts),
            overwrite=args.overwrite,
            liveness=Liveness(startup_s=args.stall_timeout),
        )
    except ClusterFailed as err:
        print(f"strategist train: error: {printable(str(err))}", file=sys.stderr)
        return 1
    print_summary(metrics, config.output_dir)
    return 0


def use_shards(
    config: RunConfig, shards_dir: str, dataset: str | None, *, verify_records: bool = True
) -> tuple[RunConfig, datasets.Manifest]:
    """Points the config at existing shards, after reading every record back.

    Args:
        config: the run's configuration.
        shards_dir: `--shards-dir`.
        dataset: `--dataset`, when given.
        verify_records: read every record back (else only the manifest and the
            files' sizes: `read_shards` reads the records later).

    Raises:
        ConfigError: what `read_shards` refuses, or shards of another dataset.
    """
    manifest = read_shards(shards_dir, verify_records=verify_records)
    if dataset not in (None, manifest.dataset):
        raise ConfigError(
            f"--shards-dir {shards_dir} holds {manifest.dataset!r}, not {dataset!r}: drop "
            "--dataset, or pass the shards of that dataset"
        )
    data = dataclasses.replace(config.data, dataset=manifest.dataset, shards_dir=manifest.root)
    return dataclasses.replace(config, data=data), manifest


def read_shards(shards_dir: str, *, verify_records: bool) -> datasets.Manifest:
    """The manifest of `--shards-dir`, checked (`datasets.load_manifest`).

    Raises:
        ConfigError: no such folder, a `gs://` folder that cannot be reached or
            read, no or unreadable manifest, missing, truncated or (with
            `verify_records`) corrupted shard files.
    """
    with storage_access.reading(shards_dir, "--shards-dir"):
        return datasets.load_manifest(storage.absolute(shards_dir), verify_records=verify_records)


def with_shards_dir(config: RunConfig) -> RunConfig:
    """The config with the folder its shards go to: `--shards-dir`'s, else the default."""
    data = config.data
    shards_dir = data.shards_dir or datasets.default_shards_dir(data)
    return dataclasses.replace(config, data=dataclasses.replace(data, shards_dir=shards_dir))
