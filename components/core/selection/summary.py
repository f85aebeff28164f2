"""How `strategist select` prints an answer: the short answer (at most 12 lines of at most
100 columns), and the full table with every reason as text or Markdown.
"""

from __future__ import annotations

import textwrap
from typing import Any

from components.core.selection.cost import price_shown
from components.core.selection.prediction import Prediction
from components.core.selection.ranges import widest_unknown
from components.core.strategy_spec import spec_for

WIDTH = 100
MAX_LINES = 12
HEADER = [
    "strategy",
    "workers/ps/gpus",
    "step ms",
    "compute ms",
    "comm ms",
    "examples/s",
    "efficiency",
    "measured/s",
    "USD/1M examples",
]


def summary_lines(rec: Any) -> list[str]:
    """The short answer of `rec` (a `recommendation.Recommendation`), line by line."""
    topology = rec.topology
    if not rec.supported or rec.chosen is None:
        lines = [
            f"recommended: {rec.strategy} (not supported by Strategist)",
            f"why:         {rec.model.name} does not fit one {topology.gpu} GPU's memory, even "
            "at batch 1",
        ]
        return _fit([*lines, "--explain prints every reason."])
    chosen: Prediction = rec.chosen
    layout = chosen.layout
    on = f"{layout.workers} machine{'s' if layout.workers > 1 else ''}"
    machines = f"{on} x {layout.gpus_per_machine} {chosen.machines_gpu or topology.gpu}"
    if topology.gpu_mix and not chosen.machines_gpu and layout.workers == topology.machines:
        mix = " + ".join(f"{n} {name}" for name, n in topology.gpu_mix)
        machines = f"{on} ({mix}, {layout.gpus_per_machine} GPUs each)"
    lines = [
        f"recommended: {rec.strategy} on {machines}"
        + (f", {layout.ps} parameter servers" if layout.ps else "")
    ]
    if rec.deciding_inputs:  # a guess never decides silently: in the first two lines
        lines.append(
            "depends on:  an estimate; the choice differs at its ends: give "
            + ", ".join(rec.deciding_inputs)
        )
    lines += _speed(chosen, rec.prices) + [f"why:         {decided_by(rec)}"]
    lines += [f"alternative: {a}" for a in _alternatives(rec)]
    if rec.machine_options and rec.layout.workers == topology.machines > 1:
        above = max([m for m, _, _, e in rec.machine_options if e >= 0.5] or [1])
        lines.append(
            f"note:        all {topology.machines} machines scale at "
            f"{rec.machine_options[-1][3]:.0%} machine efficiency; {above} would stay above 50%"
        )
    lines.append("--explain prints every reason and the full table.")
    return _fit(lines)


def candidate_rows(rec: Any) -> list[list[str]]:
    """One row of the full table per candidate of `rec`, the chosen one first and marked
    `> `; a candidate that cannot run shows no number."""
    rows = []
    preds = ([rec.chosen] if rec.chosen else []) + rec.alternatives
    for i, p in enumerate(preds):
        measured = (
            f"{p.measured_examples_per_second:,.0f}" if p.measured_examples_per_second else "-"
        )
        mark = "> " if i == 0 and rec.supported else ""
        cost = p.usd_per_million_examples
        if not p.feasible:  # a candidate that cannot run has no speed to show
            rows.append(
                [
                    f"{mark}{p.label} (infeasible: {p.note})",
                    f"{p.layout.workers}/{p.layout.ps}/{p.layout.gpus_per_machine}",
                    *["-"] * (len(HEADER) - 2),
                ]  # fmt: skip
            )
            continue
        rows.append(
            [
                mark + p.label,
                f"{p.layout.workers}/{p.layout.ps}/{p.layout.gpus_per_machine}",
                f"{p.step_time_s * 1e3:,.1f}",
                f"{p.compute_s * 1e3:,.1f}",
                f"{p.communication_s * 1e3:,.1f}",
                f"{p.examples_per_second:,.0f}" + (" (input)" if p.input_capped else ""),
                f"{p.scaling_efficiency:.0%}",
                measured,
                "-" if cost is None else price_shown(cost),
            ]
        )
    return rows


def decided_by(rec: Any) -> str:
    """The seed's rule that decided, in a few words, from the answer's data."""
    topology, chosen = rec.topology, rec.chosen
    spec = spec_for(rec.strategy)
    if chosen.measured_examples_per_second is not None:
        return "a measurement (--history) ranks it first"
    if spec.uses_ps:
        causes = [
            word
            for word, on in (
                ("preemptible machines", topology.preemptible),
                ("machines of uneven speed", topology.heterogeneous),
                ("a large sparse embedding table", bool(rec.model.sparse_embedding_params)),
            )
            if on
        ]
        if causes:
            return " and ".join(causes) + ": parameter servers, not slower by prediction"
        return "asynchronous updates allowed (--async-ok) and predicted fastest"
    if spec.single_device:
        if topology.total_gpus > 1:
            return "one device is predicted faster than any more of them together"
        return "one device"
    if chosen.layout.workers == 1:
        if topology.machines > 1:
            return "one machine is predicted faster than more: the network costs more than it adds"
        return "one machine with several GPUs: synchronous all-reduce within it"
    return "several machines, synchronous: one all-reduce ring over every GPU"


