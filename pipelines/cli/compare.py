"""`strategist compare`: the comparison pipeline, run locally through kfp.local."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from components.core import run_folder
from components.core.checkpoint_interval import PREEMPTIONS_PER_MACHINE_HOUR, check_preemption_rate
from components.core.comparison.planning import MAX_REPEATS
from components.core.comparison.plots import PLOT_FILES
from components.core.config import (
    PILOT_WINDOWS,
    STRATEGIES,
    ConfigError,
    RunConfig,
    cluster_for,
    validate_run,
)
from components.core.input_spec import REGRESSION
from components.core.signals import exit_code, signal_name
from components.core.strategy_spec import COMPARED_BY_DEFAULT
from pipelines.cli import arg_types, common, preemption_flags

DEFAULT_STRATEGIES = COMPARED_BY_DEFAULT
# Everything kfp.local and the tasks print, in the output folder.
LOG_NAME = "pipeline.log"
# What a comparison writes in its output folder (all that replacing it removes).
OUTPUT_ENTRIES = (
    "pipeline_root",
    "comparison.json",
    "report.html",
    "summary.md",
    "timings.json",
    run_folder.STATUS_NAME,
    LOG_NAME,
    *PLOT_FILES,
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="compare strategies side by side on the same data and hardware",
        description=(
            "Run the comparison pipeline through kfp.local: shard the dataset once, train the "
            "same model with each strategy on a real localhost cluster, evaluate each, and "
            "compare wall-clock per epoch, throughput, scaling efficiency, time to accuracy, "
            "final quality and cost. Writes OUTPUT/comparison.json, OUTPUT/report.html, "
            "OUTPUT/summary.md and PNG plots. It always runs on this machine; "
            "`strategist submit --pipeline comparison` runs it on Vertex AI or a KFP host."
        ),
        epilog=(
            "examples:\n"
            "  strategist compare\n"
            "  strategist compare --strategies one_device,mirrored --gpus-per-machine 4 --epochs 3 "
            "--output runs/cmp\n"
            "  strategist compare --model-module examples/digits_cnn_module.py --gpu a100"
        ),
    )
    # Older scripts pass --local: compare always runs here (hidden; `submit` runs elsewhere).
    parser.add_argument("--local", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--strategies",
        default=",".join(DEFAULT_STRATEGIES),
        help=f"comma-separated strategies (default: {','.join(DEFAULT_STRATEGIES)})",
    )
    parser.add_argument(
        "--repeats",
        type=arg_types.bounded_int(1, MAX_REPEATS),
        default=1,
        help=f"train each strategy N times (1 to {MAX_REPEATS}), interleaved (s1,s2,s1,s2), "
        "and report the median "
        "and min-max spread; a winner is called only when the ranges do not overlap "
        "(default: 1)",
    )
    parser.add_argument(
        "--max-steps",
        type=common.non_negative_int,
        default=0,
        help=f"a pilot: train each strategy N steps (a multiple of {PILOT_WINDOWS}) after a "
        f"warm-up of N/{PILOT_WINDOWS} instead of --epochs; its steady examples/s is the median "
        f"of {PILOT_WINDOWS} windows after the warm-up, with their spread; quality is not judged "
        "(default: 0, whole epochs)",
    )
    common.add_data_model_arguments(parser)
    common.add_cluster_arguments(
        parser, gpus_elsewhere="Also the GPUs per machine of the recorded recommendation."
    )
    parser.add_argument(
        "--target-metric",
        default="accuracy",
        help="training metric time-to-target and the winner are judged on: accuracy, loss, "
        "mae, or a metric your model compiles; losses and errors count lower as better "
        "(default: accuracy)",
    )
    parser.add_argument(
        "--target-value",
        "--target-accuracy",
        dest="target_value",
        type=float,
        default=None,
        help="value of --target-metric that counts as trained (default: 0.9 for accuracy; "
        "required for another metric)",
    )
    hardware = parser.add_argument_group("target hardware, for the recorded recommendation")
    hardware.add_argument(
        "--gpu",
        default=common.DEFAULT_TARGET_GPU,
        help=f"GPU type: {common.GPU_NAMES} (default: {common.DEFAULT_TARGET_GPU})",
    )
    hardware.add_argument(
        "--machines", type=arg_types.positive_int, default=1, help="machines (default: 1)"
    )
    hardware.add_argument(
        "--network-gbps",
        type=arg_types.positive_float,
        default=10.0,
        help="network between machines, Gbit/s (default: 10)",
    )
    price = parser.add_argument_group("price")
    preemption_flags.add_capacity_arguments(
        price,
        "price the runs as Spot/preemptible machines: at the price table's Spot prices, "
        "with the work expected preemptions throw away (a restart and half each run's "
        "--checkpoint-every, from its measured step time); also the recorded "
        "recommendation's machines",
    )
    price.add_argument(
        "--prices",
        metavar="FILE",
        help="price table in the layout of components/core/data/prices.json (default: "
        "that one, on-demand list prices only); its spot_usd_per_hour prices --preemptible",
    )
    parser.add_argument(
        "--shards-dir",
        help="compare on existing shards (a folder with manifest.json, written by an earlier "
        "run) instead of sharding the data; every record is checked first",
    )
    parser.add_argument(
        "--output",
        help="output folder: new, empty, or an earlier comparison's "
        "(default: runs/<timestamp>-compare)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier comparison of other settings in --output instead of refusing",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show everything kfp.local and the tasks print (always written to "
        f"OUTPUT/{LOG_NAME})",
    )
    parser.set_defaults(run=run)


def parse_strategies(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not any(names):
        raise ConfigError("--strategies is empty: name at least one strategy")
    if not all(names):
        raise ConfigError(
            f"--strategies {ascii(text)} has an empty name (a stray comma): pass names "
            "separated by single commas, e.g. mirrored,parameter_server"
        )
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown:
        raise ConfigError(
            f"unknown strateg{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
            f"choose from {', '.join(STRATEGIES)}"
        )
    if len(set(names)) != len(names):
        raise ConfigError(f"--strategies names a strategy twice: {text}")
    return names


def pipeline_arguments(args: argparse.Namespace) -> dict:
    """Validated comparison pipeline parameters from the flags.

    The run's settings become one RunConfig (`run_config`), built by the same
    builder as `strategist train`'s; each strategy gets its cluster
    (`clusters`) from the one shape the flags give.

    Raises:
        ConfigError: for anything a strategy of the comparison cannot run.
    """
    arguments = settings(args)
    check_inputs(args, arguments)
    return arguments


def settings(args: argparse.Namespace) -> dict:
    """The comparison pipeline's parameters, from the flags and the quick checks alone.

    What takes longer (reading every shard record back, the data's
    description, importing a module name as the trainers will) is
    `check_inputs`; the parameters do not depend on it, so an output folder
    can be judged on them first.

    Raises:
        ConfigError: for anything a strategy of the comparison cannot run
            that the flags and the shards' manifest show.
    """
    from components.core.hardware import get_gpu
    from components.core.launch.preflight import check_rehearsal

    clusters = _clusters(args)
    # Data, model and batch flags are shared; each strategy gets its own cluster.
    shared = argparse.Namespace(
        **{
            **vars(args),
            "workers": None,
            "ps": None,
            "gpus_per_machine": None,
            "all_reduce": "auto",
            "all_reduce_pack_mb": 0.0,
        }
    )
    base = common.build_run_config(shared, "mirrored", "unused")
    most_pipelines = max(c.spec.input_pipelines(c) for c in clusters)
    base = dataclasses.replace(
        base,
        data=dataclasses.replace(base.data, num_shards=max(args.num_shards, most_pipelines)),
    )
    for cluster in clusters:
        # Each step trains with the pipeline's `max_steps` in its config (train_to_artifacts).
        pilot = dataclasses.replace(base.training, max_steps=args.max_steps)
        run = dataclasses.replace(base, cluster=cluster, training=pilot)
        validate_run(run)
        check_rehearsal(run)
        common.check_machine_size(args, run)
    get_gpu(args.gpu)
    check_preemption_rate(args.preemptions_per_machine_hour, args.preemptible)
    if args.shards_dir:
        base = _on_shards(base, args)
    run_config = {k: v for k, v in base.to_pipeline_parameter().items() if k != "cluster"}
    return {
        "run_config": run_config,  # each strategy's cluster is in `clusters`
        "clusters": [dataclasses.asdict(cluster) for cluster in clusters],
        "machines": args.machines,
        "gpus_per_machine": args.gpus_per_machine or cluster_for("mirrored").gpus_per_machine,
        "gpu": args.gpu,
        "network_gbps": args.network_gbps,
        "preemptible": args.preemptible,
        "preemptions_per_machine_hour": (
            PREEMPTIONS_PER_MACHINE_HOUR
            if args.preemptions_per_machine_hour is None
            else args.preemptions_per_machine_hour
        ),
        "prices": price_table(args.prices),
        "target_value": target_value(args),
        "target_metric": args.target_metric,
        "backend": "local",
        "repeats": args.repeats,
        "max_steps": args.max_steps,
    }


def price_table(path: str | None) -> dict:
    """The price table at `path` as the pipeline's `prices` parameter ({}: the bundled one).

    Raises:
        ConfigError: a file that is not a price table, in one line.
    """
    if path is None:
        return {}
    if not path:
        raise ConfigError("--prices is empty: pass a value, or leave the flag out")
    from components.core.json_input import read_json
    from components.core.prices import PriceTable

    raw = read_json(path, "price table")
    PriceTable.from_dict(raw, origin=path)
    return raw


def check_inputs(args: argparse.Namespace, arguments: dict) -> None:
    """The longer checks of a comparison's inputs, before anything starts.

    Raises:
        ConfigError: shards whose records do not read back, bad data, a
            regression judged on accuracy, or a module name the trainers cannot
            import.
    """
    base = RunConfig.from_dict(arguments["run_config"])
    if args.shards_dir:
        from pipelines.cli.train import read_shards

        spec = read_shards(args.shards_dir, verify_records=True).input_spec
    else:
        spec = common.check_data(base)
    if spec.task == REGRESSION and args.target_metric == "accuracy":
        raise ConfigError(
            "the data is a regression (its label is a float), which has no accuracy: pass "
            "--target-metric mae (or loss, rmse, mse, a metric your model compiles) and "
            "--target-value, the training value that counts as trained"
        )
    if base.model.module:
        from components.core import model_module

        model_module.check_isolated_import(base.model.module)
    else:
        _build_here(base, spec)


def _build_here(config: RunConfig, spec) -> None:
    """Builds a built-in model on the data's examples here, as `train`'s pre-flight does,
    so one that does not take the data exits 2 before any task starts.

    Raises:
        ConfigError: `build_model of cnn failed: ...`, naming what the model expected.
    """
    import tensorflow as tf
    import tf_keras as keras

    from components.core import model_build, models

    try:
        with tf.device("/cpu:0"):
            model_build.build_model(models.resolve(config.model), spec)
    finally:
        keras.backend.clear_session()


def _on_shards(base: RunConfig, args: argparse.Namespace) -> RunConfig:
    """The comparison's run on existing shards, from their manifest (`check_inputs`
    reads their records back).

    Raises:
        ConfigError: `--data` given too, or shards `train --shards-dir` refuses.
    """
    from pipelines.cli.train import use_shards

    if args.data:
        raise ConfigError("--shards-dir and --data exclude each other: pass one of them")
    config, manifest = use_shards(base, args.shards_dir, args.dataset, verify_records=False)
    pipelines = max(c.spec.shard_files_needed(c) for c in _clusters(args))
    if len(manifest.split("train").files) < pipelines:
        raise ConfigError(
            f"--shards-dir {args.shards_dir} has {len(manifest.split('train').files)} train "
            f"shard file(s), too few for {pipelines} workers: shard again with --num-shards "
            f"{pipelines} or more"
        )
    return config


def _clusters(args: argparse.Namespace):
    return [
        cluster_for(
            name,
            args.workers,
            args.ps,
            args.gpus_per_machine,
            args.evaluator,
            args.all_reduce,
            args.all_reduce_pack_mb,
        )
        for name in parse_strategies(args.strategies)
    ]


def target_value(args: argparse.Namespace) -> float:
    """The target of `--target-metric`: `--target-value`, or 0.9 for accuracy.

    Raises:
        ConfigError: no value for another metric, or an accuracy outside (0, 1].
    """
    import math
    import re

    if not re.fullmatch(r"\w+", args.target_metric):
        raise ConfigError(f"--target-metric {args.target_metric!r}: name one metric, e.g. mae")
    value = args.target_value
    if value is None:
        if args.target_metric != "accuracy":
            raise ConfigError(
                f"--target-metric {args.target_metric} needs --target-value: the "
                f"{args.target_metric} that counts as trained"
            )
        return 0.9
    if not math.isfinite(value) or (args.target_metric == "accuracy" and not 0 < value <= 1):
        raise ConfigError(f"--target-value {value} for accuracy: pass a number in (0, 1]")
    return value


def run(args: argparse.Namespace) -> int:
    if args.global_batch_size is not None:
        raise ConfigError(
            "--global-batch-size does not fit a comparison (replica counts differ per "
            "strategy): use --batch-size"
        )
    output = common.default_output_dir("compare") if args.output is None else args.output
    run_folder.check_destination(output)
    common.apply_network_exposure(args)
    arguments = settings(args)
    config_json = json.dumps(arguments, sort_keys=True)
    # A folder of another comparison is refused before the longer checks of the inputs.
    run_folder.check_reusable(output, config_json, overwrite=args.overwrite)
    check_inputs(args, arguments)
    with run_folder.claim(
        output,
        config_json,
        overwrite=args.overwrite,
        entries=OUTPUT_ENTRIES,
        stale=OUTPUT_ENTRIES,  # nothing of a comparison resumes
    ) as output:
        # `strategist status OUTPUT` reads a comparison's state as it reads a run's.
        run_folder.write_status(output, "running", pid=os.getpid())
        return _compare(args, arguments, output)


def _compare(args: argparse.Namespace, arguments: dict, output: str) -> int:
    from components.core import comparison
    from pipelines.comparison import build_comparison_pipeline
    from pipelines.local_run import run_locally

    config = RunConfig.from_dict(arguments["run_config"])
    names = ", ".join(c["strategy"] for c in arguments["clusters"])
    log_path = os.path.join(output, LOG_NAME)
    times = f", each {arguments['repeats']} times interleaved" if arguments["repeats"] > 1 else ""
    steps = arguments["max_steps"]
    length = (
        f"pilot of {steps} steps after {steps // PILOT_WINDOWS} warm-up"
        if steps
        else f"{config.training.epochs} epochs"
    )
    print(f"compare: {names}{times}; {config.data.dataset}, {config.model.name}, {length}")
    print(f"full log: {log_path}", flush=True)
    started = time.perf_counter()
    try:
        result, timings = run_locally(
            build_comparison_pipeline(),
            arguments,
            os.path.join(output, "pipeline_root"),
            log_path=log_path,
            verbose=args.verbose,
        )
    except RuntimeError as err:
        print(f"strategist compare: error: {err}; full log: {log_path}", file=sys.stderr)
        run_folder.write_status(output, "failed", error=str(err).splitlines()[0], log=log_path)
        return 1
    except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM: the running task was stopped
        run_folder.write_status(output, "interrupted", signal=signal_name(interrupt))
        print(
            f"strategist compare: interrupted ({signal_name(interrupt)}); every process "
            f"was stopped. Finished tasks' outputs are kept in {output}/pipeline_root",
            file=sys.stderr,
        )
        return exit_code(interrupt)
    wall = time.perf_counter() - started
    report_files = collect_outputs(result, output)
    from components.core import atomic

    atomic.write_json(
        os.path.join(output, "timings.json"),
        {
            "pipeline_wall_seconds": wall,
            "tasks": [dataclasses.asdict(t) for t in timings],
        },
    )
    report = comparison.load_report(os.path.join(output, "comparison.json"))
    unfinished = comparison.did_not_finish(report)
    if unfinished:
        run_folder.write_status(output, "failed", error=unfinished, winner=report.get("winner"))
    else:
        run_folder.write_status(output, "succeeded", winner=report.get("winner"))
    print()
    print(comparison.summary_table(report), end="")
    print(f"{len(timings)} tasks in {wall:.1f} s. Why, the rule, hardware, plots: report.html,")
    print(f"summary.md and {len(report_files) - 2} more files in {output}")
    if unfinished:
        print(f"strategist compare: error: {unfinished}", file=sys.stderr)
        return 1
    return 0


def collect_outputs(result, output: str) -> list[str]:
    """Copies the compare task's files into `output`, each written to a temporary name and
    renamed (`storage.copy_file`): a kill leaves the old file or the new, never a part;
    returns their names."""
    from components.core import storage

    copied = []
    for key in ("comparison", "report", "summary"):
        source = result.outputs[key].path
        name = {"comparison": "comparison.json", "report": "report.html", "summary": "summary.md"}
        storage.copy_file(source, os.path.join(output, name[key]))
        copied.append(name[key])
    plots = result.outputs["plots"].path
    for name in sorted(os.listdir(plots)):
        storage.copy_file(os.path.join(plots, name), os.path.join(output, name))
        copied.append(name)
    return copied
