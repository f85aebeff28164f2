"""What each candidate costs at list prices, per hour and per million examples, in the table's
currency (the names say usd for the readers of `--json`), and `--objective cost`: the cheaper
layouts it weighs and the cheapest of them.

A GPU machine is priced as the machine type that takes its GPUs plus the GPUs (unless the type
bundles them), at Spot prices for preemptible machines when the table has them. Parameter servers
and the coordinator are billed on demand as the CPU machines they run on (`ps_servers`). Fewer
machines, a mix's slower GPU type alone and fewer GPUs per machine can cost less per example.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from components.core.config import ConfigError
from components.core.hardware import Gpu
from components.core.model_profile import ModelProfile
from components.core.prices import PriceTable
from components.core.selection.explanation import explain
from components.core.selection.history import apply_history
from components.core.selection.input_bound import fewest_gpus_the_input_keeps_busy
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.machine_subsets import (
    machine_counts,
    machines_running,
    of_one_type,
    on_first_machines,
    predicted_on_fewer_machines,
)
from components.core.selection.memory import max_batch_that_fits
from components.core.selection.prediction import Prediction, candidates_that_fit, six_digits
from components.core.selection.ps_servers import server_machine, servers_share_the_host
from components.core.selection.rules import rules_for_the_cheapest
from components.core.selection.topology import Topology, a_device, device
from components.core.strategy_spec import spec_for

SPOT_PRICES_MISSING = (
    "--preemptible: the price table has no Spot prices (spot_usd_per_hour), so the "
    "candidates are priced at on-demand list prices, above what Spot machines cost; Spot "
    "prices change up to daily (cloud.google.com/spot-vms/pricing): add them to a copy of "
    "the table and pass it with --prices FILE."
)
CPU_UNPRICED = "CPU machines (--gpu cpu) are not priced"


def on_spot(topology: Topology, prices: PriceTable) -> bool:
    """Whether `topology`'s GPU machines are priced at Spot prices."""
    return topology.preemptible and prices.has_spot_prices


def price_basis(topology: Topology, prices: PriceTable) -> str:
    """What the candidates are priced at, for a sentence (with the table's date)."""
    if on_spot(topology, prices):
        return f"Spot prices for the GPU machines ({prices.as_of})"
    return f"on-demand list prices ({prices.as_of})"


def prices_used(topology: Topology, prices: PriceTable) -> dict[str, str]:
    """What `select --json` records about the prices: which, of when, in what currency."""
    return {
        "gpu_machines": "spot" if on_spot(topology, prices) else "on-demand",
        "parameter_servers": "on-demand",
        "as_of": prices.as_of,
        "currency": prices.currency,
    }


def price_basis_reasons(topology: Topology, prices: PriceTable) -> list[str]:
    """A sentence when preemptible machines are priced on demand for want of Spot prices."""
    if topology.preemptible and not prices.has_spot_prices:
        return [SPOT_PRICES_MISSING]
    return []


def usd_per_hour(candidate: Prediction, topology: Topology, prices: PriceTable) -> float | None:
    """Hourly list price of the machines `candidate` uses, each for its own GPU (None when a
    price is missing)."""
    if missing_prices(candidate, topology, prices):
        return None
    spot = on_spot(topology, prices)
    gpus = candidate.layout.gpus_per_machine
    rates = [_machine_rate(name, gpus, prices, spot) for name in _machines(candidate, topology)]
    if not _server_machines(candidate, topology):
        return sum(rates)
    server_rate = prices.machine_price(server_machine_type(candidate, topology))
    coordinator_rate = prices.machine_price(coordinator_machine_type(topology))
    return sum(rates) + candidate.layout.ps * server_rate + coordinator_rate


def missing_prices(candidate: Prediction, topology: Topology, prices: PriceTable) -> list[str]:
    """What `candidate`'s price needs and the table lacks, for a sentence (none: priced)."""
    spot = on_spot(topology, prices)
    field = "spot_usd_per_hour" if spot else "usd_per_hour"
    gpus = candidate.layout.gpus_per_machine
    missing = []
    for name in dict.fromkeys(_machines(candidate, topology)):
        gpu = device(name)
        if gpu.name == "cpu":
            missing.append(CPU_UNPRICED)
            continue
        try:
            machine_type = gpu.machine_type(gpus)
        except ConfigError:
            missing.append(f"no machine type takes {gpus} {gpu.name}")
            continue
        if prices.machine_price(machine_type, spot) is None:
            missing.append(f"machine type {machine_type} has no {field}")
            if gpu.sold_in_its_machines:
                missing[-1] += (
                    f' (with its {gpus} {gpu.name} in the price, "bundled_gpus": {gpus}: '
                    f"{gpu.name} is sold only in its machine types)"
                )
        if not _includes_gpus(machine_type, gpu, prices) and (
            prices.accelerator_price(gpu.name, spot) is None
        ):
            missing.append(f"accelerator {gpu.name} has no {field}")
    if _server_machines(candidate, topology):
        for cpu_type in dict.fromkeys(
            [server_machine_type(candidate, topology), coordinator_machine_type(topology)]
        ):
            if prices.machine_price(cpu_type) is None:
                missing.append(f"machine type {cpu_type} has no usd_per_hour")
    return missing


