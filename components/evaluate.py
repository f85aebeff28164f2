"""KFP component: read the trainer's test-split evaluation and decide the model's blessing."""

from typing import NamedTuple

from kfp.dsl import HTML, Artifact, ClassificationMetrics, Input, Metrics, Model, Output


def evaluate(
    model: Input[Model],
    run: Input[Artifact],
    metrics: Output[Metrics],
    confusion: Output[ClassificationMetrics],
    report: Output[HTML],
    promotion_target: str = "none",
    promotion_root: str = "",
    promotion_metric: str = "test_accuracy",
    promotion_margin: float = 0.0,
    model_display_name: str = "strategist-model",
    cloud_config: dict = {},  # noqa: B006  (KFP takes a literal default)
    pipeline_root: str = "",
) -> NamedTuple(
    "Outputs", blessed=bool, test_accuracy=float, metric_value=float, blessing_reason=str
):
    """Shows the model's test-split quality and blesses the model when it is better.

    The train step's chief evaluated the model it exported on every example of
    the test split, compiled as the run compiled it, and wrote the result into
    the run's record; this step reads that record instead of evaluating again
    (no TensorFlow here). The model is blessed when it beats the currently
    promoted model on `promotion_metric` by more than `promotion_margin` (or
    when nothing is promoted yet); only a blessed model goes on to the promote
    step.

    Args:
        model: the SavedModel the record describes (for lineage).
        run: the train step's record (metrics.json).
        promotion_target: where the promoted model is recorded: pointer (a
            promoted.json under promotion_root), vertex (Vertex AI Model
            Registry) or none (no blessing).
        promotion_root: folder, /gcs/ or gs:// path of promoted.json; empty:
            beside the pipeline root.
        promotion_metric: test_<metric> of any evaluated metric: test_accuracy,
            test_loss, test_mae, test_rmse, test_mse, or a metric the model
            compiles; losses and errors are better lower, the rest higher.
        promotion_margin: improvement the candidate needs over the promoted model.
        model_display_name: Vertex AI Model Registry display name (vertex target).
        cloud_config: the CloudConfig; its project and region locate the registry.
        pipeline_root: the run's pipeline root (set by the pipeline).

    Returns:
        metrics: every test metric (test_accuracy or test_mae/test_rmse/test_mse,
            test_loss, the model's compiled metrics).
        confusion: classification: the confusion matrix, drawn by the KFP UI;
            regression: the (true, predicted) points of a predicted-vs-true
            plot, in its metadata.
        report: a page the KFP UI shows: every test metric and, for a
            regression, the predicted-vs-true plot (inline SVG); for a
            classification, the per-class precision, recall and F1.
        blessed: whether the model is blessed, i.e. may be promoted.
        test_accuracy: the test accuracy (NaN for regression, and for a
            comparison's run that failed or diverged: nothing to evaluate).
        metric_value: the candidate's value of promotion_metric (NaN when
            promotion_target is none and the task has no such metric, as a
            regression in the comparison pipeline has no test_accuracy).
        blessing_reason: why, with the numbers compared.
    """
    import html
    from collections import namedtuple

    from components.core import (
        evaluation,
        evaluation_page,
        failed_run,
        promotion,
        run_metrics,
        storage,
    )

    promotion.check_settings(promotion_target, promotion_metric, promotion_margin)
    Outputs = namedtuple("Outputs", ["blessed", "test_accuracy", "metric_value", "blessing_reason"])
    record = storage.read_json(run.path)
    if failed_run.is_failed_run(record):  # a comparison's strategy that did not finish
        failed = failed_run.from_dict(record, run.path)
        reason = f"not evaluated: training {failed.outcome}: {failed.error}"
        storage.write_text(report.path, f"<p>{html.escape(reason)}</p>\n")
        print(f"evaluate: {reason}")
        return Outputs(False, float("nan"), float("nan"), reason)
    result = evaluation.from_record(run_metrics.read(run.path))
    for name, number in sorted(result.metrics.items()):
        metrics.log_metric(f"test_{name}", number)
    metrics.log_metric("test_examples", result.num_examples)
    if result.confusion_matrix is not None:
        labels = [str(i) for i in range(len(result.confusion_matrix))]
        confusion.log_confusion_matrix(labels, result.confusion_matrix)
    else:
        confusion.metadata["predicted_vs_true"] = [list(p) for p in result.points]
    storage.write_text(report.path, evaluation_page.render(result))
    store = promotion.pipeline_store(
        promotion_target, promotion_root, pipeline_root, model_display_name, cloud_config
    )
    if store is None:  # nothing is promoted (the comparison pipeline): any task evaluates
        value = result.metrics.get(promotion_metric.removeprefix("test_"), float("nan"))
    else:
        value = promotion.metric_value(promotion_metric, result.metrics)
    blessing = promotion.bless(store, value, promotion_metric, promotion_margin)
    print(f"evaluate: {'blessed' if blessing.blessed else 'not blessed'}: {blessing.reason}")
    metrics.log_metric("blessed", int(blessing.blessed))
    accuracy = result.accuracy if result.accuracy is not None else float("nan")
    return Outputs(blessing.blessed, accuracy, value, blessing.reason)
