"""KFP component: evaluate the exported model on the test split."""

from kfp.dsl import ClassificationMetrics, Dataset, Input, Metrics, Model, Output


def evaluate(
    model: Input[Model],
    shards: Input[Dataset],
    metrics: Output[Metrics],
    confusion: Output[ClassificationMetrics],
) -> float:
    """Evaluates the exported model on the test split.

    Loads the SavedModel the train step exported and measures it on every
    example of the test split, independently of the trainer's own numbers.

    Args:
        model: the SavedModel to evaluate.
        shards: the shards the model was trained on (the test split is used).
        metrics: test accuracy and loss.
        confusion: the confusion matrix, drawn by the KFP UI.

    Returns:
        The test accuracy.
    """
    from components.core import evaluation

    result = evaluation.evaluate_saved_model(model.path, shards.path)
    metrics.log_metric("test_accuracy", result.accuracy)
    metrics.log_metric("test_loss", result.loss)
    metrics.log_metric("test_examples", result.num_examples)
    labels = [str(i) for i in range(len(result.confusion_matrix))]
    confusion.log_confusion_matrix(labels, result.confusion_matrix)
    return result.accuracy
