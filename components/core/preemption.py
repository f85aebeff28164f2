"""Step-level checkpoints, and a checkpoint on the preemption notice, for `model.fit`.

`backup_callback` returns a `BackupAndRestore` that:

- writes the checkpoint every `--checkpoint-every` steps (counted from the run's
  start, so every task of a synchronous cluster agrees on the step) and at each
  epoch's end, after the epoch's record (see `training.EpochRecorder`);
- saves when the machine is about to go, then ends the task with
  `PREEMPTED_EXIT_CODE` so the platform restarts it: SIGTERM (Kubernetes, a
  local kill, a stopping VM) or, on Compute Engine, the metadata server's
  preemption or maintenance notice;
- records where each resumed attempt picked up and how many steps it trains
  again (`resumes.json` beside the checkpoint, `RunMetrics.resumes`).

What tf-keras 2.21 and TensorFlow 2.21 do, from their source (tf-keras v2.21.0
`tf_keras/src/callbacks.py`, `tf_keras/src/distribute/worker_training_state.py`;
TensorFlow v2.21.0 `tensorflow/python/distribute/failure_handling/failure_handling.py`
and `failure_handling_util.py`):

- `BackupAndRestore(save_freq=N)` saves every N calls of `on_train_batch_end`
  (one per `steps_per_execution` steps), counted from the attempt's start and
  never at an epoch's end; the batch index it saves is the one
  `on_train_batch_begin` saw (the first step of an execution). A restored
  `(epoch, batch)` resumes `fit` at `batch + 1` of that epoch, or at the next
  epoch when `batch` is its last step. Its batch hooks return at once under
  `ParameterServerStrategy`: there it saves nothing mid-epoch.
- `save_before_preemption=True` only acts where `support_on_demand_checkpoint_callback`
  holds: MultiWorkerMirroredStrategy on Google Cloud. Elsewhere it is ignored.
- `PreemptionCheckpointHandler` refuses a cluster with parameter servers
  (NotImplementedError), and on a Compute Engine CPU or TPU VM it only logs a
  warning and watches nothing. With a `termination_watcher_fn` it polls that
  function once a second in a thread; without one, off Google Cloud, it takes
  SIGTERM (at once). On a notice the worker that got it publishes "save after step k+1"
  through the coordination service, every worker saves at that step, and
  `exit_fn` runs (Google Cloud's default: `sys.exit(143)`).
- Keras does not restore the input position: a resumed epoch draws its
  remaining steps from a fresh iterator over the input.

So: the step counting and the epoch-end save are done here for every strategy;
MultiWorkerMirroredStrategy (several workers that must agree on the step to save
at) takes TensorFlow's handler wherever it watches; `mirrored`, `one_device`,
the parameter-server coordinator, and MultiWorkerMirroredStrategy where the
handler would watch nothing, save on the notice here, each alone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import urllib.request
import uuid
from typing import Any

from components.core import storage
from components.core.checkpoint_interval import CheckpointInterval

# The exit code of a task that saved on the preemption notice: 128 + SIGTERM, what
# TensorFlow's Google Cloud handler exits with (failure_handling_util._RESTARTABLE_EXIT_CODE)
# and a code the Kubeflow training operator's ExitCode policy restarts (kubeflow/
# training-operator pkg/util/train/train_util.go IsRetryableExitCode: 130, 137, 143, 138).
PREEMPTED_EXIT_CODE = 143
# A Kubernetes pod's time from SIGTERM to SIGKILL (Kubernetes' default: 30 s): the step
# in flight, every worker's agreement on the step to save at, and the save itself.
TERMINATION_GRACE_S = 120
PROGRESS_NAME = "progress.json"
RESUMES_NAME = "resumes.json"
# Steps of an attempt timed to turn a duration into steps: after the first two
# (tracing), ten steps.
TIMED_FROM_STEP = 2
TIMED_STEPS = 10
# How often the chief notes the step it reached (to count what a restart redoes):
# often enough to be within a second of steps, rarely enough to cost nothing.
PROGRESS_EVERY_S = 1.0
PROGRESS_EVERY_REMOTE_S = 30.0
_GCE_METADATA = "http://metadata.google.internal/computeMetadata/v1/instance/"


class PreemptionNotice:
    """Whether this machine has been told it is going: SIGTERM, or Compute Engine's notice.

    Installs a SIGTERM handler (main thread only) that only notes the signal;
    on Compute Engine a daemon thread also polls the metadata server's
    `preempted` (Spot) and `maintenance-event` once a second.
    """

    def __init__(self, on_gcp: bool = False):
        self._event = threading.Event()
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, lambda signum, frame: self._event.set())
        if on_gcp:
            threading.Thread(target=self._poll_gce, daemon=True, name="gce-notice").start()

    def uninstall(self) -> None:
        """Gives SIGTERM back to the handler it had (after `fit`: export and evaluation)."""
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def given(self) -> bool:
        """True once the notice came (TensorFlow's `termination_watcher_fn`)."""
        return self._event.is_set()

    def _poll_gce(self) -> None:
        while not self._event.is_set():
            if gce_notice():
                self._event.set()
                return
            time.sleep(1.0)


def gce_notice() -> bool:
    """Whether Compute Engine says this VM is preempted or will stop for maintenance."""

    def read(key: str) -> str:
        request = urllib.request.Request(_GCE_METADATA + key, headers={"Metadata-Flavor": "Google"})
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.read().decode()

    try:
        return read("preempted") == "TRUE" or (
            read("maintenance-event") == "TERMINATE_ON_HOST_MAINTENANCE"
        )
    except OSError:
        return False


def backup_callback(
    backup_dir: str,
    interval: CheckpointInterval,
    *,
    steps_per_epoch: int,
    strategy,
    is_chief: bool,
    attempt: int,
    verbose: bool = False,
):
    """The run's `BackupAndRestore`, checkpointing at `interval` and on the notice.

    Args:
        backup_dir: the checkpoint's folder (TensorFlow opens its `local_view`).
        interval: `--checkpoint-every`.
        steps_per_epoch: `fit` steps of one epoch.
        strategy: the run's `tf.distribute` strategy.
        is_chief: whether this task writes the run's records.
        attempt: how many restarts came before this attempt.
        verbose: print where a resumed run resumes and each interval it measures.
    """
    import tensorflow as tf
    import tf_keras as keras

    uses_ps = isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)
    token = uuid.uuid4().hex  # this attempt's, told from the attempt before it
    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and (
        strategy.extended._num_workers > 1  # noqa: SLF001  (no public count of workers)
    )

    class Backup(keras.callbacks.BackupAndRestore):
        """`BackupAndRestore` with the step counting, epoch-end save and notice above."""

        def __init__(self):
            # An int save_freq makes Keras restore at (epoch, batch + 1); the saves
            # themselves are ours (`_implements_train_batch_hooks`, `on_epoch_end`).
            super().__init__(
                storage.local_view(backup_dir),
                save_freq=interval.steps or steps_per_epoch,
                delete_checkpoint=False,
            )
            self.checkpoint_steps = interval.steps
            self.steps_per_epoch = steps_per_epoch
            self.resumed_at_step = 0
            self.step = 0  # steps completed since the run's start, all attempts
            self._attempt_steps = 0
            self._timer: float | None = None
            self._last_progress = 0.0
            self._notice: PreemptionNotice | None = None
            self._handler = None

        def _implements_train_batch_hooks(self):
            return True

        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)  # restores the checkpoint
            state = self._training_state
            epoch = int(state._ckpt_saved_epoch.numpy())  # noqa: SLF001
            batch = int(state._ckpt_saved_batch.numpy())  # noqa: SLF001
            if batch >= 0:
                self.resumed_at_step = epoch * steps_per_epoch + batch + 1
            self.step = self.resumed_at_step
            on_gcp = _on_gcp()
            self._notice = PreemptionNotice(on_gcp=on_gcp)
            if multi_worker:
                self._handler = _tensorflow_handler(
                    strategy, state, self._notice, self._exit, on_gcp
                )
                if self._handler is None:  # one worker cannot save alone: a collective save
                    self._notice.uninstall()
            if is_chief:
                _note_resume(
                    backup_dir, attempt, token, self.resumed_at_step, steps_per_epoch, verbose
                )
                self._write_progress("running")

        def on_train_batch_begin(self, batch, logs=None):
            pass  # the batch is set as a checkpoint is written (`_save`)

        def on_train_batch_end(self, batch, logs=None):
            # tf-keras passes the index of the execution's last step (its `end_step`).
            before = self.step
            self.step = int(self._current_epoch) * steps_per_epoch + int(batch) + 1
            self._attempt_steps += self.step - before
            self._measure()
            if self._handler is not None:
                if self._handler._received_checkpoint_step.is_set():  # noqa: SLF001
                    self._set_position(self.step)  # the handler may save at this step
                self._handler._run_counter += 1  # noqa: SLF001  (Keras's backup_if_preempted)
                self._handler._check_preemption_and_maybe_checkpoint()  # noqa: SLF001
            elif self._notice.given() and not multi_worker:
                self._save(self.step)
                self._exit()
            at_epoch_end = self.step % steps_per_epoch == 0
            n = self.checkpoint_steps
            if n and not at_epoch_end and self.step // n > before // n:
                self._save(self.step)
            if is_chief and time.monotonic() - self._last_progress > _progress_every(backup_dir):
                self._write_progress("running")

        def on_train_end(self, logs=None):
            super().on_train_end(logs)
            given = self._notice.given()
            self._notice.uninstall()
            if given:  # came after the last step: end as the signal asked
                os.kill(os.getpid(), signal.SIGTERM)

        def on_epoch_end(self, epoch, logs=None):
            # After the epoch's record (its callback runs first): see EpochRecorder.
            self._save((epoch + 1) * steps_per_epoch)

        def _set_position(self, step: int) -> None:
            state = self._training_state
            state._ckpt_saved_epoch.assign((step - 1) // steps_per_epoch)  # noqa: SLF001
            state._ckpt_saved_batch.assign((step - 1) % steps_per_epoch)  # noqa: SLF001

        def _save(self, step: int) -> None:
            if uses_ps:  # every step scheduled so far is in the variables saved
                self.model._cluster_coordinator.join()  # noqa: SLF001
            self._set_position(step)
            self._training_state.back_up(epoch=(step - 1) // steps_per_epoch)

        def _measure(self) -> None:
            """Turns a duration into steps once ten steps of this attempt are timed."""
            if interval.seconds is None or self.checkpoint_steps is not None:
                return
            if self._attempt_steps >= TIMED_FROM_STEP and self._timer is None:
                self._timer = time.perf_counter()
                self._timed_from = self._attempt_steps
            elif self._timer is not None and self._attempt_steps >= self._timed_from + TIMED_STEPS:
                seconds = (time.perf_counter() - self._timer) / (
                    self._attempt_steps - self._timed_from
                )
                seconds = _agreed(strategy, seconds) if multi_worker else seconds
                self.checkpoint_steps = interval.steps_for(seconds)
                if verbose:
                    print(
                        f"checkpoint every {self.checkpoint_steps} steps "
                        f"({interval.seconds:g} s at {seconds * 1000:.1f} ms a step)",
                        flush=True,
                    )

        def _write_progress(self, how: str) -> None:
            self._last_progress = time.monotonic()
            storage.write_json(
                storage.join(backup_dir, PROGRESS_NAME),
                {"attempt": attempt, "token": token, "step": self.step, "how": how},
            )

        def _exit(self) -> None:
            """Ends the task after the notice's checkpoint, so the platform restarts it."""
            if is_chief:
                self._write_progress("preempted")
            print(
                f"preemption notice: checkpoint saved at step {self.step}; exiting "
                f"{PREEMPTED_EXIT_CODE} to be restarted",
                flush=True,
            )
            sys.stderr.flush()
            if multi_worker:  # every worker waits here until the chief has written its files
                _agreed(strategy, 0.0)
            os._exit(PREEMPTED_EXIT_CODE)  # no teardown: the checkpoint is written

    return Backup()


def _progress_every(backup_dir: str) -> float:
    return PROGRESS_EVERY_REMOTE_S if storage.is_remote(backup_dir) else PROGRESS_EVERY_S


def _on_gcp() -> bool:
    from tensorflow.python.distribute.failure_handling import failure_handling_util

    return failure_handling_util.on_gcp()


def _agreed(strategy, seconds: float) -> float:
    """The mean of every worker's measured step time: every worker then saves at the same step."""
    import tensorflow as tf

    value = strategy.run(lambda: tf.constant(seconds, tf.float64))
    return float(strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None))


def _tensorflow_handler(strategy, state, notice: PreemptionNotice, exit_fn, on_gcp: bool):
    """TensorFlow's handler on a multi-worker cluster, or None where it would watch nothing.

    Built as tf-keras's `WorkerTrainingState` builds it for `save_before_preemption`,
    with this notice and exit. The handler restores from the manager it is given
    (on a non-chief worker, that worker's scratch folder), so the run's checkpoint
    is read again, now with the handler's step counter in it, and the counter set
    from it: every worker then counts the same steps.
    """
    import tensorflow as tf
    from tensorflow.python.distribute.failure_handling import failure_handling_util

    platform = failure_handling_util.detect_platform()
    if platform in (
        failure_handling_util.PlatformDevice.GCE_CPU,
        failure_handling_util.PlatformDevice.GCE_TPU,
    ):
        print(
            "preemption notice: TensorFlow's handler does not watch a Compute Engine CPU "
            "VM; a preemption here resumes from the last step checkpoint",
            flush=True,
        )
        return None
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver,
        state.write_checkpoint_manager,
        # Off Google Cloud, no watcher: the handler takes SIGTERM itself, at once (a
        # watcher is polled once a second). On it, ours: TensorFlow's watches only
        # `maintenance-event`, not a Spot VM's `preempted`, and no SIGTERM.
        termination_config=tf.distribute.experimental.TerminationConfig(
            termination_watcher_fn=notice.given if on_gcp else None,
            exit_fn=exit_fn,
            grace_period=0,
        ),
    )
    handler._read_checkpoint_manager = state.read_checkpoint_manager  # noqa: SLF001
    state.read_checkpoint_manager.restore_or_initialize()
    handler._run_counter = int(handler._checkpointed_runs.numpy())  # noqa: SLF001
    state.preemption_handler = handler
    return handler


