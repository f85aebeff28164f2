"""Candidate strategies for a topology, each with the step-time model's prediction, at a
per-replica batch that fits the GPUs' memory."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from components.core.checkpoint_interval import CheckpointInterval
from components.core.checkpoint_interval import preemption_loss_seconds as loss_per_preemption
from components.core.checkpoint_interval import preemption_share as hourly_share
from components.core.hardware import Gpu
from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import (
    achievable_tflops,
    step_compute_share,
    step_compute_time,
)
from components.core.selection.machine_speeds import (
    machine_gpus,
    mean_machine_speed,
    preemption_rate,
    worker_shares,
)
from components.core.selection.memory import (
    OPTIMIZER_STATE_FACTOR,
    USABLE_MEMORY_FRACTION,
    max_batch_that_fits,
    memory_needed_bytes,
    server_state_bytes,
)
from components.core.selection.ranges import (
    efficiency_group,
    efficiency_range,
    speed_group,
    speed_range,
)
from components.core.selection.step_time import predict_allreduce, predict_parameter_server
from components.core.selection.topology import (
    ASSUMED_EPOCH_S,
    Layout,
    Topology,
    a_device,
    device,
)
from components.core.strategy_spec import spec_for

# Parameter-server host memory available for variables and optimizer state, GB.
PS_HOST_MEMORY_GB = 64.0


@dataclass
class Prediction:
    """The step-time model's (and, when given, the measurement's) view of one candidate.

    Attributes:
        strategy: one of `config.STRATEGIES`.
        layout: the cluster shape it runs on.
        replicas: GPUs that each hold a replica.
        per_replica_batch: examples per replica per step.
        compute_s: predicted compute seconds per step.
        communication_s: predicted communication seconds not hidden behind compute.
        raw_communication_s: predicted communication seconds before overlap.
        single_gpu_step_s: predicted step seconds of one GPU alone.
        overhead_fraction: share of throughput lost to expected preemptions.
        preemption_loss_s: expected seconds one preemption loses it.
        feasible: False when the candidate cannot run (e.g. out of GPU memory).
        note: why it cannot run, when it cannot.
        misfit: infeasible because a replica does not fit a GPU its machines hold.
        measured_examples_per_second: measured throughput on matching hardware.
        measured_source: the file the measurement came from.
        usd_per_million_examples: list price of a million examples, when priced.
        input_limit: examples/s its machines' input pipelines feed together (None: unlimited).
        replica_speed: its machines' mean GPU speed relative to the topology's GPU.
        machines_gpu: the GPU type of a mix it runs on alone (empty: the mix's first machines).
        server_state_bytes: the variables and Adam state its parameter servers hold together.
        machine_shares: (share of its examples, machines) groups when its machines differ.
        efficiency_group: the `ranges` group of its scaling efficiency (empty: one GPU).
        speed_group: the `ranges` group of its GPUs' own speed.
    """

    strategy: str
    layout: Layout
    replicas: int
    per_replica_batch: int
    compute_s: float
    communication_s: float
    raw_communication_s: float
    single_gpu_step_s: float
    overhead_fraction: float = 0.0
    preemption_loss_s: float = 0.0
    feasible: bool = True
    note: str = ""
    misfit: bool = False
    measured_examples_per_second: float | None = None
    measured_source: str | None = None
    usd_per_million_examples: float | None = None
    input_limit: float | None = None
    replica_speed: float = 1.0
    machines_gpu: str = ""
    server_state_bytes: float = 0.0
    machine_shares: tuple[tuple[float, int], ...] = ()
    efficiency_group: str = ""
    speed_group: str = "fp32"

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
    def examples_per_second(self) -> float:
        """Predicted examples/s, each machine at most what its input pipeline feeds, after
        preemption losses."""
        computed = self.computed_examples_per_second
        if self.input_limit is not None:
            feed = self.machine_feed
            computed = sum(n * min(computed * share, feed) for share, n in self._shares())
        return computed * (1 - self.overhead_fraction)

    @property
    def computed_examples_per_second(self) -> float:
        """Predicted examples/s its GPUs compute, before input caps and preemption losses."""
        return self.replicas * self.per_replica_batch / self.step_time_s

    @property
    def machine_feed(self) -> float:
        """Examples/s one machine's input pipeline feeds (infinite when unlimited)."""
        if self.input_limit is None:
            return math.inf
        return self.input_limit / self.layout.workers

    def _shares(self) -> tuple[tuple[float, int], ...]:
        """`machine_shares`, or one equal share per machine."""
        workers = self.layout.workers
        return self.machine_shares or ((1.0 / workers, workers),)

    @property
    def input_bound(self) -> bool:
        """Whether the input pipelines, not the GPUs, set the throughput: every machine's
        GPUs compute more than its pipeline feeds."""
        slowest = min(share for share, _ in self._shares())
        return self.computed_examples_per_second * slowest > self.machine_feed

    @property
    def input_capped(self) -> bool:
        """Whether the input pipeline of any of its machines feeds less than its GPUs
        compute (`input_bound`: of every machine)."""
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
        return efficiency_range(self.scaling_efficiency, self.efficiency_group)

    @property
    def examples_per_second_range(self) -> tuple[float, float]:
        """The range around `examples_per_second`: one GPU's speed and the scaling
        efficiency at their ends, within what the input pipelines feed."""
        point, efficiency = self.examples_per_second, self.scaling_efficiency
        speed_low, speed_high = speed_range(self.speed_group)
        low, high = self.scaling_efficiency_range
        ends = [point * speed_low * low / efficiency, point * speed_high * high / efficiency]
        if self.input_limit is not None:
            feed = self.input_limit * (1 - self.overhead_fraction)
            ends = [min(end, max(feed, point)) for end in ends]
        return ends[0], ends[1]

    @property
    def usd_per_million_examples_range(self) -> tuple[float, float] | None:
        """The price at the ends of `examples_per_second_range` (None when unpriced; the
        measured price when measured)."""
        price = self.usd_per_million_examples
        if price is None or self.measured_examples_per_second is not None:
            return None if price is None else (price, price)
        low, high = self.examples_per_second_range
        return price * self.examples_per_second / high, price * self.examples_per_second / low

    @property
    def rank_examples_per_second(self) -> float:
        """What ranking uses: the measurement, else the prediction; either less the expected
        preemption losses."""
        if self.measured_examples_per_second is not None:
            return self.measured_examples_per_second * (1 - self.overhead_fraction)
        return self.examples_per_second

    def to_dict(self) -> dict[str, Any]:
        """The candidate as a JSON-ready dict (six significant digits)."""
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "layout": self.layout.to_dict(),
            "predicted": {
                "step_time_s": six_digits(self.step_time_s),
                "compute_s": six_digits(self.compute_s),
                "communication_s": six_digits(self.communication_s),
                "examples_per_second": six_digits(self.examples_per_second),
                "scaling_efficiency": six_digits(self.scaling_efficiency),
            },
        }
        if self.feasible:
            out["predicted"]["scaling_efficiency_range"] = [
                six_digits(x) for x in self.scaling_efficiency_range
            ]
            out["predicted"]["examples_per_second_range"] = [
                six_digits(x) for x in self.examples_per_second_range
            ]
        if self.machines_gpu:
            out["machines_gpu"] = self.machines_gpu
        if self.input_bound:  # the step is the GPUs'; the input pipelines feed fewer examples
            out["predicted"]["input_bound"] = True
        elif self.input_capped:  # the input holds back its faster machines only
            out["predicted"]["input_capped"] = True
        if self.measured_examples_per_second is not None:
            out["measured"] = {
                "examples_per_second": six_digits(self.measured_examples_per_second),
                "source": self.measured_source,
            }
        if self.usd_per_million_examples is not None:
            out["usd_per_million_examples"] = six_digits(self.usd_per_million_examples)
            out["usd_per_million_examples_range"] = [
                six_digits(x) for x in self.usd_per_million_examples_range
            ]
        if not self.feasible:
            out["feasible"] = False
        if self.note:
            out["note"] = self.note
        return out


