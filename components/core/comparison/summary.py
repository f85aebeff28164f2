"""The report as text: a plain table for terminals and a Markdown summary, with their notes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from components.core import speed_options
from components.core.comparison import failures
from components.core.comparison.analysis import target_words
from components.core.comparison.measured_on import hardware_lines, recommendation_check
from components.core.comparison.values import usd


def _accuracy(value: float) -> str:
    """An accuracy as a percentage with two decimals (0.9554 -> `95.54%`)."""
    return f"{100 * value:.2f}%"


# The columns of every results table: record key, heading, cell format. Every time
# says which time it is: time to target from the start of fit, time inside epochs.
TEXT_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("name", "Strategy", str),
    ("num_replicas", "Replicas", lambda v: f"{v:d}"),
    ("examples_per_second", "Steady examples/s", lambda v: f"{v:,.1f}"),
    ("speedup", "Speed-up", lambda v: f"{v:.2f}×"),
    ("scaling_efficiency", "Scaling eff.", lambda v: f"{100 * v:.1f}%"),
    ("time_to_target_s", "To target (s from fit start)", lambda v: f"{v:.1f}"),
    ("eval_accuracy", "Eval accuracy", _accuracy),
    ("eval_loss", "Eval loss", lambda v: f"{v:.4f}"),
    ("wall_seconds", "In epochs (s)", lambda v: f"{v:.1f}"),
    ("seconds_per_epoch", "Per epoch (s)", lambda v: f"{v:.2f}"),
    ("estimated_cost_usd", "Cost of epochs", lambda v: usd(v)),
)

# The console's narrower table (at most 100 columns): record key, heading, cell format.
CONSOLE_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("name", "Strategy", str),
    ("num_replicas", "Replicas", lambda v: f"{v:d}"),
    ("examples_per_second", "Steady ex/s", lambda v: f"{v:,.0f}"),
    ("speedup", "Speed-up", lambda v: f"{v:.2f}×"),
    ("time_to_target_s", "To target s", lambda v: f"{v:.1f}"),
    ("eval_quality", "Eval", lambda v: f"{v:.4g}"),
    ("wall_seconds", "Epochs s", lambda v: f"{v:.1f}"),
    ("estimated_cost_usd", "Cost", lambda v: usd(v)),
)
CONSOLE_WIDTH = 100

# Decimal places the HTML/Markdown cells show, for checking them against the JSON.
DISPLAY_PRECISION = {
    "num_replicas": 0,
    "examples_per_second": 1,
    "speedup": 2,
    "scaling_efficiency": 3,  # shown as a percentage with one decimal
    "time_to_target_s": 1,
    "eval_accuracy": 4,  # shown as a percentage with two decimals
    "eval_loss": 4,
    "wall_seconds": 1,
    "seconds_per_epoch": 2,
    "estimated_cost_usd": 6,
}

# The measures whose spread over repeated runs is shown: `spread` key, heading, format.
SPREAD_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("seconds_per_epoch", "Per epoch (s)", lambda v: f"{v:.2f}"),
    ("examples_per_second", "Steady examples/s", lambda v: f"{v:,.0f}"),
    ("time_to_target_s", "To target (s)", lambda v: f"{v:.1f}"),
    ("eval_quality", "Eval quality", lambda v: f"{v:.4g}"),
)


# What a missing value means, where it is not simply unknown.
_MISSING = {
    "time_to_target_s": "not reached",
    "speedup": "n/a",  # no one_device baseline: see the baseline's description
    "scaling_efficiency": "n/a",
}


def _cell(record: Mapping[str, Any], key: str, fmt: Callable[[Any], str]) -> str:
    """One formatted cell; a dash (or `not reached`) for a missing value."""
    value = record.get(key)
    if value is None:
        return _MISSING.get(key, "–")
    return fmt(value)


def table_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """The cells of each result, in the order of `TEXT_COLUMNS`."""
    return [[_cell(r, key, fmt) for key, _, fmt in TEXT_COLUMNS] for r in report.get("results", [])]


def spread_heading(report: Mapping[str, Any]) -> str | None:
    """The spread table's title, or None when every strategy ran once (nothing to spread)."""
    if (report.get("repeats") or 1) < 2:
        return None
    metric = report.get("target_metric") or "accuracy"
    return (
        f"Spread over repeated runs (median, min–max over N interleaved runs; "
        f"eval quality is the test {metric})"
    )


def spread_headers() -> list[str]:
    """The spread table's column headings."""
    return ["Strategy", "N", *(title for _, title, _ in SPREAD_COLUMNS)]


