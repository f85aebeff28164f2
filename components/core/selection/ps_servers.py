"""The machines parameter servers run on, as `select` costs and bills them.

Across machines each parameter server runs on a CPU machine of its own, of the
type `strategist train --ps-machine-type` gives it (`Topology.ps_machine_type`),
or a larger shape of that type when a server's share of the variables and their
Adam state needs the memory. Its transfers run at that machine's egress rate,
at most one NIC of the cluster's network: a server on an n1-standard-8 moves
16 Gbit/s however fast the GPU machines' NICs are.

On one machine the servers share the worker's GPU machine (the cost model moves
their traffic through its host memory, and nothing else is billed), so that
machine's memory must hold all of them: where it does not, the candidate cannot
run there (`shared_machine_note`), rather than be costed as if it could.
"""

from __future__ import annotations

from components.core.config import ConfigError
from components.core.cpu_machine import CpuMachine, cpu_machine, holding
from components.core.hardware import Gpu
from components.core.selection.topology import Topology

# A server's share of the variables and state, with room for the process and gRPC buffers.
SERVER_MEMORY_HEADROOM = 1.25


def server_machine(topology: Topology, state_bytes_per_server: float) -> CpuMachine | None:
    """The CPU machine each parameter server of `topology` runs on, holding
    `state_bytes_per_server`; None where the servers share the workers' machine
    (one machine) or run at a worker machine's rate (`ps_machine_type` None)."""
    if topology.machines == 1 or topology.ps_machine_type is None:
        return None
    return holding(cpu_machine(topology.ps_machine_type), servers_memory_gb(state_bytes_per_server))


def server_network_gbps(topology: Topology, state_bytes_per_server: float) -> float | None:
    """Gbit/s one parameter server sends and receives: its machine's egress rate,
    at most one NIC of `topology`'s network (None: a worker machine's rate)."""
    machine = server_machine(topology, state_bytes_per_server)
    if machine is None:
        return None
    return min(machine.egress_gbps, topology.network_gbps)


def servers_memory_gb(state_bytes: float) -> float:
    """Host memory, GB, that servers holding `state_bytes` of variables and Adam state need."""
    return state_bytes * SERVER_MEMORY_HEADROOM / 1e9


def shared_machine(gpu: Gpu, gpus_per_machine: int) -> tuple[str, float] | None:
    """The machine type that takes `gpus_per_machine` of `gpu` (`Gpu.machine_type`) and
    its host memory, GB; None where unknown (CPU machines, or a GPU count no machine
    type takes, which pricing reports)."""
    try:
        return gpu.machine_type(gpus_per_machine), gpu.machine_memory_gb(gpus_per_machine)
    except ConfigError:
        return None


def shared_machine_note(
    topology: Topology, gpu: Gpu, gpus_per_machine: int, state_bytes: float
) -> str:
    """Why parameter servers holding `state_bytes` together cannot share the worker's
    machine of a one-machine `topology`, with `gpus_per_machine` of `gpu`: its machine
    type has less host memory than they need (`servers_memory_gb`).

    Empty when they fit, across machines (servers then get machines of their own,
    sized by `server_machine`), and where the machine is unknown (`shared_machine`).
    """
    machine = shared_machine(gpu, gpus_per_machine) if topology.machines == 1 else None
    needed_gb = servers_memory_gb(state_bytes)
    if machine is None or needed_gb <= machine[1]:
        return ""
    machine_type, memory_gb = machine
    return (
        f"its servers need {needed_gb:,.0f} GB of host memory, more than the worker's "
        f"{machine_type} has ({memory_gb:,.0f} GB); across 2 or more machines they run "
        "on CPU machines of their own"
    )
