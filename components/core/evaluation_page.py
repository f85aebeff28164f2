"""The evaluate step's page for the KFP UI: the test metrics and, for a regression, a
predicted-vs-true plot.

The KFP UI shows an `HTML` output artifact's file as a page
(https://www.kubeflow.org/docs/components/pipelines/user-guides/core-functions/visualize-results/);
it is one file, so the plot is inline SVG, written here by hand: a few dozen
lines of markup need no plotting library in the evaluate step, and each point
stays an element a test can count and place.
"""

from __future__ import annotations

import html
import math

from components.core.evaluation import EvalResult, lower_is_better

# The plot's size and the margins that hold the axis labels, in SVG user units (pixels).
WIDTH, HEIGHT = 480, 420
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 48
POINT_RADIUS = 2.5


def render(result: EvalResult) -> str:
    """The whole page: a metrics table, then the plot (regression) or the per-class report."""
    title = f"Test split: {result.task}, {result.num_examples:,} examples"
    parts = [f"<h2>{title}</h2>", _metrics_table(result)]
    points = [p for p in result.points if all(map(math.isfinite, p))]
    if points:
        parts += [
            predicted_vs_true_svg(points),
            f"<p>{len(points):,} test examples (evenly spaced through the split); a "
            "point on the diagonal is predicted exactly, above it too high.</p>",
        ]
    if len(points) < len(result.points):
        parts.append(
            f"<p>{len(result.points) - len(points):,} predictions are not finite numbers and "
            "are not drawn: the model diverged (lower the learning rate).</p>"
        )
    if result.per_class:
        parts.append(_per_class_table(result))
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{_STYLE}</style></head><body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


_STYLE = (
    "body{font-family:sans-serif;margin:16px;color:#111827}"
    "table{border-collapse:collapse;margin:8px 0 16px}"
    "td,th{border:1px solid #d1d5db;padding:3px 10px;text-align:right}"
    "th{background:#f3f4f6}td:first-child,th:first-child{text-align:left}"
)


def _metrics_table(result: EvalResult) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(str(name))}</td><td>{value:.5g}</td>"
        f"<td>{'lower' if lower_is_better(name) else 'higher'}</td></tr>"
        for name, value in sorted(result.metrics.items())
    )
    return f"<table><tr><th>metric</th><th>value</th><th>better</th></tr>{rows}</table>"


def _per_class_table(result: EvalResult) -> str:
    rows = "".join(
        f"<tr><td>{c['class']}</td><td>{c['precision']:.3f}</td><td>{c['recall']:.3f}</td>"
        f"<td>{c['f1']:.3f}</td><td>{c['support']}</td></tr>"
        for c in result.per_class
    )
    return (
        "<table><tr><th>class</th><th>precision</th><th>recall</th><th>F1</th>"
        f"<th>support</th></tr>{rows}</table>"
    )


def axis_range(values: list[float]) -> tuple[float, float]:
    """One range for both axes (so the diagonal is y = x), padded by 5 % each side."""
    low, high = min(values), max(values)
    pad = (high - low) * 0.05 or abs(low) * 0.05 or 1.0
    return low - pad, high + pad


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values (1, 2 or 5 times a power of ten apart) between `low` and `high`."""
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def predicted_vs_true_svg(points: list[tuple[float, float]]) -> str:
    """An SVG scatter plot of (true, predicted) pairs, with the y = x diagonal.

    Each pair is one `<circle class="point">` (x: the true value, y: the
    prediction, up being larger); the diagonal is `<line class="identity">`.
    """
    low, high = axis_range([v for point in points for v in point])

    def x(value: float) -> float:
        return LEFT + (value - low) / (high - low) * (WIDTH - LEFT - RIGHT)

    def y(value: float) -> float:
        return HEIGHT - BOTTOM - (value - low) / (high - low) * (HEIGHT - TOP - BOTTOM)

    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    marks = []
    for value in ticks(low, high):
        label = f"{value:.6g}"
        marks.append(
            f'<line x1="{x(value):.1f}" y1="{bottom}" x2="{x(value):.1f}" y2="{bottom + 4}" '
            'stroke="#6b7280"/>'
            f'<text x="{x(value):.1f}" y="{bottom + 16}" text-anchor="middle">{label}</text>'
            f'<line x1="{LEFT - 4}" y1="{y(value):.1f}" x2="{LEFT}" y2="{y(value):.1f}" '
            'stroke="#6b7280"/>'
            f'<text x="{LEFT - 7}" y="{y(value) + 4:.1f}" text-anchor="end">{label}</text>'
        )
    circles = "".join(
        f'<circle class="point" cx="{x(t):.2f}" cy="{y(p):.2f}" r="{POINT_RADIUS}"/>'
        for t, p in points
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11" role="img">'
        "<title>Predicted against true value, test split</title>"
        f'<rect x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" '
        'fill="none" stroke="#9ca3af"/>'
        + "".join(marks)
        + f'<line class="identity" x1="{x(low):.2f}" y1="{y(low):.2f}" x2="{x(high):.2f}" '
        f'y2="{y(high):.2f}" stroke="#9ca3af" stroke-dasharray="4 3"/>'
        f'<g fill="#2563eb" fill-opacity="0.55">{circles}</g>'
        f'<text x="{(LEFT + right) / 2}" y="{HEIGHT - 10}" text-anchor="middle">true value</text>'
        f'<text transform="translate(14 {(TOP + bottom) / 2}) rotate(-90)" '
        'text-anchor="middle">predicted value</text>'
        "</svg>"
    )
