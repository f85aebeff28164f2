"""`train(config, role)`: Keras `fit` under any `tf.distribute` strategy, measured per epoch.

Keras 2 (`tf_keras`) is used: Keras 3's `fit` fails under MultiWorkerMirrored
and ParameterServer strategies. One code path serves every
strategy: a `DatasetCreator` over the shard reader, `steps_per_epoch` (which
ParameterServerStrategy requires) so every strategy sees the same examples per
epoch, and `BackupAndRestore` so a restarted cluster resumes from the last
finished epoch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from components.core import (
    datasets,
    evaluation,
    evaluation_page,
    model_build,
    models,
    run_metrics,
    sidecar,
    storage,
    storage_paths,
    strategies,
)
from components.core.config import RunConfig, validate_for_machine
from components.core.strategies import Role

METRICS_NAME = "metrics.json"
MODEL_DIR_NAME = "model"
CONFIG_NAME = "config.json"
# The test metrics as a page; for a regression with its predicted-vs-true plot.
EVALUATION_PAGE_NAME = "evaluation.html"
SAVED_RUN_CONFIG = os.path.join("assets.extra", "strategist_run_config.json")
# Epoch records survive a restart here, beside the BackupAndRestore checkpoint.
EPOCH_LOG_NAME = "epochs.json"
# TensorBoard logs: OUTPUT/tensorboard, or where Vertex AI asks a job with a TensorBoard
# instance (`--tensorboard`) to write them.
TENSORBOARD_DIR_NAME = "tensorboard"
TENSORBOARD_ENV = "AIP_TENSORBOARD_LOG_DIR"


@dataclass(frozen=True)
class Batching:
    """How examples are grouped for one strategy.

    Attributes:
        global_batch_size: examples in one synchronous update across all replicas
            (for parameter_server: across all workers' concurrent steps).
        batch_per_step: examples one `fit` step consumes (one worker's step for
            parameter_server).
        steps_per_epoch: `fit` steps in one epoch.
        examples_per_epoch: the same for every strategy of a comparison.
    """

    global_batch_size: int
    batch_per_step: int
    steps_per_epoch: int
    examples_per_epoch: int


def plan_batching(config: RunConfig, replicas_in_sync: int, num_train_examples: int) -> Batching:
    """Global batch = per-replica batch x replicas; epochs drop the ragged tail.

    Raises:
        ConfigError: when the global batch is larger than the training split.
    """
    from components.core.config import ConfigError

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
    return Batching(global_batch, batch_per_step, examples // batch_per_step, examples)


def check_fits(config: RunConfig, manifest: datasets.Manifest) -> Batching:
    """Checks, before anything is launched, that the shards can feed this run.

    Raises:
        ConfigError: fewer shard files than input pipelines, a split missing,
            or a global batch larger than the training split.
    """
    from components.core.config import ConfigError

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
    return plan_batching(
        config, spec.replicas_in_sync(config.cluster), manifest.split("train").num_examples
    )


def check_replicas(config: RunConfig, replicas_in_sync: int) -> None:
    """Refuses a strategy whose replicas differ from what the config counted.

    The global batch, the learning rate and the run's record all depend on the
    replica count: a cluster that holds another number (a machine with more or
    fewer GPUs than `devices_per_worker`) would train something else than asked.

    Raises:
        ConfigError: saying what the cluster has and what to pass.
    """
    from components.core.config import ConfigError

    expected = config.cluster.spec.replicas_in_sync(config.cluster)
    if replicas_in_sync != expected:
        raise ConfigError(
            f"{config.cluster.strategy} holds {replicas_in_sync} replica(s) in sync on this "
            f"machine, but the run was planned for {expected} "
            f"({config.cluster.devices_per_worker} device(s) per machine): pass "
            "--gpus-per-machine equal to the GPUs of each machine"
        )


def make_learning_rate(
    config: RunConfig,
    batch_per_update: int,
    steps_per_epoch: int,
    base_learning_rate: float | None = None,
):
    """Linear scaling rule with linear warm-up (Goyal et al., 2017).

    Args:
        config: the run (base batch size, warm-up epochs).
        batch_per_update: examples per optimizer update.
        steps_per_epoch: steps of one epoch.
        base_learning_rate: the rate at `training.base_batch_size` (a user's
            optimizer's own rate); None: `training.base_learning_rate`.
    """
    import tf_keras as keras

    t = config.training
    base = t.base_learning_rate if base_learning_rate is None else base_learning_rate
    peak = base * batch_per_update / t.base_batch_size
    warmup_steps = t.warmup_epochs * steps_per_epoch
    if warmup_steps == 0:
        return peak

    @keras.saving.register_keras_serializable(package="strategist")
    class WarmUp(keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self, peak: float, warmup_steps: int):
            self.peak, self.warmup_steps = peak, warmup_steps

        def __call__(self, step):
            import tensorflow as tf

            with on_parameter_server_of(step):
                progress = tf.cast(step + 1, tf.float32) / float(self.warmup_steps)
                return self.peak * tf.minimum(1.0, progress)

        def get_config(self) -> dict[str, Any]:
            return {"peak": self.peak, "warmup_steps": self.warmup_steps}

    return WarmUp(peak, warmup_steps)


def on_parameter_server_of(step):
    """A device scope on the parameter server that holds `step`, else no scope.

    tf-keras computes a learning-rate schedule from the optimizer's step counter
    and assigns the result to a variable every step (`_compute_current_learning_rate`
    in tf_keras/src/optimizers/optimizer.py). Under parameter_server both
    variables live on a parameter server; computed on the worker, the schedule
    costs two transfers per step in series before the update (the counter read
    to the worker, the rate sent back), which the profile in docs/benchmarks.md
    measured. Computed where the counter lives, it costs none.
    """
    import tensorflow as tf

    device = getattr(step, "device", "") or ""
    if isinstance(step, tf.Variable) and "/job:ps/" in device:
        return tf.device(device)
    return contextlib.nullcontext()


class EpochRecorder:
    """Records each epoch's wall seconds, throughput, loss and accuracy.

    Records are kept in `log_path` (beside the BackupAndRestore checkpoint) so a
    resumed run keeps exactly one entry per epoch, and `elapsed_s` continues
    from the last kept epoch (the time lost to a failure is in no epoch; the
    launcher reports it). Its callback must run before `BackupAndRestore`'s:
    an epoch's record is then on disk before its checkpoint, so a failure
    between the two only makes the resumed run redo that epoch, and the redo
    replaces the record. The other order would lose the record of an epoch
    whose checkpoint was saved.

    Args:
        log_path: JSON file of the records (None: kept in memory only).
        examples_per_epoch: examples one epoch trains on.
        epochs: epochs of the whole run.
        verbose: print one line per epoch, and where a resumed run resumes.
        attempt: how many times the cluster was restarted before this attempt;
            stored in each record, so one can see which epochs were redone.
    """

    def __init__(
        self,
        log_path: str | None,
        examples_per_epoch: int,
        epochs: int,
        verbose: bool,
        attempt: int = 0,
    ):
        import tf_keras as keras

        recorder = self

        class _Callback(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                recorder.begin(epoch)

            def on_epoch_end(self, epoch, logs=None):
                recorder.record(epoch, logs or {})

        self.callback = _Callback()
        self.log_path = log_path
        self.examples_per_epoch = examples_per_epoch
        self.epochs = epochs
        self.verbose = verbose
        self.attempt = attempt
        self.records: list[dict[str, float]] = self._load()
        self._epoch_started = time.perf_counter()
        self.first_epoch: int | None = None  # 0-based epoch this attempt started at

    def begin(self, epoch: int) -> None:
        """Called as epoch `epoch` (0-based) starts; reports where a resumed run resumes."""
        if self.first_epoch is None:
            self.first_epoch = epoch
            if epoch > 0 and self.verbose:
                kept = min(len(self.records), epoch)
                print(
                    f"resuming at epoch {epoch + 1}/{self.epochs} from the backup "
                    f"({kept} finished epoch(s) kept, attempt {self.attempt + 1})",
                    flush=True,
                )
        self._epoch_started = time.perf_counter()

    def _load(self) -> list[dict[str, float]]:
        if self.log_path and storage.exists(self.log_path):
            return storage.read_json(self.log_path)
        return []

    def record(self, epoch: int, logs: dict[str, Any]) -> None:
        seconds = time.perf_counter() - self._epoch_started
        del self.records[epoch:]  # an epoch redone after a restart replaces its record
        previous = self.records[-1]["elapsed_s"] if self.records else 0.0
        self.records.append(
            {
                "epoch": epoch + 1,
                "attempt": self.attempt,
                "ended_at": time.time(),
                "seconds": seconds,
                "examples_per_second": self.examples_per_epoch / seconds,
                "loss": float(logs.get("loss", float("nan"))),
                "accuracy": float(logs.get("accuracy", float("nan"))),
                "elapsed_s": previous + seconds,
                # Every metric the model was compiled with (the user's too).
                "metrics": {name: float(value) for name, value in logs.items()},
            }
        )
        if self.log_path:
            storage.write_json(self.log_path, self.records)
        if self.verbose:
            r = self.records[-1]
            values = "  ".join(f"{name} {value:.4f}" for name, value in r["metrics"].items())
            print(
                f"epoch {epoch + 1}/{self.epochs}: {values}  {seconds:.2f}s  "
                f"{r['examples_per_second']:.0f} examples/s",
                flush=True,
            )


def train(config: RunConfig, role: Role, *, restarts: int = 0) -> run_metrics.RunMetrics | None:
    """Trains, exports and evaluates; returns the run's record on the chief, None elsewhere.

    Args:
        config: the resolved run configuration; `config.data.shards_dir` must
            hold shards written by `datasets.shard_dataset`.
        role: this process's role from `TF_CONFIG`.
        restarts: how many times the launcher restarted the cluster before this
            attempt (recorded in the metrics).

    Returns:
        The record written to `metrics.json`, on the chief; None on other tasks.
    """
    startup_s = seconds_since_process_start()
    started = time.perf_counter()
    gpu_names = _gpu_names()
    gpus = len(gpu_names)
    validate_for_machine(config, gpus)
    strategies.configure_devices(config.cluster)
    strategy = strategies.make_strategy(config, role, gpus)
    manifest = datasets.load_manifest(config.data.shards_dir)
    module = models.resolve(config.model)
    replicas = strategy.num_replicas_in_sync
    check_replicas(config, replicas)
    batching = plan_batching(config, replicas, manifest.split("train").num_examples)
    output_dir = config.output_dir if role.is_chief else _scratch_dir(config.output_dir, role)
    backup_dir = config.backup_dir or storage.join(config.output_dir, "backup")
    storage.makedirs(output_dir)

    keras_seed(config)
    xla = xla_scope(config, gpus)
    built = model_build.build_compiled(
        config,
        manifest.input_spec,
        module,
        strategy=strategy,
        xla_scope=xla,
        batch_per_update=batching.batch_per_step,
        steps_per_epoch=batching.steps_per_epoch,
    )
    model = built.model
    recorder = EpochRecorder(
        storage.join(backup_dir, EPOCH_LOG_NAME) if role.is_chief else None,
        batching.examples_per_epoch,
        config.training.epochs,
        verbose=role.is_chief,
        attempt=restarts,
    )
    if role.is_chief:
        print(
            f"training {module.name} ({model.count_params():,} parameters) on "
            f"{manifest.dataset} with {config.cluster.strategy}: {replicas} replica(s) in sync, "
            f"global batch {batching.global_batch_size}, {batching.steps_per_epoch} steps/epoch",
            flush=True,
        )
        for change in built.adjustments:
            print(f"strategist changed: {change}", flush=True)
    fit_started = time.perf_counter()
    _fit(
        model,
        config,
        manifest,
        batching,
        recorder,
        backup_dir,
        tensorboard_log_dir(output_dir),
        module.preprocess,
    )
    fit_ended = time.perf_counter()
    weights_sha256 = _weights_digest(model)
    model_build.uncompile_model_with_xla(model)
    _export(model, output_dir, config)
    exported = time.perf_counter()
    if not role.is_chief:
        _finish_task(config.output_dir, output_dir, role, weights_sha256)
        return None

    # Evaluated in this one process, without the strategy, by a copy compiled as the user chose.
    eval_model = model_build.build_compiled(config, manifest.input_spec, module).model
    eval_model.set_weights(model.get_weights())
    result = evaluation.evaluate(
        eval_model,
        datasets.eval_dataset(
            manifest,
            preprocess=module.preprocess,
            by_name=datasets.inputs_by_name(manifest, model),
        ),
        manifest.input_spec,
    )
    phases = {
        "startup": startup_s,
        "setup": fit_started - started,
        "fit": fit_ended - fit_started,
        # This attempt's epochs; the rest of `fit` is checkpoints and input set-up/teardown.
        "epochs": sum(r["seconds"] for r in recorder.records[recorder.first_epoch or 0 :]),
        "export": exported - fit_ended,
        "evaluate": time.perf_counter() - exported,
    }
    print(format_phases(phases), flush=True)
    metrics = dataclasses.replace(
        _metrics(config, manifest, batching, replicas, recorder.records, result, gpu_names),
        all_reduce=strategies.communication(config, gpus).all_reduce,
        xla_scope=xla,
        phase_seconds=phases,
        restarts=restarts,
        weights_sha256=weights_sha256,
        variable_placement=_variable_placement(model),
        parameters=int(model.count_params()),
        model_module=config.model.module,
        compile_settings=built.compile,
        adjustments=[*batch_adjustments(config, batching, replicas), *built.adjustments],
    )
    storage.write_json(storage.join(config.output_dir, CONFIG_NAME), config.to_dict())
    storage.write_text(
        storage.join(config.output_dir, EVALUATION_PAGE_NAME), evaluation_page.render(result)
    )
    run_metrics.write(storage.join(config.output_dir, METRICS_NAME), metrics)
    _write_task_summary(config.output_dir, role, weights_sha256)
    storage.remove_tree(backup_dir)  # finished: nothing to resume
    return metrics


def xla_scope(config: RunConfig, gpus: int) -> str | None:
    """What XLA compiles in this run on machines with `gpus` GPUs (None: no `--jit-compile`)."""
    return config.cluster.spec.xla_scope(gpus) if config.training.jit_compile else None


def keras_seed(config: RunConfig) -> None:
    """Seeds weights and shuffling before the model is built (`model_build` sets the
    precision policy, which layers take when they are built)."""
    import tf_keras as keras

    keras.utils.set_random_seed(config.training.seed)


def batch_adjustments(config: RunConfig, batching: Batching, replicas: int) -> list[str]:
    """What Strategist chose of the batch, in words, for the record."""
    per_replica = config.training.per_replica_batch_size
    return [
        f"batch {per_replica} per replica x {replicas} replica(s) in sync = "
        f"{batching.batch_per_step} per step (global batch {batching.global_batch_size})"
    ]


def evaluate_beside(config: RunConfig) -> list[dict[str, Any]]:
    """The evaluator task: evaluates the chief's epoch checkpoints on the test split.

    Builds no strategy and writes only below `<output_dir>/evaluator/`; see
    `components.core.sidecar`.

    Returns:
        One result per evaluated checkpoint.
    """
    manifest = datasets.load_manifest(config.data.shards_dir)
    module = models.resolve(config.model)
    model = model_build.build_compiled(config, manifest.input_spec, module).model
    by_name = datasets.inputs_by_name(manifest, model)
    return sidecar.evaluate_checkpoints(
        config,
        model,
        datasets.eval_dataset(manifest, preprocess=module.preprocess, by_name=by_name),
    )


def _fit(
    model,
    config: RunConfig,
    manifest,
    batching: Batching,
    recorder,
    backup_dir: str,
    log_dir: str,
    preprocess=None,
):
    """`model.fit` over the shards, resuming from and checkpointing to `backup_dir`.

    TensorBoard logs go to `log_dir` (`tensorboard_callback`); each example
    goes through the model module's `preprocess`.
    """
    import tf_keras as keras

    dataset = keras.utils.experimental.DatasetCreator(
        datasets.make_dataset_fn(
            manifest,
            "train",
            batching.batch_per_step,
            seed=config.training.seed,
            per_worker_order=config.cluster.spec.uses_ps,
            preprocess=preprocess,
            by_name=datasets.inputs_by_name(manifest, model),
        )
    )
    storage.makedirs(backup_dir)
    keep_input_iterators(model)
    # The record first, then the checkpoint (see EpochRecorder). TensorFlow writes the
    # checkpoints and logs itself: through `local_view` under a rehearsal. The checkpoint
    # outlives `fit` (Keras would delete it at its end): an interruption during export or
    # evaluation resumes after the last epoch; `train` removes it once all is written.
    backup = keras.callbacks.BackupAndRestore(
        storage.local_view(backup_dir), delete_checkpoint=False
    )
    callbacks = [recorder.callback, backup]
    if config.cluster.evaluator:
        callbacks.append(sidecar.checkpoint_callback(config.output_dir))
    callbacks.append(
        tensorboard_callback(storage.local_view(log_dir), recorder, config.training.profile_batches)
    )
    model.fit(
        dataset,
        epochs=config.training.epochs,
        steps_per_epoch=batching.steps_per_epoch,
        callbacks=callbacks,
        verbose=0,
    )


def tensorboard_log_dir(output_dir: str) -> str:
    """Where a task writes TensorBoard logs.

    `AIP_TENSORBOARD_LOG_DIR` when Vertex AI sets it (a job with a TensorBoard
    instance), written through the job's gcsfuse mount (`/gcs/...`) like every
    other path of a Vertex AI run; otherwise `output_dir/tensorboard`. In a
    multi-worker cluster Keras lets only the chief keep what it writes there.

    Args:
        output_dir: this task's output folder (the chief's is the run's).
    """
    from_vertex = os.environ.get(TENSORBOARD_ENV)
    if from_vertex:
        return storage_paths.to_gcsfuse(from_vertex)
    return storage.join(output_dir, TENSORBOARD_DIR_NAME)


def tensorboard_callback(
    log_dir: str, recorder: EpochRecorder, profile_batches: tuple[int, int] | None = None
):
    """A Keras TensorBoard callback writing each epoch's scalars to `log_dir`.

    Scalars: loss, accuracy, learning rate, examples per second and seconds of
    the epoch (the last two from `recorder`, whose callback runs first). No
    graph, and a profiler trace only of `profile_batches` (first, last step):
    both would cost every run time.
    """
    import tf_keras as keras

    class _TensorBoard(keras.callbacks.TensorBoard):
        def on_epoch_end(self, epoch, logs=None):
            logs = dict(logs or {})
            if len(recorder.records) > epoch:
                record = recorder.records[epoch]
                logs["examples_per_second"] = record["examples_per_second"]
                logs["seconds"] = record["seconds"]
            # A constant rate; a schedule's current value is added by Keras itself.
            with contextlib.suppress(TypeError, ValueError):
                logs["learning_rate"] = float(self.model.optimizer.learning_rate)
            super().on_epoch_end(epoch, logs)

    return _TensorBoard(
        log_dir, write_graph=False, profile_batch=profile_batches or 0, update_freq="epoch"
    )


def _finish_task(run_output_dir: str, scratch_dir: str, role: Role, weights_sha256: str) -> None:
    """A non-chief task's end: its weights digest recorded, its scratch export removed."""
    _write_task_summary(run_output_dir, role, weights_sha256)
    storage.remove_tree(scratch_dir)
    storage.remove_empty_dir(os.path.dirname(scratch_dir))  # the last task out removes it


def _metrics(
    config, manifest, batching, replicas, records, result, gpu_names
) -> run_metrics.RunMetrics:
    """The run's record from its plan, its epochs and its evaluation."""
    seconds = [r["seconds"] for r in records]
    throughput = [r["examples_per_second"] for r in records]
    steady = throughput[1:] or throughput  # epoch 1 includes tracing and warm-up
    history = {"loss": [r["loss"] for r in records]}
    for name in records[-1].get("metrics", {"accuracy": None}) if records else []:
        history[name] = [r.get("metrics", r).get(name, float("nan")) for r in records]
    return run_metrics.RunMetrics(
        strategy=config.cluster.strategy,
        model=config.model.name,
        dataset=manifest.dataset,
        dataset_version=manifest.version,
        data_fingerprint=datasets.manifest_sha256(manifest),
        num_replicas=config.cluster.num_replicas,
        replicas_in_sync=replicas,
        workers=config.cluster.workers,
        ps=config.cluster.ps,
        devices_per_worker=config.cluster.devices_per_worker,
        per_replica_batch_size=config.training.per_replica_batch_size,
        global_batch_size=batching.global_batch_size,
        epochs=config.training.epochs,
        steps_per_epoch=batching.steps_per_epoch,
        examples_per_epoch=batching.examples_per_epoch,
        epoch_seconds=seconds,
        epoch_examples_per_second=throughput,
        examples_per_second=statistics.median(steady),
        wall_seconds=sum(seconds),
        elapsed_at_epoch_end=[r["elapsed_s"] for r in records],
        # Which attempt (0 = first start, k = after k cluster restarts) trained each epoch.
        epoch_attempts=[r.get("attempt", 0) for r in records],
        history=history,
        task=result.task,
        eval_accuracy=result.accuracy,
        eval_loss=result.loss,
        eval_metrics=result.metrics,
        confusion_matrix=result.confusion_matrix,
        eval_examples=result.num_examples,
        eval_points=[list(point) for point in result.points],
        hardware=run_metrics.detect_hardware(config.cluster, gpu_names),
        precision=config.training.precision,
        jit_compile=config.training.jit_compile,
        steps_per_execution=config.training.steps_per_execution,
        run_config=config.to_dict(),
    )


def _gpu_names() -> list[str]:
    """Names of the GPUs TensorFlow sees in this process (`NVIDIA A100-SXM4-40GB`...)."""
    import tensorflow as tf

    return [
        tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
        for gpu in tf.config.list_physical_devices("GPU")
    ]


def keep_input_iterators(model) -> list[Any]:
    """Keeps the input iterators `fit` creates alive after it returns; returns them.

    Destroying a tf.data iterator waits for its autotuning thread, and in
    TensorFlow 2.21 that thread can sleep through the cancellation for the rest
    of its 10 s optimisation period; a distributed iterator holds several such
    iterators (one per device besides the host's). At the end of `fit` that
    stalled a quarter of local multi-worker runs by 10-40 s (docs/benchmarks.md).
    Kept here, they are never torn down: the trainer process ends with
    `os._exit` once everything is written.

    Wraps `make_train_function` (Keras's documented hook) on this model, so the
    function `fit` builds, after it has set up a ClusterCoordinator for
    ParameterServerStrategy, records the iterator it is called with.
    """
    kept: list[Any] = []
    build = model.make_train_function

    def make_train_function(force: bool = False):
        train_step = build(force=force)
        if getattr(train_step, "keeps_input_iterators", False):
            return train_step  # Keras's cache: already wrapped

        def train_function(iterator):
            if not any(iterator is known for known in kept):
                kept.append(iterator)
            return train_step(iterator)

        train_function.keeps_input_iterators = True
        model.train_function = train_function
        return train_function

    model.make_train_function = make_train_function
    return kept


def seconds_since_process_start() -> float | None:
    """Seconds since this process started (interpreter, imports, TensorFlow), from /proc.

    Returns None where /proc is not there (not Linux).
    """
    try:
        with open("/proc/self/stat") as handle:
            # Field 22 (after the parenthesised command name) is the start time in ticks.
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime_s = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime_s - start_ticks / os.sysconf("SC_CLK_TCK"))


def format_phases(phases: dict[str, float | None]) -> str:
    """One line saying where a training process's time went."""

    def seconds(name: str) -> str:
        value = phases.get(name)
        return "?" if value is None else f"{value:.1f}s"

    return (
        f"time: start-up {seconds('startup')}, set-up {seconds('setup')}, fit {seconds('fit')} "
        f"({seconds('epochs')} in epochs), export {seconds('export')}, "
        f"evaluation {seconds('evaluate')}"
    )


def _scratch_dir(output_dir: str, role: Role) -> str:
    """Non-chief tasks must still write (collective saves), but not where the chief does."""
    return storage.join(output_dir, "_scratch", role.name)


def _export(model, output_dir: str, config: RunConfig) -> None:
    """Saves the model as a SavedModel, atomically, with the run config in `assets.extra/`.

    Saved into a local folder first, then published by `storage.staged_tree`:
    renamed into place on a local disk, uploaded file by file with its marker
    last on Cloud Storage and gcsfuse (which refuses folder renames). The run
    config says which model module built it, so an evaluation elsewhere
    compiles it with the same loss and metrics (`saved_run_config`).
    """
    with storage.staged_tree(storage.join(output_dir, MODEL_DIR_NAME)) as staging:
        # The serving model needs no optimizer (nor its warm-up schedule class).
        model.save(staging, save_format="tf", include_optimizer=False)
        # assets.extra: the SavedModel folder's place for files its loaders ignore.
        storage.write_json(storage.join(staging, SAVED_RUN_CONFIG), config.to_dict())


def saved_run_config(model_dir: str) -> dict[str, Any] | None:
    """The run config exported beside a SavedModel (None for models exported without one)."""
    try:
        return storage.read_json(storage.join(model_dir, SAVED_RUN_CONFIG))
    except (OSError, ValueError):
        return None


def _weights_digest(model) -> str:
    digest = hashlib.sha256()
    for weights in model.get_weights():
        digest.update(weights.tobytes())
    return digest.hexdigest()


def _variable_placement(model) -> dict[str, int]:
    """How many variable shards live on each task (`/job:ps/replica:0/task:0` ...)."""
    placement: Counter[str] = Counter()
    for variable in model.trainable_variables:
        for shard in getattr(variable, "variables", [variable]):
            device = shard.device or "unplaced"
            placement[device.split("/device:")[0]] += 1
    return dict(sorted(placement.items()))


def _write_task_summary(output_dir: str, role: Role, weights_sha256: str) -> None:
    tasks_dir = storage.join(output_dir, "tasks")
    storage.makedirs(tasks_dir)
    storage.write_json(
        storage.join(tasks_dir, f"{role.name}.json"),
        {"role": role.name, "weights_sha256": weights_sha256},
    )
