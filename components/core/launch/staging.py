"""Where a cloud job's files are: its output and shards folders, its model module staged,
and the state of the preprocessing layers the module adapts once, before any replica starts."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from components.core import adapt_once, run_folder, storage
from components.core.config import ConfigError, RunConfig

if TYPE_CHECKING:  # annotations only: `cloud` imports this module
    from components.core.launch.cloud import CloudConfig

MODULE_DIR = run_folder.STAGED_MODULE_DIR


def output_uri(run: RunConfig, cloud: CloudConfig) -> str:
    """The Cloud Storage folder the job writes to (`--base-output-dir`, else the run's)."""
    return (cloud.base_output_dir or run.output_dir).rstrip("/")


def shards_uri(run: RunConfig, cloud: CloudConfig) -> str | None:
    """The Cloud Storage folder of the shards the job reads."""
    shards = cloud.shards_dir or run.data.shards_dir
    return shards.rstrip("/") if shards else None


def staged_module_uri(run: RunConfig, cloud: CloudConfig) -> str | None:
    """Where the run's model module file is in Cloud Storage for the job's replicas.

    A local `.py` file is staged beside the job's outputs,
    `<output>/model_module/<file>` (`stage_module` copies it at submission); a
    `gs://` file is read where it is. None for a built-in model or an
    importable module name, which the trainer image must hold (a two-line
    Dockerfile `FROM` Strategist's image: containers/README.md).
    """
    from components.core import model_module

    source = run.model.module
    if not source or not model_module.is_file_source(source):
        return None
    if source.startswith("gs://"):
        return source
    return f"{output_uri(run, cloud)}/{MODULE_DIR}/{os.path.basename(source)}"


def module_origin(run: RunConfig, cloud: CloudConfig) -> str | None:
    """One line saying where the replicas' model module comes from (None for built-ins)."""
    source = run.model.module
    if not source:
        return None
    staged = staged_module_uri(run, cloud)
    if staged is None:
        return f"model module {source}: imported on every replica, so the image must hold it"
    if staged == source:
        return f"model module {source}: read by every replica from Cloud Storage"
    return f"model module {source}: staged to {staged} at submission, read by every replica"


def stage_module(run: RunConfig, cloud: CloudConfig) -> str | None:
    """Copies a local model module file to `staged_module_uri`; returns that URI.

    Raises:
        ConfigError: the file cannot be read or written.
    """
    for staged, source in files_to_stage(run, cloud).items():
        copy_file(source, staged, "--model-module")
    return staged_module_uri(run, cloud)


def files_to_stage(run: RunConfig, cloud: CloudConfig) -> dict[str, str]:
    """`{Cloud Storage URI: local file}` that submission copies before the job starts."""
    staged = staged_module_uri(run, cloud)
    if staged is None or staged == run.model.module:
        return {}
    return {staged: run.model.module}


def copy_file(source: str, target: str, what: str) -> None:
    """Copies one file through the storage layer (local, `/gcs/` or `gs://`).

    Raises:
        ConfigError: naming `what` when it cannot be read or written.
    """
    try:
        storage.copy_file(source, target)
    except OSError as err:
        raise ConfigError(f"cannot stage {what} {source} to {target}: {err}") from None


def build_module_once(
    run: RunConfig, shards_dir: str, output_dir: str, log: Callable[[str], None] = print
) -> float | None:
    """The launcher's one build of the run's model module, before any replica starts.

    As `strategist train --local` builds it: imported, built on the job's training
    split and fed one batch, in a child process (`user_code`), so a bad module is
    refused before anything is sent. The preprocessing layers its `build_model`
    adapts on `spec.training_data()` adapt there, once; their state goes beside
    the job's outputs (`adapt_once.state_path(output_dir)`), which every replica's
    build, the chief's evaluation and the export take instead of reading the data.
    Shards and state go through the storage layer: a local folder, `/gcs/` or `gs://`.

    Not built here: a built-in model (it adapts nothing), and a module named for
    import that this machine cannot import (the trainer image holds it), whose
    `build_model` then cannot adapt on the training split (docs/your-model.md).

    Args:
        run: the run, its model module as the user gave it (a file, `gs://` file or name).
        shards_dir: where this machine reads the job's shards.
        output_dir: where this machine writes the job's outputs.
        log: where the line saying what was built goes.

    Returns:
        Seconds the build took; None when nothing was built.

    Raises:
        ConfigError: unreadable shards; a module that fails to import, build or
            take the data.
    """
    from components.core import datasets, model_module, storage_access, user_code

    source = run.model.module
    if not source:
        return None
    if not model_module.is_file_source(source):
        try:
            model_module.check_isolated_import(source)
        except ConfigError:
            log(
                f"model module {source} is not importable here: not built before the job, so "
                "its build_model cannot adapt layers on spec.training_data()"
            )
            return None
    with storage_access.reading(shards_dir, "--shards-dir"):
        datasets.load_manifest(shards_dir)
    config = dataclasses.replace(
        run,
        data=dataclasses.replace(run.data, shards_dir=shards_dir),
        output_dir=output_dir,
    )
    seconds = user_code.check("model", source, config.to_json())["seconds"]
    states = adapt_once.read(output_dir) or []
    adapted = (
        f"{len(states)} adapted layer state(s) in {adapt_once.state_path(output_dir)}, "
        "which every replica takes"
        if states
        else "it adapts no preprocessing layer"
    )
    log(f"model module {source} built once on the training split here ({seconds:.1f}s): {adapted}")
    return seconds
