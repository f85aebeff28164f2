"""The report as one self-contained HTML page: inline CSS, plots embedded as data URIs."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from html import escape
from typing import Any

from components.core import speed_options
from components.core.comparison import failures
from components.core.comparison.analysis import target_words
from components.core.comparison.measured_on import hardware_lines, recommendation_check
from components.core.comparison.plots import PLOT_FILES, render_plots, strategy_colors
from components.core.comparison.summary import (
    TEXT_COLUMNS,
    notes,
    recommended,
    spread_headers,
    spread_heading,
    spread_rows,
    table_rows,
)

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f3f4f6; color: #111827;
  font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 28px 32px 40px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 10px; }
.meta { color: #4b5563; margin: 0 0 18px; }
.callouts { display: grid; grid-template-columns: 2fr 1fr; gap: 16px; }
.card { background: #fff; border: 1px solid #e5e7eb; border-radius: 10px; padding: 16px 20px; }
.winner { border-left: 6px solid #16a34a; }
.winner .label, .rec .label, .rehearsal .label { font-size: 12px; letter-spacing: .06em;
  text-transform: uppercase; color: #4b5563; margin: 0; }
.winner .name { font-size: 24px; font-weight: 700; margin: 2px 0 6px; }
.rec .name { font-size: 20px; font-weight: 600; margin: 2px 0 6px; }
.agree { color: #166534; } .differ { color: #9a3412; } .unlike { color: #4b5563; }
.rehearsal { border-left: 6px solid #d97706; margin-top: 16px; }
#hardware { margin: 0 0 6px; padding-left: 20px; color: #374151; }
.table-wrap { background: #fff; border: 1px solid #e5e7eb; border-radius: 10px; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 9px 12px; border-bottom: 1px solid #e5e7eb; white-space: nowrap; }
th { background: #f9fafb; font-size: 13px; color: #374151; text-align: right; }
td { text-align: right; }
th:first-child, td:first-child { text-align: left; }
tbody tr:last-child td { border-bottom: none; }
tr.is-winner td { background: #f0fdf4; font-weight: 600; }
tr.did-not-finish td { background: #fef2f2; color: #991b1b; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 8px; }
.muted { color: #9ca3af; font-weight: 400; }
.plots { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
figure { margin: 0; background: #fff; border: 1px solid #e5e7eb; border-radius: 10px;
  padding: 10px; }
figure img { width: 100%; height: auto; display: block; }
figcaption { font-size: 13px; color: #4b5563; padding: 6px 4px 0; }
ul.notes { color: #374151; padding-left: 20px; margin: 0; }
.caption { color: #4b5563; font-size: 13px; margin: 8px 2px 0; }
ul.notes li { margin-bottom: 6px; }
@media (max-width: 900px) { .callouts, .plots { grid-template-columns: 1fr; } }
"""

_CAPTIONS = {
    "throughput.png": "Examples per second per strategy; speed-up over one_device in brackets "
    "when it ran.",
    "phases.png": "Where each run's time went, from its chief's start to its record: start-up, "
    "set-up, epochs, the rest of fit, export and evaluation (phase_seconds).",
    "accuracy_vs_time.png": "Training accuracy at each epoch end; ★ marks reaching the target.",
    "loss_vs_time.png": "Training loss at each epoch end against wall-clock time.",
    "epoch_times.png": "Seconds per epoch; the first epoch includes graph tracing and warm-up.",
}


def render_html(report: Mapping[str, Any], plots: Mapping[str, bytes] | None = None) -> str:
    """The report as one self-contained HTML page.

    Plots are embedded as base64 PNG data URIs and the CSS is inline, so the
    page needs no other file or network access (the KFP UI's HTML viewer
    shows it as is).

    Args:
        report: `build_report` output.
        plots: file name -> PNG bytes; rendered from the report when None.

    Returns:
        The HTML text.
    """
    plots = render_plots(report) if plots is None else plots
    winner = report.get("winner")
    baseline = (report.get("baseline") or {}).get("description")
    recommendation = _recommendation(report)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Strategy comparison{f" — winner {escape(winner)}" if winner else ""}</title>
<style>{_CSS}</style>
</head>
<body>
<main>
<h1>Strategy comparison</h1>
<p class="meta">{_meta(report)}</p>
<ul id="hardware">{"".join(f"<li>{escape(line)}</li>" for line in _measured_lines(report))}</ul>
<section class="callouts">
<div class="card winner"><p class="label">Winner</p>
<p class="name" id="winner">{escape(winner or "no clear winner")}</p>
<p id="winner-reason">{escape(report.get("winner_reason", ""))}</p></div>
<div class="card rec"><p class="label">strategist select would choose</p>{recommendation}</div>
</section>
{_rehearsal(report)}
<h2>Results</h2>
<div class="table-wrap">
<table id="results">
<thead><tr>{_table_head()}</tr></thead>
<tbody>
{_table_body(report)}
</tbody>
</table>
</div>
{_baseline_caption(baseline)}
{_spread_table(report)}
<h2>Plots</h2>
<section class="plots">
{_figures(plots)}
</section>
<h2>Notes</h2>
<ul class="notes">{_note_items(report, baseline)}</ul>
</main>
</body>
</html>
"""


def _meta(report: Mapping[str, Any]) -> str:
    """The line under the title: dataset, model, target accuracy and generation time."""
    subject = " · ".join(
        f"{label} {escape(str(report[key]))}"
        for key, label in (("dataset", "dataset"), ("model", "model"))
        if report.get(key)
    )
    return " · ".join(
        x
        for x in (
            subject,
            "target "
            + target_words(
                report.get("target_metric") or "accuracy", report.get("target_value", 0)
            ),
            f"generated {escape(str(report.get('generated_at', '')))}",
        )
        if x
    )


def _recommendation(report: Mapping[str, Any]) -> str:
    """The recommendation card's content: the strategy, agreement and the first reasons."""
    rec = recommended(report)
    if not rec:
        return (
            '<p class="name muted">not given</p><p>No recommendation was passed to the report.</p>'
        )
    kind, sentence = recommendation_check(report, rec)
    out = f'<p class="name">{escape(rec)}</p><p class="{kind}">{escape(sentence)}</p>'
    reasons = (report.get("recommendation") or {}).get("reasons") or []
    if isinstance(reasons, list) and reasons:
        out += (
            "<ul class=notes>"
            + "".join(f"<li>{escape(str(x))}</li>" for x in reasons[:4])
            + "</ul>"
        )
    return out


