"""Each GPU-speed option, Strategist's trainer against the bare script with the same option.

    python -m benchmarks.options [--options LIST] [--rounds N] [--steps N] [--output FILE]

For every option (`--precision mixed_bfloat16`, `--jit-compile`,
`--steps-per-execution 4`, an explicit `--all-reduce`, all of these at once,
and `--all-reduce-pack-mb 0.02`, which only `multi_worker_mirrored` takes) and
every strategy that can run it on this machine, each round runs Strategist's
trainer (`run_local`) and `benchmarks/bare_tf.py` with the same option,
alternating the order (A B, B A), on the same shards, model, batch and cluster,
as `benchmarks.overhead` does for the defaults. A combination the trainer
refuses here (XLA compiles no collectives on CPU, so `--jit-compile` runs only
under `one_device` without GPUs; packs split only the all-reduce of
`multi_worker_mirrored`) is listed with the reason, not run.

The figure is ours/bare per option: Strategist's wrapper must stay at 0.97 or
more with every option on.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any

from benchmarks import common, overhead
from components.core.config import ClusterConfig, RunConfig, TrainingConfig
from components.core.errors import ConfigError
from pipelines.cli.arg_types import positive_int


@dataclasses.dataclass(frozen=True)
class Option:
    """One option as the trainer's `TrainingConfig` and the bare script's flags see it.

    Attributes:
        name: the option's row name.
        training: `TrainingConfig` fields Strategist's trainer gets.
        all_reduce: the cluster's `--all-reduce` per strategy (absent: `auto`).
        all_reduce_pack_mb: the cluster's `--all-reduce-pack-mb` (0: one pack);
            the trainer refuses it under every strategy but `multi_worker_mirrored`.
    """

    name: str
    training: dict[str, Any] = dataclasses.field(default_factory=dict)
    all_reduce: dict[str, str] = dataclasses.field(default_factory=dict)
    all_reduce_pack_mb: float = 0.0

    def cluster(self, strategy: str) -> ClusterConfig:
        """The cluster shape of `strategy` with this option's all-reduce and its packs."""
        shape = SHAPES[strategy]
        return dataclasses.replace(
            shape,
            all_reduce=self.all_reduce.get(strategy, shape.all_reduce),
            all_reduce_pack_mb=self.all_reduce_pack_mb,
        )

    def bare_args(self, strategy: str) -> tuple[str, ...]:
        args: list[str] = []
        if "precision" in self.training:
            args += ["--precision", self.training["precision"]]
        if self.training.get("jit_compile"):
            args.append("--jit-compile")
        if "steps_per_execution" in self.training:
            args += ["--steps-per-execution", str(self.training["steps_per_execution"])]
        if strategy in self.all_reduce:
            args += ["--all-reduce", self.all_reduce[strategy]]
        if self.all_reduce_pack_mb:
            args += ["--all-reduce-pack-mb", str(self.all_reduce_pack_mb)]
        return tuple(args)


# The CPU stand-ins of each GPU switch: bfloat16 is the mixed precision a CPU
# runs; ring and reduction-to-one-device are the all-reduces that need no GPU.
_ALL_REDUCE = {"multi_worker_mirrored": "ring", "mirrored": "reduction_to_one_device"}
OPTIONS: dict[str, Option] = {
    option.name: option
    for option in (
        Option("mixed_bfloat16", training={"precision": "mixed_bfloat16"}),
        Option("jit_compile", training={"jit_compile": True}),
        Option("steps_per_execution=4", training={"steps_per_execution": 4}),
        Option("all_reduce", all_reduce=_ALL_REDUCE),
        # Packs of 0.02 MiB split the gradients (30 KB of the cnn, 69 KB of the mlp) into
        # several all-reduces, each started as soon as its gradients exist; on a GPU that
        # overlaps back-propagation, on CPU workers each pack is one more ring of gRPC calls.
        Option("all_reduce_pack_mb=0.02", all_reduce_pack_mb=0.02),
        # Every option at once, without and with XLA (which compiles only the model's
        # forward and backward passes under the all-reducing strategies on CPU).
        Option(
            "all",
            training={"precision": "mixed_bfloat16", "steps_per_execution": 4},
            all_reduce=_ALL_REDUCE,
        ),
        Option(
            "all+jit_compile",
            training={"precision": "mixed_bfloat16", "steps_per_execution": 4, "jit_compile": True},
            all_reduce=_ALL_REDUCE,
        ),
    )
}
# The shapes of `benchmarks.overhead`, and one device, the baseline of every option.
SHAPES: dict[str, ClusterConfig] = {"one_device": ClusterConfig("one_device"), **common.SHAPES}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line (exits 2 on bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.options",
        description=(
            "Each GPU-speed option (precision, XLA, steps per execution, all-reduce), "
            "Strategist's trainer against the bare tf.distribute script with the same option."
        ),
        epilog="example: python -m benchmarks.options --options mixed_bfloat16,all --rounds 3",
    )
    parser.add_argument(
        "--options",
        default=",".join(OPTIONS),
        help=f"comma-separated subset of {','.join(OPTIONS)} (default: all)",
    )
    parser.add_argument(
        "--strategies",
        default=",".join(SHAPES),
        help=f"comma-separated subset of {','.join(SHAPES)} (default: all)",
    )
    parser.add_argument("--rounds", type=positive_int, default=3, help="A/B rounds (default: 3)")
    parser.add_argument(
        "--warmup-rounds",
        type=int,
        default=0,
        help=(
            "A/B rounds run first and left out of the figures, for a machine whose first "
            "cluster runs are slow (default: 0)"
        ),
    )
    parser.add_argument(
        "--steps", type=positive_int, default=300, help="steps per epoch (default: 300)"
    )
    parser.add_argument(
        "--epochs", type=positive_int, default=3, help="epochs; the first is warm-up (default: 3)"
    )
    parser.add_argument("--model", default="cnn", choices=("cnn", "mlp"), help="(default: cnn)")
    parser.add_argument(
        "--work-dir",
        default=os.path.join(common.DEFAULT_WORK_DIR, "options"),
        help="shards and run folders (default: runs/bench/options)",
    )
    parser.add_argument(
        "--timeout", type=positive_int, default=600, help="seconds per run (default: 600)"
    )
    parser.add_argument("--output", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    args.options = _subset(parser, "--options", args.options, OPTIONS)
    args.strategies = _subset(parser, "--strategies", args.strategies, SHAPES)
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the first epoch is warm-up")
    if args.warmup_rounds < 0:
        parser.error("--warmup-rounds must be 0 or more")
    return args


def _subset(parser: argparse.ArgumentParser, flag: str, value: str, known) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in known]
    if unknown or not chosen:
        parser.error(f"{flag}: unknown {unknown}; choose from {', '.join(known)}")
    return chosen


