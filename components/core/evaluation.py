"""Evaluation of a trained classifier: accuracy, loss and a confusion matrix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvalResult:
    """Test-split quality of one model.

    Attributes:
        accuracy: fraction of examples classified correctly.
        loss: mean sparse categorical cross-entropy (from logits).
        num_examples: examples evaluated.
        confusion_matrix: rows are true labels, columns predictions.
    """

    accuracy: float
    loss: float
    num_examples: int
    confusion_matrix: list[list[int]]


def evaluate(model, dataset, num_classes: int) -> EvalResult:
    """Evaluates a logits-emitting Keras `model` on a batched (image, label) dataset.

    The loss is tf_keras's (Keras 2), as in training, whatever `tf.keras` is here.
    """
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    total_loss = 0.0
    count = 0
    for images, labels in dataset:
        logits = model(images, training=False)
        total_loss += float(
            tf.reduce_sum(
                keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            )
        )
        predictions = tf.argmax(logits, axis=-1).numpy()
        np.add.at(matrix, (labels.numpy(), predictions), 1)
        count += int(labels.shape[0])
    if count == 0:
        raise ValueError("the evaluation split is empty")
    return EvalResult(
        accuracy=float(np.trace(matrix) / count),
        loss=total_loss / count,
        num_examples=count,
        confusion_matrix=matrix.tolist(),
    )


def evaluate_saved_model(model_dir: str, shards_dir: str, split: str = "test") -> EvalResult:
    """Loads an exported SavedModel and evaluates it on `split` of a shards folder."""
    import tf_keras as keras

    from components.core import datasets, storage

    manifest = datasets.load_manifest(shards_dir)
    # TensorFlow opens the SavedModel itself: through `local_view` under a rehearsal.
    model = keras.models.load_model(storage.local_view(model_dir), compile=False)
    return evaluate(model, datasets.eval_dataset(manifest, split), manifest.num_classes)
