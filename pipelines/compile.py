"""Compile targets: one pipeline spec per pipeline and platform.

`vertex` files are a single YAML document (Vertex AI rejects a second one);
`kubeflow` files (`kfp` is another name for that target) add the kfp-kubernetes
platform document that puts the train step on a GPU node pool.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

from components.core import atomic, cloud_ids
from components.core.config import (
    ClusterConfig,
    ConfigError,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainingConfig,
)
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
        _write_integer_defaults(Path(tmp))
    return output


def _write_integer_defaults(path: Path) -> None:
    """Rewrites the compiled run form's whole-number defaults as integers.

    KFP stores every number as a protobuf double, so the form showed `epochs: 5.0`
    and `gpus_per_machine: int [Default: 1.0]`; an integer parameter and a run
    config's integer field get an integer default here (the value is unchanged).
    """
    import yaml

    text = path.read_text()
    documents = list(yaml.safe_load_all(text))
    for spec in documents:
        for parameters in _parameter_blocks(spec):
            for parameter in parameters.values():
                _integer_default(parameter)
    # KFP's header comments (`# PIPELINE DEFINITION`, each input with its default) are
    # kept, with the root inputs' defaults as now written.
    root = documents[0].get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    header = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        match = _HEADER_INPUT.match(line)
        if match and "defaultValue" in root.get(match["name"], {}):
            line = f"{match['lead']}[Default: {root[match['name']]['defaultValue']!r}]\n"
        header.append(line)
    path.write_text("".join(header) + yaml.safe_dump_all(documents, sort_keys=False))


# One input of KFP's header comment: `#    epochs: int [Default: 5.0]`.
_HEADER_INPUT = re.compile(r"^(?P<lead>#\s+(?P<name>\w+): \w+ )\[Default: .*\]$")


def _parameter_blocks(node: Any):
    """Every `parameters` mapping of an `inputDefinitions` in the compiled spec."""
    if isinstance(node, dict):
        definitions = node.get("inputDefinitions")
        if isinstance(definitions, dict) and isinstance(definitions.get("parameters"), dict):
            yield definitions["parameters"]
        for value in node.values():
            yield from _parameter_blocks(value)
    elif isinstance(node, list):
        for value in node:
            yield from _parameter_blocks(value)


def _integer_default(parameter: dict) -> None:
    default = parameter.get("defaultValue")
    if parameter.get("parameterType") == "NUMBER_INTEGER" and isinstance(default, float):
        parameter["defaultValue"] = int(default)
    elif parameter.get("parameterType") == "STRUCT" and isinstance(default, dict):
        parameter["defaultValue"] = _run_config_integers(default)
    elif parameter.get("parameterType") == "LIST" and isinstance(default, list):
        parameter["defaultValue"] = [
            _section_integers(item, ClusterConfig) if isinstance(item, dict) else item
            for item in default
        ]


# RunConfig's sections by their annotation (the module's annotations are strings).
_SECTIONS = {cls.__name__: cls for cls in (DataConfig, ModelConfig, TrainingConfig, ClusterConfig)}


def _run_config_integers(raw: dict) -> dict:
    """A run config default with its integer fields (by `RunConfig`'s types) as integers."""
    sections = {f.name: f.type for f in dataclasses.fields(RunConfig)}
    out = dict(raw)
    for name, section in raw.items():
        kind = sections.get(name)
        if not isinstance(section, dict) or not isinstance(kind, str) or kind not in _SECTIONS:
            continue
        out[name] = _section_integers(section, _SECTIONS[kind])
    return out


def _section_integers(raw: dict, section: type) -> dict:
    """`raw` with the whole numbers of `section`'s integer fields as integers."""
    ints = {f.name for f in dataclasses.fields(section) if f.type == "int"}
    return {
        key: int(value) if key in ints and isinstance(value, float) else value
        for key, value in raw.items()
    }
