"""What each candidate costs at list prices: USD per hour and per million examples.

Prices come from the table `strategist compare` uses (`data/prices.json`,
`comparison.pricing.load_prices`). A GPU machine is priced as the Vertex AI
machine type that takes its GPUs (`hardware.Gpu.machine_type`) plus the GPUs
unless the type bundles them, each machine of a GPU mix for its own GPU;
parameter servers and the parameter-server coordinator run on the table's
default CPU machine type. Preemptible machines are priced at the table's Spot
prices (`spot_usd_per_hour`) when it gives any, else on demand, and the
reasons say which (`SPOT_PRICES_MISSING`).
"""

from __future__ import annotations

from components.core.comparison.pricing import PriceTable
from components.core.config import ConfigError
from components.core.selection.cost_model import machine_gpus
from components.core.selection.prediction import Prediction
from components.core.selection.topology import Topology, device
from components.core.strategy_spec import spec_for

# Spot prices change up to daily (https://cloud.google.com/spot-vms/pricing), so the
# bundled table, transcribed by hand, carries none; a user's copy can.
SPOT_PRICES_MISSING = (
    "--preemptible: the price table has no Spot prices (spot_usd_per_hour), so the "
    "candidates are priced at {basis}, above what Spot machines cost; Spot prices change "
    "up to daily (cloud.google.com/spot-vms/pricing): add them to a copy of the table and "
    "pass it with --prices FILE."
)


def prices_for(topology: Topology, prices: PriceTable) -> PriceTable:
    """The prices `topology`'s machines are billed at: Spot for preemptible machines when
    the table gives Spot prices, else the table's own."""
    if topology.preemptible and prices.kind != "Spot":
        return prices.spot() or prices
    return prices


def price_basis_reasons(topology: Topology, prices: PriceTable) -> list[str]:
    """A sentence when preemptible machines are priced on demand for want of Spot prices."""
    if topology.preemptible and prices.kind != "Spot":
        return [SPOT_PRICES_MISSING.format(basis=prices.basis)]
    return []


def usd_per_hour(candidate: Prediction, topology: Topology, prices: PriceTable) -> float | None:
    """Hourly list price of the machines `candidate` uses (None when a price is missing).

    In a GPU mix the candidate runs on the fastest machines first
    (`cost_model.machine_gpus`), each priced for its own GPU.
    """
    workers = candidate.layout.workers
    rates = [
        _machine_rate(name, candidate.layout.gpus_per_machine, prices)
        for name in machine_gpus(topology, workers)
    ]
    if None in rates:
        return None
    cpu_machines = candidate.layout.ps + 1 if spec_for(candidate.strategy).uses_ps else 0
    if not cpu_machines:
        return sum(rates)
    cpu_rate = prices.machine_types.get(prices.default_machine_type)
    return None if cpu_rate is None else sum(rates) + cpu_machines * cpu_rate


def _machine_rate(gpu_name: str, gpus: int, prices: PriceTable) -> float | None:
    """Hourly list price of one machine with `gpus` GPUs of `gpu_name` (None when unpriced)."""
    gpu = device(gpu_name)
    if gpu.name == "cpu":
        return None
    try:
        machine_type = gpu.machine_type(gpus)
    except ConfigError:
        return None
    rate = prices.machine_types.get(machine_type)
    if rate is None:
        return None
    if machine_type not in prices.bundled_gpus:
        gpu_rate = prices.accelerator_price(gpu.name)
        if gpu_rate is None:
            return None
        rate += gpus * gpu_rate
    return rate


def usd_per_million_examples(
    candidate: Prediction, topology: Topology, prices: PriceTable
) -> float | None:
    """List price of training on a million examples with `candidate` (None when unpriced)."""
    hourly = usd_per_hour(candidate, topology, prices)
    if hourly is None:
        return None
    return hourly / (candidate.rank_examples_per_second * 3600) * 1e6
