"""KFP component: compare strategies side by side (fan-in of the training runs)."""

from typing import List, NamedTuple  # noqa: UP035  (KFP resolves typing.List artifact lists)

from kfp.dsl import HTML, Artifact, Input, Markdown, Output


def compare_strategies(
    runs: Input[List[Artifact]],  # noqa: UP006
    comparison: Output[Artifact],
    report: Output[HTML],
    summary: Output[Markdown],
    plots: Output[Artifact],
    recommendation_json: str = "{}",
    target_value: float = 0.9,
    target_metric: str = "accuracy",
    preemptible: bool = False,
    preemptions_per_machine_hour: float = 1 / 24,  # checkpoint_interval's default
    prices: dict = {},  # noqa: B006  (KFP takes a literal default)
) -> NamedTuple("Verdict", winner=str, speedup_over_runner_up=float):
    """Compares training runs: throughput, scaling, time to accuracy, quality and cost.

    Writes comparison.json (each run with speed-up, scaling efficiency, time to
    the target accuracy and estimated cost, plus the winner and why), a
    self-contained HTML report with embedded plots, a Markdown summary and the
    PNG plots.

    Args:
        runs: the metrics.json of each training run.
        recommendation_json: what strategy selection recommended, for the record.
        target_value: the training value of target_metric "time to target" is
            measured to.
        target_metric: accuracy, loss, or any metric the runs record per epoch
            (losses and errors are reached from above).
        preemptible: price the runs as Spot machines, with the work expected
            preemptions throw away.
        preemptions_per_machine_hour: expected preemptions of one machine per hour.
        prices: the price table (the layout of components/core/data/prices.json);
            {} for the bundled one.

    Returns:
        comparison: comparison.json.
        report: the HTML report, readable in the KFP UI.
        summary: the summary table as Markdown.
        plots: a folder of PNG plots.
        winner: the winning strategy's name, or "" when no winner is clear.
        speedup_over_runner_up: the leader's steady-state throughput over the
            runner-up's (0.0 with a single strategy), for CI or the training
            pipeline to read.
    """
    import json

    from components.core import comparison as core
    from components.core import storage

    built = core.build_report(
        core.load_metrics(run.path for run in runs),
        target_value=target_value,
        target_metric=target_metric,
        prices=core.PriceTable.from_dict(prices) if prices else None,
        capacity=core.Capacity(preemptible, preemptions_per_machine_hour),
        recommendation=json.loads(recommendation_json or "{}") or None,
    )
    destinations = {
        core.REPORT_JSON: comparison.path,
        core.REPORT_HTML: report.path,
        core.SUMMARY_MD: summary.path,
    }
    for name, data in core.render_files(built).items():
        storage.write_bytes(destinations.get(name) or storage.join(plots.path, name), data)
    return (built["winner"] or "", float(built["speedup_over_runner_up"] or 0.0))
