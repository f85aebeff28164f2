"""How `strategist select` prints an answer: the short answer (at most 12 lines of at most
100 columns), and the full table with every reason as text or Markdown."""

from __future__ import annotations

import textwrap
from typing import Any

from components.core.selection.cost import price_shown
from components.core.selection.explanation import pct, plural
from components.core.selection.prediction import Prediction
from components.core.selection.ranges import widest_unknown
from components.core.strategy_spec import spec_for

WIDTH = 100
MAX_LINES = 12
HEADER = ["strategy", "workers/ps/gpus", "step ms", "compute ms", "comm ms", "examples/s",
          "efficiency", "measured/s", "USD/1M examples"]  # fmt: skip


def summary_lines(rec: Any) -> list[str]:
    """The short answer of `rec` (a `recommendation.Recommendation`), line by line."""
    topology, chosen = rec.topology, rec.chosen
    if not rec.supported or chosen is None:
        return _fit([f"recommended: {rec.strategy} (not supported by Strategist)",
                     f"why:         {rec.model.name} does not fit one {topology.gpu} GPU's memory, "
                     "even at batch 1", "--explain prints every reason."])  # fmt: skip
    layout, on = chosen.layout, plural(chosen.layout.workers, "machine")
    machines = f"{on} x {layout.gpus_per_machine} {chosen.machines_gpu or topology.gpu}"
    if topology.gpu_mix and not chosen.machines_gpu and layout.workers == topology.machines:
        mix = " + ".join(f"{n} {name}" for name, n in topology.gpu_mix)
        machines = f"{on} ({mix}, {layout.gpus_per_machine} GPUs each)"
    servers = f", {layout.ps} parameter servers" if layout.ps else ""
    lines = [f"recommended: {rec.strategy} on {machines}{servers}"]
    if rec.deciding_inputs:  # a guess never decides silently: in the first two lines
        lines.append("depends on:  an estimate; the choice differs at its ends: give "
                     + ", ".join(rec.deciding_inputs))  # fmt: skip
    lines += [*_speed(chosen, rec.prices), f"why:         {decided_by(rec)}"]
    lines += [f"alternative: {a}" for a in _alternatives(rec)]
    if rec.machine_options and rec.layout.workers == topology.machines > 1:
        above = max([m for m, _, _, e in rec.machine_options if e >= 0.5] or [1])
        every = rec.machine_options[-1][3]
        lines.append(f"note:        all {topology.machines} machines scale at {every:.0%} machine "
                     f"efficiency; {above} would stay above 50%")  # fmt: skip
    return _fit([*lines, "--explain prints every reason and the full table."])


def candidate_rows(rec: Any) -> list[list[str]]:
    """The full table's rows: the chosen candidate first, marked `> `; no number if infeasible."""
    rows = []
    for i, p in enumerate(([rec.chosen] if rec.chosen else []) + rec.alternatives):
        label = ("> " if i == 0 and rec.supported else "") + p.label
        layout = f"{p.layout.workers}/{p.layout.ps}/{p.layout.gpus_per_machine}"
        if not p.feasible:  # a candidate that cannot run has no speed to show
            rows.append([f"{label} (infeasible: {p.note})", layout, *["-"] * (len(HEADER) - 2)])
            continue
        measured = "-"
        if p.measured_examples_per_second:  # less the preemption losses its prediction bears
            measured = f"{p.measured_examples_per_second:,.0f}"
            measured += f" less {pct(p.overhead_fraction)}" if p.overhead_fraction else ""
        cost = p.usd_per_million_examples
        ms = [f"{s * 1e3:,.1f}" for s in (p.step_time_s, p.compute_s, p.communication_s)]
        rows.append([label, layout, *ms,
                     f"{p.examples_per_second:,.0f}" + (" (input)" if p.input_capped else ""),
                     f"{p.scaling_efficiency:.0%}", measured,
                     "-" if cost is None else price_shown(cost)])  # fmt: skip
    return rows


def decided_by(rec: Any) -> str:
    """The rule that decided, in a few words, from the answer's data: the first that holds."""
    topology, spec, chosen = rec.topology, spec_for(rec.strategy), rec.chosen
    causes = " and ".join(word for word, on in (
        ("preemptible machines", topology.preemptible),
        ("machines of uneven speed", topology.heterogeneous),
        ("a large sparse embedding table", rec.model.sparse_embedding_params),
    ) if on)  # fmt: skip
    one_machine, measured = chosen.layout.workers == 1, chosen.measured_examples_per_second
    rules = (
        (measured is not None, "a measurement (--history) ranks it first"),
        (spec.uses_ps and causes, f"{causes}: parameter servers, not slower by prediction"),
        (spec.uses_ps, "asynchronous updates allowed (--async-ok) and predicted fastest"),
        (spec.single_device and topology.total_gpus > 1, "one device, predicted faster than more"),
        (spec.single_device, "one device"),
        (one_machine and topology.machines > 1, "one machine, predicted faster than more of them"),
        (one_machine, "one machine with several GPUs: synchronous all-reduce within it"),
        (True, "several machines, synchronous: one all-reduce ring over every GPU"),
    )
    return next(why for holds, why in rules if holds)


