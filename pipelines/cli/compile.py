"""`strategist compile`: write a pipeline spec for Vertex AI Pipelines or self-hosted KFP."""

from __future__ import annotations

import argparse

from components.core.targets import add_target_argument
from components.image import DEFAULT_IMAGE
from pipelines.cli import arg_types, common


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "compile",
        help="compile the training or comparison pipeline",
        description=(
            "Compile a pipeline to a KFP v2 pipeline spec. The vertex target is a single YAML "
            "document for Vertex AI Pipelines; the kubeflow (or kfp) target adds kfp-kubernetes "
            "settings that put the train step on a GPU node pool (node selector "
            "cloud.google.com/gke-accelerator, toleration nvidia.com/gpu, GPU limit)."
        ),
        epilog=(
            "examples:\n"
            "  strategist compile --pipeline training --target vertex -o training.yaml\n"
            "  strategist compile --pipeline comparison --target kubeflow --gpu a100 "
            "--gpus-per-machine 4 --image "
            "us-docker.pkg.dev/my-project/strategist/trainer:1.0 -o comparison.yaml"
        ),
    )
    parser.add_argument("--pipeline", required=True, choices=("training", "comparison"))
    add_target_argument(
        parser,
        required=True,
        help="vertex (Vertex AI Pipelines) or kubeflow (a KFP host; kfp is another name for it)",
    )
    parser.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"container image of every step (default: {DEFAULT_IMAGE})",
    )
    parser.add_argument(
        "--gpu",
        help=f"GPU of the train step: {common.GPU_NAMES}, or none "
        "(default: t4 for kubeflow, none for vertex, where training runs as a custom job)",
    )
    common.add_train_step_gpus_argument(parser)
    parser.add_argument("-o", "--output", required=True, help="the YAML file to write")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.compile import compile_pipeline, placement_for
    from pipelines.scheduling import spec_defaults

    arg_types.output_file(args.output)
    gpu = args.gpu if args.gpu is not None else ("t4" if args.target == "kubeflow" else None)
    gpus = args.gpus_per_machine
    path = compile_pipeline(
        args.pipeline, args.target, args.output, image=args.image, gpu=gpu, gpus=gpus
    )
    where = f", train step on {gpus} x {gpu}" if gpu and gpu != "none" else ""
    defaults = spec_defaults(args.target, placement_for(args.target, gpu, gpus), gpus)
    print(
        f"compiled {args.pipeline} for {args.target}{where}: {path}\n"
        f"defaults: backend={defaults.backend}, gpus_per_machine={defaults.devices} "
        "(change them with --param NAME=VALUE or in the run form)"
    )
    return 0
