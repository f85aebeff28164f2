"""Candidate strategies for a topology, each with the step-time model's prediction, at a
per-replica batch that fits the GPUs' memory."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from components.core import checkpoint_interval
from components.core.hardware import Gpu
from components.core.model_profile import ModelProfile
from components.core.selection import device_compute, machine_speeds, memory, ranges
from components.core.selection.step_time import predict_allreduce, predict_parameter_server
from components.core.selection.topology import ASSUMED_EPOCH_S, Layout, Topology, a_device, device
from components.core.strategy_spec import spec_for

# Parameter-server host memory available for variables and optimizer state, GB.
PS_HOST_MEMORY_GB = 64.0


@dataclass
class Prediction:
    """The step-time model's (and, when given, the measurement's) view of one candidate."""

    strategy: str  # one of `config.STRATEGIES`
    layout: Layout  # the cluster shape it runs on
    replicas: int  # GPUs that each hold a replica
    per_replica_batch: int  # examples per replica per step
    compute_s: float  # predicted compute seconds per step
    communication_s: float  # predicted communication seconds not hidden behind compute
    raw_communication_s: float  # predicted communication seconds before overlap
    single_gpu_step_s: float  # predicted step seconds of one GPU alone
    overhead_fraction: float = 0.0  # share of throughput lost to expected preemptions
    preemption_loss_s: float = 0.0  # expected seconds one preemption loses it
    feasible: bool = True  # False when it cannot run (e.g. out of GPU memory)
    note: str = ""  # why it cannot run, when it cannot
    misfit: bool = False  # infeasible: a replica does not fit a GPU its machines hold
    measured_examples_per_second: float | None = None  # on matching hardware
    measured_source: str | None = None  # the file the measurement came from
    usd_per_million_examples: float | None = None  # list price, when priced
    input_limit: float | None = None  # examples/s its machines' input pipelines feed together
    replica_speed: float = 1.0  # its machines' mean GPU speed relative to the topology's GPU
    machines_gpu: str = ""  # the GPU type of a mix it runs on alone (empty: the first machines)
    server_state_bytes: float = 0.0  # the variables and Adam state its parameter servers hold
    machine_shares: tuple[tuple[float, int], ...] = ()  # (share, machines) when machines differ
    efficiency_group: str = ""  # the `ranges` group of its scaling efficiency (empty: one GPU)
    speed_group: str = "fp32"  # the `ranges` group of its GPUs' own speed

    @property
    def label(self) -> str:
        """The strategy, and the GPU of its machines when not the first machines'."""
        return f"{self.strategy} on {self.machines_gpu}" if self.machines_gpu else self.strategy

    @property
    def server_share_bytes(self) -> float:
        """The variables and Adam state one of its parameter servers holds."""
        return self.server_state_bytes / max(self.layout.ps, 1)

    @property
    def step_time_s(self) -> float:
        """Predicted seconds per step: compute plus exposed communication."""
        return self.compute_s + self.communication_s

    @property
    def computed_examples_per_second(self) -> float:
        """Predicted examples/s its GPUs compute, before input caps and preemption losses."""
        return self.replicas * self.per_replica_batch / self.step_time_s

    @property
    def examples_per_second(self) -> float:
        """Predicted examples/s, each machine at most what its input feeds, less preemptions."""
        computed = self.computed_examples_per_second
        if self.input_limit is not None:
            feed = self.machine_feed
            computed = sum(n * min(computed * share, feed) for share, n in self._shares())
        return computed * (1 - self.overhead_fraction)

    @property
    def machine_feed(self) -> float:
        """Examples/s one machine's input pipeline feeds (infinite when unlimited)."""
        return math.inf if self.input_limit is None else self.input_limit / self.layout.workers

    def _shares(self) -> tuple[tuple[float, int], ...]:
        """`machine_shares`, or one equal share per machine."""
        return self.machine_shares or ((1.0 / self.layout.workers, self.layout.workers),)

    @property
    def input_bound(self) -> bool:
        """Whether every machine's GPUs compute more than its input pipeline feeds."""
        slowest = min(share for share, _ in self._shares())
        return self.computed_examples_per_second * slowest > self.machine_feed

    @property
    def input_capped(self) -> bool:
        """Whether any machine's GPUs compute more than its input pipeline feeds."""
        fastest = max(share for share, _ in self._shares())
        return self.computed_examples_per_second * fastest > self.machine_feed

    @property
    def scaling_efficiency(self) -> float:
        """Throughput relative to what its GPUs give alone (each at its own speed)."""
        single = self.per_replica_batch / self.single_gpu_step_s
        return self.examples_per_second / (self.replicas * single * self.replica_speed)

    @property
    def scaling_efficiency_range(self) -> tuple[float, float]:
        """The range the published cases leave around `scaling_efficiency`."""
        if not self.efficiency_group:
            return self.scaling_efficiency, self.scaling_efficiency
        return ranges.efficiency_range(self.scaling_efficiency, self.efficiency_group)

    @property
    def examples_per_second_range(self) -> tuple[float, float]:
        """`examples_per_second` at the ends of one GPU's speed and the efficiency, fed."""
        point, efficiency = self.examples_per_second, self.scaling_efficiency
        speed_low, speed_high = ranges.speed_range(self.speed_group)
        low, high = self.scaling_efficiency_range
        ends = [point * speed_low * low / efficiency, point * speed_high * high / efficiency]
        if self.input_limit is not None:
            feed = self.input_limit * (1 - self.overhead_fraction)
            ends = [min(end, max(feed, point)) for end in ends]
        return ends[0], ends[1]

    @property
    def usd_per_million_examples_range(self) -> tuple[float, float] | None:
        """The price at the ends of `examples_per_second_range` (the measured: its price)."""
        price = self.usd_per_million_examples
        if price is None or self.measured_examples_per_second is not None:
            return None if price is None else (price, price)
        low, high = self.examples_per_second_range
        return price * self.examples_per_second / high, price * self.examples_per_second / low

    @property
    def rank_examples_per_second(self) -> float:
        """What ranking uses: the measurement, else the prediction; less preemption losses."""
        if self.measured_examples_per_second is not None:
            return self.measured_examples_per_second * (1 - self.overhead_fraction)
        return self.examples_per_second

    def to_dict(self) -> dict[str, Any]:
        """The candidate as a JSON-ready dict (six significant digits)."""
        predicted = {key: six_digits(getattr(self, key)) for key in _PREDICTED}
        if self.feasible:
            predicted["scaling_efficiency_range"] = _six(self.scaling_efficiency_range)
            predicted["examples_per_second_range"] = _six(self.examples_per_second_range)
        if self.input_bound:  # the step is the GPUs'; the input pipelines feed fewer examples
            predicted["input_bound"] = True
        elif self.input_capped:  # the input holds back its faster machines only
            predicted["input_capped"] = True
        out = {"strategy": self.strategy, "layout": self.layout.to_dict(), "predicted": predicted}
        if self.machines_gpu:
            out["machines_gpu"] = self.machines_gpu
        if self.measured_examples_per_second is not None:
            measured = six_digits(self.measured_examples_per_second)
            out["measured"] = {"examples_per_second": measured, "source": self.measured_source}
        if self.usd_per_million_examples is not None:
            out["usd_per_million_examples"] = six_digits(self.usd_per_million_examples)
            out["usd_per_million_examples_range"] = _six(self.usd_per_million_examples_range)
        if not self.feasible:
            out["feasible"] = False
        if self.note:
            out["note"] = self.note
        return out


