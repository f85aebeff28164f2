"""`strategist select`: recommend a tf.distribute strategy for hardware and a model."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Sequence

from components.core import model_profile
from components.core.config import ConfigError
from components.core.cpu_machine import DEFAULT_PS_MACHINE_TYPE
from components.core.hardware import INTERCONNECT_GBPS
from components.core.models import DATASET_CLASSES, MODELS
from components.core.selection import model_family
from components.core.selection.step_time import TRAINER_COMPILED_METRICS
from components.core.selection.topology import (
    CPU_NAMES,
    DEFAULT_NETWORK_GBPS,
    HETEROGENEITY_RANGE,
    HETEROGENEITY_SLOWDOWN,
)
from pipelines.cli import arg_types, common, preemption_flags

# `--heterogeneous` without a factor: the slowdown is assumed, and the reasons say so
# (not a string: argparse would pass a string const through `type`).
ASSUMED = object()

# More classes than any labelled image dataset has (ImageNet-21k: 21,841); a registry
# model of more is not built (its output layer alone would not fit in memory).
MAX_CLASSES = 100_000

# Models of published benchmarks that `--model` takes besides the registry's (resnet50 is both).
PUBLISHED_ONLY = [name for name in model_profile.PUBLISHED_PROFILES if name not in MODELS]

DESCRIPTION = """\
Recommend one_device, mirrored, multi_worker_mirrored or parameter_server (or
say that the model needs model parallelism) for a cluster and a model, with the
layout (workers, parameter servers), the predicted step time split into compute
and communication for every candidate, and the reasons in plain sentences.