def six_digits(value: float) -> float:
    """`value` rounded to six significant digits."""
    return float(f"{value:.6g}")


def _candidate(strategy, layout, replicas, batch, parts, single) -> Prediction:
    """A Prediction from the step-time model's (compute, exposed, raw communication) triple."""
    compute, exposed, raw = parts
    return Prediction(strategy, layout, replicas, batch, compute, exposed, raw, single)


def _ps_count(topology: Topology, model: ModelProfile, batch: int, workers: int, gpus: int) -> int:
    """Fewest parameter servers within 3% of the best, and enough to hold sparse tables."""
    need = ps_needed_for_memory(model)
    steps = {}
    for p in range(need, max(need, 2 * workers, 8) + 1):
        c, e, _ = predict_parameter_server(topology, model, batch, workers, p, gpus)
        steps[p] = c + e
    best = min(steps.values())
    return next(p for p, step in steps.items() if step <= best * 1.03)


def ps_needed_for_memory(model: ModelProfile) -> int:
    """Parameter servers whose host memory holds the sparse table and its Adam state."""
    table = model.sparse_embedding_params * 4 * (1 + OPTIMIZER_STATE_FACTOR)
    return max(1, math.ceil(table / (PS_HOST_MEMORY_GB * 1e9)))


def candidates(topology: Topology, model: ModelProfile, batch: int) -> list[Prediction]:
    """Every strategy that can use (part of) the topology, with its prediction."""
    single = step_compute_time(model, batch, achievable_tflops(topology.gpu, topology.precision))
    m, g = topology.machines, topology.gpus_per_machine
    # TensorFlow gives each worker of a multi-worker strategy one CPU device, so on CPU
    # machines those run a device per worker (`StrategySpec.cpu_rehearsal`)
    g_workers = 1 if topology.gpu == "cpu" else g
    out = [_candidate("one_device", Layout(1, 0, 1), 1, batch, (single, 0.0, 0.0), single)]
    if g > 1:
        parts = predict_allreduce(topology, model, batch, 1, g)
        out.append(_candidate("mirrored", Layout(1, 0, g), g, batch, parts, single))
    if m > 1:
        parts = predict_allreduce(topology, model, batch, m, g_workers)
        layout = Layout(m, 0, g_workers)
        out.append(_candidate("multi_worker_mirrored", layout, m * g_workers, batch, parts, single))
    if m > 1 or model.sparse_embedding_params:
        ps = _ps_count(topology, model, batch, m, g_workers)
        parts = predict_parameter_server(topology, model, batch, m, ps, g_workers)
        layout = Layout(m, ps, g_workers)
        out.append(_candidate("parameter_server", layout, m * g_workers, batch, parts, single))
    share = step_compute_share(single)
    mixed_or_xla = topology.precision == "mixed" or topology.jit_compile
    for c in out:  # a GPU mix's candidates run on its fastest machines first
        c.speed_group = speed_group(mixed_or_xla)
        if c.replicas > 1:
            c.efficiency_group = efficiency_group(c.layout.workers, mixed_or_xla)
        c.replica_speed = mean_machine_speed(topology, c.layout.workers, share)
        if spec_for(c.strategy).uses_ps:
            c.server_state_bytes = server_state_bytes(model)
            # each worker at its own speed (synchronous replicas all wait for the slowest)
            c.machine_shares = worker_shares(
                topology, c.layout.workers, share, c.compute_s, c.communication_s
            )
    if topology.input_examples_per_second is not None:
        for c in out:  # every machine's CPUs feed only its own GPUs
            c.input_limit = c.layout.workers * topology.input_examples_per_second
    if topology.preemptible:
        _charge_preemptions(out, topology)
    return out


