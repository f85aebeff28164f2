"""Batching: how a run's examples are grouped into steps and epochs, checked before launch."""

from __future__ import annotations

from dataclasses import dataclass

from components.core import datasets
from components.core.config import PILOT_WINDOWS, ConfigError, RunConfig


@dataclass(frozen=True)
class Batching:
    """How examples are grouped for one strategy.

    Attributes:
        global_batch_size: examples in one synchronous update across all replicas
            (for parameter_server: across all workers' concurrent steps).
        batch_per_step: examples one `fit` step consumes (one worker's step for
            parameter_server).
        steps_per_epoch: `fit` steps in one epoch (of a pilot: in one window).
        examples_per_epoch: the same for every strategy of a comparison (of a
            pilot: in one window).
        epochs: `fit` epochs: the run's, or a pilot's windows (its warm-up first).
        warmup_steps: a pilot's steps before it measures (its first window);
            0 for a run of whole epochs, whose first epoch is its warm-up.
        steps_per_data_epoch: steps of one pass over the training split (the
            learning-rate warm-up counts epochs in them, pilot or not).
    """

    global_batch_size: int
    batch_per_step: int
    steps_per_epoch: int
    examples_per_epoch: int
    epochs: int
    warmup_steps: int = 0
    steps_per_data_epoch: int = 0

    @property
    def max_steps(self) -> int:
        """A pilot's measured steps (after its warm-up); 0 for a run of whole epochs."""
        return (self.epochs - 1) * self.steps_per_epoch if self.warmup_steps else 0


def plan_batching(config: RunConfig, replicas_in_sync: int, num_train_examples: int) -> Batching:
    """Global batch = per-replica batch x replicas; epochs drop the ragged tail.

    A pilot (`training.max_steps` N) runs `PILOT_WINDOWS` + 1 `fit` epochs of
    N / `PILOT_WINDOWS` steps each: the first is its warm-up, the others its
    measured windows. Its input repeats, so N may exceed an epoch of data.

    Raises:
        ConfigError: when the global batch is larger than the training split.
    """
    per_replica = config.training.per_replica_batch_size
    batch_per_step = per_replica * replicas_in_sync
    # Under parameter_server a global batch is every worker's concurrent step;
    # otherwise it is the one synchronous step all replicas take.
    global_batch = per_replica * config.cluster.num_replicas
    if not config.cluster.spec.uses_ps:
        global_batch = batch_per_step
    steps_of_global = num_train_examples // global_batch
    if steps_of_global < 1:
        raise ConfigError(
            f"global batch {global_batch} is larger than the {num_train_examples} training "
            "examples: lower --batch-size"
        )
    examples = steps_of_global * global_batch
    data_steps = examples // batch_per_step
    max_steps = config.training.max_steps
    if max_steps:
        window = max_steps // PILOT_WINDOWS
        return Batching(
            global_batch,
            batch_per_step,
            steps_per_epoch=window,
            examples_per_epoch=window * batch_per_step,
            epochs=PILOT_WINDOWS + 1,
            warmup_steps=window,
            steps_per_data_epoch=data_steps,
        )
    return Batching(
        global_batch, batch_per_step, data_steps, examples, config.training.epochs, 0, data_steps
    )


def check_fits(config: RunConfig, manifest: datasets.Manifest) -> Batching:
    """Checks, before anything is launched, that the shards can feed this run.

    Raises:
        ConfigError: fewer shard files than input pipelines, a split missing,
            or a global batch larger than the training split.
    """
    spec = config.cluster.spec
    pipelines = spec.shard_files_needed(config.cluster)
    for split in datasets.SPLITS:
        files = len(manifest.split(split).files)
        if split == "train" and files < pipelines:
            raise ConfigError(
                f"{manifest.root} has {files} {split} shard file(s), too few for "
                f"{pipelines} workers (each reads its own files): shard again with "
                f"--num-shards {pipelines} or more"
            )
    batching = plan_batching(
        config,
        spec.replicas_in_sync(config.cluster),
        datasets.training_examples(manifest, config.training.validation_fraction),
    )
    profile = config.training.profile_batches
    if profile and profile[1] > batching.steps_per_epoch:
        raise ConfigError(
            f"--profile-steps {config.training.profile_steps}: the trace is of the first "
            f"epoch, which has {batching.steps_per_epoch} steps; pass steps 1 to "
            f"{batching.steps_per_epoch}"
        )
    return batching


def check_replicas(config: RunConfig, replicas_in_sync: int) -> None:
    """Refuses a strategy whose replicas differ from what the config counted.

    The global batch, the learning rate and the run's record all depend on the
    replica count: a cluster that holds another number (a machine with more or
    fewer GPUs than `gpus_per_machine`) would train something else than asked.

    Raises:
        ConfigError: saying what the cluster has and what to pass.
    """
    expected = config.cluster.spec.replicas_in_sync(config.cluster)
    if replicas_in_sync != expected:
        raise ConfigError(
            f"{config.cluster.strategy} holds {replicas_in_sync} replica(s) in sync on this "
            f"machine, but the run was planned for {expected} "
            f"({config.cluster.gpus_per_machine} device(s) per machine): pass "
            "--gpus-per-machine equal to the GPUs of each machine"
        )


def batch_adjustments(config: RunConfig, batching: Batching, replicas: int) -> list[str]:
    """What Strategist chose of the batch, in words, for the record."""
    per_replica = config.training.per_replica_batch_size
    return [
        f"batch {per_replica} per replica x {replicas} replica(s) in sync = "
        f"{batching.batch_per_step} per step (global batch {batching.global_batch_size})"
    ]