_PREDICTED = (
    "step_time_s",
    "compute_s",
    "communication_s",
    "examples_per_second",
    "scaling_efficiency",
)


def six_digits(value: float) -> float:
    """`value` rounded to six significant digits."""
    return float(f"{value:.6g}")


def _six(values) -> list[float]:
    """Each of `values` to six significant digits."""
    return [six_digits(x) for x in values]


def ps_needed_for_memory(model: ModelProfile) -> int:
    """Parameter servers whose host memory holds the sparse table and its Adam state."""
    table = model.sparse_embedding_params * 4 * (1 + memory.OPTIMIZER_STATE_FACTOR)
    return max(1, math.ceil(table / (PS_HOST_MEMORY_GB * 1e9)))


def _ps_count(topology: Topology, model: ModelProfile, batch: int, workers: int, gpus: int) -> int:
    """Fewest parameter servers within 3% of the best, and enough to hold sparse tables."""
    need = ps_needed_for_memory(model)
    steps = {
        ps: sum(predict_parameter_server(topology, model, batch, workers, ps, gpus)[:2])
        for ps in range(need, max(need, 2 * workers, 8) + 1)
    }
    best = min(steps.values())
    return next(ps for ps, step in steps.items() if step <= best * 1.03)


def candidates(topology: Topology, model: ModelProfile, batch: int) -> list[Prediction]:
    """Every strategy that can use (part of) the topology, with its prediction."""
    tflops = device_compute.achievable_tflops(topology.gpu, topology.precision)
    single = device_compute.step_compute_time(model, batch, tflops)
    m, g = topology.machines, topology.gpus_per_machine
    # TensorFlow gives a multi-worker strategy's worker one CPU device (`cpu_rehearsal`)
    gw = 1 if topology.gpu == "cpu" else g
    shapes = [("one_device", Layout(1, 0, 1), (single, 0.0, 0.0))]
    if g > 1:
        shapes += [("mirrored", Layout(1, 0, g), predict_allreduce(topology, model, batch, 1, g))]
    if m > 1:
        parts = predict_allreduce(topology, model, batch, m, gw)
        shapes += [("multi_worker_mirrored", Layout(m, 0, gw), parts)]
    if m > 1 or model.sparse_embedding_params:
        ps = _ps_count(topology, model, batch, m, gw)
        parts = predict_parameter_server(topology, model, batch, m, ps, gw)
        shapes += [("parameter_server", Layout(m, ps, gw), parts)]
    share = device_compute.step_compute_share(single)
    mixed_or_xla = topology.precision == "mixed" or topology.jit_compile
    feed = topology.input_examples_per_second  # every machine's CPUs feed only its own GPUs
    out = []
    for strategy, layout, (compute, exposed, raw) in shapes:
        replicas, workers = layout.workers * layout.gpus_per_machine, layout.workers
        c = Prediction(strategy, layout, replicas, batch, compute, exposed, raw, single)
        c.speed_group = ranges.speed_group(mixed_or_xla)
        if replicas > 1:
            c.efficiency_group = ranges.efficiency_group(workers, mixed_or_xla)
        # a GPU mix's candidates run on its fastest machines first
        c.replica_speed = machine_speeds.mean_machine_speed(topology, workers, share)
        if spec_for(strategy).uses_ps:
            c.server_state_bytes = memory.server_state_bytes(model)
            # each worker at its own speed (synchronous replicas all wait for the slowest)
            c.machine_shares = machine_speeds.worker_shares(
                topology, workers, share, compute, exposed
            )
        c.input_limit = None if feed is None else workers * feed
        out.append(c)
    if topology.preemptible:
        interval = topology.checkpoint_interval()
        for c in out:
            c.preemption_loss_s, c.overhead_fraction = preemption_share(c, topology, interval)
            if c.overhead_fraction == 1.0:  # it trains nothing
                c.feasible = False
                c.note = f"its {_preempted_machines(c)} machines' preemption losses fill every hour"
    return out


