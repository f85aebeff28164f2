"""How `strategist select` prints an answer: the short answer (at most 12 lines of at most
100 columns), and the full table with every reason as text or Markdown.
"""

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
# What decided a synchronous choice, by (what it runs on, whether the hardware has more of it).
DECIDED_BY = {
    ("device", False): "one device",
    ("device", True): "one device is predicted faster than any more of them together",
    ("machine", False): "one machine with several GPUs: synchronous all-reduce within it",
    ("machine", True): "one machine is predicted faster than more: the network costs more",
    ("machines", True): "several machines, synchronous: one all-reduce ring over every GPU",
}


def summary_lines(rec: Any) -> list[str]:
    """The short answer of `rec` (a `recommendation.Recommendation`), line by line."""
    topology, chosen = rec.topology, rec.chosen
    if not rec.supported or chosen is None:
        return _fit([
            f"recommended: {rec.strategy} (not supported by Strategist)",
            f"why:         {rec.model.name} does not fit one {topology.gpu} GPU's memory, even "
            "at batch 1",
            "--explain prints every reason.",
        ])  # fmt: skip
    layout = chosen.layout
    on = plural(layout.workers, "machine")
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
        lines.append(f"note:        all {topology.machines} machines scale at "
                     f"{rec.machine_options[-1][3]:.0%} machine efficiency; {above} would stay "
                     "above 50%")  # fmt: skip
    return _fit([*lines, "--explain prints every reason and the full table."])


def candidate_rows(rec: Any) -> list[list[str]]:
    """One row of the full table per candidate of `rec`, the chosen one first and marked
    `> `; a candidate that cannot run shows no number."""
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
        rows.append([label, layout, f"{p.step_time_s * 1e3:,.1f}", f"{p.compute_s * 1e3:,.1f}",
                     f"{p.communication_s * 1e3:,.1f}",
                     f"{p.examples_per_second:,.0f}" + (" (input)" if p.input_capped else ""),
                     f"{p.scaling_efficiency:.0%}", measured,
                     "-" if cost is None else price_shown(cost)])  # fmt: skip
    return rows


def decided_by(rec: Any) -> str:
    """The seed's rule that decided, in a few words, from the answer's data."""
    topology, spec = rec.topology, spec_for(rec.strategy)
    if rec.chosen.measured_examples_per_second is not None:
        return "a measurement (--history) ranks it first"
    if spec.uses_ps:
        causes = [word for word, on in (
            ("preemptible machines", topology.preemptible),
            ("machines of uneven speed", topology.heterogeneous),
            ("a large sparse embedding table", bool(rec.model.sparse_embedding_params)),
        ) if on]  # fmt: skip
        if causes:
            return " and ".join(causes) + ": parameter servers, not slower by prediction"
        return "asynchronous updates allowed (--async-ok) and predicted fastest"
    if spec.single_device:
        return DECIDED_BY["device", topology.total_gpus > 1]
    runs_on = "machine" if rec.chosen.layout.workers == 1 else "machines"
    return DECIDED_BY[runs_on, topology.machines > 1]


def _speed(p: Prediction, prices: Any) -> list[str]:
    """Examples/s (measured, or predicted with its range), scaling efficiency, the price
    when known, and for a prediction the unknown that makes its range wide."""
    currency = (prices or {}).get("currency", "USD")
    cost = p.usd_per_million_examples
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
    fastest = max(feasible, key=lambda a: a.rank_examples_per_second)
    ratio = fastest.rank_examples_per_second / chosen.rank_examples_per_second
    out = [f"{_named(fastest)}, {fastest.rank_examples_per_second:,.0f} examples/s ({ratio:.2f}x)"]
    priced = [a for a in feasible if a.usd_per_million_examples is not None]
    if chosen.usd_per_million_examples is not None and priced:
        cheapest = min(priced, key=lambda a: a.usd_per_million_examples)
        if cheapest is not fastest and (
            cheapest.usd_per_million_examples < chosen.usd_per_million_examples
        ):
            out.append(f"{_named(cheapest)} is cheaper per example, "
                       f"{cheapest.rank_examples_per_second:,.0f} examples/s")  # fmt: skip
    return out


def _named(p: Prediction) -> str:
    """A candidate and its layout: `multi_worker_mirrored on 4 machines`."""
    servers = f", {p.layout.ps} servers" if p.layout.ps else ""
    return f"{p.label} on {plural(p.layout.workers, 'machine')}{servers}"


def _fit(lines: list[str]) -> list[str]:
    """`lines` wrapped to `WIDTH` columns, at most `MAX_LINES` of them."""
    indent = " " * 13
    out = [
        w for line in lines for w in textwrap.wrap(line, WIDTH, subsequent_indent=indent) or [""]
    ]
    return out if len(out) <= MAX_LINES else out[: MAX_LINES - 1] + [out[-1]]


def _table(rec: Any) -> tuple[str, list[str], list[list[str]]]:
    """`rec`'s layout for a sentence (or ``), the table's header in its price table's
    currency, and its rows."""
    layout, gpu = rec.layout, rec.chosen.machines_gpu if rec.chosen else ""
    if layout:
        layout = f"workers {layout.workers}, ps {layout.ps}, GPUs per machine "
        layout += f"{rec.layout.gpus_per_machine}" + (f", on the {gpu} machines" if gpu else "")
    currency = (rec.prices or {}).get("currency", "USD")
    return layout, [*HEADER[:-1], f"{currency}/1M examples"], candidate_rows(rec)


def as_markdown(rec: Any) -> str:
    """`rec` (a `recommendation.Recommendation`) as Markdown, for a KFP Markdown artifact."""
    layout, header, rows = _table(rec)
    lines = [
        f"## Recommended strategy: `{rec.strategy}{'' if rec.supported else ' (not supported)'}`",
        "",
        f"Hardware: {rec.topology.describe()}; model: {rec.model.name}; per-GPU batch "
        f"{rec.batch_size}.",
        *([f"Layout: {layout}."] if layout else []),
        "",
    ]
    if rows:
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    return "\n".join([*lines, "### Reasons", *(f"- {r}" for r in rec.reasons)]) + "\n"


def as_text(rec: Any) -> str:
    """`rec` as plain text for the terminal: the full table and every reason (`--explain`)."""
    layout, header, rows = _table(rec)
    lines = [f"recommended: {rec.strategy}" + ("" if rec.supported else
                                               " (not supported by Strategist)")]  # fmt: skip
    if layout:
        lines.append(f"layout:      {layout}")
    if rows:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines += ["", *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                        for r in [header, *rows])]  # fmt: skip
    return "\n".join([*lines, "", "reasons:", *(f"  - {r}" for r in rec.reasons)])
