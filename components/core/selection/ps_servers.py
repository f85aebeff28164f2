"""The machines parameter servers run on, as `select` predicts and bills them.

Each server and the coordinator run on a CPU machine of their own, of `--ps-machine-type` or a
larger shape of it whose memory holds a server's share of the variables and Adam state, as
Vertex AI's ps and chief pools do (`launch.cloud.layout`). A server moves data at its machine's
egress rate, at most one NIC of the network. Only on one CPU machine (the local rehearsal) do
the servers share the worker's host.
"""

from __future__ import annotations

from components.core.cpu_machine import CpuMachine, cpu_machine, holding
from components.core.selection.topology import Topology

# A server's share of the variables and state, with room for the process and gRPC buffers.
SERVER_MEMORY_HEADROOM = 1.25


def servers_share_the_host(topology: Topology) -> bool:
    """Whether `topology`'s parameter servers run on the worker's own machine: one CPU
    machine, where `train` runs every process (the local rehearsal)."""
    return topology.machines == 1 and topology.gpu == "cpu"


def server_machine(topology: Topology, state_bytes_per_server: float) -> CpuMachine | None:
    """The CPU machine each parameter server of `topology` runs on, holding
    `state_bytes_per_server`; None where the servers share the worker's machine
    (`servers_share_the_host`)."""
    if servers_share_the_host(topology):
        return None
    return holding(cpu_machine(topology.ps_machine_type), servers_memory_gb(state_bytes_per_server))


def server_network_gbps(topology: Topology, state_bytes_per_server: float) -> float | None:
    """Gbit/s one parameter server sends and receives: its machine's egress rate, at most one NIC
    of `topology`'s network across machines (None: they share the worker's machine). With one GPU
    machine there is no network between machines: the egress alone (its NIC sends at least that)."""
    machine = server_machine(topology, state_bytes_per_server)
    if machine is None:
        return None
    if topology.machines == 1:
        return machine.egress_gbps
    return min(machine.egress_gbps, topology.network_gbps)


def servers_memory_gb(state_bytes: float) -> float:
    """Host memory, GB, that servers holding `state_bytes` of variables and Adam state need."""
    return state_bytes * SERVER_MEMORY_HEADROOM / 1e9
