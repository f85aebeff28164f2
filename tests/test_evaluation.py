"""Evaluation: accuracy, the cross-entropy loss (tf_keras's, as in training), confusion matrix."""

from __future__ import annotations

import math


def test_loss_accuracy_and_confusion_matrix_of_known_logits():
    import numpy as np
    import tensorflow as tf

    from components.core.evaluation import evaluate

    logits = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]], np.float32)
    labels = np.array([0, 1, 1], np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((logits, labels)).batch(2)

    result = evaluate(lambda images, training: images, dataset, num_classes=2)

    per_example = [
        math.log(np.exp(row).sum()) - row[label] for row, label in zip(logits, labels, strict=True)
    ]
    assert abs(result.loss - float(np.mean(per_example))) < 1e-6
    assert result.accuracy == 2 / 3
    assert result.num_examples == 3
    assert result.confusion_matrix == [[1, 0], [1, 1]]