def _preempted_machines(c: Prediction) -> int:
    """Machines whose preemption stops `c`: all when synchronous, one for parameter_server."""
    return 1 if spec_for(c.strategy).uses_ps else c.layout.workers


def preemption_share(
    c: Prediction, topology: Topology, interval: checkpoint_interval.CheckpointInterval
) -> tuple[float, float]:
    """Seconds one preemption loses `c` (the restart, half an `interval` retrained), and the
    share of each hour preemptions take (<= 1)."""
    step_s = c.step_time_s / (c.layout.workers if spec_for(c.strategy).uses_ps else 1)
    examples = topology.examples_per_epoch
    epoch_s = ASSUMED_EPOCH_S if examples is None else examples / c.computed_examples_per_second
    loss_s = checkpoint_interval.preemption_loss_seconds(interval, epoch_s, step_s)
    rate = machine_speeds.preemption_rate(topology)
    return loss_s, checkpoint_interval.preemption_share(loss_s, _preempted_machines(c), rate)


def candidates_that_fit(
    topology: Topology, model: ModelProfile, batch: int, gpu: Gpu, fit_replicated: int
) -> tuple[list[Prediction], int, list[str]]:
    """The candidates at the largest per-replica batch up to `batch` that fits one GPU (only
    parameter_server when the embedding table fits none), that batch, and the reasons."""
    need_gb = memory.memory_needed_bytes(model, batch, True, topology.precision) / 1e9
    reasons = []
    if 0 < fit_replicated < batch:
        usable_gb = gpu.memory_gb * memory.USABLE_MEMORY_FRACTION
        reasons = [
            f"A per-GPU batch of {batch} needs {need_gb:,.1f} GB, more than the {usable_gb:.0f} "
            f"GB usable on {a_device(gpu.name)}: use at most {fit_replicated:,} per GPU (the "
            "predictions do), or accumulate gradients."
        ]
        batch = fit_replicated
    preds = candidates(topology, model, batch)
    if fit_replicated == 0:
        for p in preds:
            if not spec_for(p.strategy).uses_ps:
                p.feasible, p.note = False, "sparse embedding table does not fit one GPU"
        reasons = [
            f"The {model.sparse_embedding_params:,}-parameter embedding table does not fit one "
            f"{gpu.name} ({need_gb:,.1f} GB with gradients, Adam state and activations): "
            "parameter servers hold it in host memory and send only the rows a step touches."
        ]
        table_gb = model.sparse_embedding_params * 4 * (2 + memory.OPTIMIZER_STATE_FACTOR) / 1e9
        usable_gb = topology.total_gpus * gpu.memory_gb * memory.USABLE_MEMORY_FRACTION
        if table_gb <= usable_gb * 0.8:  # a fifth left for the dense model and activations
            reasons.append(
                f"The table ({table_gb:,.0f} GB with gradients and Adam state) fits the "
                f"{topology.total_gpus} GPUs' {usable_gb:,.0f} GB together: sharding it across "
                "GPUs (TensorFlow Recommenders, DTensor) avoids parameter-server round trips, "
                "but Strategist does not run that."
            )
    mixed = [p for p in preds if p.feasible] if topology.gpu_mix else []
    for p in mixed:  # a replica must fit the smallest GPU of the machines it runs on
        gpus = machine_speeds.machine_gpus(topology, p.layout.workers)
        smallest = min(map(device, gpus), key=lambda g: g.memory_gb)
        replicated = not spec_for(p.strategy).uses_ps
        fits = memory.max_batch_that_fits(model, smallest.memory_gb, replicated, topology.precision)
        if fits < p.per_replica_batch:
            p.feasible, p.misfit = False, True
            p.note = f"a replica does not fit {a_device(smallest.name)}"
    return preds, batch, reasons