def server_machine_type(candidate: Prediction, topology: Topology) -> str:
    """The machine type each of `candidate`'s parameter servers is billed as: the one
    the step-time model runs it on (`ps_servers.server_machine`)."""
    machine = server_machine(topology, candidate.server_share_bytes)
    return machine.name if machine else coordinator_machine_type(topology)


def coordinator_machine_type(topology: Topology) -> str:
    """The machine type the parameter-server coordinator (chief) is billed as: the
    servers' type as `train` gives it."""
    return topology.ps_machine_type


def _machines(candidate: Prediction, topology: Topology) -> list[str]:
    """The GPU of each machine `candidate` uses."""
    return machine_gpus(topology, candidate.layout.workers)


def _server_machines(candidate: Prediction, topology: Topology) -> int:
    """CPU machines a candidate adds: its parameter servers and coordinator, on machines
    of their own (none where they share the worker's one machine)."""
    if not spec_for(candidate.strategy).uses_ps or servers_share_the_host(topology):
        return 0
    return candidate.layout.ps + 1


def _machine_rate(gpu_name: str, gpus: int, prices: PriceTable, spot: bool) -> float:
    """Hourly price of one machine with `gpus` GPUs of `gpu_name`, which
    `missing_prices` found priced."""
    gpu = device(gpu_name)
    machine_type = gpu.machine_type(gpus)
    rate = prices.machine_price(machine_type, spot)
    if not _includes_gpus(machine_type, gpu, prices):
        rate += gpus * prices.accelerator_price(gpu.name, spot)
    return rate


def _includes_gpus(machine_type: str, gpu: Gpu, prices: PriceTable) -> bool:
    """Whether `machine_type`'s price includes its GPUs: the table says so
    (`bundled_gpus`), or the GPU is sold no other way (`Gpu.sold_in_its_machines`)."""
    return machine_type in prices.bundled_gpus or gpu.sold_in_its_machines


def price_shown(value: float) -> str:
    """A price with three significant digits at least (cents from 1 up), so that prices
    below a cent differ: 0.00630, 0.0101, 0.360, 2.29, 1,234.50."""
    decimals = 2 if value >= 1 or value <= 0 else 2 - math.floor(math.log10(value))
    return f"{value:,.{decimals}f}"


def per_million_examples(value: float, prices: PriceTable) -> str:
    """`2.29 USD per million examples`, in the table's currency, for a sentence."""
    return f"{price_shown(value)} {prices.currency} per million examples"


def usd_per_million_examples(
    candidate: Prediction, topology: Topology, prices: PriceTable
) -> float | None:
    """List price of training on a million examples with `candidate` (None when unpriced)."""
    hourly = usd_per_hour(candidate, topology, prices)
    if hourly is None or candidate.rank_examples_per_second <= 0:
        return None  # unpriced, or trains nothing (preemption restarts fill its hours)
    return hourly / (candidate.rank_examples_per_second * 3600) * 1e6


def price_candidates(preds: list[Prediction], topology: Topology, prices: Any) -> None:
    """Sets each candidate's list price per million examples (none for one that cannot run)."""
    for p in preds:
        priced = usd_per_million_examples(p, topology, prices) if p.feasible else None
        p.usd_per_million_examples = priced


def on_fewer_machines(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
    prices: Any,
) -> list[Prediction]:
    """The feasible candidates on 1, 2, 4, ... of the machines that `preds` lacks, each priced
    on its own machines."""
    known = {(p.strategy, p.layout) for p in preds}
    out = []
    for k, on, predicted in predicted_on_fewer_machines(preds, topology, model, batch, history):
        extra = [
            p
            for p in predicted
            if p.feasible and p.layout.workers == k and (p.strategy, p.layout) not in known
        ]
        price_candidates(extra, on, prices)
        out += extra
    return out