def _note_resume(
    backup_dir: str,
    attempt: int,
    token: str,
    resumed_at_step: int,
    steps_per_epoch: int,
    verbose: bool,
) -> None:
    """Appends this attempt's resume to `resumes.json` when an attempt came before it."""
    progress_path = storage.join(backup_dir, PROGRESS_NAME)
    if not storage.exists(progress_path):
        return
    progress = storage.read_json(progress_path)
    if progress.get("token") == token:
        return  # this attempt's own note
    reached = progress.get("step")
    twice = max(0, reached - resumed_at_step) if isinstance(reached, int) else 0
    resumes_path = storage.join(backup_dir, RESUMES_NAME)
    resumes = storage.read_json(resumes_path) if storage.exists(resumes_path) else []
    resumes.append(
        {
            "attempt": attempt,
            "resumed_at_step": resumed_at_step,
            "reached_step": reached,
            "how": "preempted" if progress.get("how") == "preempted" else "failed",
            "steps_trained_twice": twice,
        }
    )
    storage.write_json(resumes_path, resumes)
    if verbose:
        epoch, step = divmod(resumed_at_step, steps_per_epoch)
        print(
            f"resuming at step {resumed_at_step} (epoch {epoch + 1}, step {step + 1}); the "
            f"stopped attempt had reached step {reached}: {twice} step(s) trained twice",
            flush=True,
        )


def resumes(backup_dir: str) -> list[dict[str, Any]]:
    """The run's resumes so far (`RunMetrics.resumes`)."""
    path = storage.join(backup_dir, RESUMES_NAME)
    return storage.read_json(path) if storage.exists(path) else []
