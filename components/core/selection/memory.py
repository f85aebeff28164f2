"""Memory a step's state needs: the bytes one device needs for a replica (weights, gradients,
Adam state and the activations back-propagation keeps), and the CPU machines parameter servers
run on, as `select` predicts and bills them."""

from __future__ import annotations

from components.core.cpu_machine import CpuMachine, cpu_machine, holding
from components.core.model_profile import ModelProfile
from components.core.selection.topology import Topology

# Usable share of GPU memory (the CUDA context, cuDNN workspaces and fragmentation take the rest).
USABLE_MEMORY_FRACTION = 0.90
OPTIMIZER_STATE_FACTOR = 2  # Adam's first and second moment per parameter
# A mixed policy keeps layer outputs in 16 bits (weights, gradients and Adam state stay float32).
ACTIVATION_BYTES_FACTOR = {"fp32": 1.0, "mixed": 0.5}
# Share of the summed layer outputs back-propagation keeps (some are recomputed or shared):
# calibrated on the largest batches NVIDIA publishes for ResNet-50 v1.5 in TensorFlow.
KEPT_ACTIVATION_FRACTION = 0.85
# Gradient bytes per parameter on the wire: Keras all-reduces float32 gradients under any policy.
GRADIENT_BYTES_FACTOR = {"fp32": 1.0, "mixed": 1.0}
# A server's share of the variables and state, with room for the process and gRPC buffers.
SERVER_MEMORY_HEADROOM = 1.25


def activation_bytes_per_example(model: ModelProfile, precision: str = "fp32") -> float:
    """Activation bytes one example keeps for back-propagation (a user's figure whole)."""
    kept = 1.0 if model.kept_activations_given else KEPT_ACTIVATION_FRACTION
    return model.activation_bytes_per_example * kept * ACTIVATION_BYTES_FACTOR[precision]


def memory_needed_bytes(
    model: ModelProfile, per_replica_batch: int, replicated_embedding: bool, precision: str = "fp32"
) -> float:
    """Bytes one GPU needs: weights, gradients, Adam state and activations (sparse embedding
    tables only when every replica holds them: parameter servers keep them off the GPU)."""
    params = model.params if replicated_embedding else model.dense_params
    static = params * 4 * (1 + GRADIENT_BYTES_FACTOR[precision] + OPTIMIZER_STATE_FACTOR)
    return static + activation_bytes_per_example(model, precision) * per_replica_batch


def max_batch_that_fits(
    model: ModelProfile, memory_gb: float, replicated_embedding: bool, precision: str = "fp32"
) -> int:
    """Largest per-replica batch that fits one GPU (0 when not even the weights fit)."""
    usable = memory_gb * 1e9 * USABLE_MEMORY_FRACTION
    static = memory_needed_bytes(model, 0, replicated_embedding, precision)
    per_example = activation_bytes_per_example(model, precision)
    if static + per_example > usable:
        return 0
    return int((usable - static) // per_example) if per_example > 0 else 1 << 30


def server_state_bytes(model: ModelProfile) -> float:
    """The variables and their Adam state all parameter servers hold, bytes."""
    return model.params * 4.0 * (1 + OPTIMIZER_STATE_FACTOR)


def servers_memory_gb(state_bytes: float) -> float:
    """Host memory, GB, that servers holding `state_bytes` of variables and Adam state need."""
    return state_bytes * SERVER_MEMORY_HEADROOM / 1e9


def servers_share_the_host(topology: Topology) -> bool:
    """Whether the parameter servers run on the worker's one CPU machine (the local rehearsal)."""
    return topology.machines == 1 and topology.gpu == "cpu"


def server_machine(topology: Topology, state_bytes_per_server: float) -> CpuMachine | None:
    """The CPU machine each parameter server runs on: `--ps-machine-type` or a larger shape that
    holds `state_bytes_per_server`, as Vertex AI's ps pool (`launch.cloud.layout`); None on the
    worker's machine."""
    if servers_share_the_host(topology):
        return None
    return holding(cpu_machine(topology.ps_machine_type), servers_memory_gb(state_bytes_per_server))


def server_network_gbps(topology: Topology, state_bytes_per_server: float) -> float | None:
    """Gbit/s one parameter server moves: its machine's egress, at most one NIC of the network
    between machines (with one GPU machine, the egress alone); None on the worker's machine."""
    machine = server_machine(topology, state_bytes_per_server)
    if machine is None:
        return None
    network = topology.network_gbps if topology.machines > 1 else machine.egress_gbps
    return min(machine.egress_gbps, network)