def _speed(p: Prediction, prices: Any) -> list[str]:
    """Examples/s (measured, or predicted with its range), scaling efficiency, the price
    when known, and for a prediction the unknown that makes its range wide."""
    currency = (prices or {}).get("currency", "USD")
    if p.measured_examples_per_second is not None:
        text = f"measured:    {p.rank_examples_per_second:,.0f} examples/s"
        if p.usd_per_million_examples is not None:
            text += f", {p.usd_per_million_examples:,.3g} {currency} per 1M examples"
        return [text]
    low, high = p.examples_per_second_range
    e_low, e_high = p.scaling_efficiency_range
    efficiency = f"{p.scaling_efficiency:.0%} scaling efficiency"
    if p.efficiency_group:  # one GPU's is 1 by definition
        efficiency += f" ({e_low * 100:.0f}-{e_high:.0%})"
    lines = [
        f"predicted:   {p.examples_per_second:,.0f} examples/s ({low:,.0f}-{high:,.0f}), "
        + efficiency
    ]
    if p.usd_per_million_examples is not None:
        cheap, dear = p.usd_per_million_examples_range
        lines.append(f"price:       {p.usd_per_million_examples:,.3g} {currency} per 1M examples "
                     f"({cheap:,.3g}-{dear:,.3g})")  # fmt: skip
    unknown = widest_unknown(p.scaling_efficiency, p.efficiency_group or None, p.speed_group)
    lines.append(f"unsure:      {unknown.what}; measure {unknown.measure}")
    return lines


def _alternatives(rec: Any) -> list[str]:
    """The fastest feasible alternative of another strategy or size, and a cheaper one."""
    chosen = rec.chosen
    feasible = [a for a in rec.alternatives if a.feasible]
    out = []
    if feasible:
        fastest = max(feasible, key=lambda a: a.rank_examples_per_second)
        ratio = fastest.rank_examples_per_second / chosen.rank_examples_per_second
        out.append(f"{_named(fastest)}, {fastest.rank_examples_per_second:,.0f} examples/s "
                   f"({ratio:.2f}x)")  # fmt: skip
    priced = [a for a in feasible if a.usd_per_million_examples is not None]
    if chosen.usd_per_million_examples is not None and priced:
        cheapest = min(priced, key=lambda a: a.usd_per_million_examples)
        if cheapest.usd_per_million_examples < chosen.usd_per_million_examples and (
            not out or cheapest is not fastest
        ):
            out.append(f"{_named(cheapest)} is cheaper per example, "
                       f"{cheapest.rank_examples_per_second:,.0f} examples/s")  # fmt: skip
    return out


def _named(p: Prediction) -> str:
    """A candidate and its layout: `multi_worker_mirrored on 4 machines`."""
    machines = f"{p.layout.workers} machine{'s' if p.layout.workers > 1 else ''}"
    servers = f", {p.layout.ps} servers" if p.layout.ps else ""
    return f"{p.label} on {machines}{servers}"


def _fit(lines: list[str]) -> list[str]:
    """`lines` wrapped to `WIDTH` columns, at most `MAX_LINES` of them."""
    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, WIDTH, subsequent_indent=" " * 13) or [""]
    if len(out) > MAX_LINES:
        out = out[: MAX_LINES - 1] + [out[-1]]
    return out


def _on_machines_of(rec: Any) -> str:
    """`, on the t4 machines` when the choice runs on one slower type of a mix alone."""
    gpu = rec.chosen.machines_gpu if rec.chosen else ""
    return f", on the {gpu} machines" if gpu else ""


def _header(rec: Any) -> list[str]:
    """`HEADER`, its price column in the price table's currency."""
    currency = (rec.prices or {}).get("currency", "USD")
    return [*HEADER[:-1], f"{currency}/1M examples"]


def as_markdown(rec: Any) -> str:
    """`rec` (a `recommendation.Recommendation`) as Markdown, for a KFP Markdown artifact."""
    title = rec.strategy + ("" if rec.supported else " (not supported)")
    lines = [f"## Recommended strategy: `{title}`", ""]
    lines.append(
        f"Hardware: {rec.topology.describe()}; model: "
        f"{rec.model.name}; per-GPU batch {rec.batch_size}."
    )
    if rec.layout:
        lines.append(
            f"Layout: workers {rec.layout.workers}, ps {rec.layout.ps}, "
            f"GPUs per machine {rec.layout.gpus_per_machine}{_on_machines_of(rec)}."
        )
    lines.append("")
    rows = candidate_rows(rec)
    if rows:
        lines.append("| " + " | ".join(_header(rec)) + " |")
        lines.append("|" + "---|" * len(HEADER))
        lines.extend("| " + " | ".join(r) + " |" for r in rows)
        lines.append("")
    lines.append("### Reasons")
    lines.extend(f"- {r}" for r in rec.reasons)
    return "\n".join(lines) + "\n"


def as_text(rec: Any) -> str:
    """`rec` as plain text for the terminal: the full table and every reason (`--explain`)."""
    lines = [
        f"recommended: {rec.strategy}" + ("" if rec.supported else " (not supported by Strategist)")
    ]
    if rec.layout:
        lines.append(
            f"layout:      workers {rec.layout.workers}, ps {rec.layout.ps}, "
            f"GPUs per machine {rec.layout.gpus_per_machine}{_on_machines_of(rec)}"
        )
    rows = candidate_rows(rec)
    if rows:
        header = _header(rec)
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines.append("")
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    lines.append("")
    lines.append("reasons:")
    lines.extend(f"  - {r}" for r in rec.reasons)
    return "\n".join(lines)
