"""What candidates cost at list prices, per hour and per million examples; `--objective cost`."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from components.core.config import ConfigError
from components.core.model_profile import ModelProfile
from components.core.prices import PriceTable
from components.core.selection import machine_subsets as subsets
from components.core.selection.explanation import explain
from components.core.selection.history import apply_history
from components.core.selection.input_bound import fewest_gpus_the_input_keeps_busy
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.machine_subsets import History
from components.core.selection.memory import server_machine, servers_share_the_host
from components.core.selection.prediction import Prediction, six_digits
from components.core.selection.rules import apply_rules
from components.core.selection.topology import Topology, device
from components.core.strategy_spec import spec_for

CPU_UNPRICED = "CPU machines (--gpu cpu) are not priced"


def price_basis(topology: Topology, prices: PriceTable) -> str:
    """What the candidates are priced at, with the table's date, for a sentence."""
    if topology.preemptible and prices.has_spot_prices:
        return f"Spot prices for the GPU machines ({prices.as_of})"
    return f"on-demand list prices ({prices.as_of})"


def prices_used(topology: Topology, prices: PriceTable) -> dict[str, str]:
    """What `select --json` records about the prices: which, of when, in what currency."""
    gpu_machines = "spot" if topology.preemptible and prices.has_spot_prices else "on-demand"
    return {"gpu_machines": gpu_machines, "parameter_servers": "on-demand",
            "as_of": prices.as_of, "currency": prices.currency}  # fmt: skip


def price_basis_reasons(topology: Topology, prices: PriceTable) -> list[str]:
    """A sentence when preemptible machines are priced on demand for want of Spot prices."""
    if not topology.preemptible or prices.has_spot_prices:
        return []
    no_spot = "--preemptible: the price table has no Spot prices (spot_usd_per_hour), so GPU"
    return [f"{no_spot} machines are priced at on-demand list prices, above Spot (--prices FILE)."]


def _hourly(candidate: Prediction, topology: Topology,
            prices: PriceTable) -> tuple[float | None, list[str]]:  # fmt: skip
    """Hourly list price of `candidate`'s machines, each for its GPU; or None and what's missing."""
    spot = topology.preemptible and prices.has_spot_prices
    field = "spot_usd_per_hour" if spot else "usd_per_hour"
    gpus = candidate.layout.gpus_per_machine
    machines = machine_gpus(topology, candidate.layout.workers)
    rates, missing = {}, []
    for name in dict.fromkeys(machines):
        gpu = device(name)
        machine_type = gpu.machine_types.get(gpus) if gpu.name != "cpu" else None
        # the type's price includes its GPUs: the table says so, or the GPU is sold no other way
        bundled = machine_type in prices.bundled_gpus or gpu.sold_in_its_machines
        machine = prices.machine_price(machine_type, spot) if machine_type else None
        accelerator = 0.0 if bundled else prices.accelerator_price(gpu.name, spot)
        sold = f' (with its {gpu.name}: "bundled_gpus": {gpus})' if gpu.sold_in_its_machines else ""
        lacks = {  # each entry the price needs: whether the table lacks it
            CPU_UNPRICED: gpu.name == "cpu",
            f"no machine type takes {gpus} {gpu.name}": gpu.name != "cpu" and not machine_type,
            f"machine type {machine_type} has no {field}{sold}": machine_type and machine is None,
            f"accelerator {gpu.name} has no {field}": machine_type and accelerator is None,
        }
        missing += [entry for entry, lacking in lacks.items() if lacking]
        if machine is not None and accelerator is not None:
            rates[name] = machine if bundled else machine + gpus * accelerator
    # the servers and the coordinator, on demand on CPU machines of their own
    servers = spec_for(candidate.strategy).uses_ps and not servers_share_the_host(topology)
    types = (server_machine_type(candidate, topology), topology.ps_machine_type) if servers else ()
    missing += [f"machine type {t} has no usd_per_hour"
                for t in dict.fromkeys(types) if prices.machine_price(t) is None]  # fmt: skip
    if missing:
        return None, missing
    server, coordinator = map(prices.machine_price, types) if servers else (0.0, 0.0)
    return sum(rates[name] for name in machines) + candidate.layout.ps * server + coordinator, []


def usd_per_hour(candidate: Prediction, topology: Topology, prices: PriceTable) -> float | None:
    """Hourly list price of the machines `candidate` uses (None when a price is missing)."""
    return _hourly(candidate, topology, prices)[0]


def _missing(candidate: Prediction, topology: Topology, prices: PriceTable) -> list[str]:
    """What the price of `candidate`, on the machines it runs on, needs and the table lacks."""
    return _hourly(candidate, subsets.machines_running(candidate, topology), prices)[1]


def server_machine_type(candidate: Prediction, topology: Topology) -> str:
    """The machine type a parameter server is billed as: the one the step-time model gives it."""
    machine = server_machine(topology, candidate.server_share_bytes)
    return machine.name if machine else topology.ps_machine_type


