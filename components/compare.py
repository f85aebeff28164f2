"""KFP component: compare strategies side by side (fan-in of the training runs)."""

from typing import List  # noqa: UP035  (KFP resolves typing.List artifact lists)

from kfp.dsl import HTML, Artifact, Input, Markdown, Output


def compare_strategies(
    runs: Input[List[Artifact]],  # noqa: UP006
    comparison: Output[Artifact],
    report: Output[HTML],
    summary: Output[Markdown],
    plots: Output[Artifact],
    recommendation_json: str = "{}",
    target_accuracy: float = 0.9,
):
    """Compares training runs: throughput, scaling, time to accuracy, quality and cost.

    Writes comparison.json (each run with speed-up, scaling efficiency, time to
    the target accuracy and estimated cost, plus the winner and why), a
    self-contained HTML report with embedded plots, a Markdown summary and the
    PNG plots.

    Args:
        runs: the metrics.json of each training run.
        comparison: comparison.json.
        report: the HTML report, readable in the KFP UI.
        summary: the summary table as Markdown.
        plots: a folder of PNG plots.
        recommendation_json: what strategy selection recommended, for the record.
        target_accuracy: the accuracy "time to accuracy" is measured to.
    """
    from components.core import comparison as core

    core.compare_to_artifacts(
        [run.path for run in runs],
        comparison_path=comparison.path,
        report_path=report.path,
        summary_path=summary.path,
        plots_dir=plots.path,
        recommendation_json=recommendation_json,
        target_accuracy=target_accuracy,
    )