The step-time model and its calibration on published scaling results are described
in docs/selection.md. Measured throughput from comparison.json files on the
same hardware (--history) outranks the prediction. Exits 2 on invalid input.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Adds `select` to the `strategist` command."""
    parser = subparsers.add_parser(
        "select",
        help="recommend a distribution strategy for a cluster and a model",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  strategist select --machines 2 --gpus-per-machine 4 --gpu v100 --model resnet50\n"
            "  strategist select --machines 1 --gpus-per-machine 8 --gpu a100 --params 2e9 --json\n"
            "  strategist select --machines 4 --gpus-per-machine 1 --model cnn "
            "--history runs/"
        ),
    )
    hw = parser.add_argument_group("hardware")
    hw.add_argument("--machines", type=int, required=True, help="machines with GPUs")
    hw.add_argument(
        "--gpus-per-machine",
        type=int,
        required=True,
        metavar="N",
        help="GPUs on each machine that computes gradients, as train and compare take it",
    )
    hw.add_argument(
        "--gpu",
        default=common.DEFAULT_TARGET_GPU,
        help=f"GPU type: {common.GPU_NAMES}, or cpu/none for machines without GPUs "
        "(then --gpus-per-machine counts CPU devices), or a mix of machines per type, "
        f"e.g. a100:2,t4:6 (default: {common.DEFAULT_TARGET_GPU}, as compare and the "
        "pipelines)",
    )
    hw.add_argument(
        "--interconnect",
        help=f"link between GPUs of a machine: {', '.join(INTERCONNECT_GBPS)} "
        "(default: the GPU's usual link)",
    )
    hw.add_argument(
        "--network-gbps",
        type=float,
        help="bandwidth of one NIC between machines, Gbit/s: its rating, or better a rate "
        "measured between two of the machines (a cloud may cap one TCP flow below the "
        "rating: AWS at 5 Gbit/s outside a cluster placement group) (default: 10, and the "
        "reasons say so with the answer at 1 and 100)",
    )
    hw.add_argument(
        "--nics",
        type=int,
        help="NICs per machine carrying training traffic; a machine moves "
        "--network-gbps x --nics on the host's network (an overlay's pods use one) "
        "(default: 1)",
    )
    hw.add_argument(
        "--ps-machine-type",
        help="CPU machine type of each parameter server and of the coordinator, as train "
        "--ps-machine-type takes it: its egress rate (2 Gbit/s per vCPU, at most 32) bounds a "
        "server's transfers, and --prices bills it; a larger shape of it is taken where a "
        "server's share of the variables needs the memory (default: "
        f"{DEFAULT_PS_MACHINE_TYPE}, train's)",
    )
    hw.add_argument(
        "--network-path",
        choices=("host", "overlay"),
        help="how traffic between machines travels: host (the machines' own network: bare "
        "metal, VMs, Kubernetes pods with hostNetwork) or overlay (a container overlay "
        "network such as kubenet or flannel, which delivers a fitted share of the NICs' "
        "rate) (default: host, and the reasons give the answer through an overlay too)",
    )
    hw.add_argument(
        "--precision",
        default="fp32",
        help="fp32 or mixed (FP16/BF16 tensor cores) (default: fp32)",
    )
    preemption_flags.add_preemption_arguments(hw)
    hw.add_argument(
        "--input-examples-per-second",
        type=float,
        help="examples/s one machine's input pipeline can deliver (default: unlimited)",
    )
    hw.add_argument(
        "--heterogeneous",
        nargs="?",
        type=float,
        const=ASSUMED,  # given without FACTOR: assumed, and said so
        metavar="FACTOR",
        help="machines differ in speed: the slower half compute FACTOR times slower than the "
        "rest (a --gpu mix rates each machine by its GPU instead; without FACTOR, "
        f"{HETEROGENEITY_SLOWDOWN:g} is assumed and the reasons give the answer at "
        f"{HETEROGENEITY_RANGE[0]:g} and {HETEROGENEITY_RANGE[1]:g})",
    )
    model = parser.add_argument_group("model")
    which = model.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--model",
        help=f"registry model ({', '.join(MODELS)}; built once and cached) or a published "
        f"benchmark model ({', '.join(PUBLISHED_ONLY)})",
    )
    which.add_argument(
        "--params", type=arg_types.whole_number, help="parameter count instead of a model, e.g. 2e9"
    )
    model.add_argument(
        "--gflops-per-example",
        type=float,
        help="forward GFLOPs per example with --params (default: estimated, and the "
        "answer is shown for an MLP-like and a CNN-like model)",
    )
    model.add_argument("--model-family", choices=model_family.FAMILIES, help="with --params and no "
                       "--gflops-per-example: FLOPs from the family (transformer: 2 x params "
                       "x --sequence-length) instead of the MLP-to-CNN estimate")  # fmt: skip
    model.add_argument("--sequence-length", type=int, help="tokens per example of a transformer")
    model.add_argument(
        "--activation-bytes-per-example",
        type=float,
        help="activation bytes one example keeps for back-propagation with --params, in "
        "float32, taken whole (halved under --precision mixed) (default: estimated from the "
        "FLOPs, and said so)",
    )
    model.add_argument(
        "--classes",
        type=arg_types.positive_int,
        help=f"classes of a registry model, up to {MAX_CLASSES:,} (default: its dataset's: "
        + ", ".join(f"{name} {n:,}" for name, n in DATASET_CLASSES.items())
        + ")",
    )
    model.add_argument(
        "--sparse-embedding-params",
        type=arg_types.whole_number,
        default=0,
        help="parameters in a sparse embedding table added to the model, up to "
        f"{model_profile.MAX_SPARSE_EMBEDDING_PARAMS:,}, ten times the largest published "
        "model (default: 0)",
    )
    model.add_argument(
        "--embedding-dim",
        type=arg_types.positive_int,
        help="embedding row width, with --sparse-embedding-params (default: 64)",
    )
    model.add_argument(
        "--embedding-lookups-per-example",
        type=int,
        help="embedding rows one example reads, with --sparse-embedding-params (default: 1)",
    )
    run = parser.add_argument_group("training")
    run.add_argument(
        "--batch-size",
        type=int,
        default=common.DEFAULT_BATCH_SIZE,
        help="examples per replica per step (per GPU), as train and compare take it "
        f"(default: {common.DEFAULT_BATCH_SIZE})",
    )
    run.add_argument(
        "--jit-compile",
        action="store_true",
        help="the train step is compiled with XLA (as `train --jit-compile`): less "
        "communication hides behind back-propagation where any does",
    )
    run.add_argument(
        "--all-reduce-pack-mb",
        type=arg_types.non_negative_float,
        default=0.0,
        help="multi_worker_mirrored all-reduces in packs of this many MB (as `train "
        "--all-reduce-pack-mb`), which overlap back-propagation; 0: one pack after it, "
        "none hidden (default: 0)",
    )
    run.add_argument(
        "--compiled-metrics",
        type=arg_types.bounded_int(0, 1000),
        default=TRAINER_COMPILED_METRICS,
        help="metrics the model is compiled with besides its loss, 0 to 1,000 (default: "
        f"{TRAINER_COMPILED_METRICS}, the trainer's accuracy for a classifier; a "
        "regressor's MAE and RMSE are 2): under multi_worker_mirrored Keras all-reduces 3 "
        "scalars for each every step",
    )
    run.add_argument(
        "--async-ok",
        action="store_true",
        help="asynchronous updates are acceptable (parameter_server in TF2 is asynchronous)",
    )
    run.add_argument(
        "--objective",
        default="time",
        choices=("time", "cost"),
        help="time: fastest at a 50%% scaling-efficiency floor (fewer machines below it); "
        "cost: cheapest per example at the price table's prices, Spot ones for "
        "--preemptible when it has them, under time's rules on asynchronous "
        "parameter_server (default: time)",
    )
    run.add_argument(
        "--prices",
        nargs="?",
        const="",
        metavar="FILE",
        help="price each candidate per million examples (a table in the layout of "
        "components/core/data/prices.json; the bundled one without FILE; an entry's "
        "spot_usd_per_hour prices --preemptible machines)",
    )
    run.add_argument(
        "--history",
        nargs="+",
        default=[],
        metavar="FILE",
        help="comparison.json files with measured throughput; a folder means every "
        "comparison.json under it (runs/ reads every `compare` run)",
    )
    output = parser.add_mutually_exclusive_group()  # one format per answer
    output.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    output.add_argument(
        "--markdown", action="store_true", help="print the recommendation as Markdown"
    )
    parser.add_argument("--explain", action="store_true", help="print every reason and the "
                        "full table (default: the short answer, at most 12 lines)")  # fmt: skip
    parser.set_defaults(run=run_select)
    return parser


def build_profile(args: argparse.Namespace):
    """The model profile the flags describe.

    Raises:
        ConfigError: unknown model, bad parameter count or FLOPs.
    """
    _check_model_flags_apply(args, MODELS)
    if args.params is not None:
        if args.params < 1:
            raise ConfigError(f"--params must be at least 1, got {args.params}")
        flops = None
        if args.gflops_per_example is not None:
            if not 0 < args.gflops_per_example < math.inf:
                raise ConfigError(
                    f"--gflops-per-example must be a positive number, got {args.gflops_per_example}"
                )
            flops = args.gflops_per_example * 1e9
        per_param = model_family.flops_per_param(args.model_family, args.sequence_length)
        if per_param is not None:
            if flops is not None:
                raise ConfigError("--model-family estimates --gflops-per-example: give one")
            flops = per_param * args.params
        activations = args.activation_bytes_per_example
        if activations is not None and not 0 <= activations < math.inf:
            raise ConfigError(
                f"--activation-bytes-per-example must be 0 or a positive number, got {activations}"
            )
        profile = model_profile.from_params(args.params, flops, activations)
        if args.model_family == "transformer" and activations is None:
            profile = model_family.with_transformer_activations(profile)
    elif args.model in MODELS:
        classes = args.classes or DATASET_CLASSES[args.model]
        if classes > MAX_CLASSES:
            raise ConfigError(
                f"--classes {classes:,}: a registry model takes at most {MAX_CLASSES:,} "
                "classes; pass --params for a larger model"
            )
        profile = model_profile.profile_model(args.model, num_classes=classes)
    elif args.model in model_profile.PUBLISHED_PROFILES:
        profile = model_profile.PUBLISHED_PROFILES[args.model]
    else:
        known = list(MODELS) + PUBLISHED_ONLY
        raise ConfigError(f"unknown model {args.model!r}; choose one of {', '.join(known)}")
    if not args.sparse_embedding_params:
        return profile
    table = {"dim": args.embedding_dim, "lookups": args.embedding_lookups_per_example}
    given = {name: value for name, value in table.items() if value is not None}
    return profile.with_sparse_embedding(args.sparse_embedding_params, **given)


def _check_model_flags_apply(args: argparse.Namespace, registry: Sequence[str]) -> None:
    """Refuses a model flag the model asked about does not use, rather than drop it.

    Raises:
        ConfigError: naming the flag and what it applies to.
    """
    if args.params is None:
        for flag, value in (
            ("--gflops-per-example", args.gflops_per_example),
            ("--activation-bytes-per-example", args.activation_bytes_per_example),
            ("--model-family", args.model_family),
        ):
            if value is not None:
                raise ConfigError(
                    f"{flag} applies to --params only: --model {args.model}'s are measured "
                    "from its layers; leave it out, or describe the model with --params"
                )
    if args.classes is not None and args.model not in registry:
        raise ConfigError(
            f"--classes applies to registry models ({', '.join(registry)}): "
            f"{'--params' if args.params is not None else args.model} states its size itself"
        )
    if not args.sparse_embedding_params:
        for flag, value in (
            ("--embedding-dim", args.embedding_dim),
            ("--embedding-lookups-per-example", args.embedding_lookups_per_example),
        ):
            if value is not None:
                raise ConfigError(f"{flag} describes a table: give --sparse-embedding-params too")


def parse_gpu(value: str, precision: str = "fp32") -> tuple[str, tuple[tuple[str, int], ...]]:
    """`--gpu`: a GPU name, or a mix `a100:2,t4:6` -> (the fastest at `precision`, of
    equal speed the one with the most memory (`machine_speeds.machine_rank`), mix).

    Raises:
        ConfigError: for a mix entry that is not `NAME:MACHINES`.
    """
    if ":" not in value:
        return value, ()
    mix = []
    for part in value.split(","):
        name, _, count = part.partition(":")
        if not name or not count.strip().isdigit():
            raise ConfigError(
                f"--gpu {value!r}: write a mix as NAME:MACHINES,..., e.g. a100:2,t4:6"
            )
        mix.append((name.strip().lower(), int(count)))
    from components.core.selection.machine_speeds import machine_rank

    # the first machine's GPU, whatever order the mix is written in
    fastest = min(mix, key=lambda gc: machine_rank(gc[0], precision))[0]
    return fastest, tuple(mix)


def _load_prices(args: argparse.Namespace):
    """The price table `--prices`/`--objective cost` ask for, else None.

    Raises:
        ConfigError: when the table cannot be read.
    """
    if args.prices is None and args.objective != "cost":
        return None
    from components.core.errors import ReportError
    from components.core.prices import load_prices

    try:
        return load_prices(args.prices or None)
    except ReportError as err:
        raise ConfigError(f"--prices: {err}") from None


def _unstated(args: argparse.Namespace, mix: tuple) -> tuple[str, ...]:
    """The hardware inputs `select` assumed, for `recommend(unstated=...)`."""
    assumed = {
        "network": args.network_gbps is None,
        "network_path": args.network_path is None,
        "heterogeneity": args.heterogeneous is ASSUMED and not mix,
    }
    return tuple(name for name, is_assumed in assumed.items() if is_assumed)


def _check_network_flags_apply(args: argparse.Namespace) -> None:
    """Refuses network flags on one machine, which sends nothing between machines
    (as `--heterogeneous` is refused there), rather than drop them; and
    `--ps-machine-type` on one CPU machine, whose servers `train` runs on it.
    On one GPU machine the servers still get machines of that type, as on Vertex AI.

    Raises:
        ConfigError: naming the flags given.
    """
    given = [
        flag
        for flag, value in (
            ("--network-gbps", args.network_gbps),
            ("--nics", args.nics),
            ("--network-path", args.network_path),
        )
        if value is not None
    ]
    if args.machines == 1 and given:
        raise ConfigError(
            f"{', '.join(given)}: one machine sends nothing over a network between machines "
            "(its GPUs talk over their own link); drop "
            f"{'it' if len(given) == 1 else 'them'}, or give --machines 2 or more"
        )
    one_cpu_machine = args.machines == 1 and str(args.gpu).lower() in CPU_NAMES
    if one_cpu_machine and args.ps_machine_type is not None:
        raise ConfigError(
            "--ps-machine-type: on one CPU machine train runs the parameter servers on it "
            "(localhost); drop it, or give --machines 2 or more"
        )


def run_select(args: argparse.Namespace) -> int:
    """Prints the recommendation; returns 0.

    Raises:
        ConfigError: for invalid hardware, model or history (exit 2).
    """
    from components.core import selection

    _check_network_flags_apply(args)
    gpu, mix = parse_gpu(args.gpu, args.precision)
    factor = args.heterogeneous
    if mix and factor is not None and factor is not ASSUMED:
        raise ConfigError(
            f"--heterogeneous {factor:g} with a --gpu mix: the mix already rates each machine "
            "by its GPU; drop the factor"
        )
    topology = selection.Topology(
        machines=args.machines,
        gpus_per_machine=args.gpus_per_machine,
        gpu=gpu,
        gpu_mix=mix,
        preemptions_per_machine_hour=args.preemptions_per_machine_hour,
        input_examples_per_second=args.input_examples_per_second,
        interconnect=args.interconnect,
        network_gbps=(DEFAULT_NETWORK_GBPS if args.network_gbps is None else args.network_gbps),
        precision=args.precision,
        preemptible=args.preemptible,
        checkpoint_every=args.checkpoint_every,
        examples_per_epoch=args.examples_per_epoch,
        heterogeneous=factor is not None,
        heterogeneity_slowdown=factor if isinstance(factor, float) else HETEROGENEITY_SLOWDOWN,
        nics=1 if args.nics is None else args.nics,
        jit_compile=args.jit_compile,
        network_path=args.network_path or "host",
        all_reduce_pack_mb=args.all_reduce_pack_mb,
        ps_machine_type=(
            DEFAULT_PS_MACHINE_TYPE if args.ps_machine_type is None else args.ps_machine_type
        ),
    )
    topology.validate()  # before a model is built
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, got {args.batch_size}")
    history = selection.load_history(args.history)
    prices = _load_prices(args)
    profile = dataclasses.replace(build_profile(args), compiled_metrics=args.compiled_metrics)
    rec = selection.recommend(
        topology,
        profile,
        batch_size=args.batch_size,
        async_ok=args.async_ok,
        history=history,
        prices=prices,
        objective=args.objective,
        unstated=_unstated(args, mix),
    )
    from components.core.selection import summary

    if args.json:
        print(json.dumps(rec.to_dict(), indent=2))
    elif args.markdown:
        print(summary.as_markdown(rec), end="")
    elif args.explain:
        print(summary.as_text(rec))
    else:
        print("\n".join(summary.summary_lines(rec)))
    return 0
