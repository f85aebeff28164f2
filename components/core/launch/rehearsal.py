"""A cloud job rehearsed: every replica of the exact CustomJob or TFJob, run on this machine.

`strategist train --target vertex|kubeflow --rehearse` builds the job that
`--dry-run` prints and submission sends, then starts each replica of it as a real
process: the replica's own container command and args, the env of its container,
and what the platform itself would give that replica (Vertex AI: `CLUSTER_SPEC`,
`TF_CONFIG`, `AIP_*`; training operator v1.9: `TF_CONFIG`), read from the request,
not re-derived from the RunConfig. What changes, and is printed:

- hostnames and ports of the cluster become `127.0.0.1:<free port>`;
- every replica gets `STRATEGIST_GCS_LOCAL_ROOT=ROOT`: the storage layer then serves
  `gs://BUCKET/x` and its Vertex AI gcsfuse form `/gcs/BUCKET/x` from `ROOT/BUCKET/x`
  (`storage.local_view`), so the args keep the request's paths;
- the container's `python` is this interpreter, started in the folder that holds
  the `components` package (the image's WORKDIR holds it too);
- a model module is built once on the job's shards before the replicas start, as
  submission builds it (`staging.build_module_once`), its adapted layers' state
  written to the job's output folder;
- the platform recorded in `metrics.json` is `rehearsal of vertex|kubeflow`, and the
  cloud machine type and GPUs the request names are not claimed;
- GPUs are logical CPU devices, as in a local run (`strategies.configure_devices`),
  so shapes a local run refuses are refused here too (`preflight.check_rehearsal`).

The processes are started, watched, restarted and stopped by the local launcher
(`LocalCluster`, through its `plan` and `process` hooks): the same log prefixes,
`status.json`, restart policy and no process left behind.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from components.core import batching, datasets, run_metrics, storage, trainer
from components.core.config import ConfigError, RunConfig
from components.core.launch.local import LocalCluster
from components.core.launch.local_tasks import HOST, Task, free_ports, task_environment
from components.core.launch.preflight import check_rehearsal
from components.core.launch.replicas import Replica, replicas_of
from components.core.launch.staging import build_module_once, copy_file
from components.core.run_metrics import RunMetrics
from components.core.storage_paths import GCSFUSE_PREFIX, GS_PREFIX

# The storage layer's contract: with this set, `gs://BUCKET/x` is `$ROOT/BUCKET/x`.
GCS_ROOT_ENV = storage.LOCAL_ROOT_ENV
DEFAULT_GCS_ROOT = os.path.join("runs", "gcs")
# What the platform sets in a replica's environment (removed from this machine's first).
PLATFORM_ENV_NAMES = (
    "TF_CONFIG",
    "CLUSTER_SPEC",
    "AIP_MODEL_DIR",
    "AIP_CHECKPOINT_DIR",
    "AIP_TENSORBOARD_LOG_DIR",
)
# The machine the request names, which a rehearsal does not run on.
_CLOUD_MACHINE_ENV = (
    run_metrics.MACHINE_TYPE_ENV,
    run_metrics.ACCELERATOR_ENV,
    run_metrics.ACCELERATORS_ENV,
    run_metrics.SPOT_ENV,
)


# -- on this machine ------------------------------------------------------------------


def localize(replicas: list[Replica]) -> tuple[list[Replica], dict[str, str]]:
    """The replicas with every cluster address moved to 127.0.0.1 on a free port.

    Only the addresses in `TF_CONFIG` and `CLUSTER_SPEC` change; everything else in
    them stays as the platform wrote it.

    Returns:
        The replicas, and the address map (cloud address -> local address).
    """
    addresses: list[str] = []
    for replica in replicas:
        for name in ("CLUSTER_SPEC", "TF_CONFIG"):
            if name in replica.env:
                for hosts in json.loads(replica.env[name])["cluster"].values():
                    addresses += [a for a in hosts if a not in addresses]
    ports = free_ports(len(addresses))
    mapping = {a: f"{HOST}:{port}" for a, port in zip(addresses, ports, strict=True)}
    localized = []
    for replica in replicas:
        env = dict(replica.env)
        for name in ("CLUSTER_SPEC", "TF_CONFIG"):
            if name in env:
                raw = json.loads(env[name])
                raw["cluster"] = {k: [mapping[a] for a in v] for k, v in raw["cluster"].items()}
                # The same JSON layout the platform wrote (the operator's has no spaces).
                compact = '": ' not in env[name]
                env[name] = json.dumps(raw, separators=(",", ":") if compact else None)
        localized.append(dataclasses.replace(replica, env=env))
    return localized, mapping


def local_path(path: str | None, root: str) -> str | None:
    """Where this machine keeps a bucket path: `gs://B/x` and `/gcs/B/x` -> `ROOT/B/x`.

    What `storage.local_view` gives the replicas; the launcher uses it without
    setting the variable in its own process.
    """
    if path and path.startswith(GS_PREFIX):
        return os.path.join(root, path[len(GS_PREFIX) :])
    if path and path.startswith(GCSFUSE_PREFIX):
        return os.path.join(root, path[len(GCSFUSE_PREFIX) :])
    return path


def trainer_config(replica: Replica) -> RunConfig:
    """The RunConfig a replica's trainer will run (its `--config-json` or `--config`)."""
    try:
        args = trainer.parse_args(list(replica.args))
    except SystemExit:
        raise ConfigError(
            f"{replica.name}'s args are not the trainer's: {' '.join(replica.args)[:200]}"
        ) from None
    if args.config_json:
        return RunConfig.from_json(args.config_json)
    return RunConfig.from_json(storage.read_text(args.config))