def spread_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """Per strategy: its name, runs and `median (min–max)` of each measure in `SPREAD_COLUMNS`."""
    accuracy = (report.get("target_metric") or "accuracy") == "accuracy"
    rows = []
    for r in report.get("results", []):
        spread = r.get("spread") or {}
        cells = [r["name"], str(r.get("repeats") or 1)]
        for key, _, fmt in SPREAD_COLUMNS:
            if key == "eval_quality" and accuracy:
                fmt = _accuracy  # as the Eval accuracy column shows it
            cells.append(_spread_cell(spread.get(key), fmt, _MISSING.get(key, "–")))
        rows.append(cells)
    return rows


def _spread_cell(summary: Mapping[str, Any] | None, fmt: Callable[[Any], str], missing: str) -> str:
    """`1,234 (1,200–1,260)`; a missing median or bound in words."""
    if not summary:
        return "–"

    def shown(value: Any) -> str:
        return missing if value is None else fmt(value)

    return f"{shown(summary['median'])} ({shown(summary['min'])}–{shown(summary['max'])})"


def _aligned(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a plain-text table: the first column left-aligned, the others right."""
    widths = [max(len(x) for x in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        out = [cells[0].ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in rows)]


def summary_table(report: Mapping[str, Any]) -> str:
    """The report for a console: a table at most `CONSOLE_WIDTH` columns wide and the verdict.

    Everything else (the winner's reason, the rule, hardware, the rehearsal
    note, prices, the spread table) is in `summary.md` and `report.html`.

    Args:
        report: `build_report` output.

    Returns:
        Lines of aligned columns and the one-line verdict.
    """
    metric = report.get("target_metric") or "accuracy"
    rehearsal = any(cost_is_a_rehearsal(r) for r in report.get("results", []))
    columns = []
    for key, title, fmt in CONSOLE_COLUMNS:
        if key == "eval_quality":
            title, fmt = (
                (f"Eval {metric}"[:12], fmt) if metric != "accuracy" else ("Eval acc.", _accuracy)
            )
        elif key == "estimated_cost_usd" and rehearsal:
            title = "Cost*"
        columns.append((key, title, fmt))
    rows = [[_cell(r, key, fmt) for key, _, fmt in columns] for r in report.get("results", [])]
    rows += failures.table_rows(report, len(columns))
    lines = _aligned([title for _, title, _ in columns], rows)
    line = report.get("winner_line") or f"Winner: {report.get('winner') or '–'}."
    lines += [
        "",
        line,
        *failures.failure_lines(report),
        *(report.get("stall_notes") or []),
        *price_basis(report),
    ]
    if rehearsal:
        lines.append("* a local CPU rehearsal, priced as cloud machines for its time in epochs")
    return "\n".join(lines) + "\n"


def cost_is_a_rehearsal(record: Mapping[str, Any]) -> bool:
    """Whether a run's cost is a local rehearsal's, priced as the cloud machines it stood for."""
    return "local rehearsal" in str(record.get("priced_as") or "")


def summary_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown (a KFP Markdown artifact, a CI job summary).

    Args:
        report: `build_report` output.

    Returns:
        A heading, the winner with its reason, a results table and notes.
    """
    headers = [title for _, title, _ in TEXT_COLUMNS]
    winner = report.get("winner")
    out = [
        "# Strategy comparison",
        "",
        f"**Winner: {winner or '–'}.** {_md_escape(report.get('winner_reason', ''))}",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|",
    ]
    for r, row in zip(report.get("results", []), table_rows(report), strict=True):
        cells = [_md_escape(c) for c in row]
        if r.get("name") == winner:
            cells[0] = f"**{cells[0]}**"
        out.append("| " + " | ".join(cells) + " |")
    for cells in failures.table_rows(report, len(headers)):
        out.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    out.append("")
    heading = spread_heading(report)
    if heading:
        out += [f"**{heading}**", "", "| " + " | ".join(spread_headers()) + " |"]
        out.append("|" + "|".join([":---"] + ["---:"] * (len(spread_headers()) - 1)) + "|")
        out += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in spread_rows(report)]
        out.append("")
    out.extend(f"- {_md_escape(note)}" for note in notes(report))
    return "\n".join(out) + "\n"