def preemption_loss_seconds(
    c: Prediction, topology: Topology, interval: CheckpointInterval
) -> float:
    """Expected seconds one preemption loses candidate `c` checkpointing at `interval`: the
    restart plus half the interval trained again (a parameter_server run counts the
    coordinator's steps, one per worker step)."""
    step_s = c.step_time_s / (c.layout.workers if spec_for(c.strategy).uses_ps else 1)
    examples = topology.examples_per_epoch
    epoch_s = ASSUMED_EPOCH_S if examples is None else examples / c.computed_examples_per_second
    return loss_per_preemption(interval, epoch_s, step_s)


def _charge_preemptions(preds: list[Prediction], topology: Topology) -> None:
    """Sets each candidate's expected share of time lost to preemptions; one whose losses fill
    every hour trains nothing and is infeasible."""
    interval = topology.checkpoint_interval()
    for c in preds:
        c.preemption_loss_s, c.overhead_fraction = preemption_share(c, topology, interval)
        if c.overhead_fraction == 1.0 and c.feasible:
            c.feasible = False
            c.note = f"its {preempted_machines(c)} machines' preemption losses fill every hour"


def preempted_machines(c: Prediction) -> int:
    """Machines whose preemption stops candidate `c`: all its workers when synchronous;
    one for parameter_server, whose other workers keep training when one is lost."""
    return 1 if spec_for(c.strategy).uses_ps else c.layout.workers