def refusal(option: Option, strategy: str) -> str | None:
    """Why the trainer refuses `option` under `strategy` on this machine, or None."""
    from components.core import config as config_module
    from components.core.strategies import visible_gpus

    run = RunConfig(training=TrainingConfig(**option.training), cluster=option.cluster(strategy))
    try:
        config_module.validate_run(run)
        config_module.validate_for_machine(run, visible_gpus())
    except ConfigError as err:
        return str(err)
    return None


def run_option(args: argparse.Namespace, option: Option, strategy: str, shards: str, log) -> dict:
    """The A/B rounds of one option under one strategy: medians and ours/bare per round."""
    cluster = option.cluster(strategy)
    eps: dict[str, list[float]] = {"ours": [], "bare": []}
    for round_index in range(-args.warmup_rounds, args.rounds):
        order = ("ours", "bare") if round_index % 2 == 0 else ("bare", "ours")
        for side in order:
            folder = os.path.join(args.work_dir, option.name, strategy, f"{side}-{round_index}")
            common_args = (strategy, shards, args.model, args.epochs, folder)
            if side == "ours":
                metrics = overhead.run_ours(
                    *common_args, cluster=cluster, training_options=option.training
                )
            else:
                metrics = overhead.run_bare(
                    *common_args,
                    cluster=cluster,
                    extra_args=option.bare_args(strategy),
                    timeout_s=args.timeout,
                )
            examples_per_second = common.median(common.steady(metrics["epoch_examples_per_second"]))
            label = (
                f"warm-up round {-round_index}"
                if round_index < 0
                else f"round {round_index + 1}/{args.rounds}"
            )
            log(
                f"options: {option.name} {strategy} {label} {side}: {examples_per_second:,.0f} ex/s"
            )
            if round_index >= 0:
                eps[side].append(examples_per_second)
    ratios = [o / b for o, b in zip(eps["ours"], eps["bare"], strict=True)]
    return {
        "ours": common.median(eps["ours"]),
        "bare": common.median(eps["bare"]),
        "ratio": common.median(eps["ours"]) / common.median(eps["bare"]),
        "ratio_per_round": ratios,
        "rounds": args.rounds,
        "warmup_rounds": args.warmup_rounds,
    }


def run_options(args: argparse.Namespace, log=print) -> dict[str, dict[str, Any]]:
    """`{option: {strategy: result or {"refused": reason}}}` for the chosen options."""
    shards = os.path.join(args.work_dir, f"shards-{args.steps}-steps")
    common.make_shards(shards, common.train_examples_for(args.steps))
    results: dict[str, dict[str, Any]] = {}
    for name in args.options:
        option = OPTIONS[name]
        results[name] = {}
        for strategy in args.strategies:
            reason = refusal(option, strategy)
            if reason:
                log(f"options: {name} {strategy}: not run here ({reason})")
                results[name][strategy] = {"refused": reason}
                continue
            results[name][strategy] = run_option(args, option, strategy, shards, log)
    return results


def table(results: dict[str, dict[str, Any]]) -> str:
    """The results as a Markdown table: option, strategy, ours, bare, ratio and its spread."""
    rows = []
    for name, per_strategy in results.items():
        for strategy, r in per_strategy.items():
            if "refused" in r:
                rows.append((name, strategy, float("nan"), float("nan"), float("nan"), "not run"))
                continue
            spread = r["ratio_per_round"]
            rows.append(
                (
                    name,
                    strategy,
                    r["ours"],
                    r["bare"],
                    r["ratio"],
                    f"{min(spread):.3f}-{max(spread):.3f}",
                )
            )
    headers = ("option", "strategy", "ours ex/s", "bare ex/s", "ours/bare", "per round")
    return common.format_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    machine = common.machine_info()
    print(f"machine: {machine['cpu_model']}, {machine['nproc']} cores, TF {machine['tensorflow']}")
    results = run_options(args)
    print(table(results))
    common.write_json(args.output, {"machine": machine, "options": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
