"""`strategist select`: recommend a tf.distribute strategy for hardware and a model."""

from __future__ import annotations

import argparse
import json

from components.core.config import ConfigError
from components.core.hardware import GPUS, INTERCONNECT_GBPS
from pipelines.cli import common

# More classes than any labelled image dataset has (ImageNet-21k: 21,841); a registry
# model of more is not built (its output layer alone would not fit in memory).
MAX_CLASSES = 100_000

DESCRIPTION = """\
Recommend one_device, mirrored, multi_worker_mirrored or parameter_server (or
say that the model needs model parallelism) for a cluster and a model, with the
layout (workers, parameter servers), the predicted step time split into compute
and communication for every candidate, and the reasons in plain sentences.

The cost model and its calibration on published scaling results are described
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
    )
    hw = parser.add_argument_group("hardware")
    hw.add_argument("--machines", type=int, required=True, help="machines with GPUs")
    hw.add_argument("--gpus-per-machine", type=int, required=True, help="GPUs in each machine")
    hw.add_argument("--gpu", default="v100", help=f"GPU type: {', '.join(GPUS)} (default: v100)")
    hw.add_argument(
        "--interconnect",
        help=f"link between GPUs of a machine: {', '.join(INTERCONNECT_GBPS)} "
        "(default: the GPU's usual link)",
    )
    hw.add_argument(
        "--network-gbps",
        type=float,
        default=10.0,
        help="network bandwidth between machines, Gbit/s (default: 10)",
    )
    hw.add_argument(
        "--precision",
        default="fp32",
        help="fp32 or mixed (FP16/BF16 tensor cores) (default: fp32)",
    )
    hw.add_argument("--preemptible", action="store_true", help="Spot/preemptible machines")
    hw.add_argument(
        "--heterogeneous", action="store_true", help="machines differ in speed (mixed GPU types)"
    )
    model = parser.add_argument_group("model")
    which = model.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--model",
        help="registry model (mlp, cnn, resnet50, mobilenet_v2; built once and cached) or a "
        "published benchmark model (resnet101, resnet152, inception_v3, vgg16)",
    )
    which.add_argument(
        "--params", type=common.whole_number, help="parameter count instead of a model, e.g. 2e9"
    )
    model.add_argument(
        "--gflops-per-example",
        type=float,
        help="forward GFLOPs per example with --params (default: 2 x params, as for an MLP)",
    )
    model.add_argument(
        "--classes",
        type=common.positive_int,
        default=10,
        help=f"classes of a registry model, up to {MAX_CLASSES:,} (default: 10)",
    )
    model.add_argument(
        "--sparse-embedding-params",
        type=int,
        default=0,
        help="parameters in a sparse embedding table added to the model (default: 0)",
    )
    model.add_argument(
        "--embedding-dim", type=int, default=64, help="embedding row width (default: 64)"
    )
    run = parser.add_argument_group("training")
    run.add_argument(
        "--batch-size",
        type=int,
        default=64,
        help="per-GPU (per-replica) batch size (default: 64)",
    )
    run.add_argument(
        "--async-ok",
        action="store_true",
        help="asynchronous updates are acceptable (parameter_server in TF2 is asynchronous)",
    )
    run.add_argument(
        "--history",
        nargs="+",
        default=[],
        metavar="FILE",
        help="comparison.json files (or folders) with measured throughput",
    )
    parser.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    parser.add_argument(
        "--markdown", action="store_true", help="print the recommendation as Markdown"
    )
    parser.set_defaults(run=run_select)
    return parser


def build_profile(args: argparse.Namespace):
    """The model profile the flags describe.

    Raises:
        ConfigError: unknown model, bad parameter count or FLOPs.
    """
    from components.core import model_profile
    from components.core.models import MODELS

    if args.params is not None:
        if args.params < 1:
            raise ConfigError(f"--params must be at least 1, got {args.params}")
        flops = None
        if args.gflops_per_example is not None:
            if not args.gflops_per_example > 0:
                raise ConfigError(
                    f"--gflops-per-example must be positive, got {args.gflops_per_example}"
                )
            flops = args.gflops_per_example * 1e9
        profile = model_profile.from_params(args.params, flops)
    elif args.model in MODELS:
        if args.classes > MAX_CLASSES:
            raise ConfigError(
                f"--classes {args.classes:,}: a registry model takes at most {MAX_CLASSES:,} "
                "classes; pass --params for a larger model"
            )
        profile = model_profile.profile_model(args.model, num_classes=args.classes)
    elif args.model in model_profile.PUBLISHED_PROFILES:
        profile = model_profile.PUBLISHED_PROFILES[args.model]
    else:
        known = list(MODELS) + [m for m in model_profile.PUBLISHED_PROFILES if m not in MODELS]
        raise ConfigError(f"unknown model {args.model!r}; choose one of {', '.join(known)}")
    return profile.with_sparse_embedding(args.sparse_embedding_params, args.embedding_dim)


def run_select(args: argparse.Namespace) -> int:
    """Prints the recommendation; returns 0.

    Raises:
        ConfigError: for invalid hardware, model or history (exit 2).
    """
    from components.core import selection

    topology = selection.Topology(
        machines=args.machines,
        gpus_per_machine=args.gpus_per_machine,
        gpu=args.gpu,
        interconnect=args.interconnect,
        network_gbps=args.network_gbps,
        precision=args.precision,
        preemptible=args.preemptible,
        heterogeneous=args.heterogeneous,
    )
    topology.validate()  # before a model is built
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, got {args.batch_size}")
    history = selection.load_history(args.history)
    profile = build_profile(args)
    rec = selection.recommend(
        topology, profile, batch_size=args.batch_size, async_ok=args.async_ok, history=history
    )
    if args.json:
        print(json.dumps(rec.to_dict(), indent=2))
    elif args.markdown:
        print(rec.to_markdown(), end="")
    else:
        print(rec.to_text())
    return 0
