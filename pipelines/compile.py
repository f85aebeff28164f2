"""Compile targets: one pipeline spec per pipeline and platform.

`vertex` files are a single YAML document (Vertex AI rejects a second one);
`kubeflow` files (`kfp` is another name for that target) add the kfp-kubernetes
platform document that puts the train step on a GPU node pool.
"""

from __future__ import annotations

import os
from pathlib import Path

from components.core import atomic, cloud_ids
from components.core.config import ConfigError
from components.core.hardware import get_gpu
from components.core.targets import TARGETS, canonical
from components.image import DEFAULT_IMAGE
from pipelines.comparison import build_comparison_pipeline
from pipelines.scheduling import GpuPlacement
from pipelines.training import build_training_pipeline

PIPELINES = {"training": build_training_pipeline, "comparison": build_comparison_pipeline}


def check_image(image: str) -> None:
    """Raises ConfigError unless `image` is a container image reference."""
    cloud_ids.check_image(image)


def placement_for(target: str, gpu: str | None, gpus: int) -> GpuPlacement | None:
    """The train step's GPU placement for a target (`kubeflow`, alias `kfp`)."""
    target = canonical(target)
    if target not in TARGETS:
        raise ConfigError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if gpu is None or gpu == "none":
        return None
    get_gpu(gpu).machine_type(gpus)  # unknown GPU, or a count no machine takes
    return GpuPlacement(target, gpu, gpus)


def compile_pipeline(
    pipeline: str,
    target: str,
    output: str | os.PathLike,
    *,
    image: str = DEFAULT_IMAGE,
    gpu: str | None = None,
    gpus: int = 1,
) -> Path:
    """Compiles `pipeline` for `target` into `output`, atomically.

    Args:
        pipeline: `training` or `comparison`.
        target: `vertex` or `kubeflow` (alias `kfp`).
        output: the YAML file to write.
        image: the container image of every step.
        gpu: GPU of the train step (`none` or None: no GPU).
        gpus: GPUs of the train step; without `gpu`, the `gpus_per_machine`
            default (the cloud job's machines).

    Returns:
        The written file.

    Raises:
        ConfigError: unknown pipeline, target or GPU, bad image, impossible GPU count.
    """
    from kfp import compiler

    if pipeline not in PIPELINES:
        raise ConfigError(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    check_image(image)
    placement = placement_for(target, gpu, gpus)
    func = PIPELINES[pipeline](
        image=image, placement=placement, target=canonical(target), gpus_per_machine=gpus
    )
    output = Path(output)
    with atomic.staged_file(output) as tmp:
        compiler.Compiler().compile(func, tmp)
    return output