def _md_escape(text: str) -> str:
    """`text` safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|")


def recommended(report: Mapping[str, Any]) -> str | None:
    """The strategy `strategist select` recommended, or None when none was passed."""
    rec = report.get("recommendation")
    if not isinstance(rec, Mapping) or not rec.get("strategy"):
        return None
    return str(rec["strategy"])


def notes(report: Mapping[str, Any]) -> list[str]:
    """The notes under a report: baseline, hardware, definitions, prices, recommendation.

    Args:
        report: `build_report` output.

    Returns:
        One sentence or more per note, in display order.
    """
    out = failures.failure_lines(report)
    if report.get("winner_rule"):
        out.append(report["winner_rule"])
    if report.get("baseline"):
        out.append(report["baseline"]["description"])
    out.extend(hardware_lines(report))
    out.extend(speed_options.lines(report.get("results") or []))
    out.extend(learning_rate_lines(report.get("results") or []))
    if report.get("rehearsal_note"):
        out.append(report["rehearsal_note"])
    out.extend(report.get("stall_notes") or [])
    out.append(
        f"Time to target: wall-clock seconds from the start of fit to the end of the first "
        f"epoch whose {_target(report)} was reached (epoch granularity). In epochs: the time "
        "inside epochs (not start-up, set-up, export or evaluation); per epoch: that over the "
        "epochs run. Steady examples/s: the median of the epochs after the first (which holds "
        "tracing and warm-up)."
    )
    prices = report.get("prices") or {}
    out.extend(cost_lines(report))
    if any(cost_is_a_rehearsal(r) for r in report.get("results", [])):
        out.append(
            "A local CPU rehearsal's cost is what the same processes would cost as cloud "
            "machines for its time in epochs, not a price of this machine; cost never decides "
            f"the winner. {prices.get('convention', '')}".rstrip()
        )
    if prices.get("caveat"):
        out.append(f"Prices: {prices['caveat']}")
    for r in report.get("results", []):
        if r.get("cost_note"):
            out.append(f"{r['name']}: cost not estimated: {r['cost_note']}.")
    rec = recommended(report)
    if rec:
        out.append(
            f"`strategist select` would have chosen {rec}. {recommendation_check(report, rec)[1]}"
        )
    return out


def price_basis(report: Mapping[str, Any]) -> list[str]:
    """Which prices the costs are at, and the preemption assumption: lines of at most
    `CONSOLE_WIDTH` characters."""
    results = report.get("results") or []
    capacity = report.get("capacity") or {}
    as_of = report.get("prices_as_of", "?")
    if not (capacity.get("preemptible") or any(r.get("preemption") for r in results)):
        return [f"Cost: on-demand list prices ({as_of})."]
    on_spot = any(r.get("priced_on") == "spot" for r in results)
    prices = f"Spot prices ({as_of})" if on_spot else f"on-demand list prices ({as_of})"
    given = "given" if capacity.get("rate_given") else "default: one a day"
    return [
        f"Cost: preemptible machines at {prices}, with expected preemptions:",
        f"{capacity.get('preemptions_per_machine_hour', 0):.3g} per machine-hour ({given}), "
        f"each a {capacity.get('restart_seconds', 0):.0f} s restart and half the checkpoint "
        "interval.",
    ]


def cost_lines(report: Mapping[str, Any]) -> list[str]:
    """How each cost was priced: the prices used (Spot or on demand), their date and
    source, and on Spot what the expected preemptions cost each strategy."""
    prices = report.get("prices") or {}
    results = report.get("results") or []
    preempted = [r for r in results if r.get("preemption")]
    what = "the time in epochs"
    if preempted:
        what += " and the time expected preemptions take"
    out = [
        f"{' '.join(price_basis(report))} Cost of epochs = hourly price × ({what}), with "
        f"prices as of "
        f"{report.get('prices_as_of', '?')}: {prices.get('source', 'source unknown')}"
    ]
    for r in preempted:
        p = r["preemption"]
        if p.get("lost_seconds") is None:
            continue  # unpriced: its cost note says why
        out.append(
            f"{r['name']} on Spot: {p['expected_preemptions']:.2f} preemptions expected "
            f"({p['machines']} machine(s)), each losing {p['loss_seconds']:,.0f} s "
            f"({p['loss_seconds'] - p['redone_seconds']:.0f} s restart + "
            f"{p['redone_seconds']:,.1f} s trained again, checkpoints written "
            f"{p['checkpoint_every']}; --checkpoint-every): {usd(p['usd'])} of its cost."
        )
    return out


def learning_rate_lines(records: list[Mapping[str, Any]]) -> list[str]:
    """One sentence naming each run's learning rate when the runs trained at different rates.

    The rate is the peak each run trained at (`compile_settings.learning_rate`): scaled
    linearly with its batch per optimizer update, which differs between strategies (a
    parameter-server worker updates with its own batch). None (a schedule) is left out.
    """
    rates = {
        r["name"]: (r.get("compile_settings") or {}).get("learning_rate")
        for r in records
        if (r.get("compile_settings") or {}).get("learning_rate") is not None
    }
    if len(set(rates.values())) < 2:
        return []
    each = ", ".join(f"{name} {rate:g}" for name, rate in rates.items())
    return [
        f"Learning rates differ: {each} (each scaled linearly with its batch per optimizer "
        "update; --no-scale-learning-rate trains every strategy at the rate given)."
    ]


def _target(report: dict) -> str:
    """The report's target in words: `training accuracy of 90.0 %`."""
    return target_words(report.get("target_metric") or "accuracy", report.get("target_value", 0))