def launcher_config(replicas: list[Replica], root: str) -> RunConfig:
    """The chief's RunConfig with its bucket paths where this machine keeps them.

    The launcher watches the run through it (status, backup, metrics); the
    replicas keep their own args.
    """
    chief = next((r for r in replicas if r.task_type == "chief"), replicas[0])
    config = trainer_config(chief)
    data = dataclasses.replace(
        config.data,
        shards_dir=local_path(config.data.shards_dir, root),
        data_dir=local_path(config.data.data_dir, root),
    )
    return dataclasses.replace(
        config,
        data=data,
        output_dir=local_path(config.output_dir, root),
        backup_dir=local_path(config.backup_dir, root),
    )


def gcs_root() -> str:
    """The folder that stands in for Cloud Storage: `$STRATEGIST_GCS_LOCAL_ROOT`, else runs/gcs."""
    return os.path.abspath(os.environ.get(GCS_ROOT_ENV) or DEFAULT_GCS_ROOT)


def source_root() -> str:
    """The folder holding the `components` package this launcher runs (the image's WORKDIR)."""
    import components

    return os.path.dirname(os.path.dirname(os.path.abspath(components.__file__)))


class RehearsalCluster(LocalCluster):
    """The local launcher, starting a cloud job's replicas instead of its own tasks.

    Args:
        replicas: the job's replicas (`replicas_of`), cloud addresses and all.
        target: `vertex` or `kubeflow`.
        config: the launcher's view of the run (`launcher_config`).
        root: the folder that stands in for Cloud Storage.
        **kwargs: as `LocalCluster` (restart policy, log, on_line).
    """

    def __init__(
        self, replicas: list[Replica], target: str, config: RunConfig, root: str, **kwargs: Any
    ):
        super().__init__(config, **kwargs)
        self.replicas = replicas
        self.target = target
        self.root = root
        self.addresses: dict[str, str] = {}
        self._started_replicas: dict[str, Replica] = {}

    def plan(self) -> list[Task]:
        """The job's replicas on fresh 127.0.0.1 ports (each attempt, as `plan_tasks`)."""
        localized, self.addresses = localize(self.replicas)
        self._started_replicas = {r.name: r for r in localized}
        for cloud, local in self.addresses.items():
            self.log(f"[rehearsal] {cloud} -> {local}")
        return [Task(r.task_type, r.index, r.env.get("TF_CONFIG")) for r in localized]

    def process(self, task: Task) -> tuple[list[str], dict[str, str], str | None]:
        """The replica's container command, args and env, as rehearsed on this machine."""
        replica = self._started_replicas[task.name]
        command = [sys.executable if word == "python" else word for word in replica.command]
        return [*command, *replica.args], self.environment(replica), source_root()

    def environment(self, replica: Replica) -> dict[str, str]:
        """This machine's environment, the container's, the platform's, then the rehearsal's.

        The container's env names the cloud platform and machine (`trainer_env`):
        the rehearsal overrides the platform with `rehearsal of <target>` and drops
        the machine type and GPUs, so `metrics.json` claims no cloud machine.
        """
        env = task_environment(None, self.cluster_restarts)
        for name in (*PLATFORM_ENV_NAMES, *_CLOUD_MACHINE_ENV, GCS_ROOT_ENV):
            env.pop(name, None)
        env.update(replica.env)
        for name in _CLOUD_MACHINE_ENV:
            env.pop(name, None)
        env[run_metrics.PLATFORM_ENV] = run_metrics.rehearsal_platform(self.target)
        env[GCS_ROOT_ENV] = self.root  # gs:// and /gcs/ paths are served from this folder
        return env