def price_shown(value: float) -> str:
    """A price with three significant digits at least: 0.00630, 0.0101, 0.360, 2.29, 1,234.50."""
    decimals = 2 if value >= 1 or value <= 0 else 2 - math.floor(math.log10(value))
    return f"{value:,.{decimals}f}"


def price_candidates(preds: list[Prediction], topology: Topology, prices: Any) -> None:
    """Sets each candidate's list price per million examples (None: unpriced or cannot run)."""
    for p in preds:
        hourly = usd_per_hour(p, topology, prices) if p.feasible else None
        # no price either for one that trains nothing (preemption restarts fill its hours)
        if hourly is None or (speed := p.rank_examples_per_second) <= 0:
            p.usd_per_million_examples = None
        else:
            p.usd_per_million_examples = hourly / (speed * 3600) * 1e6


def on_fewer_machines(preds: list[Prediction], topology: Topology, model: ModelProfile,
                      batch: int, history: History, prices: Any) -> list[Prediction]:  # fmt: skip
    """The feasible candidates on fewer machines that `preds` lacks, priced on their machines."""
    counts = range(1, topology.machines)
    lacking = subsets.on_faster_machines(preds, topology, model, batch, history, counts)
    for p in lacking:
        price_candidates([p], subsets.on_first_machines(topology, p.layout.workers), prices)
    return lacking


def on_one_gpu_type(topology: Topology, model: ModelProfile, batch: int, history: History,
                    prices: Any) -> tuple[list[Prediction], list[str]]:  # fmt: skip
    """The feasible candidates on a mix's slower GPU types alone, priced, and `history`'s word."""
    out, measured = [], []
    first = machine_gpus(topology, 1)[0]
    for name, count in (gc for gc in topology.gpu_mix if gc[0] != first):
        for k in subsets.machine_counts(count):
            on = subsets.of_one_type(topology, name, k)
            alone = [p for p in subsets.predicted_on(on, model, batch)
                     if p.feasible and p.layout.workers == k]  # fmt: skip
            if history:
                said = apply_history(alone, history, on, model, batch).measured
                measured += [f"On the {name} machines: {r}" for r in said]
            for p in alone:
                p.machines_gpu = name
            price_candidates(alone, on, prices)
            out += alone
    return out, measured


def on_fewer_gpus(preds: list[Prediction], topology: Topology, model: ModelProfile, batch: int,
                  history: History,
                  prices: Any) -> list[tuple[Prediction, Prediction]]:  # fmt: skip
    """(input-bound candidate, the same on fewer GPUs per machine, priced) pairs not in `preds`."""
    known = {(p.strategy, p.layout) for p in preds}
    out: list[tuple[Prediction, Prediction]] = []
    for p in [p for p in preds if p.feasible and p.input_bound]:
        on = subsets.on_first_machines(topology, p.layout.workers)
        fed, on, _ = fewest_gpus_the_input_keeps_busy(p, on, model, batch, True, history)
        if (fed.strategy, fed.layout) not in known:
            known.add((fed.strategy, fed.layout))
            price_candidates([fed], on, prices)
            out.append((p, fed))
    return out


def cost_sentences(chosen: Prediction, preds: list[Prediction], topology: Topology,
                   model: ModelProfile, async_ok: bool, prices: Any) -> list[str]:  # fmt: skip
    """What the choice costs, what `--objective cost` picks instead, and what is not priced."""
    basis = price_basis(topology, prices)
    if chosen.usd_per_million_examples is None:
        missing = "; ".join(_missing(chosen, topology, prices))
        return [f"No price for this hardware among the table's {basis}: {missing}."]
    out = [f"At {basis}, {chosen.strategy} costs {_price_said(chosen, topology, prices)}."]
    _, cheapest, _ = _cost_choice(preds, topology, model, async_ok, prices)
    if cheapest is not chosen:
        ratio = chosen.rank_examples_per_second / cheapest.rank_examples_per_second
        speed = f"{ratio:,.1f}x slower" if ratio >= 1 else f"{1 / ratio:,.2f}x faster"
        out.append(f"--objective cost picks {_named(cheapest)}, {speed}, at "
                   f"{_price_said(cheapest, topology, prices)}.")  # fmt: skip
    return out + _unpriced_sentences(chosen, preds, topology, prices)


def _unpriced_sentences(chosen: Prediction, preds: list[Prediction], topology: Topology,
                        prices: Any) -> list[str]:  # fmt: skip
    """What the table lacks to price candidates; the break-even price of one faster than chosen."""
    lacking: dict[tuple[str, ...], list[Prediction]] = {}
    for p in [p for p in preds if p.feasible]:  # lacking nothing, it trains nothing: no price
        if p.usd_per_million_examples is None and (lacks := _missing(p, topology, prices)):
            lacking.setdefault(tuple(lacks), []).append(p)
    out = [f"Not priced, so not weighed: {', '.join(map(_named, ps))}: {'; '.join(m)}."
           for m, ps in lacking.items()]  # fmt: skip
    unpriced = [p for ps in lacking.values() for p in ps]
    fastest = max(unpriced, key=lambda p: p.rank_examples_per_second, default=chosen)
    speed, chosen_speed = fastest.rank_examples_per_second, chosen.rank_examples_per_second
    if speed > chosen_speed:
        even = price_shown(chosen.usd_per_million_examples * speed * 3600 / 1e6)
        out.append(f"The unpriced {_named(fastest)} is predicted {speed / chosen_speed:,.1f}x as "
                   f"fast as {chosen.label} ({speed:,.0f} examples/s): the cheaper per example if "
                   f"its machines cost under {even} {prices.currency} an hour.")  # fmt: skip
    return out


