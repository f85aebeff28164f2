"""Typed configuration for a Strategist run.

One resolved `RunConfig` travels to every training process (as JSON), is saved
beside the exported model, and is what every backend (local, Vertex AI,
Kubeflow) is built from. Validation lives here so that bad input is refused
before any process or cloud job starts.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

# Re-exported: callers import the run's vocabulary from here.
from components.core.checkpoint_interval import CheckpointInterval
from components.core.config_fields import build_section
from components.core.errors import ConfigError as ConfigError
from components.core.strategy_spec import ALL_REDUCE as ALL_REDUCE
from components.core.strategy_spec import AUTO, StrategySpec, spec_for
from components.core.strategy_spec import STRATEGIES as STRATEGIES
from components.core.targets import TARGETS

BACKENDS = ("local", *TARGETS)  # where the pipeline's train step trains
# tf-keras mixed-precision policies (`--precision`).
FLOAT32 = "float32"
MIXED_FLOAT16 = "mixed_float16"
MIXED_BFLOAT16 = "mixed_bfloat16"
PRECISIONS = (FLOAT32, MIXED_FLOAT16, MIXED_BFLOAT16)

# Random seeds are unsigned 32-bit for NumPy and TensorFlow.
MAX_SEED = 2**32 - 1
# More epochs than any run needs: a larger number is a typo (and overflows the int64
# a KFP pipeline parameter holds).
MAX_EPOCHS = 1_000_000
# A pilot (`training.max_steps`) measures its steps in this many windows of equal steps, after
# one more window of warm-up: each window's throughput is a sample, so the steady state has a
# median and a spread, as the epochs after the first give a whole run.
PILOT_WINDOWS = 5
# Steps in one tf.function call: Keras truncates an execution at the epoch's end, so more
# than an epoch's steps only names a number no run has.
MAX_STEPS_PER_EXECUTION = 100_000


@dataclass(frozen=True)
class DataConfig:
    """Where the training data comes from: a TFDS dataset, or files (`files`).

    Attributes:
        dataset: what `tfds.builder` resolves (`digits` is built offline,
            `mnist`, `glue/sst2`, `mnist:3.0.1` ...) or a prepared dataset
            folder; with `files`, only the name reports use.
        dataset_module: a `.py` file or module that registers the user's TFDS
            builder (imported before `dataset` is resolved).
        files: `.csv`, `.npz` or `.tfrecord` file(s), a path or a glob,
            instead of a TFDS dataset.
        label: the label's column (CSV), array (npz), feature (tfrecord, TFDS);
            for TFDS, the other features become the inputs instead of the
            dataset's supervised keys.
        feature_spec: the features of `.tfrecord` files, JSON or a JSON file
            (`data_sources.tfrecord_spec`).
        test_fraction: for data without a test split (files, TFDS datasets with
            only `train`): the share of examples held out, every (1/f)-th example.
        data_dir: TFDS data directory (prepared datasets and downloads).
        shards_dir: folder of TFRecord shards and `manifest.json`; written by
            `shard`, read by the trainer.
        num_shards: shard files per split; raised to the number of input
            pipelines when smaller, so file-based auto-sharding never starves.
    """

    dataset: str = "digits"
    dataset_module: str | None = None
    files: str | None = None
    label: str | None = None
    feature_spec: str | None = None
    test_fraction: float = 0.2
    data_dir: str | None = None
    shards_dir: str | None = None
    num_shards: int = 8


@dataclass(frozen=True)
class ModelConfig:
    """Which model to train.

    Attributes:
        name: key of the model registry (`components.core.models`), or, with
            `module`, the module's short name (for records and reports).
        module: a user's model module (`--model-module`): a `.py` file (a
            local path, or the `/gcs/` or `gs://` copy staged beside a cloud
            job's outputs) or an importable module name; see
            `components.core.model_module`. None: the registry's `name`.
    """

    name: str = "mlp"
    module: str | None = None


@dataclass(frozen=True)
class TrainingConfig:
    """How to train.

    Attributes:
        epochs: number of passes over the training split.
        per_replica_batch_size: examples each replica sees per step; the global
            batch is this times the number of replicas.
        base_learning_rate: learning rate at `base_batch_size`; scaled linearly
            with the batch each update uses (Goyal et al., 2017).
        base_batch_size: the batch size `base_learning_rate` was tuned for.
        scale_learning_rate: False keeps every rate as given, at any batch
            (`--no-scale-learning-rate`; a model module's `SCALE_LEARNING_RATE = False`).
        learning_rate_given: `base_learning_rate` was asked for (`--learning-rate`):
            it replaces the rate of an optimizer a model module chose.
        warmup_epochs: epochs of linear learning-rate warm-up.
        validation_fraction: share of the training split held out and evaluated
            at the end of each epoch (`val_` metrics in the record); 0: none.
        seed: random seed for weights and shuffling.
        steps_per_execution: steps Keras runs per `tf.function` call; more
            amortise per-step dispatch (RPCs under parameter_server).
        precision: the tf-keras mixed-precision policy, one of `PRECISIONS`;
            set before the model is built. The logits stay float32, and
            `mixed_float16` gets loss scaling from tf-keras' optimizer wrapper.
            `mixed_float16` needs GPUs; `mixed_bfloat16` also runs on CPU.
        jit_compile: compile the train step with XLA (`model.compile(jit_compile=...)`);
            on a machine without GPUs the all-reducing strategies compile the
            model's forward and backward passes only (`StrategySpec.xla_scope`).
        profile_steps: `"A,B"` takes a TensorFlow profiler trace of training
            steps A to B of the first epoch (1-based) into the TensorBoard
            logs; empty: no trace (a trace slows those steps).
        max_steps: 0 trains `epochs` whole epochs. N > 0 is a pilot: N
            measured steps after a warm-up of N / `PILOT_WINDOWS` steps,
            instead of `epochs` (`batching.plan_batching` lays them out as
            windows; a multiple of `PILOT_WINDOWS`).
    """

    epochs: int = 5
    per_replica_batch_size: int = 32
    base_learning_rate: float = 0.001
    base_batch_size: int = 32
    scale_learning_rate: bool = True
    learning_rate_given: bool = False
    warmup_epochs: int = 1
    validation_fraction: float = 0.0
    seed: int = 42
    steps_per_execution: int = 1
    precision: str = FLOAT32
    jit_compile: bool = False
    profile_steps: str = ""
    max_steps: int = 0
    checkpoint_every: str = "epoch"

    @property
    def checkpoint_interval(self) -> CheckpointInterval:
        """`checkpoint_every`, parsed.

        Raises:
            ConfigError: when it is not `epoch`, a step count or a duration.
        """
        return CheckpointInterval.parse(self.checkpoint_every)

    @property
    def profile_batches(self) -> tuple[int, int] | None:
        """`profile_steps` as (first, last) step, or None when no trace is asked for.

        Raises:
            ConfigError: when it is not two step numbers `A,B` with 1 <= A <= B.
        """
        if not self.profile_steps:
            return None
        parts = self.profile_steps.split(",")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ConfigError(
                f"--profile-steps takes two step numbers A,B (e.g. 10,20), got "
                f"{self.profile_steps!r}"
            )
        first, last = (int(p) for p in parts)
        if not 1 <= first <= last:
            raise ConfigError(f"--profile-steps A,B needs 1 <= A <= B, got {self.profile_steps!r}")
        return first, last


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster shape and the strategy that runs on it.

    What the shape means for each strategy (tasks, replicas, input pipelines)
    is answered by its `StrategySpec` (`components.core.strategy_spec`).

    Attributes:
        strategy: one of `STRATEGIES`.
        workers: machines that compute gradients. For `multi_worker_mirrored`
            the first is the chief; for `parameter_server` a separate chief
            (the coordinator) dispatches steps to them.
        ps: parameter-server tasks (`parameter_server` only).
        gpus_per_machine: devices (GPUs) of each machine that computes
            gradients; on a machine without GPUs, logical CPU devices stand in
            for them where the strategy can use them.
        evaluator: one more task that never trains: it evaluates each epoch's
            checkpoint on the test split beside the training (a sidecar).
        all_reduce: how gradients are all-reduced, one of `ALL_REDUCE` that
            the strategy offers (`StrategySpec.all_reduce_choices`); `auto`
            is NCCL with GPUs and ring without for `multi_worker_mirrored`,
            TensorFlow's default for `mirrored`.
        all_reduce_pack_mb: `multi_worker_mirrored` only: all-reduce the
            gradients in packs of about this many MB
            (`CommunicationOptions(bytes_per_pack=...)`), each as soon as its
            gradients exist, so communication overlaps back-propagation. 0:
            TensorFlow's default, one pack after the last gradient.
    """

    strategy: str = "mirrored"
    workers: int = 1
    ps: int = 0
    gpus_per_machine: int = 1
    evaluator: bool = False
    all_reduce: str = AUTO
    all_reduce_pack_mb: float = 0.0

    @property
    def spec(self) -> StrategySpec:
        """The strategy's spec (raises ConfigError for an unknown strategy)."""
        return spec_for(self.strategy)

    @property
    def num_replicas(self) -> int:
        """Replicas that compute gradients for one global batch."""
        return self.spec.num_replicas(self)

    @property
    def num_processes(self) -> int:
        """TensorFlow processes the cluster needs."""
        return self.spec.num_processes(self)


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run needs.

    Attributes:
        data: the data.
        model: the model.
        training: the optimisation settings.
        cluster: the strategy and cluster shape.
        output_dir: where the chief writes `metrics.json`, `model/` and
            `config.json`; other tasks write to scratch folders below it.
        backup_dir: where `BackupAndRestore` keeps its checkpoint; defaults to
            `<output_dir>/backup`.
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    output_dir: str = "runs/train"
    backup_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def to_pipeline_parameter(self) -> dict[str, Any]:
        """The config as a pipeline's `run_config` parameter.

        Output paths are left out: the pipeline's artifacts decide where the
        outputs live; `data.shards_dir`, when set, names existing shards the
        shard step takes instead of sharding. Unset (None) values are left out
        too, which a pipeline parameter cannot hold. `from_dict` restores them
        to their defaults.
        """
        raw = self.to_dict()
        for key in ("output_dir", "backup_dir"):
            raw.pop(key)
        return {
            name: {key: value for key, value in section.items() if value is not None}
            for name, section in raw.items()
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunConfig:
        """Builds a config from `to_dict()` output (missing keys take their
        defaults), rejecting unknown keys.

        Raises:
            ConfigError: an unknown key, or a section that is not an object.
        """
        if not isinstance(raw, dict):
            raise ConfigError(f"a run config is a JSON object, got {type(raw).__name__}")
        sections = {
            "data": DataConfig,
            "model": ModelConfig,
            "training": TrainingConfig,
            "cluster": ClusterConfig,
        }
        kwargs: dict[str, Any] = {}
        for key, value in raw.items():
            if key in sections:
                kwargs[key] = build_section(sections[key], value, key)
            elif key in ("output_dir", "backup_dir"):
                kwargs[key] = value
            else:
                raise ConfigError(f"unknown config key {key!r}")
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls.from_dict(json.loads(text))


def cluster_for(
    strategy: str,
    workers: int | None = None,
    ps: int | None = None,
    devices: int | None = None,
    evaluator: bool = False,
    all_reduce: str = AUTO,
    all_reduce_pack_mb: float = 0.0,
) -> ClusterConfig:
    """The cluster of `strategy` for a shape given once for several strategies.

    A comparison (or a command line) gives one `workers`/`ps`/devices shape:
    single-machine strategies take one worker, only `parameter_server` takes
    parameter servers, only strategies with an all-reduce to choose take
    `all_reduce`, only those whose all-reduce splits into packs take
    `all_reduce_pack_mb`, and a value left None takes the strategy's default.

    Raises:
        ConfigError: for an unknown strategy.
    """
    spec = spec_for(strategy)
    return ClusterConfig(
        strategy,
        (spec.default_workers() if workers is None else workers) if spec.multi_machine else 1,
        (spec.default_ps() if ps is None else ps) if spec.uses_ps else 0,
        (spec.default_devices if devices is None else devices) if spec.devices_apply else 1,
        evaluator,
        all_reduce if spec.all_reduce_choices else AUTO,
        all_reduce_pack_mb if spec.takes_all_reduce_pack else 0.0,
    )


def validate_cluster(cluster: ClusterConfig) -> None:
    """Refuses cluster shapes the strategy cannot use.

    Raises:
        ConfigError: with a message that says which flag to change.
    """
    errors = cluster.spec.shape_errors(cluster)
    if errors:
        raise ConfigError(errors[0])


def cluster_from_dict(raw: dict[str, Any]) -> ClusterConfig:
    """A `ClusterConfig` from its dict (a pipeline's `clusters` item or a select output).

    Raises:
        ConfigError: unknown keys.
    """
    return build_section(ClusterConfig, raw, "cluster")


def validate_pipeline_run(
    run_config: dict[str, Any], clusters: list[dict[str, Any]] | None = None
) -> RunConfig:
    """Validates a pipeline's `run_config` (and `clusters`) before anything is sent.

    Args:
        run_config: the pipeline's `run_config` parameter; its strategy may be
            `auto` (the select step chooses).
        clusters: the comparison pipeline's clusters, each validated with the
            run config.

    Returns:
        The parsed config.

    Raises:
        ConfigError: saying what to change.
    """
    config = RunConfig.from_dict(run_config)
    if config.cluster.strategy == "auto":
        validate_run(dataclasses.replace(config, cluster=cluster_for("one_device")))
    else:
        validate_run(config)
    for raw in clusters or []:
        validate_run(dataclasses.replace(config, cluster=cluster_from_dict(raw)))
    return config


def validate_run(config: RunConfig) -> None:
    """Validates everything that can be checked without touching data.

    Raises:
        ConfigError: with a message that says what to do.
    """
    validate_cluster(config.cluster)
    t = config.training
    if t.epochs < 1:
        raise ConfigError(f"--epochs must be at least 1, got {t.epochs}")
    if t.epochs > MAX_EPOCHS:
        raise ConfigError(f"--epochs must be at most {MAX_EPOCHS:,}, got {t.epochs}")
    if t.per_replica_batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, got {t.per_replica_batch_size}")
    if t.base_batch_size < 1:
        raise ConfigError(f"base batch size must be at least 1, got {t.base_batch_size}")
    if not (t.base_learning_rate > 0 and math.isfinite(t.base_learning_rate)):
        raise ConfigError(f"learning rate must be a positive number, got {t.base_learning_rate}")
    if not 0 <= t.seed <= MAX_SEED:
        raise ConfigError(f"--seed must be between 0 and {MAX_SEED}, got {t.seed}")
    if not 1 <= t.steps_per_execution <= MAX_STEPS_PER_EXECUTION:
        raise ConfigError(
            f"steps per execution must be 1 to {MAX_STEPS_PER_EXECUTION:,}, got "
            f"{t.steps_per_execution}"
        )
    if t.warmup_epochs < 0:
        raise ConfigError(f"warm-up epochs must be 0 or more, got {t.warmup_epochs}")
    if not 0 <= t.validation_fraction < 1:
        raise ConfigError(
            f"--validation-fraction must be 0 or more and below 1, got {t.validation_fraction}"
        )
    check_max_steps(t.max_steps)
    if t.precision not in PRECISIONS:
        raise ConfigError(
            f"unknown precision {t.precision!r}; choose one of {', '.join(PRECISIONS)}"
        )
    t.profile_batches  # noqa: B018  (raises on a malformed value)
    t.checkpoint_interval  # noqa: B018  (raises on a malformed value)
    if config.data.num_shards < 1:
        raise ConfigError(f"--num-shards must be at least 1, got {config.data.num_shards}")
    if not 0 < config.data.test_fraction < 1:
        raise ConfigError(
            f"--test-fraction must be between 0 and 1, got {config.data.test_fraction}"
        )
    if config.data.feature_spec and not (config.data.files or "").endswith(".tfrecord"):
        raise ConfigError("--feature-spec describes .tfrecord files: pass them with --data")


def check_max_steps(max_steps: int) -> None:
    """Refuses a pilot's step count that cannot be split into `PILOT_WINDOWS` equal windows.

    Raises:
        ConfigError: saying which counts work.
    """
    if max_steps < 0 or max_steps > MAX_EPOCHS:
        raise ConfigError(f"--max-steps must be between 0 and {MAX_EPOCHS:,}, got {max_steps}")
    if max_steps % PILOT_WINDOWS:
        below = max_steps - max_steps % PILOT_WINDOWS
        raise ConfigError(
            f"--max-steps {max_steps}: a pilot measures {PILOT_WINDOWS} windows of equal steps; "
            f"pass a multiple of {PILOT_WINDOWS}, e.g. {below or PILOT_WINDOWS} or "
            f"{below + PILOT_WINDOWS}"
        )


def validate_for_machine(config: RunConfig, gpus: int) -> None:
    """Refuses what cannot run on machines with `gpus` GPUs each (0: CPU only).

    Called where the machine is known: the local launcher (this machine), the
    cloud backends (the job's accelerators) and the trainer (the GPUs
    TensorFlow sees).

    Raises:
        ConfigError: saying what to use instead.
    """
    errors = config.cluster.spec.machine_errors(
        config.cluster.all_reduce, gpus, config.training.jit_compile
    )
    if errors:
        raise ConfigError(errors[0])
    if config.training.precision == MIXED_FLOAT16 and not gpus:
        raise ConfigError(
            "--precision mixed_float16 needs GPUs and this machine has none: use "
            "--precision mixed_bfloat16 to rehearse mixed precision on CPU (the cloud job "
            "with --gpu takes mixed_float16)"
        )


def per_replica_from_global(global_batch_size: int, cluster: ClusterConfig) -> int:
    """The per-replica batch for a requested global batch.

    Raises:
        ConfigError: when the global batch does not divide across the replicas.
    """
    replicas = cluster.num_replicas
    if global_batch_size < 1:
        raise ConfigError(f"--global-batch-size must be at least 1, got {global_batch_size}")
    if global_batch_size % replicas:
        raise ConfigError(
            f"--global-batch-size {global_batch_size} does not divide across {replicas} replicas "
            f"of {cluster.strategy}: use a multiple of {replicas}"
        )
    return global_batch_size // replicas
