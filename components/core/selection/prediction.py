"""Candidate strategies for a topology, each with the step-time model's prediction."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from components.core.checkpoint_interval import CheckpointInterval
from components.core.checkpoint_interval import preemption_loss_seconds as loss_per_preemption
from components.core.checkpoint_interval import preemption_share as hourly_share
from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import (
    achievable_tflops,
    step_compute_share,
    step_compute_time,
)
from components.core.selection.machine_speeds import (
    mean_machine_speed,
    preemption_rate,
    worker_shares,
)
from components.core.selection.memory import OPTIMIZER_STATE_FACTOR, server_state_bytes
from components.core.selection.ranges import (
    efficiency_group,
    efficiency_range,
    speed_group,
    speed_range,
)
from components.core.selection.step_time import predict_allreduce, predict_parameter_server
from components.core.selection.topology import ASSUMED_EPOCH_S, Layout, Topology
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
        preemption_loss_s: expected seconds one preemption costs it: the restart
            and the steps trained again since the last checkpoint (0 when the
            machines are not preemptible).
        feasible: False when the candidate cannot run (e.g. out of GPU memory).
        note: why it cannot run, when it cannot.
        measured_examples_per_second: measured throughput on matching hardware.
        measured_source: the file the measurement came from.
        usd_per_million_examples: list price of a million examples, when priced.
        input_limit: examples/s the input pipelines of its machines can feed
            together, each machine's pipeline only its own GPUs (None: unlimited).
        replica_speed: the mean speed of its machines' GPUs alone, relative to
            the topology's GPU (below 1 when slower machines of a GPU mix, or
            of `--heterogeneous`, take part).
        machines_gpu: the GPU of its machines when it runs on one slower type
            of a GPU mix alone (empty: on the mix's first machines, fastest first).
        server_state_bytes: the variables and Adam state its parameter servers
            hold together (0 for the other strategies).
        machine_shares: the share of its examples one machine computes, and how many
            machines compute that share, when they differ (parameter-server workers of
            a GPU mix or of `--heterogeneous` each run at their own speed); empty when
            every machine computes alike.
        efficiency_group: the `ranges` group its scaling efficiency's range comes from
            (empty: one GPU, whose efficiency is 1 by definition).
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
        """What ranking uses: the measurement when there is one, else the prediction;
        either less the expected preemption losses (a measured benchmark ran too briefly
        to be preempted, a training run will not)."""
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
        out.append(
            _candidate(
                "mirrored",
                Layout(1, 0, g),
                g,
                batch,
                predict_allreduce(topology, model, batch, 1, g),
                single,
            )
        )
    if m > 1:
        out.append(
            _candidate(
                "multi_worker_mirrored",
                Layout(m, 0, g_workers),
                m * g_workers,
                batch,
                predict_allreduce(topology, model, batch, m, g_workers),
                single,
            )
        )
    if m > 1 or model.sparse_embedding_params:
        ps = _ps_count(topology, model, batch, m, g_workers)
        out.append(
            _candidate(
                "parameter_server",
                Layout(m, ps, g_workers),
                m * g_workers,
                batch,
                predict_parameter_server(topology, model, batch, m, ps, g_workers),
                single,
            )
        )
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
    """Expected seconds one preemption costs candidate `c` checkpointing at `interval`.

    The restart (`RESTART_S`) plus, on average, half the interval trained again
    (`work_lost_seconds`), in seconds from its predicted step time, or half an
    epoch (of `topology.examples_per_epoch`, else `ASSUMED_EPOCH_S`) for `epoch`.
    A parameter_server run counts the coordinator's steps, one per worker step.
    """
    step_s = c.step_time_s / (c.layout.workers if spec_for(c.strategy).uses_ps else 1)
    examples = topology.examples_per_epoch
    epoch_s = ASSUMED_EPOCH_S if examples is None else examples / c.computed_examples_per_second
    return loss_per_preemption(interval, epoch_s, step_s)


def _charge_preemptions(preds: list[Prediction], topology: Topology) -> None:
    """Sets each candidate's expected share of time lost to preemptions.

    A synchronous strategy restarts when any of its machines is preempted;
    parameter_server counts as one machine, since its other workers keep
    training when one is lost. A candidate whose losses fill every hour
    trains nothing: it is infeasible, not given a share of some made-up rest.
    """
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
    """Seconds one preemption costs `c` at `interval`, and the share of each hour
    expected preemptions take (at most 1)."""
    loss_s = preemption_loss_seconds(c, topology, interval)
    return loss_s, hourly_share(loss_s, preempted_machines(c), preemption_rate(topology))
