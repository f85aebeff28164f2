"""The report's PNG plots: throughput, where the time went, loss and accuracy, epoch times.

Drawn with matplotlib on an Agg canvas (no pyplot, so no global state or GUI
backend).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from components.core.comparison.analysis import accuracy_history, epoch_end_times
from components.core.comparison.values import pct

PLOT_FILES = (
    "throughput.png",
    "phases.png",
    "loss_vs_time.png",
    "accuracy_vs_time.png",
    "epoch_times.png",
)
# Where a run's time went, from its `phase_seconds`, in the order the chief spends it.
# `fit` holds the epochs; its rest is input set-up, checkpoints and teardown.
PHASES = (
    ("startup", "start-up (imports, cluster)", "#9ca3af"),
    ("setup", "set-up (strategy, data, model)", "#60a5fa"),
    ("epochs", "epochs", "#2563eb"),
    ("fit_other", "fit outside epochs", "#a78bfa"),
    ("export", "export", "#f59e0b"),
    ("evaluate", "evaluation", "#10b981"),
)

_STRATEGY_COLORS = {
    "one_device": "#6b7280",
    "mirrored": "#2563eb",
    "multi_worker_mirrored": "#ea580c",
    "parameter_server": "#16a34a",
}
_EXTRA_COLORS = ("#9333ea", "#db2777", "#0891b2", "#ca8a04", "#4b5563")


def strategy_colors(report: Mapping[str, Any]) -> dict[str, str]:
    """Run name -> colour: a fixed one per strategy, others for repeated strategies."""
    colors, extra = {}, iter(_EXTRA_COLORS * 4)
    for r in report.get("results", []):
        colors[r["name"]] = (
            _STRATEGY_COLORS[r["strategy"]]
            if r["strategy"] in _STRATEGY_COLORS and r["name"] == r["strategy"]
            else next(extra)
        )
    return colors


def _figure(height: float = 3.6) -> tuple[Any, Any]:
    """A new figure on an Agg canvas and its one axes, in the report's style."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, height), dpi=125, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    return fig, ax


def _png(fig: Any) -> bytes:
    """The figure as PNG bytes, without a timestamp or software tag, so reproducible."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="white", metadata={"Software": None})
    return buf.getvalue()


def _no_data(ax: Any, what: str) -> None:
    """Writes `no WHAT recorded` in the middle of an empty plot."""
    ax.text(0.5, 0.5, f"no {what} recorded", ha="center", va="center", transform=ax.transAxes)


def plot_throughput(report: Mapping[str, Any]) -> bytes:
    """Horizontal bars of examples/s per run, labelled with the speed-up; PNG bytes."""
    results = report.get("results", [])
    fig, ax = _figure(max(3.6, 1.4 + 0.55 * len(results)))
    colors = strategy_colors(report)
    names = [r["name"] for r in results][::-1]
    values = [r["examples_per_second"] for r in results][::-1]
    if results:
        bars = ax.barh(
            names,
            values,
            color=[colors[n] for n in names],
            height=0.6,
            xerr=_throughput_spread(results[::-1]),
            error_kw={"ecolor": "#111827", "capsize": 4, "linewidth": 1},
        )
        top = max(values) or 1.0
        for bar, r in zip(bars, results[::-1], strict=True):
            label = f"{r['examples_per_second']:,.0f}"
            if r.get("speedup") is not None:
                label += f"  ({r['speedup']:.2f}×)"
            ax.text(
                bar.get_width() + 0.01 * top,
                bar.get_y() + bar.get_height() / 2,
                label,
                va="center",
                fontsize=9,
            )
        ax.set_xlim(0, top * 1.3)
        for tick in ax.get_yticklabels():
            if tick.get_text() == report.get("winner"):
                tick.set_fontweight("bold")
    else:
        _no_data(ax, "throughput")
    ax.grid(False, axis="y")
    ax.set_xlabel(
        "examples per second (median epoch after the first"
        + (
            "; bars: medians, whiskers: min–max over repeats)"
            if report.get("repeats", 1) > 1
            else ")"
        )
    )
    baseline = (report.get("baseline") or {}).get("name")
    title = f"Training throughput (speed-up vs {baseline})" if baseline else "Training throughput"
    ax.set_title(title, loc="left", fontsize=11)
    return _png(fig)


def _throughput_spread(results: list[Mapping[str, Any]]) -> list[list[float]] | None:
    """Error bars from each run's median to its min and max throughput; None when all ran once."""
    spreads = [(r.get("spread") or {}).get("examples_per_second") or {} for r in results]
    if all((s.get("n") or 1) < 2 for s in spreads):
        return None
    below, above = [], []
    for r, s in zip(results, spreads, strict=True):
        median = r["examples_per_second"]
        below.append(max(0.0, median - (s.get("min") or median)))
        above.append(max(0.0, (s.get("max") or median) - median))
    return [below, above]


