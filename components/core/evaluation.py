"""Test-split evaluation for the run's task.

Classification: accuracy, a per-class report (precision, recall, F1,
support) and a confusion matrix. Regression: MAE, RMSE, MSE and a sample of
(true, predicted) pairs for a plot. Both: the loss and every metric the model
was compiled with (the user's own too), from `model.evaluate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from components.core.input_spec import CLASSIFICATION, REGRESSION, InputSpec

# (true, predicted) pairs kept for a regression's predicted-vs-true plot.
PLOT_POINTS = 500
# Metrics whose lower values are better; every other metric is better higher.
LOWER_IS_BETTER = ("loss", "mae", "mse", "rmse", "error", "msle", "mape", "hinge", "crossentropy")


@dataclass(frozen=True)
class EvalResult:
    """Test-split quality of one model.

    Attributes:
        task: `classification` or `regression`.
        accuracy: fraction of examples classified correctly (None for regression).
        loss: the model's compiled loss, averaged over the examples.
        num_examples: examples evaluated.
        confusion_matrix: rows are true labels, columns predictions (None for regression).
        metrics: every metric by name (`loss`, the compiled metrics, and
            `accuracy` or `mae`, `rmse`, `mse`).
        per_class: classification: one dict per class (`class`, `precision`,
            `recall`, `f1`, `support`).
        points: regression: up to `PLOT_POINTS` (true, predicted) pairs.
    """

    task: str
    accuracy: float | None
    loss: float
    num_examples: int
    confusion_matrix: list[list[int]] | None
    metrics: dict[str, float] = field(default_factory=dict)
    per_class: list[dict[str, float]] = field(default_factory=list)
    points: list[tuple[float, float]] = field(default_factory=list)


def lower_is_better(metric: str) -> bool:
    """True for losses and errors (`loss`, `test_mae`, `rmse`...), False for the rest."""
    name = metric.lower().removeprefix("test_").removeprefix("eval_")
    return any(word in name for word in LOWER_IS_BETTER)


def evaluate(model, dataset, spec: InputSpec) -> EvalResult:
    """Evaluates a compiled Keras `model` on a batched (inputs, label) dataset.

    Args:
        model: compiled with the run's loss and metrics (`model_build.build_compiled`).
        dataset: the test split, batched, after the module's `preprocess`.
        spec: the examples; its label says the task.

    Raises:
        ValueError: an empty split.
    """
    import numpy as np

    compiled = {
        k: float(v) for k, v in model.evaluate(dataset, verbose=0, return_dict=True).items()
    }
    compiled = _without_unmeasured(model, compiled)
    labels, outputs, losses = [], [], []
    loss_of = _loss_function(model) if "loss" not in compiled else None
    for inputs, label in dataset:
        predicted = model(inputs, training=False)
        outputs.append(np.asarray(predicted, dtype=np.float64))
        labels.append(label.numpy())
        if loss_of is not None:
            losses.append((float(loss_of(label, predicted)), len(labels[-1])))
    if not labels:
        raise ValueError("the evaluation split is empty")
    if losses:
        # Weighted by batch: the loss's mean over the split, as `evaluate` gives it.
        compiled["loss"] = sum(v * n for v, n in losses) / sum(n for _, n in losses)
    truth = np.concatenate(labels)
    predicted = np.concatenate(outputs)
    if spec.task == REGRESSION:
        return _regression(truth, predicted, compiled)
    return _classification(truth, predicted, spec.label.num_classes, compiled)


def _without_unmeasured(model, compiled: dict[str, float]) -> dict[str, float]:
    """`compiled` without the values of metrics the evaluation never updated.

    A model with its own `train_step` and no `test_step` that lists its own
    trackers (`metrics`, as keras-io's "customizing what happens in fit" does)
    gets Keras's `test_step`, which never updates them: `evaluate` reports
    their initial 0.0, which a `test_loss` promotion would call perfect.
    A `Mean`-like metric that counted nothing is left out.
    """
    unmeasured = set()
    for metric in getattr(model, "metrics", []):
        count = getattr(metric, "count", None)
        try:
            counted = float(count.numpy()) if count is not None else None
        except (AttributeError, TypeError, ValueError):
            counted = None
        if counted == 0.0:
            unmeasured.add(metric.name)
    return {name: value for name, value in compiled.items() if name not in unmeasured}


def _loss_function(model):
    """The loss the model was compiled with, as a function of (labels, outputs)."""
    import tf_keras as keras

    loss = model.loss
    if isinstance(loss, (dict, list, tuple)) or loss is None:
        return None
    return keras.losses.get(loss) if isinstance(loss, str) else loss


def class_ids(truth, num_classes: int):
    """Class ids from labels given as ids or one-hot rows (a `preprocess` may make either)."""
    import numpy as np

    if truth.ndim >= 2 and truth.shape[-1] == num_classes and num_classes > 1:
        return truth.reshape(-1, num_classes).argmax(axis=-1).astype(np.int64)
    return truth.reshape(-1).astype(np.int64)


def _classification(truth, outputs, num_classes: int, compiled: dict[str, float]) -> EvalResult:
    import numpy as np

    truth = class_ids(truth, num_classes)
    if outputs.ndim > 1 and outputs.shape[-1] > 1:
        predicted = outputs.argmax(axis=-1)
    else:  # one output for two classes: a logit or a probability
        values = outputs.reshape(-1)
        threshold = 0.5 if values.min() >= 0 and values.max() <= 1 else 0.0
        predicted = (values > threshold).astype(np.int64)
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (truth, predicted), 1)
    count = int(matrix.sum())
    accuracy = float(np.trace(matrix) / count)
    per_class = []
    for k in range(num_classes):
        hits = int(matrix[k, k])
        precision = hits / max(int(matrix[:, k].sum()), 1)
        recall = hits / max(int(matrix[k, :].sum()), 1)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class.append(
            {"class": k, "precision": precision, "recall": recall, "f1": f1,
             "support": int(matrix[k, :].sum())}
        )  # fmt: skip
    return EvalResult(
        task=CLASSIFICATION,
        accuracy=accuracy,
        loss=compiled.get("loss", float("nan")),
        num_examples=count,
        confusion_matrix=matrix.tolist(),
        metrics={**compiled, "accuracy": accuracy},
        per_class=per_class,
    )


def _regression(truth, outputs, compiled: dict[str, float]) -> EvalResult:
    import numpy as np

    truth = truth.reshape(-1).astype(np.float64)
    predicted = outputs.reshape(len(truth), -1)[:, 0]
    errors = predicted - truth
    mse = float(np.mean(errors**2))
    step = max(1, len(truth) // PLOT_POINTS)
    return EvalResult(
        task=REGRESSION,
        accuracy=None,
        loss=compiled.get("loss", mse),
        num_examples=len(truth),
        confusion_matrix=None,
        metrics={
            **compiled,
            "mae": float(np.mean(np.abs(errors))),
            "mse": mse,
            "rmse": math.sqrt(mse),
        },
        points=[
            (float(t), float(p)) for t, p in zip(truth[::step], predicted[::step], strict=True)
        ],
    )


def from_record(record) -> EvalResult:
    """The test-split evaluation the trainer already made, from its record (`RunMetrics`).

    The chief evaluates the model it exports on the whole test split before it
    writes `metrics.json`; the evaluate step reads that instead of loading the
    SavedModel and evaluating it again.

    Raises:
        ValueError: a record older than `eval_examples` (no evaluation to read).
    """
    if record.eval_examples is None:
        raise ValueError(
            "the run record has no test-split evaluation (eval_examples): it was written by "
            "an older Strategist; train again"
        )
    metrics = dict(record.eval_metrics)
    return EvalResult(
        task=record.task,
        accuracy=record.eval_accuracy,
        loss=record.eval_loss if record.eval_loss is not None else metrics.get("loss", math.nan),
        num_examples=record.eval_examples,
        confusion_matrix=record.confusion_matrix,
        metrics=metrics,
        points=[tuple(point) for point in record.eval_points],
    )
