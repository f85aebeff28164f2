"""Where a cloud job's files are: its output and shards folders, its model module staged."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from components.core import run_folder, storage
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
