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
from components.core.selection.device_compute import FITTED, FittedConstants
from components.core.selection.step_time import (
    ServerPlacement,
    allreduce_step_parts,
    exposed_communication,
    overlap_share,
    parameter_server_step,
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
    overlap = overlap_share(c.allreduce_overlap, topology, c, run.overlaps_backward)
    exposed = exposed_communication(comm, compute, overlap) + sync_wait_s(machines * gpus, c)
    return compute, exposed, comm


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
    own machine when there is one machine."""
    placement = ServerPlacement(
        shares_host=run.topology.machines == 1, server_bytes_per_s=None, partitioned=False
    )
    return parameter_server_step(
        run.topology, model, batch, workers, ps, gpus, placement, streams_per_worker, constants
    )
