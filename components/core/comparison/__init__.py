"""Comparison of strategy runs: the report, its pages and plots, and the CI gate.

`build_report` turns the `metrics.json` records of several training runs into
the content of `comparison.json`: each record gains its speed-up and scaling
efficiency against a baseline run, the wall-clock time it took to reach a
target value and an estimated cost from an editable price table; repeated
runs of a strategy become one result with their medians and spread; a winner
is chosen with a reason in plain words, only when it is clear. `write_report` writes that content as
JSON, a self-contained HTML page (plots embedded, no external resources, so
the KFP UI's HTML viewer shows it), a Markdown summary and PNG plots, each file
atomically. `gate` compares a report with a committed baseline and lists what
regressed.

One concept per module:

- `pricing`: the price table and the cost of one run.
- `analysis`: derived numbers, baseline and `build_report`.
- `verdict`: the winner, only when the measurements can tell (`decide`).
- `repeats`: a strategy's repeated runs as one result, median and spread.
- `summary`: the plain-text table and the Markdown summary, with their notes.
- `plots`: the PNG plots.
- `html`: the self-contained HTML page.
- `files`: rendering and writing every report file, reading reports back.
- `failures`: strategies that did not finish (failed or diverged), apart from the results.
- `gating`: the CI regression gate (`gate`).
- `errors` and `values`: `ReportError` and small helpers the others share.

Pure Python and matplotlib (Agg canvas, no pyplot); never imports TensorFlow
or KFP.
"""

from components.core.comparison.analysis import build_report, choose_baseline, time_to_target
from components.core.comparison.errors import ReportError
from components.core.comparison.failures import did_not_finish
from components.core.comparison.files import (
    REPORT_HTML,
    REPORT_JSON,
    SUMMARY_MD,
    load_metrics,
    load_report,
    render_files,
    write_report,
)
from components.core.comparison.gating import (
    GateResult,
    Regression,
    StrategyCheck,
    gate,
    validate_thresholds,
)
from components.core.comparison.html import render_html
from components.core.comparison.plots import (
    PLOT_FILES,
    plot_accuracy_vs_time,
    plot_epoch_times,
    plot_loss_vs_time,
    plot_throughput,
    render_plots,
)
from components.core.comparison.pricing import (
    DEFAULT_PRICES_PATH,
    Capacity,
    CostEstimate,
    PriceTable,
    estimate_cost,
    load_prices,
)
from components.core.comparison.summary import (
    DISPLAY_PRECISION,
    summary_markdown,
    summary_table,
)
from components.core.comparison.summary import TEXT_COLUMNS as _TEXT_COLUMNS

__all__ = [
    "DEFAULT_PRICES_PATH",
    "DISPLAY_PRECISION",
    "PLOT_FILES",
    "REPORT_HTML",
    "REPORT_JSON",
    "SUMMARY_MD",
    "_TEXT_COLUMNS",
    "Capacity",
    "CostEstimate",
    "GateResult",
    "PriceTable",
    "Regression",
    "ReportError",
    "StrategyCheck",
    "build_report",
    "choose_baseline",
    "did_not_finish",
    "estimate_cost",
    "gate",
    "load_metrics",
    "load_prices",
    "load_report",
    "plot_accuracy_vs_time",
    "plot_epoch_times",
    "plot_loss_vs_time",
    "plot_throughput",
    "render_files",
    "render_html",
    "render_plots",
    "summary_markdown",
    "summary_table",
    "time_to_target",
    "validate_thresholds",
    "write_report",
]
