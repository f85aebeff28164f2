"""The machines parameter servers run on, as `select` costs and bills them.

Across machines each parameter server runs on a CPU machine of its own, of the
type `strategist train --ps-machine-type` gives it (`Topology.ps_machine_type`),
or a larger shape of that type when a server's share of the variables and their
Adam state needs the memory. Its transfers run at that machine's egress rate,
at most one NIC of the cluster's network: a server on an n1-standard-8 moves
16 Gbit/s however fast the GPU machines' NICs are.
"""

from __future__ import annotations

from components.core.cpu_machine import CpuMachine, cpu_machine, holding
from components.core.selection.topology import Topology

# A server's share of the variables and state, with room for the process and gRPC buffers.
SERVER_MEMORY_HEADROOM = 1.25


def server_machine(topology: Topology, state_bytes_per_server: float) -> CpuMachine | None:
    """The CPU machine each parameter server of `topology` runs on, holding
    `state_bytes_per_server`; None where the servers share the workers' machine
    (one machine) or run at a worker machine's rate (`ps_machine_type` None)."""
    if topology.machines == 1 or topology.ps_machine_type is None:
        return None
    needed_gb = state_bytes_per_server * SERVER_MEMORY_HEADROOM / 1e9
    return holding(cpu_machine(topology.ps_machine_type), needed_gb)


def server_network_gbps(topology: Topology, state_bytes_per_server: float) -> float | None:
    """Gbit/s one parameter server sends and receives: its machine's egress rate,
    at most one NIC of `topology`'s network (None: a worker machine's rate)."""
    machine = server_machine(topology, state_bytes_per_server)
    if machine is None:
        return None
    return min(machine.egress_gbps, topology.network_gbps)
