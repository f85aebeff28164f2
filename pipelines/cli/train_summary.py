"""The train summary: a finished run's record as a table on the terminal."""

from __future__ import annotations

import os

from components.core import compile_choices, speed_options
from components.core.run_metrics import RunMetrics


def _compiled_from(compiled: dict) -> str:
    """Where each compile setting came from: the module's, or Strategist's defaults."""
    source = compiled.get("from")
    defaulted = compiled.get("defaults") or []
    if source == compile_choices.DEFAULTS or not defaulted:
        return f"from {source}"
    return f"from {source}; {', '.join(defaulted)}: {compile_choices.STRATEGISTS} defaults"


def print_summary(metrics: RunMetrics, output_dir: str) -> None:
    compiled = metrics.compile_settings
    rows = [
        ("model", f"{metrics.model} ({metrics.model_module or 'built-in'})"),
        (
            "compiled with",
            f"{compiled.get('optimizer')}, loss {compiled.get('loss')}, metrics "
            f"{', '.join(compiled.get('metrics', [])) or '-'} ({_compiled_from(compiled)})",
        ),
        ("strategy", metrics.strategy),
        ("replicas", metrics.num_replicas),
        ("workers / ps", f"{metrics.workers} / {metrics.ps}"),
        ("global batch", metrics.global_batch_size),
        (
            "speed options",
            f"{speed_options.training_options(metrics.to_dict())}, "
            f"all-reduce {metrics.all_reduce or 'auto'}",
        ),
        ("epoch seconds", " ".join(f"{s:.2f}" for s in metrics.epoch_seconds)),
        ("examples/s", f"{metrics.examples_per_second:.0f} (median after epoch 1)"),
        *[
            (f"final {_epoch_metric(name)}", f"{values[-1]:.4f}")
            for name, values in _train_metrics(metrics)
        ],
        *[(f"test {name}", f"{value:.4f}") for name, value in _test_metrics(metrics)],
        ("restarts", metrics.restarts),
        *[
            (
                "stalled",
                f"{stall['task']} held the run up {stall['seconds']:.1f} s in epoch "
                f"{stall['epoch']} ({stall['how']}): not a clean measurement",
            )
            for stall in metrics.stalls
        ],
        ("hardware", metrics.hardware.describe()),
        *[("strategist changed", change) for change in metrics.adjustments],
    ]
    width = max(len(name) for name, _ in rows)
    print("\nsummary")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    print(f"\nmetrics: {os.path.join(output_dir, 'metrics.json')}")
    print(f"model:   {os.path.join(output_dir, 'model')}")


def _train_metrics(metrics: RunMetrics) -> list[tuple[str, list[float]]]:
    """The last epoch's metrics worth a line: training's and validation's (`val_`); not the loss."""
    return [(n, v) for n, v in metrics.history.items() if n != "loss" and v and v[-1] == v[-1]]


def _epoch_metric(name: str) -> str:
    """How a history's metric is named in the summary: `val_` ones are the validation share's."""
    if name.startswith("val_"):
        return f"validation {name.removeprefix('val_')}"
    return f"train {name}"


def _test_metrics(metrics: RunMetrics) -> list[tuple[str, float]]:
    """The test metrics: every evaluated one, or accuracy and loss for older records."""
    if metrics.eval_metrics:
        return sorted(metrics.eval_metrics.items())
    return [("accuracy", metrics.eval_accuracy), ("loss", metrics.eval_loss)]
