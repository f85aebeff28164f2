"""The evaluator task: evaluates each epoch's checkpoint on the test split, beside training.

With `cluster.evaluator` the chief saves the model's weights after every epoch
in `<output_dir>/checkpoints/ckpt-<epoch>` (`checkpoint_callback`), and one more
task, the evaluator, evaluates each of them as tf-keras' `SidecarEvaluator` does
(`evaluate_checkpoints`): it never builds
a distribution strategy, never trains and never writes the chief's files; its
results go to `<output_dir>/evaluator/evaluations.json`, which the local
launcher adds to the run's record (`RunMetrics.sidecar_evaluations`).

The evaluator learns its role from `TF_CONFIG` in both shapes: Vertex AI leaves
it out of `cluster` (pool 3 only names it in `task`), the training operator
puts it in (`genClusterSpec`). Building `MultiWorkerMirroredStrategy` there
would raise `KeyError: 'evaluator'` on Vertex AI, which is why this path builds
none.
"""

from __future__ import annotations

import os
import re
from typing import Any

from components.core import storage

CHECKPOINTS_DIR = "checkpoints"
EVALUATIONS_PATH = "evaluator/evaluations.json"
_CHECKPOINT = "ckpt-{epoch}"


def checkpoint_dir(output_dir: str) -> str:
    """Where the chief saves each epoch's weights for the evaluator."""
    return storage.join(output_dir, CHECKPOINTS_DIR)


def checkpoint_callback(output_dir: str):
    """The chief's callback that saves the weights after every epoch (`ckpt-<epoch>`)."""
    import tf_keras as keras

    # TensorFlow writes the checkpoint itself: through `local_view` under a rehearsal.
    return keras.callbacks.ModelCheckpoint(
        storage.local_view(storage.join(checkpoint_dir(output_dir), _CHECKPOINT)),
        save_weights_only=True,
    )


def evaluate_checkpoints(config, model, eval_data) -> list[dict[str, Any]]:
    """Evaluates each new epoch checkpoint until the last epoch's; returns the results.

    The loop of tf-keras' `SidecarEvaluator` (`tf.train.checkpoints_iterator`
    over the chief's checkpoint folder), kept here so that each result names
    the checkpoint it came from. A restarted evaluator keeps the results it
    wrote before and first evaluates, in epoch order, every whole checkpoint it
    has no result for (the chief keeps each epoch's): a restart loses no epoch.
    When training outpaces evaluation, the iterator skips to the newest
    checkpoint; the last line then names the epochs left without a result.

    Args:
        config: the run's `RunConfig`.
        model: the run's model, compiled with its loss and metrics (no
            strategy: the evaluator is one process).
        eval_data: the test split as a `tf.data.Dataset`.

    Returns:
        One entry per evaluated checkpoint, in epoch order: `checkpoint`,
        `epoch`, and each metric (`loss`, `accuracy`). Written after each
        evaluation to `<output_dir>/evaluator/evaluations.json`.
    """
    import tensorflow as tf

    path = storage.join(config.output_dir, EVALUATIONS_PATH)
    results = read_evaluations(config.output_dir)  # a restarted evaluator's earlier results
    watched = storage.local_view(checkpoint_dir(config.output_dir))

    def evaluate(checkpoint: str) -> int | None:
        """Evaluates one checkpoint and records it; returns its epoch (None: not readable)."""
        epoch = _epoch_of(checkpoint)
        try:
            model.load_weights(checkpoint).expect_partial()
        except (tf.errors.OpError, ValueError) as err:  # the chief is still writing it
            print(f"evaluator: {os.path.basename(checkpoint)} not readable yet ({err})")
            return None
        logs = model.evaluate(eval_data, verbose=0, return_dict=True)
        entry = {"checkpoint": os.path.basename(checkpoint), "epoch": epoch}
        entry.update({name: float(value) for name, value in logs.items()})
        results.append(entry)
        results.sort(key=lambda e: e["epoch"] or 0)
        storage.write_json(path, results)
        print(
            f"evaluator: epoch {epoch}/{config.training.epochs} checkpoint: loss "
            f"{entry.get('loss', float('nan')):.4f}  accuracy "
            f"{entry.get('accuracy', float('nan')):.4f}",
            flush=True,
        )
        return epoch

    def evaluated() -> set[int | None]:
        return {e["epoch"] for e in results}

    missed = [c for c in _saved_checkpoints(watched) if _epoch_of(c) not in evaluated()]
    if results and missed:
        epochs = ", ".join(str(_epoch_of(c)) for c in missed)
        print(f"evaluator: restarted; first evaluating the epoch(s) it missed: {epochs}")
    for checkpoint in missed:
        evaluate(checkpoint)
    final = config.training.epochs
    if final in evaluated():
        return results
    for checkpoint in tf.train.checkpoints_iterator(watched):
        if _epoch_of(checkpoint) in evaluated():
            continue
        epoch = evaluate(checkpoint)
        if epoch is not None and epoch >= final:
            break
    skipped = sorted(set(range(1, final + 1)) - evaluated())
    if skipped:
        print(
            "evaluator: no result for epoch(s) "
            f"{', '.join(map(str, skipped))}: training outpaced the evaluation"
        )
    return results


def _saved_checkpoints(folder: str) -> list[str]:
    """The whole epoch checkpoints in `folder` (their `.index` is written last), by epoch."""
    import tensorflow as tf

    prefixes = [p.removesuffix(".index") for p in tf.io.gfile.glob(f"{folder}/ckpt-*.index")]
    return sorted((p for p in prefixes if _epoch_of(p) is not None), key=_epoch_of)


def read_evaluations(output_dir: str) -> list[dict[str, Any]]:
    """The evaluator's results of a run (empty when it had no evaluator)."""
    try:
        return storage.read_json(storage.join(output_dir, EVALUATIONS_PATH))
    except (OSError, ValueError):
        return []


def _epoch_of(checkpoint: str | None) -> int | None:
    match = re.search(r"ckpt-(\d+)$", checkpoint or "")
    return int(match.group(1)) if match else None