def _rehearsal(report: Mapping[str, Any]) -> str:
    """The local-rehearsal card: what these numbers do and do not predict; empty otherwise."""
    note = report.get("rehearsal_note")
    if not note:
        return ""
    return (
        '<div class="card rehearsal" id="rehearsal"><p class="label">Local CPU rehearsal</p>'
        f"<p>{escape(note)}</p></div>"
    )


def _table_head() -> str:
    """The header cells of the results table."""
    return "".join(
        f'<th scope="col" data-key="{key}">{escape(title)}</th>' for key, title, _ in TEXT_COLUMNS
    )


def _table_body(report: Mapping[str, Any]) -> str:
    """The rows of the results table, one line each; the winner's row is marked."""
    colors = strategy_colors(report)
    winner = report.get("winner")
    rows = []
    for r, texts in zip(report.get("results", []), table_rows(report), strict=True):
        cells = "".join(
            _table_cell(r, key, text, colors)
            for (key, _, _), text in zip(TEXT_COLUMNS, texts, strict=True)
        )
        cls = ' class="is-winner"' if r["name"] == winner else ""
        rows.append(f'<tr{cls} data-name="{escape(r["name"])}">{cells}</tr>')
    for entry, texts in zip(
        report.get("failed") or [], failures.table_rows(report, len(TEXT_COLUMNS)), strict=True
    ):
        cells = "".join(
            f'<td data-key="{key}" class="{entry["outcome"]}">{escape(text)}</td>'
            for (key, _, _), text in zip(TEXT_COLUMNS, texts, strict=True)
        )
        rows.append(
            f'<tr class="did-not-finish" data-name="{escape(entry["name"])}" '
            f'title="{escape(entry["error"])}">{cells}</tr>'
        )
    return "\n".join(rows)


def _table_cell(record: Mapping[str, Any], key: str, text: str, colors: Mapping[str, str]) -> str:
    """One cell: a colour swatch before the name, missing values muted, cost explained.

    Args:
        record: the result the row shows.
        key: the column's record key.
        text: the formatted value (`table_rows`).
        colors: run name -> plot colour.

    Returns:
        The `<td>` element.
    """
    content = escape(text)
    if key == "name":
        content = (
            f'<span class="swatch" style="background:{colors[record["name"]]}"></span>' + content
        )
    elif record.get(key) is None:
        content = f'<span class="muted">{content}</span>'
    title = ""
    if key == "estimated_cost_usd" and (record.get("priced_as") or record.get("cost_note")):
        title = f' title="{escape(record.get("cost_note") or record["priced_as"])}"'
    return f'<td data-key="{key}"{title}>{content}</td>'


def _spread_table(report: Mapping[str, Any]) -> str:
    """The median and min–max of each measure over repeated runs; empty when each ran once."""
    heading = spread_heading(report)
    if not heading:
        return ""
    head = "".join(f'<th scope="col">{escape(title)}</th>' for title in spread_headers())
    body = "\n".join(
        f'<tr data-spread="{escape(row[0])}">'
        + "".join(f"<td>{escape(cell)}</td>" for cell in row)
        + "</tr>"
        for row in spread_rows(report)
    )
    return (
        f'<h2>Spread</h2><p class="caption">{escape(heading)}.</p>'
        f'<div class="table-wrap"><table id="spread"><thead><tr>{head}</tr></thead>'
        f"<tbody>\n{body}\n</tbody></table></div>"
    )


def _baseline_caption(baseline: str | None) -> str:
    """The baseline's description under the table; empty without a baseline."""
    return f'<p class="caption" id="baseline">{escape(baseline)}</p>' if baseline else ""


def _figures(plots: Mapping[str, bytes]) -> str:
    """The plots as `<figure>` elements with embedded PNGs, in the order of `PLOT_FILES`."""
    figures = []
    for name in PLOT_FILES:
        if name in plots:
            data = base64.b64encode(plots[name]).decode("ascii")
            caption = escape(_CAPTIONS[name])
            figures.append(
                f'<figure><img alt="{caption}" data-plot="{name}" '
                f'src="data:image/png;base64,{data}"><figcaption>{caption}</figcaption></figure>'
            )
    return "\n".join(figures)


def _measured_lines(report: Mapping[str, Any]) -> list[str]:
    """What the runs measured on and trained with, shown under the title."""
    return [*hardware_lines(report), *speed_options.lines(report.get("results") or [])]


def _note_items(report: Mapping[str, Any], baseline: str | None) -> str:
    """The notes as `<li>` elements, without what the page shows elsewhere.

    The baseline is under the table, the hardware under the title and the
    rehearsal note in its card.
    """
    shown = {baseline, report.get("rehearsal_note"), *_measured_lines(report)}
    return "".join(f"<li>{escape(n)}</li>" for n in notes(report) if n not in shown)