def _speed(p: Prediction, prices: Any) -> list[str]:
    """Examples/s, measured or predicted with their range and the unknown that makes it wide."""
    currency, cost = (prices or {}).get("currency", "USD"), p.usd_per_million_examples
    if p.measured_examples_per_second is not None:
        priced = "" if cost is None else f", {cost:,.3g} {currency} per 1M examples"
        return [f"measured:    {p.rank_examples_per_second:,.0f} examples/s{priced}"]
    (low, high), (e_low, e_high) = p.examples_per_second_range, p.scaling_efficiency_range
    efficiency = f"{p.scaling_efficiency:.0%} scaling efficiency"
    if p.efficiency_group:  # one GPU's is 1 by definition
        efficiency += f" ({e_low * 100:.0f}-{e_high:.0%})"
    lines = [f"predicted:   {p.examples_per_second:,.0f} examples/s ({low:,.0f}-{high:,.0f}), "
             + efficiency]  # fmt: skip
    if cost is not None:
        cheap, dear = p.usd_per_million_examples_range
        lines.append(f"price:       {cost:,.3g} {currency} per 1M examples "
                     f"({cheap:,.3g}-{dear:,.3g})")  # fmt: skip
    unknown = widest_unknown(p.scaling_efficiency, p.efficiency_group or None, p.speed_group)
    return [*lines, f"unsure:      {unknown.what}; measure {unknown.measure}"]


def _alternatives(rec: Any) -> list[str]:
    """The fastest feasible alternative of another strategy or size, and a cheaper one."""
    chosen, feasible = rec.chosen, [a for a in rec.alternatives if a.feasible]
    if not feasible:
        return []

    def named(a: Prediction) -> str:  # `parameter_server on 4 machines, 2 servers`
        servers = f", {a.layout.ps} servers" if a.layout.ps else ""
        return f"{a.label} on {plural(a.layout.workers, 'machine')}{servers}"

    fast = max(feasible, key=lambda a: a.rank_examples_per_second)
    ratio = fast.rank_examples_per_second / chosen.rank_examples_per_second
    out = [f"{named(fast)}, {fast.rank_examples_per_second:,.0f} examples/s ({ratio:.2f}x)"]
    priced = [a for a in feasible if a.usd_per_million_examples is not None]
    cost = chosen.usd_per_million_examples
    cheap = min(priced, key=lambda a: a.usd_per_million_examples) if priced else fast  # no other
    if cost is not None and cheap is not fast and cheap.usd_per_million_examples < cost:
        out.append(f"{named(cheap)} is cheaper per example, "
                   f"{cheap.rank_examples_per_second:,.0f} examples/s")  # fmt: skip
    return out


def _fit(lines: list[str]) -> list[str]:
    """`lines` wrapped to `WIDTH` columns, at most `MAX_LINES` of them (the last one kept)."""
    out = [w for line in lines for w in textwrap.wrap(line, WIDTH, subsequent_indent=" " * 13)]
    return out if len(out) <= MAX_LINES else out[: MAX_LINES - 1] + [out[-1]]


def _table(rec: Any) -> tuple[str, list[str], list[list[str]]]:
    """`rec`'s layout in words (or ``), the table's header in its prices' currency, its rows."""
    layout, gpu = rec.layout, rec.chosen.machines_gpu if rec.chosen else ""
    if layout:
        layout = f"workers {layout.workers}, ps {layout.ps}, GPUs per machine "
        layout += f"{rec.layout.gpus_per_machine}" + (f", on the {gpu} machines" if gpu else "")
    currency = (rec.prices or {}).get("currency", "USD")
    return layout, [*HEADER[:-1], f"{currency}/1M examples"], candidate_rows(rec)


def as_markdown(rec: Any) -> str:
    """`rec` (a `recommendation.Recommendation`) as Markdown, for a KFP Markdown artifact."""
    layout, header, rows = _table(rec)
    title = rec.strategy + ("" if rec.supported else " (not supported)")
    lines = [f"## Recommended strategy: `{title}`", "", f"Hardware: {rec.topology.describe()}; "
             f"model: {rec.model.name}; per-GPU batch {rec.batch_size}.",
             *([f"Layout: {layout}."] if layout else []), ""]  # fmt: skip
    if rows:
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    return "\n".join([*lines, "### Reasons", *(f"- {r}" for r in rec.reasons)]) + "\n"


def as_text(rec: Any) -> str:
    """`rec` as plain text for the terminal: the full table and every reason (`--explain`)."""
    layout, header, rows = _table(rec)
    title = rec.strategy + ("" if rec.supported else " (not supported by Strategist)")
    lines = [f"recommended: {title}", *([f"layout:      {layout}"] if layout else [])]
    if rows:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines += ["", *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                        for r in [header, *rows])]  # fmt: skip
    return "\n".join([*lines, "", "reasons:", *(f"  - {r}" for r in rec.reasons)])