def preemption_share(
    c: Prediction, topology: Topology, interval: CheckpointInterval
) -> tuple[float, float]:
    """Seconds one preemption loses `c` at `interval`, and the share of each hour
    expected preemptions take (at most 1)."""
    loss_s = preemption_loss_seconds(c, topology, interval)
    return loss_s, hourly_share(loss_s, preempted_machines(c), preemption_rate(topology))


def candidates_that_fit(
    topology: Topology, model: ModelProfile, batch: int, gpu: Gpu, fit_replicated: int
) -> tuple[list[Prediction], int, list[str]]:
    """The candidates at a per-replica batch that fits one GPU, that batch, and reasons: only
    parameter_server when the embedding table fits no GPU; the largest batch that fits when
    the batch is too large."""
    preds = candidates(topology, model, batch)
    if fit_replicated >= batch:
        _check_mix_memory(preds, topology, model)
        return preds, batch, []
    need_gb = memory_needed_bytes(model, batch, True, topology.precision) / 1e9
    if fit_replicated == 0:
        for p in preds:
            if not spec_for(p.strategy).uses_ps:
                p.feasible = False
                p.note = "sparse embedding table does not fit one GPU"
        reason = (
            f"The {model.sparse_embedding_params:,}-parameter embedding table does not fit "
            f"one {gpu.name}: a replica with it needs {need_gb:,.1f} GB for weights, gradients, "
            "Adam state and activations; "
            "parameter servers hold it in host memory and send only the rows a step touches."
        )
        _check_mix_memory(preds, topology, model)
        return preds, batch, [reason] + _sharded_embedding_reasons(topology, model, gpu)
    usable = fit_replicated
    reason = (
        f"A per-GPU batch of {batch} needs {need_gb:,.1f} GB, more than the "
        f"{gpu.memory_gb * USABLE_MEMORY_FRACTION:.0f} GB usable on {a_device(gpu.name)}; "
        f"use at most {usable:,} per GPU (or accumulate gradients). Predictions use {usable:,}."
    )
    preds = candidates(topology, model, usable)
    _check_mix_memory(preds, topology, model)
    return preds, usable, [reason]


def _check_mix_memory(preds: list[Prediction], topology: Topology, model: ModelProfile) -> None:
    """Marks infeasible the candidates of a GPU mix whose replica does not fit the
    smallest GPU of the machines they use (the first machine's was checked already)."""
    if not topology.gpu_mix:
        return
    for p in preds:
        smallest = min((device(g) for g in machine_gpus(topology, p.layout.workers)),
                       key=lambda g: g.memory_gb)  # fmt: skip
        replicated = not spec_for(p.strategy).uses_ps
        fits = max_batch_that_fits(model, smallest.memory_gb, replicated, topology.precision)
        if p.feasible and fits < p.per_replica_batch:
            p.feasible, p.misfit = False, True
            p.note = f"a replica does not fit {a_device(smallest.name)}"


def _sharded_embedding_reasons(topology: Topology, model: ModelProfile, gpu: Gpu) -> list[str]:
    """The GPU-sharded embedding alternative, when the table fits all the GPUs' memory."""
    table_gb = model.sparse_embedding_params * 4 * (2 + OPTIMIZER_STATE_FACTOR) / 1e9
    usable_gb = topology.total_gpus * gpu.memory_gb * USABLE_MEMORY_FRACTION
    if table_gb > usable_gb * 0.8:  # leave a fifth for the dense model and activations
        return []
    return [
        f"Beyond these three strategies: the table ({table_gb:,.0f} GB with gradients and "
        f"Adam state) fits the {topology.total_gpus} GPUs' {usable_gb:,.0f} GB together, so "
        "sharding it across GPU memory (each GPU holds a slice; looked-up rows travel "
        "all-to-all, as in TensorFlow Recommenders' sharded embeddings, DTensor or NVIDIA's "
        "HugeCTR/SOK) avoids parameter-server round trips. Strategist does not run it, as "
        "it does not run model parallelism."
    ]