def _plot_history(report: Mapping[str, Any], metric: str, title: str, ylabel: str) -> bytes:
    """A training metric at each epoch end against wall-clock time, one line per run.

    For accuracy, a star marks where each run reached the target and a dashed
    line shows the target.

    Args:
        report: `build_report` output.
        metric: the history key (`loss`, `accuracy`).
        title: the plot title.
        ylabel: the y axis label.

    Returns:
        PNG bytes.
    """
    fig, ax = _figure()
    colors = strategy_colors(report)
    plotted = False
    for r in report.get("results", []):
        values = (r.get("history") or {}).get(metric) or (
            accuracy_history(r) if metric == "accuracy" else []
        )
        elapsed = epoch_end_times(r)
        n = min(len(values), len(elapsed))
        if not n:
            continue
        ax.plot(
            elapsed[:n],
            values[:n],
            marker="o",
            markersize=4,
            linewidth=1.8,
            color=colors[r["name"]],
            label=r["name"],
        )
        plotted = True
        if metric == "accuracy" and r.get("time_to_target_s") is not None:
            t = r["time_to_target_s"]
            y = values[elapsed.index(t)] if t in elapsed else report["target_value"]
            ax.plot(
                [t],
                [y],
                marker="*",
                markersize=13,
                color=colors[r["name"]],
                markeredgecolor="black",
                markeredgewidth=0.6,
                linestyle="none",
            )
    if metric == "accuracy" and report.get("target_value") is not None:
        ax.axhline(
            report["target_value"],
            color="#111827",
            linestyle="--",
            linewidth=1,
            label=f"target {pct(report['target_value'])} (★ = reached)",
        )
    if plotted:
        ax.legend(fontsize=8, frameon=False)
    else:
        _no_data(ax, metric)
    ax.set_xlim(left=0)
    ax.set_xlabel("wall-clock seconds since fit start")
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11)
    return _png(fig)


def plot_loss_vs_time(report: Mapping[str, Any]) -> bytes:
    """Training loss at each epoch end against wall-clock time; PNG bytes."""
    return _plot_history(report, "loss", "Training loss against wall-clock time", "training loss")


def plot_accuracy_vs_time(report: Mapping[str, Any]) -> bytes:
    """Training accuracy against wall-clock time with the target line; PNG bytes."""
    return _plot_history(
        report, "accuracy", "Training accuracy against wall-clock time", "training accuracy"
    )


def plot_epoch_times(report: Mapping[str, Any]) -> bytes:
    """Grouped bars of seconds per epoch for each run; PNG bytes."""
    fig, ax = _figure()
    colors = strategy_colors(report)
    results = [r for r in report.get("results", []) if r.get("epoch_seconds")]
    if results:
        width = 0.8 / len(results)
        for i, r in enumerate(results):
            xs = [
                e + 1 + (i - (len(results) - 1) / 2) * width for e in range(len(r["epoch_seconds"]))
            ]
            ax.bar(xs, r["epoch_seconds"], width=width, color=colors[r["name"]], label=r["name"])
        epochs = max(len(r["epoch_seconds"]) for r in results)
        ax.set_xticks(range(1, epochs + 1))
        ax.legend(fontsize=8, frameon=False)
    else:
        _no_data(ax, "epoch times")
    ax.grid(False, axis="x")
    ax.set_xlabel("epoch (the first includes tracing and warm-up)")
    ax.set_ylabel("seconds")
    ax.set_title("Seconds per epoch", loc="left", fontsize=11)
    return _png(fig)


def phase_seconds(record: Mapping[str, Any]) -> dict[str, float]:
    """A record's `phase_seconds` as the stacked segments of `PHASES` (empty when absent)."""
    phases = record.get("phase_seconds") or {}
    if not phases:
        return {}
    seconds = {key: float(phases.get(key) or 0.0) for key, _, _ in PHASES if key in phases}
    if "fit" in phases:
        seconds["fit_other"] = max(0.0, float(phases["fit"]) - seconds.get("epochs", 0.0))
    return seconds


def plot_phases(report: Mapping[str, Any]) -> bytes:
    """Stacked horizontal bars of where each run's time went (the chief's phases); PNG bytes."""
    results = [r for r in report.get("results", []) if phase_seconds(r)]
    fig, ax = _figure(max(3.0, 1.6 + 0.55 * len(results)))
    if results:
        names = [r["name"] for r in results][::-1]
        left = [0.0] * len(names)
        for key, label, color in PHASES:
            widths = [phase_seconds(r).get(key, 0.0) for r in results][::-1]
            ax.barh(names, widths, left=left, color=color, height=0.6, label=label)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        for y, total in enumerate(left):
            ax.text(total * 1.01, y, f"{total:.1f} s", va="center", fontsize=9)
        ax.set_xlim(0, max(left) * 1.18 or 1.0)
        ax.legend(
            fontsize=8, frameon=False, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.18)
        )
    else:
        _no_data(ax, "phase times")
    ax.grid(False, axis="y")
    ax.set_xlabel("seconds of the chief process, from its start to its record")
    ax.set_title("Where the time went", loc="left", fontsize=11)
    return _png(fig)


def render_plots(report: Mapping[str, Any]) -> dict[str, bytes]:
    """All plots of a report, file name -> PNG bytes (names in `PLOT_FILES`)."""
    return {
        "throughput.png": plot_throughput(report),
        "phases.png": plot_phases(report),
        "loss_vs_time.png": plot_loss_vs_time(report),
        "accuracy_vs_time.png": plot_accuracy_vs_time(report),
        "epoch_times.png": plot_epoch_times(report),
    }
