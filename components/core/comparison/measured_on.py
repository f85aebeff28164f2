"""What the runs measured: the hardware of each, and what a local CPU rehearsal predicts.

A report's numbers hold for the hardware that produced them. Each record's
`hardware` block (detected by the trainer, see `run_metrics.Hardware`) is
described in words; runs on the same hardware share a line. When the runs
were a local CPU rehearsal the report says so, with what that does and does
not predict about GPUs, and the recommendation (a prediction for the target
GPUs) is not called an agreement with a winner measured elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from components.core.run_metrics import Hardware


def hardware_of(record: Mapping[str, Any]) -> Hardware:
    """The `Hardware` of a report's record (its `hardware` block; unknown keys ignored)."""
    raw = record.get("hardware") if isinstance(record.get("hardware"), Mapping) else {}
    known = {f.name for f in dataclasses.fields(Hardware)}
    return Hardware(**{k: v for k, v in raw.items() if k in known})


def is_cpu_rehearsal(hardware: Hardware) -> bool:
    """Whether a run was a local rehearsal on CPUs: this machine, no GPU."""
    return hardware.is_local and not hardware.gpus_per_machine


def describe(hardware: Hardware) -> str:
    """The hardware in words, with the processes that shared it."""
    text = hardware.describe()
    if hardware.processes > 1:
        text += f"; {hardware.processes} processes"
    if not hardware.detected:
        text += " (not detected: an old record, assumed)"
    return text


def measured_on(records: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The hardware the runs measured, one entry per distinct description.

    Args:
        records: the report's records (with `name` and `hardware`).

    Returns:
        `{"description", "runs", "platform", "cpu_rehearsal"}` per hardware,
        in the order of the runs.
    """
    groups: dict[str, dict[str, Any]] = {}
    for r in records:
        hardware = hardware_of(r)
        entry = groups.setdefault(
            describe(hardware),
            {
                "description": describe(hardware),
                "runs": [],
                "platform": hardware.platform,
                "cpu_rehearsal": is_cpu_rehearsal(hardware),
            },
        )
        entry["runs"].append(r["name"])
    return list(groups.values())


def hardware_lines(report: Mapping[str, Any]) -> list[str]:
    """`Measured on ...` sentences, one per hardware the report's runs ran on."""
    groups = report.get("measured_on") or []
    if len(groups) == 1:
        return [f"Measured on {groups[0]['description']} (every run)."]
    return [f"Measured on {g['description']}: {', '.join(g['runs'])}." for g in groups]


def rehearsal_note(records: list[Mapping[str, Any]]) -> str | None:
    """What a local CPU rehearsal does and does not predict; None when no run was one."""
    rehearsals = [hardware_of(r) for r in records if is_cpu_rehearsal(hardware_of(r))]
    if not rehearsals:
        return None
    machine = rehearsals[0]
    which = "Every run" if len(rehearsals) == len(records) else f"{len(rehearsals)} run(s)"
    return (
        f"{which} was a local CPU rehearsal: all processes of a cluster shared this one "
        f"machine ({machine.cpu_model or 'unknown CPU'}, {machine.cpu_cores or '?'} cores), "
        "with no GPU; logical CPU devices or processes stood in for GPUs and machines. "
        "It shows that each strategy runs end to end, reaches the same accuracy, and what "
        "start-up and coordination cost on one machine. It does not predict GPU "
        "throughput, speed-up or which strategy is fastest on GPUs, where a step computes "
        "far faster and communication weighs differently: for that, see the prediction "
        "of `strategist select`, or run the comparison on the target GPUs."
    )


def recommendation_check(report: Mapping[str, Any], rec: str) -> tuple[str, str]:
    """How the recommendation relates to the measured winner: a class and a sentence.

    The recommendation is a prediction for target hardware (`inputs.topology`);
    it is compared with the winner only when the runs measured that hardware.

    Returns:
        (`agree`, `differ` or `unlike`) and the sentence to show.
    """
    topology = ((report.get("recommendation") or {}).get("inputs") or {}).get("topology") or {}
    target_gpu = topology.get("gpu")
    measured = [hardware_of(r) for r in report.get("results", [])]
    like = measured and all(
        h.gpu and target_gpu and target_gpu.lower() in h.gpu.lower() for h in measured
    )
    if target_gpu and not like:
        gpus = topology.get("gpus_per_machine")
        target = f"{gpus} x {target_gpu}" if gpus else str(target_gpu)
        machines = topology.get("machines")
        target += f" on {machines} machine(s)" if machines else ""
        ran = "a local CPU rehearsal" if any(map(is_cpu_rehearsal, measured)) else "other hardware"
        return (
            "unlike",
            f"Predicted for {target}; the runs measured {ran}, so it is not compared with "
            "the measured winner.",
        )
    if report.get("winner") is None:
        return "unlike", "No clear winner was measured to compare it with."
    if rec == report.get("winner"):
        return "agree", "Agrees with the measured winner."
    return "differ", "Differs from the measured winner."