def prepare_shards(
    config: RunConfig, data_dir: str | None, log: Callable[[str], None] = print
) -> datasets.Manifest:
    """The job's shards in the local bucket folder, written as `train --local` writes them.

    Existing shards are read back record by record first, as `--shards-dir` is.

    Raises:
        ConfigError: unreadable shards, an unknown dataset, or shards too few for
            the cluster or too small for the batch (`batching.check_fits`).
    """
    shards = config.data.shards_dir or ""
    if storage.exists(storage.join(shards, datasets.MANIFEST_NAME)):
        manifest = datasets.load_manifest(shards, verify_records=True)
        log(f"rehearsal: reading the job's shards from {shards}")
    else:
        log(f"rehearsal: the job's shards are not in {shards}: preparing them there")
        manifest = datasets.shard_dataset(
            config.data.dataset,
            shards,
            num_shards=config.data.num_shards,
            data_dir=data_dir,
            log=log,
        )
    batching.check_fits(config, manifest)
    return manifest


def rehearse(
    job: Any,
    target: str,
    *,
    data_dir: str | None = None,
    root: str | None = None,
    staged: Mapping[str, str] | None = None,
    log: Callable[[str], None] = print,
    **kwargs: Any,
) -> tuple[RunMetrics, RunConfig]:
    """Runs every replica of a cloud job on this machine and returns the run's record.

    Args:
        job: what `launch.build_cloud_job` built (a CustomJob or a TFJob manifest).
        target: `vertex` or `kubeflow`.
        data_dir: TFDS data directory for shards that must be prepared.
        root: the folder that stands in for Cloud Storage (default `gcs_root()`).
        staged: `{gs:// URI: local file}` that submission would copy to Cloud
            Storage first (a model module file, `staging.stage_module`): copied
            into `root` the same way.
        log: where progress and replica output lines go.
        **kwargs: `LocalCluster` options (restart policy, on_line).

    Returns:
        The record (also in the output folder) and the launcher's view of the run,
        whose `output_dir` is where this machine keeps the job's outputs.

    Raises:
        ConfigError: a job this machine cannot rehearse, before any process starts.
        ClusterFailed: a replica failed with no restart left.
    """
    root = root or gcs_root()
    replicas = replicas_of(job, target)
    config = launcher_config(replicas, root)
    check_rehearsal(config)  # the shapes a local run refuses, refused the same way
    log(f"rehearsal of {target}: gs://BUCKET/... and /gcs/BUCKET/... are {root}/BUCKET/...")
    prepare_shards(config, local_path(data_dir, root), log=log)
    for uri, source in (staged or {}).items():
        copy_file(source, local_path(uri, root), "--model-module")
        log(f"rehearsal: {source} staged at {local_path(uri, root)}, as submission stages it")
    # As submission does: the module built once on the job's shards, its adapted layers'
    # state in the job's output folder, where every replica's build takes it.
    module = local_path(config.model.module, root)
    build_module_once(
        dataclasses.replace(config, model=dataclasses.replace(config.model, module=module)),
        config.data.shards_dir or "",
        config.output_dir,
        log,
    )
    log(
        f"rehearsal of {target}: {len(replicas)} replica(s) "
        f"({', '.join(r.name for r in replicas)}), each with its container's command, "
        f"args and env; `python` is {sys.executable}, run in {source_root()}; outputs in "
        f"{config.output_dir}"
    )
    cluster = RehearsalCluster(replicas, target, config, root, log=log, **kwargs)
    return cluster.run(), config