def on_one_gpu_type(
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
    prices: Any,
) -> tuple[list[Prediction], list[str]]:
    """The feasible candidates on 1, 2, 4, ... machines of each slower GPU type of a mix alone,
    priced on them, and a sentence for each that `history` measured there."""
    out: list[Prediction] = []
    measured: list[str] = []
    first = machine_gpus(topology, 1)[0]
    for name, count in topology.gpu_mix:
        if name == first:
            continue
        gpu = device(name)
        fit_replicated = max_batch_that_fits(model, gpu.memory_gb, True, topology.precision)
        for k in machine_counts(count):
            on = of_one_type(topology, name, k)
            predicted, _, _ = candidates_that_fit(on, model, batch, gpu, fit_replicated)
            predicted = [p for p in predicted if p.feasible and p.layout.workers == k]
            if history:
                said = apply_history(predicted, history, on, model, batch)
                measured += [f"On the {name} machines: {r}" for r in said.measured]
            for p in predicted:
                p.machines_gpu = name
            price_candidates(predicted, on, prices)
            out += predicted
    return out, measured


def on_fewer_gpus(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    history: Sequence[Mapping[str, Any]],
    prices: Any,
) -> list[tuple[Prediction, Prediction]]:
    """(input-bound candidate, the same throughput on fewer GPUs per machine) pairs, the latter
    priced on its machines; none that `preds` already has."""
    known = {(p.strategy, p.layout) for p in preds}
    out: list[tuple[Prediction, Prediction]] = []
    for p in preds:
        if not (p.feasible and p.input_bound):
            continue
        on = on_first_machines(topology, p.layout.workers)
        fed, on, _ = fewest_gpus_the_input_keeps_busy(p, on, model, batch, True, history)
        if (fed.strategy, fed.layout) not in known:
            known.add((fed.strategy, fed.layout))
            price_candidates([fed], on, prices)
            out.append((p, fed))
    return out


def cost_sentences(
    chosen: Prediction,
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    async_ok: bool,
    prices: Any,
) -> list[str]:
    """What the choice costs, the candidate `--objective cost` picks when it is another
    (`cheapest`), and the candidates no price weighs (`unpriced_sentences`)."""
    basis = price_basis(topology, prices)
    if chosen.usd_per_million_examples is None:
        missing = "; ".join(missing_prices(chosen, machines_running(chosen, topology), prices))
        return [f"No price for this hardware among the table's {basis}: {missing}."]
    out = [
        f"At {basis}, {chosen.strategy} costs "
        f"{per_million_examples(chosen.usd_per_million_examples, prices)}"
        f"{priced_on(chosen, topology, prices)}."
    ]
    cheapest, _ = _cost_choice(_cheapest_first(preds), topology, model, async_ok, prices)
    if cheapest is not chosen:
        ratio = chosen.rank_examples_per_second / cheapest.rank_examples_per_second
        speed = f"{ratio:,.1f}x slower" if ratio >= 1 else f"{1 / ratio:,.2f}x faster"
        layout = cheapest.layout
        out.append(
            f"The cheapest is {cheapest.label} ({layout.workers}/{layout.ps}/"
            f"{layout.gpus_per_machine} workers/ps/gpus) at "
            f"{per_million_examples(cheapest.usd_per_million_examples, prices)}, {speed} "
            f"(--objective cost picks it){priced_on(cheapest, topology, prices)}."
        )
    return out + unpriced_sentences(chosen, preds, topology, prices)


def unpriced_sentences(
    chosen: Prediction, preds: list[Prediction], topology: Topology, prices: Any
) -> list[str]:
    """Which feasible candidates the table cannot price and what it lacks; and, when one is
    faster than `chosen`, the hourly price under which it would cost less per example."""
    lacking: dict[tuple[str, ...], list[Prediction]] = {}
    for p in preds:
        if p.feasible and p.usd_per_million_examples is None:
            missing = tuple(missing_prices(p, machines_running(p, topology), prices))
            if missing:  # none: priced machines that train nothing (preemption restarts)
                lacking.setdefault(missing, []).append(p)
    if not lacking:
        return []
    out = [
        f"Not priced, so not weighed: {', '.join(_named(p) for p in unpriced)}: "
        f"{'; '.join(missing)}."
        for missing, unpriced in lacking.items()
    ]
    fastest = max((p for ps in lacking.values() for p in ps),
                  key=lambda p: p.rank_examples_per_second)  # fmt: skip
    if fastest.rank_examples_per_second > chosen.rank_examples_per_second:
        ratio = fastest.rank_examples_per_second / chosen.rank_examples_per_second
        # its machines' hourly price at which a million examples cost what the choice's do
        even = chosen.usd_per_million_examples * fastest.rank_examples_per_second * 3600 / 1e6
        out.append(
            f"The unpriced {_named(fastest)} is predicted faster than {chosen.label}: "
            f"{fastest.rank_examples_per_second:,.0f} examples/s, {ratio:,.1f}x its "
            f"{chosen.rank_examples_per_second:,.0f}; it is the cheaper per example if its "
            f"machines cost less than {price_shown(even)} {prices.currency} an hour in all: add "
            "their price to a copy of the table (--prices FILE) to weigh it."
        )
    return out


