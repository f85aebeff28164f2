"""The links a step's communication crosses: GPU links within a machine, the network
between machines, their rates and latencies."""

from __future__ import annotations

from components.core.selection.device_compute import FITTED, FittedConstants
from components.core.selection.machine_speeds import gpu_types
from components.core.selection.topology import Topology

# Nominal one-direction bandwidth of one GPU's link, GB/s, by generation: NVLink 1 (P100, 4 links x
# 20 GB/s), 2 (V100, 6 x 25), 3 (A100, 12 x 25), 4 (H100, 18 x 25); PCIe x16 gen 3/4/5
# (15.8/31.5/63). NVIDIA's P100/V100/A100/H100 data sheets and the PCI-SIG specifications.
NVLINK_GBPS = {
    "p100": 80.0,
    "v100": 150.0,
    "v100-32gb": 150.0,
    "a100": 300.0,
    "a100-80gb": 300.0,
    "h100": 450.0,
    "h200": 450.0,
}
PCIE_GBPS = {"a100": 31.5, "a100-80gb": 31.5, "l4": 31.5, "a10g": 31.5, "h100": 63.0, "h200": 63.0}

PCIE3_GBPS = 15.8
# Link latency per ring hop, seconds.
LATENCY_S = {"nvlink": 10e-6, "pcie": 15e-6, "network": 50e-6}

# One ring hop of TensorFlow's collective all-reduce between CPU workers, a gRPC call: measured on
# 127.0.0.1 by `python -m benchmarks.collective_latency` (docs/benchmarks.md section 8).
CPU_RING_HOP_S = 0.75e-3


def network_hop_latency(topology: Topology) -> float:
    """Seconds per ring hop between machines: a gRPC call between CPU workers, else NCCL's."""
    return CPU_RING_HOP_S if topology.gpu == "cpu" else LATENCY_S["network"]


def link_bandwidth_gbps(topology: Topology, gpu: str | None = None) -> float:
    """Nominal one-direction bandwidth of one GPU's link in `topology`, GB/s: of
    `topology.gpu`, or of `gpu`'s machines in a mix."""
    gpu = gpu or topology.gpu
    if topology.link_of(gpu) == "nvlink":
        return NVLINK_GBPS.get(gpu, NVLINK_GBPS["v100"])
    return PCIE_GBPS.get(gpu, PCIE3_GBPS)


def _link_efficiency(link: str, constants: FittedConstants) -> float:
    """The share of a `link`'s nominal bandwidth a ring reaches."""
    return constants.nvlink_efficiency if link == "nvlink" else constants.pcie_efficiency


def ring_link(
    topology: Topology, machines: int, constants: FittedConstants | None = None
) -> tuple[float, float, tuple[str, ...]]:
    """The GPU links of the first `machines` machines as a ring through all of them
    meets them: the bytes/s it reaches on the slowest (a mix's T4 machines' PCIe, not
    its A100s' NVLink, sets the pace), the longest hop latency, and the links' names.
    """
    c = constants or FITTED
    types = gpu_types(topology, machines)
    names = tuple(dict.fromkeys(topology.link_of(g) for g in types))
    bps = min(
        link_bandwidth_gbps(topology, g) * 1e9 * _link_efficiency(topology.link_of(g), c)
        for g in types
    )
    latency = max(LATENCY_S.get(name, LATENCY_S["pcie"]) for name in names)
    return bps, latency, names


def network_path_share(topology: Topology, constants: FittedConstants | None = None) -> float:
    """The share of the machines' network rate `topology`'s network path delivers."""
    c = constants or FITTED
    return c.overlay_network_share if topology.network_path == "overlay" else 1.0
