"""A published case as the product's inputs, and its step as its framework ran it.

The product's step-time model (`components.core.selection.step_time`) costs what
Strategist's trainer runs: one all-reduce pack after back-propagation, Keras's
per-step scalar all-reduces, variables partitioned over the parameter servers, and
servers on CPU machines of `--ps-machine-type`. The published runs differ: Horovod,
PyTorch DDP and MXNet overlap the all-reduce with back-propagation (unless a case says
its run did not, `overlaps_backward: false`) and all-reduce no metric every step;
TF1's parameter servers placed each variable whole on one server, on machines as fast
as the workers' (or on the worker's own machine). This module costs those runs from
the product's formulas, so the product carries no published-only input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.core.hardware import GPUS
from components.core.model_profile import ModelProfile
from components.core.selection.device_compute import (
    FITTED,
    FittedConstants,
    devices_sharing_compute,
    step_compute_share,
    step_compute_time,
)
from components.core.selection.machine_speeds import mean_machine_speed
from components.core.selection.step_time import (
    PCIE3_GBPS,
    PCIE_GBPS,
    allreduce_step_parts,
    exposed_communication,
    gradient_bytes,
    network_hop_latency,
    overlap_share,
    rates,
    ring_allreduce_time,
    sync_wait_s,
)
from components.core.selection.topology import Topology


@dataclass(frozen=True)
class PublishedRun:
    """A published case's hardware as the product's `Topology`, and what its framework did.

    Attributes:
        topology: the case's hardware (a GPU outside the catalog as a V100, its compute
            rescaled by `gpu_spec`).
        overlaps_backward: the framework all-reduced gradients while back-propagation
            still ran.
        gpu_spec: the spec of a GPU outside the catalog, else None.
    """

    topology: Topology
    overlaps_backward: bool = True
    gpu_spec: Mapping[str, float] | None = None


def published_run(case: Mapping[str, Any], xla: bool, network_path: str) -> PublishedRun:
    """The published `case` as the product's inputs, with XLA and the network path as
    the evidence file resolves them (`evidence.case_xla`, `evidence.case_network_path`)."""
    gpu = case["gpu"]
    topology = Topology(
        machines=case["machines"],
        gpus_per_machine=case["gpus_per_machine"],
        # a GPU with a `gpu_spec` of its own stays a V100 whose compute the spec rescales
        gpu=gpu if gpu in GPUS and not case.get("gpu_spec") else "v100",
        interconnect=case["interconnect"],
        network_gbps=float(case.get("network_gbps") or 10.0),
        nics=int(case.get("nics", 1)),
        precision=case.get("precision", "fp32"),
        jit_compile=xla,
        network_path=network_path,
    )
    # the published frameworks overlap unless the case says its run did not
    return PublishedRun(topology, bool(case.get("overlaps_backward", True)), case.get("gpu_spec"))


def published_allreduce(
    run: PublishedRun,
    model: ModelProfile,
    batch: int,
    machines: int,
    gpus: int,
    constants: FittedConstants | None = None,
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of the published run's all-reduce step: up to
    `allreduce_overlap` hidden where its framework overlaps, no per-step scalar all-reduces
    (Horovod, PyTorch and MXNet all-reduce no metric every step)."""
    c = constants or FITTED
    topology = run.topology
    compute, comm = allreduce_step_parts(topology, model, batch, machines, gpus, c)
    overlap = overlap_share(c.allreduce_overlap, topology, c) if run.overlaps_backward else 0.0
    exposed = exposed_communication(comm, compute, overlap) + sync_wait_s(machines * gpus, c)
    return compute, exposed, comm


def whole_variable_server_time(
    nbytes: float,
    largest_variable_bytes: float,
    workers: int,
    ps: int,
    network_bytes_per_s: float,
    streams_per_worker: int = 1,
) -> float:
    """Pull parameters and push gradients between workers and `ps` servers, one after the
    other, each variable whole on one server (TF1's placement).

    Each worker NIC moves `streams_per_worker` x bytes each way; each server holds
    max(bytes/ps, the largest variable) and moves it for every stream.
    """
    worker_side = streams_per_worker * nbytes / network_bytes_per_s
    shard = max(nbytes / max(ps, 1), min(largest_variable_bytes, nbytes))
    server_side = workers * streams_per_worker * shard / network_bytes_per_s
    return 2.0 * max(worker_side, server_side)


def published_parameter_server(
    run: PublishedRun,
    model: ModelProfile,
    batch: int,
    workers: int,
    ps: int,
    gpus: int,
    streams_per_worker: int = 1,
    constants: FittedConstants | None = None,
) -> tuple[float, float, float]:
    """(compute_s, exposed_comm_s, raw_comm_s) of the published run's parameter-server step:
    each variable whole on one server, servers at a worker machine's rate, on the worker's
    own machine when there is one machine (host memory over PCIe, no network round trip).

    With `streams_per_worker` above 1 each GPU of a worker talks to the servers itself
    (no local reduction over the machine's link first).
    """
    c = constants or FITTED
    topology = run.topology
    hw = rates(topology, c)
    shares_host = topology.machines == 1
    if shares_host:
        host = PCIE_GBPS.get(topology.gpu, PCIE3_GBPS) * 1e9 * c.pcie_efficiency
        hw = hw._replace(net_bps=host, ps_bps=host)
    step = step_compute_time(model, batch, hw.tflops)
    compute = step * devices_sharing_compute(topology, gpus)
    compute /= mean_machine_speed(topology, workers, step_compute_share(step))
    nbytes = gradient_bytes(model, topology.precision)
    streams = streams_per_worker
    comm = ring_allreduce_time(nbytes, gpus, hw.intra_bps, hw.intra_lat) if streams == 1 else 0.0
    comm += whole_variable_server_time(
        nbytes, model.largest_variable_bytes, workers, ps, hw.ps_bps, streams
    )
    comm += model.tensors * c.tensor_latency_s * streams
    if not shares_host:
        comm += 2 * network_hop_latency(topology)  # the pull and the push: a round trip each
    if model.sparse_embedding_params:
        rows = model.embedding_rows_touched(batch * gpus) * model.embedding_dim * 4
        comm += 2 * max(rows / hw.ps_bps, workers * rows / max(ps, 1) / hw.ps_bps)
    exposed = exposed_communication(comm, compute, overlap_share(c.ps_overlap, topology, c))
    return compute, exposed + sync_wait_s(workers, c), comm
