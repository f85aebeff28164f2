"""What each candidate costs at list prices: per hour and per million examples, in the table's
currency (the names say usd for the readers of `--json`).

A GPU machine is priced as the machine type that takes its GPUs plus the GPUs (unless the type
bundles them), at Spot prices for preemptible machines when the table has them. Parameter servers
and the coordinator are billed on demand as the CPU machines they run on (`ps_servers`).
"""

from __future__ import annotations

import math

from components.core.config import ConfigError
from components.core.hardware import Gpu
from components.core.prices import PriceTable
from components.core.selection.machine_speeds import machine_gpus
from components.core.selection.prediction import Prediction
from components.core.selection.ps_servers import server_machine, servers_share_the_host
from components.core.selection.topology import Topology, device
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
