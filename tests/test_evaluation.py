"""Evaluation for the task: classification (accuracy, per class, confusion matrix, the compiled
loss) and regression (MAE, RMSE, MSE, points to plot), with the model's own compiled metrics."""

from __future__ import annotations

import json
import math

import pytest

from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec


def _identity(width: int, loss, metrics):
    """A compiled model that outputs its input: the test chooses the logits or predictions."""
    import tf_keras as keras

    model = keras.Sequential([keras.layers.Input((width,)), keras.layers.Activation("linear")])
    model.compile(loss=loss, metrics=metrics)
    return model


def test_classification_loss_accuracy_per_class_and_confusion_matrix_of_known_logits():
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from components.core.evaluation import evaluate

    logits = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]], np.float32)
    labels = np.array([0, 1, 1], np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((logits, labels)).batch(2)
    model = _identity(
        2,
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        [keras.metrics.SparseTopKCategoricalAccuracy(k=1, name="top1")],
    )
    spec = InputSpec({"x": FeatureSpec((2,))}, LabelSpec(num_classes=2))

    result = evaluate(model, dataset, spec)

    per_example = [
        math.log(np.exp(row).sum()) - row[label] for row, label in zip(logits, labels, strict=True)
    ]
    assert result.loss == pytest.approx(float(np.mean(per_example)), abs=1e-6)
    assert result.accuracy == 2 / 3
    assert result.metrics["top1"] == pytest.approx(2 / 3)  # the model's own compiled metric
    assert result.num_examples == 3
    assert result.confusion_matrix == [[1, 0], [1, 1]]
    assert result.per_class[1] == {
        "class": 1, "precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2
    }  # fmt: skip


def test_regression_mae_rmse_mse_and_the_points_of_a_predicted_vs_true_plot():
    import numpy as np
    import tensorflow as tf

    from components.core.evaluation import evaluate

    predicted = np.array([[1.0], [2.0], [4.0]], np.float32)
    truth = np.array([1.0, 3.0, 2.0], np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((predicted, truth)).batch(2)
    spec = InputSpec({"x": FeatureSpec((1,))}, LabelSpec(dtype="float32"))

    result = evaluate(_identity(1, "mse", ["mae"]), dataset, spec)

    assert result.task == "regression" and result.accuracy is None
    assert result.metrics["mae"] == pytest.approx(1.0)
    assert result.metrics["mse"] == pytest.approx(5 / 3)
    assert result.metrics["rmse"] == pytest.approx(math.sqrt(5 / 3))
    assert result.loss == pytest.approx(5 / 3)  # the compiled loss
    assert result.points == [(1.0, 1.0), (3.0, 2.0), (2.0, 4.0)]
    assert result.confusion_matrix is None


@pytest.mark.parametrize(
    ("metric", "lower"),
    [("loss", True), ("test_mae", True), ("rmse", True), ("mse", True), ("accuracy", False),
     ("test_auc", False), ("top2_accuracy", False), ("val_loss", True)],
)  # fmt: skip
def test_metric_directions(metric, lower):
    from components.core.evaluation import lower_is_better

    assert lower_is_better(metric) is lower


def svg_points(page: str):
    """The (cx, cy) of every point, and the diagonal's ends, of the page's inline SVG plot."""
    import re
    import xml.etree.ElementTree as ET

    svg = ET.fromstring(re.search(r"<svg.*?</svg>", page, re.S).group(0))
    ns = "{http://www.w3.org/2000/svg}"
    points = [
        (float(c.get("cx")), float(c.get("cy")))
        for c in svg.iter(f"{ns}circle")
        if c.get("class") == "point"
    ]
    (line,) = [e for e in svg.iter(f"{ns}line") if e.get("class") == "identity"]
    ends = tuple(float(line.get(k)) for k in ("x1", "y1", "x2", "y2"))
    return points, ends


def test_the_predicted_vs_true_plot_draws_every_point_where_it_belongs():
    """One circle per (true, predicted) pair: right is a larger true value, up a larger
    prediction, and an exact prediction lies on the diagonal."""
    from components.core import evaluation_page
    from components.core.evaluation import EvalResult

    pairs = [(10.0, 10.0), (20.0, 35.0), (30.0, 25.0), (40.0, 40.0), (50.0, float("nan"))]
    metrics = {"loss": 1.0, "mae": 2.0, "mse": 1.0, "rmse": 1.0}
    result = EvalResult("regression", None, 1.0, 5, None, metrics, points=pairs)

    page = evaluation_page.render(result)
    drawn, (x1, y1, x2, y2) = svg_points(page)

    assert len(drawn) == 4  # the NaN prediction is left out, and said so
    assert "1 predictions are not finite numbers" in page
    xs = [cx for cx, _ in drawn]
    assert xs == sorted(xs) and len(set(xs)) == 4  # true values 10 < 20 < 30 < 40
    ys = {pair: cy for pair, (_, cy) in zip(pairs, drawn, strict=False)}
    assert ys[(20.0, 35.0)] < ys[(30.0, 25.0)]  # SVG's y grows downwards
    for (t, p), (cx, cy) in zip(pairs, drawn, strict=False):  # on the diagonal iff exact
        on_diagonal = abs((cx - x1) * (y2 - y1) - (cy - y1) * (x2 - x1)) < 1e-6 * (x2 - x1) ** 2
        assert on_diagonal == (t == p), (t, p)
    for name in ("mae", "rmse", "mse", "loss"):
        assert f"<td>{name}</td>" in page
    assert ">lower</td>" in page


def test_the_axis_ticks_are_round_numbers_inside_the_range():
    from components.core.evaluation_page import axis_range, ticks

    assert ticks(0.0, 1.0) == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert ticks(23.0, 346.0) == [100.0, 200.0, 300.0]
    low, high = axis_range([5.0, 5.0])  # a constant prediction still has a range
    assert low < 5.0 < high


def test_the_evaluate_step_reads_the_trainers_evaluation_from_its_record():
    """What the chief measured crosses `metrics.json` whole: no second evaluation needed."""
    from components.core.evaluation import from_record
    from components.core.run_metrics import RunMetrics

    regression = RunMetrics(
        strategy="mirrored", num_replicas=2, examples_per_second=1.0, eval_accuracy=None,
        task="regression", eval_loss=0.5, eval_metrics={"loss": 0.5, "mae": 0.4, "mse": 0.5},
        eval_examples=89, eval_points=[[1.0, 1.5], [2.0, 1.8]],
    )  # fmt: skip
    read = from_record(RunMetrics.from_json(json.dumps(regression.to_dict())))
    assert (read.task, read.accuracy, read.num_examples) == ("regression", None, 89)
    assert read.metrics["mae"] == 0.4 and read.points == [(1.0, 1.5), (2.0, 1.8)]
    older = RunMetrics(strategy="mirrored", num_replicas=2, examples_per_second=1.0,
                       eval_accuracy=0.9)  # fmt: skip
    with pytest.raises(ValueError, match="older Strategist"):
        from_record(older)
