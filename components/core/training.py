"""`train(config, role)`: Keras `fit` under any `tf.distribute` strategy, measured per epoch.

Keras 2 (`tf_keras`) is used: Keras 3's `fit` fails under MultiWorkerMirrored
and ParameterServer strategies. One code path serves every
strategy: a `DatasetCreator` over the shard reader, `steps_per_epoch` (which
ParameterServerStrategy requires) so every strategy sees the same examples per
epoch, and `BackupAndRestore` so a restarted cluster resumes from the last
checkpoint (each epoch's end, every `--checkpoint-every` steps, and the
preemption notice: `preemption`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import statistics
import time
from collections import Counter
from typing import Any

from components.core import (
    datasets,
    divergence,
    evaluation,
    evaluation_page,
    model_build,
    model_export,
    models,
    module_callbacks,
    preemption,
    run_metrics,
    sidecar,
    storage,
    strategies,
)
from components.core.batching import Batching, batch_adjustments, check_replicas, plan_batching
from components.core.config import RunConfig, validate_for_machine
from components.core.epoch_records import (
    EPOCH_LOG_NAME,
    EpochRecorder,
    tensorboard_callback,
    tensorboard_log_dir,
)
from components.core.fit_inputs import fit_inputs
from components.core.strategies import Role

METRICS_NAME = "metrics.json"
CONFIG_NAME = "config.json"
# The test metrics as a page; for a regression with its predicted-vs-true plot.
EVALUATION_PAGE_NAME = "evaluation.html"


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
    batching = plan_batching(
        config,
        replicas,
        datasets.training_examples(manifest, config.training.validation_fraction),
    )
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
        steps_per_epoch=batching.steps_per_data_epoch,
    )
    model = built.model
    recorder = EpochRecorder(
        storage.join(backup_dir, EPOCH_LOG_NAME) if role.is_chief else None,
        batching.examples_per_epoch,
        batching.epochs,
        verbose=role.is_chief,
        attempt=restarts,
    )
    if role.is_chief:
        print(
            f"training {module.name} ({model.count_params():,} parameters) on "
            f"{manifest.dataset} with {config.cluster.strategy}: {replicas} replica(s) in sync, "
            f"global batch {batching.global_batch_size}, {_steps_plan(batching)}",
            flush=True,
        )
        for change in built.adjustments:
            print(f"strategist changed: {change}", flush=True)
    fit_started = time.perf_counter()
    backup = _fit(
        model,
        config,
        manifest,
        batching,
        recorder,
        backup_dir,
        tensorboard_log_dir(output_dir),
        module.preprocess,
        module_callbacks.module_callbacks(
            module, manifest.input_spec, validates=bool(config.training.validation_fraction)
        ),
        role=role,
        attempt=restarts,
    )
    fit_ended = time.perf_counter()
    # Read once, while every task is still here: under multi_worker_mirrored reading a
    # sync-on-read variable (BatchNormalization's moving statistics) is an all-reduce that
    # every task must join, and the other tasks leave once they have exported.
    weights = model.get_weights()
    weights_sha256 = _weights_digest(weights)
    model_build.uncompile_model_with_xla(model)
    model_export.export_model(
        model,
        output_dir,
        config,
        serving=model_export.raw_serving(model, module.preprocess, manifest.input_spec),
    )
    exported = time.perf_counter()
    if not role.is_chief:
        _finish_task(config.output_dir, output_dir, role, weights_sha256)
        return None

    # Evaluated in this one process, without the strategy, by a copy compiled as the user chose.
    eval_model = model_build.build_compiled(config, manifest.input_spec, module).model
    eval_model.set_weights(weights)
    result = evaluation.evaluate(
        eval_model,
        datasets.eval_dataset(
            manifest,
            preprocess=module.preprocess,
            by_name=datasets.inputs_by_name(manifest, model),
        ),
        manifest.input_spec,
    )
    divergence.check_evaluation({**result.metrics, "loss": result.loss}, batching.epochs)
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
    resumes = preemption.resumes(backup_dir)
    metrics = dataclasses.replace(
        _metrics(config, manifest, batching, replicas, recorder.records, result, gpu_names),
        optimizer_steps=int(model.optimizer.iterations.numpy()),
        checkpoint_every=config.training.checkpoint_every,
        checkpoint_steps=backup.checkpoint_steps,
        resumes=resumes,
        steps_trained_twice=sum(r["steps_trained_twice"] for r in resumes),
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
    module_callbacks=(),
    *,
    role: Role,
    attempt: int = 0,
):
    """`model.fit` over the shards, resuming from and checkpointing to `backup_dir`.

    TensorBoard logs go to `log_dir` (`tensorboard_callback`); each example
    goes through the model module's `preprocess`; the module's own callbacks
    (`module_callbacks`) run after Strategist's. The checkpoint is
    written as `--checkpoint-every` says and on the preemption notice (`preemption`).

    Returns:
        The checkpoint callback (`checkpoint_steps`: the step interval that ran).
    """
    storage.makedirs(backup_dir)
    keep_input_iterators(model)
    # The record first, then the checkpoint (see EpochRecorder). TensorFlow writes the
    # checkpoints and logs itself: through `local_view` under a rehearsal. The checkpoint
    # outlives `fit` (Keras would delete it at its end): an interruption during export or
    # evaluation resumes after the last epoch; `train` removes it once all is written.
    backup = preemption.backup_callback(
        backup_dir,
        config.training.checkpoint_interval,
        steps_per_epoch=batching.steps_per_epoch,
        strategy=model.distribute_strategy,
        is_chief=role.is_chief,
        attempt=attempt,
        verbose=role.is_chief,
    )
    recorder.backup = backup
    # First: a diverged epoch is neither recorded nor checkpointed (`divergence`).
    callbacks = [
        divergence.stop_callback(config.training.base_learning_rate),
        recorder.callback,
        backup,
    ]
    if config.cluster.evaluator:
        callbacks.append(sidecar.checkpoint_callback(config.output_dir))
    callbacks.append(
        tensorboard_callback(storage.local_view(log_dir), recorder, config.training.profile_batches)
    )
    callbacks.extend(module_callbacks)
    model.fit(
        **fit_inputs(model, config, manifest, batching, preprocess),
        epochs=batching.epochs,  # a pilot's windows: the stop is `fit`'s own
        steps_per_epoch=batching.steps_per_epoch,
        callbacks=callbacks,
        verbose=0,
    )
    return backup


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
    steady = throughput[1:] or throughput  # epoch 1 (a pilot's warm-up window) holds tracing
    history = {"loss": [r["loss"] for r in records]}
    for name in records[-1].get("metrics", {"accuracy": None}) if records else []:
        history[name] = [r.get("metrics", r).get(name) for r in records]
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
        gpus_per_machine=config.cluster.gpus_per_machine,
        per_replica_batch_size=config.training.per_replica_batch_size,
        global_batch_size=batching.global_batch_size,
        epochs=batching.epochs,
        steps_per_epoch=batching.steps_per_epoch,
        examples_per_epoch=batching.examples_per_epoch,
        max_steps=batching.max_steps,
        warmup_steps=batching.warmup_steps,
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


def _steps_plan(batching: Batching) -> str:
    """`25 steps/epoch`, or a pilot's `pilot: 20 warm-up steps, then 100 in 5 windows of 20`."""
    if not batching.max_steps:
        return f"{batching.steps_per_epoch} steps/epoch"
    return (
        f"pilot: {batching.warmup_steps} warm-up steps, then {batching.max_steps} in "
        f"{batching.epochs - 1} windows of {batching.steps_per_epoch}"
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


def _weights_digest(weights: list[Any]) -> str:
    """A fingerprint of a model's weights (`model.get_weights()`), to compare tasks."""
    digest = hashlib.sha256()
    for array in weights:
        digest.update(array.tobytes())
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
