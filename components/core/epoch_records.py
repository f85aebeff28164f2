"""Epoch records: each epoch's time, throughput and metrics, kept across restarts; TensorBoard."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from components.core import storage, storage_paths

# Epoch records survive a restart here, beside the BackupAndRestore checkpoint.
EPOCH_LOG_NAME = "epochs.json"
# TensorBoard logs: OUTPUT/tensorboard, or where Vertex AI asks a job with a TensorBoard
# instance (`--tensorboard`) to write them.
TENSORBOARD_DIR_NAME = "tensorboard"
TENSORBOARD_ENV = "AIP_TENSORBOARD_LOG_DIR"


class EpochRecorder:
    """Records each epoch's wall seconds, throughput, loss and accuracy.

    An epoch's seconds are its training's: the validation `fit` runs at its end
    is in `validation_seconds`.

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

            # The validation `fit` runs at an epoch's end (`--validation-fraction`) is
            # timed apart: an epoch's seconds and throughput are its training's.
            def on_test_begin(self, logs=None):
                recorder.validating = time.perf_counter()

            def on_test_end(self, logs=None):
                recorder.validation_seconds += time.perf_counter() - recorder.validating

        self.callback = _Callback()
        self.log_path = log_path
        self.examples_per_epoch = examples_per_epoch
        self.epochs = epochs
        self.verbose = verbose
        self.attempt = attempt
        self.records: list[dict[str, float]] = self._load()
        self._epoch_started = time.perf_counter()
        self.first_epoch: int | None = None  # 0-based epoch this attempt started at
        # The run's checkpoint callback (`preemption.backup_callback`): where this attempt
        # resumed, so an epoch it finishes is measured on the steps it trained.
        self.backup: Any = None
        self._steps_begun_at = 0
        self.validating = 0.0  # when this epoch's validation began
        self.validation_seconds = 0.0  # this epoch's validation

    def begin(self, epoch: int) -> None:
        """Called as epoch `epoch` (0-based) starts; reports where a resumed run resumes."""
        steps_per_epoch = getattr(self.backup, "steps_per_epoch", 0)
        resumed_at = getattr(self.backup, "resumed_at_step", 0)
        self._steps_begun_at = max(0, resumed_at - epoch * steps_per_epoch)
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
        self.validation_seconds = 0.0

    def _load(self) -> list[dict[str, float]]:
        if self.log_path and storage.exists(self.log_path):
            return storage.read_json(self.log_path)
        return []

    def record(self, epoch: int, logs: dict[str, Any]) -> None:
        seconds = time.perf_counter() - self._epoch_started - self.validation_seconds
        del self.records[epoch:]  # an epoch redone after a restart replaces its record
        previous = self.records[-1]["elapsed_s"] if self.records else 0.0
        steps_per_epoch = getattr(self.backup, "steps_per_epoch", 0)
        # An epoch resumed mid-way trained only its remaining steps in this attempt.
        share = 1.0 - self._steps_begun_at / steps_per_epoch if steps_per_epoch else 1.0
        self.records.append(
            {
                "epoch": epoch + 1,
                "attempt": self.attempt,
                "ended_at": time.time(),
                "seconds": seconds,
                "resumed_at_step_of_epoch": self._steps_begun_at,
                "validation_seconds": self.validation_seconds,
                "examples_per_second": self.examples_per_epoch * share / seconds,
                "loss": float(logs["loss"]) if "loss" in logs else None,
                # None where the model has no accuracy (a regression).
                "accuracy": float(logs["accuracy"]) if "accuracy" in logs else None,
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
