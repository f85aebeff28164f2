"""What a comparison's pilot (`max_steps`) would cost in the cloud, before it is sent.

Each strategy's pilot is one cloud job: its machines are the job's pools
(`launch.cloud.layout`, the same the train step submits), priced by the price
table (`components.core.prices`); its minutes are the pilot's steps (warm-up
included) at the step time the selector's model predicts for that shape on the
job's GPU, plus `STARTUP_MINUTES` per job. Both are estimates, and are said to be.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.core.config import PILOT_WINDOWS, RunConfig
from components.core.launch.cloud import CloudConfig, layout
from components.core.prices import PriceTable, load_prices

# Minutes a cloud job is assumed to hold its machines before its first step and after its
# last (provisioning, image pull, TensorFlow start-up, export): an assumption, stated.
STARTUP_MINUTES = 5.0


@dataclass(frozen=True)
class PilotCost:
    """One strategy's pilot, priced.

    Attributes:
        strategy: the strategy.
        machines: machines of its job (every pool's replicas).
        priced_as: the pools in words (`worker 2 x n1-standard-8 with 1 t4, ps ...`).
        usd_per_hour: their hourly price together (None: a price is missing).
        minutes: its estimated minutes, start-up included.
        usd: machines' hourly price x minutes (None when unpriced).
    """

    strategy: str
    machines: int
    priced_as: str
    usd_per_hour: float | None
    minutes: float
    usd: float | None


def pilot_costs(
    run_config: dict,
    clusters: list[dict],
    cloud_config: dict,
    max_steps: int,
    prices: PriceTable | None = None,
) -> list[PilotCost]:
    """Each cluster's pilot of `max_steps` steps, priced as the cloud job it would be."""
    prices = prices or load_prices()
    cloud = CloudConfig(**{**cloud_config, "target": "vertex"})
    costs = []
    for raw in clusters:
        run = RunConfig.from_dict({**run_config, "cluster": raw})
        pools = layout(run, cloud)
        steps = max_steps + max_steps // PILOT_WINDOWS
        minutes = STARTUP_MINUTES + steps * _step_seconds(run, cloud) / 60.0
        hourly, words = _hourly(pools, cloud, prices)
        costs.append(
            PilotCost(
                run.cluster.strategy,
                sum(p.replicas for p in pools),
                words,
                hourly,
                minutes,
                None if hourly is None else hourly * minutes / 60.0,
            )
        )
    return costs


def _hourly(pools, cloud: CloudConfig, prices: PriceTable) -> tuple[float | None, str]:
    """The pools' hourly price together, and what they are in words."""
    total: float | None = 0.0
    words = []
    for pool in pools:
        rate = prices.machine_price(pool.machine_type, cloud.spot)
        gpus = f" with {pool.gpus} {cloud.gpu}" if pool.gpus else ""
        words.append(f"{pool.role} {pool.replicas} x {pool.machine_type}{gpus}")
        if pool.gpus and pool.machine_type not in prices.bundled_gpus:
            gpu_rate = prices.accelerator_price(str(cloud.gpu), cloud.spot)
            rate = None if rate is None or gpu_rate is None else rate + pool.gpus * gpu_rate
        total = None if total is None or rate is None else total + pool.replicas * rate
    return total, ", ".join(words)


def _step_seconds(run: RunConfig, cloud: CloudConfig) -> float:
    """The selector's predicted seconds of one step of `run`'s shape on the job's GPU."""
    from components.core.model_profile import profile_model
    from components.core.selection.prediction import candidates
    from components.core.selection.topology import Topology

    cluster = run.cluster
    gpus = max(1, cluster.spec.devices_per_machine(cluster))
    topology = Topology(
        machines=max(1, cluster.workers), gpus_per_machine=gpus, gpu=cloud.gpu or "cpu"
    )
    model = profile_model(run.model.name)
    found = candidates(topology, model, run.training.per_replica_batch_size)
    same = [c for c in found if c.strategy == cluster.strategy] or found[:1]
    return same[0].step_time_s


def describe(costs: list[PilotCost], max_steps: int, currency: str = "USD") -> list[str]:
    """The dry run's lines: one per strategy, and the total."""
    warmup = max_steps // PILOT_WINDOWS
    lines = [
        f"pilot cost (estimate): {max_steps} steps after {warmup} warm-up per strategy, each "
        f"as its own job; minutes = {STARTUP_MINUTES:g} assumed for start-up + the steps at "
        "the selector's predicted step time"
    ]
    for c in costs:
        price = "not priced" if c.usd is None else f"{c.usd:.3f} {currency}"
        hourly = "?" if c.usd_per_hour is None else f"{c.usd_per_hour:.2f} {currency}/h"
        lines.append(
            f"  {c.strategy}: {c.machines} machine(s) ({c.priced_as}) x {c.minutes:.1f} min "
            f"x {hourly} = {price}"
        )
    priced = [c.usd for c in costs if c.usd is not None]
    total = f"{sum(priced):.3f} {currency}" if len(priced) == len(costs) else "not all priced"
    lines.append(f"  total: {total}")
    return lines
