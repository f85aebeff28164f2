"""Compute Engine CPU machine types: their vCPUs, memory and network rate.

Parameter servers and the parameter-server coordinator run on a CPU machine
type (`strategist train --ps-machine-type`, default `DEFAULT_PS_MACHINE_TYPE`).
`select` costs the servers' transfers at that type's egress rate and bills them
at its price, and says so when a server's share of the variables needs a larger
shape of it than `train` would be given.

Known families are the general-purpose N1 and N2 shapes (standard, highmem,
highcpu); a type outside them is refused with what to give instead.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from components.core.config import ConfigError

# What `strategist train` gives parameter servers and the coordinator by default.
DEFAULT_PS_MACHINE_TYPE = "n1-standard-8"

# Memory per vCPU, GB (https://cloud.google.com/compute/docs/general-purpose-machines).
GB_PER_VCPU = {
    ("n1", "standard"): 3.75,
    ("n1", "highmem"): 6.5,
    ("n1", "highcpu"): 0.9,
    ("n2", "standard"): 4.0,
    ("n2", "highmem"): 8.0,
    ("n2", "highcpu"): 1.0,
}
# The shapes each family and kind offers (same page): vCPU counts.
VCPU_SIZES = {
    ("n1", "standard"): (1, 2, 4, 8, 16, 32, 64, 96),
    ("n1", "highmem"): (2, 4, 8, 16, 32, 64, 96),
    ("n1", "highcpu"): (2, 4, 8, 16, 32, 64, 96),
    ("n2", "standard"): (2, 4, 8, 16, 32, 48, 64, 80, 96, 128),
    ("n2", "highmem"): (2, 4, 8, 16, 32, 48, 64, 80, 96, 128),
    ("n2", "highcpu"): (2, 4, 8, 16, 32, 48, 64, 80, 96),
}
# Shapes whose memory is not their vCPUs times the kind's GB per vCPU (same page).
MEMORY_GB = {("n2", "highmem", 128): 864.0}
# Per-VM egress: 2 Gbit/s per vCPU ("an n1-standard-8 VM ... is limited to 16 Gbps total
# egress bandwidth"), at most 32 Gbit/s for N1 and N2 without Tier_1 networking
# (https://cloud.google.com/compute/docs/network-bandwidth).
EGRESS_GBPS_PER_VCPU = 2.0
MAX_EGRESS_GBPS = 32.0

_NAME = re.compile(r"^(n1|n2)-(standard|highmem|highcpu)-(\d+)$")


@dataclass(frozen=True)
class CpuMachine:
    """One Compute Engine CPU machine type.

    Attributes:
        family: `n1` or `n2`.
        kind: `standard`, `highmem` or `highcpu`.
        vcpus: its vCPUs.
    """

    family: str
    kind: str
    vcpus: int

    @property
    def name(self) -> str:
        """The machine type's name, e.g. `n1-standard-8`."""
        return f"{self.family}-{self.kind}-{self.vcpus}"

    @property
    def memory_gb(self) -> float:
        """Its memory, GB."""
        irregular = MEMORY_GB.get((self.family, self.kind, self.vcpus))
        return irregular or self.vcpus * GB_PER_VCPU[(self.family, self.kind)]

    @property
    def egress_gbps(self) -> float:
        """The most it sends, Gbit/s (the cap Compute Engine puts on one VM)."""
        return min(self.vcpus * EGRESS_GBPS_PER_VCPU, MAX_EGRESS_GBPS)


# Pure on its name, and asked once per parameter-server count `select` weighs.
@functools.lru_cache(maxsize=64)
def cpu_machine(name: str) -> CpuMachine:
    """The CPU machine type `name`.

    Raises:
        ConfigError: a type outside the known N1 and N2 shapes.
    """
    match = _NAME.match(str(name))
    if match is None or int(match.group(3)) not in VCPU_SIZES[match.group(1), match.group(2)]:
        raise ConfigError(
            f"--ps-machine-type {name!r}: give an N1 or N2 general-purpose type, e.g. "
            f"{DEFAULT_PS_MACHINE_TYPE} (n1-/n2-standard, -highmem or -highcpu with the "
            "family's vCPU counts), whose memory and network rate select knows"
        )
    family, kind, vcpus = match.group(1), match.group(2), int(match.group(3))
    return CpuMachine(family, kind, vcpus)


@functools.lru_cache(maxsize=4096)
def holding(machine: CpuMachine, gigabytes: float) -> CpuMachine:
    """`machine`, or the smallest larger shape of its family and kind whose memory
    holds `gigabytes` (the largest shape when none does)."""
    sizes = [n for n in VCPU_SIZES[machine.family, machine.kind] if n >= machine.vcpus]
    for vcpus in sizes:
        candidate = CpuMachine(machine.family, machine.kind, vcpus)
        if candidate.memory_gb >= gigabytes:
            return candidate
    return CpuMachine(machine.family, machine.kind, sizes[-1])