def _per_million(value: float, prices: PriceTable) -> str:
    """`2.29 USD per million examples`, in the table's currency."""
    return f"{price_shown(value)} {prices.currency} per million examples"


def _price_said(candidate: Prediction, topology: Topology, prices: Any) -> str:
    """`candidate`'s price per million examples, and on the machines given if it uses fewer GPUs."""
    said = _per_million(candidate.usd_per_million_examples, prices)
    layout, given = candidate.layout, topology.gpus_per_machine
    if layout.gpus_per_machine == given:
        return said
    on = subsets.machines_running(candidate, topology)
    gpus = dict.fromkeys(machine_gpus(on, layout.workers))
    types = " and ".join(device(gpu).machine_type(layout.gpus_per_machine) for gpu in gpus)
    full = dataclasses.replace(
        candidate, layout=dataclasses.replace(layout, gpus_per_machine=given)
    )
    price_candidates([full], on, prices)
    on_given = full.usd_per_million_examples
    there = "" if on_given is None else f"; {_per_million(on_given, prices)} on the {given} given"
    return f"{said} on {layout.gpus_per_machine} GPU per machine ({types}{there})"


def _named(p: Prediction) -> str:
    """A candidate with its workers/ps/gpus, for a sentence: `one_device (1/0/1)`."""
    return f"{p.label} ({p.layout.workers}/{p.layout.ps}/{p.layout.gpus_per_machine})"


def _cost_choice(preds: list[Prediction], topology: Topology, model: ModelProfile, async_ok: bool,
                 prices: Any) -> tuple[list[Prediction], Prediction | None, list[str]]:  # fmt: skip
    """The priced, cheapest first (six-digit ties: the faster), and the cheapest the rules allow."""
    priced = [p for p in preds if p.feasible and p.usd_per_million_examples is not None]
    by_price = sorted(priced, key=lambda p: (six_digits(p.usd_per_million_examples),
                                             -p.rank_examples_per_second))  # fmt: skip
    if not by_price:
        return by_price, None, []
    cheapest = by_price[0]
    sync = next((p for p in by_price if not spec_for(p.strategy).uses_ps), None)
    price = _per_million(cheapest.usd_per_million_examples, prices)
    claim = "" if sync is None else (f"parameter_server is predicted the cheapest per example, "
                                     f"{price} against {sync.label}'s "
                                     f"{price_shown(sync.usd_per_million_examples)}")  # fmt: skip
    on = subsets.machines_running(cheapest, topology)
    return by_price, *apply_rules(cheapest, by_price, on, model, async_ok, claim)


def cheapest(preds: list[Prediction], topology: Topology, model: ModelProfile, batch: int,
             reasons: list[str], prices: Any, async_ok: bool = False,
             ) -> tuple[Prediction, str, list[str], list[Prediction]]:  # fmt: skip
    """The cheapest candidate under the rules on asynchrony, its price, why, and the others."""
    feasible, chosen, rule_reasons = _cost_choice(preds, topology, model, async_ok, prices)
    basis = price_basis(topology, prices)
    if chosen is None:
        missing = [m for p in preds if p.feasible for m in _missing(p, topology, prices)]
        add = "" if set(missing) == {CPU_UNPRICED} else "add them to it (--prices FILE), or "
        lacks = "; ".join(dict.fromkeys(missing))
        raise ConfigError(f"--objective cost: the price table's {basis} have no price for "
                          f"{topology.describe()}: {lacks}; {add}use --objective time")  # fmt: skip
    unpriced = _unpriced_sentences(chosen, preds, topology, prices)
    sync = " synchronous" if chosen is not feasible[0] else ""
    among = f" of the{sync} candidates{' priced' if unpriced else ''}" if unpriced or sync else ""
    lead = f"Objective cost: {chosen.label} is the cheapest per example{among} at {basis}: "
    lead += f"{_price_said(chosen, topology, prices)}."
    # "communication costs more than the GPUs give" argues time, not money
    argued_by_time = spec_for(chosen.strategy).single_device and topology.total_gpus > 1
    on = subsets.machines_running(chosen, topology)
    why = explain(chosen, feasible, on, model, batch, strategy_sentence=not argued_by_time)
    others = [p for p in feasible if p is not chosen] + [p for p in preds if p not in feasible]
    return chosen, lead, unpriced + why + rule_reasons + reasons, others