def priced_on(candidate: Prediction, topology: Topology, prices: Any) -> str:
    """`, priced as an n1-standard-8 with 1 v100, where the machines given are ...` when
    `candidate` uses fewer GPUs per machine than given; empty when it uses them all."""
    g, given = candidate.layout.gpus_per_machine, topology.gpus_per_machine
    on = machines_running(candidate, topology)
    if g == given or on.gpu == "cpu" or candidate.usd_per_million_examples is None:
        return ""
    k = candidate.layout.workers
    gpus = [device(name) for name in dict.fromkeys(machine_gpus(on, k))]

    def shape(n: int) -> str:
        return " and ".join(f"{gpu.machine_type(n)} with {n} {gpu.name}" for gpu in gpus)

    layout = dataclasses.replace(candidate.layout, gpus_per_machine=given)
    on_given = usd_per_million_examples(dataclasses.replace(candidate, layout=layout), on, prices)
    there = (
        f" ({per_million_examples(on_given, prices)} on {'one' if k == 1 else 'those'})"
        if on_given is not None
        else ""
    )
    return (
        f", priced as {a_device(shape(g)) if k == 1 else f'{k} x {shape(g)}'}, where the "
        f"machines given are {shape(given)}{there}"
    )


def _named(p: Prediction) -> str:
    """A candidate with its layout, for a sentence: `one_device (1/0/1)`."""
    return f"{p.label} ({p.layout.workers}/{p.layout.ps}/{p.layout.gpus_per_machine})"


def _cost_choice(
    by_price: list[Prediction], topology: Topology, model: ModelProfile, async_ok: bool, prices: Any
) -> tuple[Prediction, list[str]]:
    """The cheapest of `by_price` under the rules on asynchrony
    (`rules.rules_for_the_cheapest`), and the sentences on its asynchrony."""
    cheapest = by_price[0]
    sync = next((p for p in by_price if not spec_for(p.strategy).uses_ps), None)
    claim = (
        "Parameter_server is predicted the cheapest per example, "
        f"{per_million_examples(cheapest.usd_per_million_examples, prices)} against "
        f"{sync.label}'s {price_shown(sync.usd_per_million_examples)}"
        if sync is not None
        else ""
    )
    on = machines_running(cheapest, topology)
    return rules_for_the_cheapest(cheapest, by_price, on, model, async_ok, claim)


def _cheapest_first(preds: list[Prediction]) -> list[Prediction]:
    """The feasible priced candidates, cheapest per example first; prices equal but for
    float rounding (the same machines, more of them) tie, and the faster goes first."""
    priced = [p for p in preds if p.feasible and p.usd_per_million_examples is not None]
    return sorted(
        priced, key=lambda p: (six_digits(p.usd_per_million_examples), -p.rank_examples_per_second)
    )


def cheapest(
    preds: list[Prediction],
    topology: Topology,
    model: ModelProfile,
    batch: int,
    reasons: list[str],
    prices: Any,
    async_ok: bool = False,
) -> tuple[Prediction, str, list[str], list[Prediction]]:
    """The feasible candidate with the lowest price per example (ties: the faster), under the
    rules on asynchrony.

    Returns:
        That candidate, the sentence of the price that decided, why, and the other candidates,
        cheapest first.
    """
    feasible = _cheapest_first(preds)
    if not feasible:
        missing = dict.fromkeys(
            entry
            for p in preds
            if p.feasible
            for entry in missing_prices(p, machines_running(p, topology), prices)
        )
        fix = "use --objective time"
        if set(missing) != {CPU_UNPRICED}:
            fix = f"add them to a copy of the table (--prices FILE), or {fix}"
        raise ConfigError(
            f"--objective cost: the price table's {price_basis(topology, prices)} have no "
            f"price for {topology.describe()}: {'; '.join(missing)}; {fix}"
        )
    chosen, rule_reasons = _cost_choice(feasible, topology, model, async_ok, prices)
    unpriced = unpriced_sentences(chosen, preds, topology, prices)
    among = " synchronous" if chosen is not feasible[0] else ""
    if unpriced or among:
        among = f" of the{among} candidates{' priced' if unpriced else ''}"
    lead = (
        f"Objective cost: {chosen.label} is the cheapest per example{among} at "
        f"{price_basis(topology, prices)}: "
        f"{per_million_examples(chosen.usd_per_million_examples, prices)}"
        f"{priced_on(chosen, topology, prices)}."
    )
    # "communication costs more than the GPUs give" argues time, not money
    argued_by_time = spec_for(chosen.strategy).single_device and topology.total_gpus > 1
    on = machines_running(chosen, topology)
    explained = explain(chosen, feasible, on, model, batch, strategy_sentence=not argued_by_time)
    reasons = unpriced + explained + rule_reasons + reasons
    others = [p for p in feasible if p is not chosen]
    return chosen, lead, reasons, others + [p for p in preds if p not in feasible]
