"""Bytes one device needs for a replica: weights, gradients, Adam state and the
activations back-propagation keeps."""

from __future__ import annotations

from components.core.model_profile import ModelProfile

# Usable share of GPU memory (the CUDA context, cuDNN workspaces and fragmentation take the rest).
USABLE_MEMORY_FRACTION = 0.90
# Adam keeps two values per parameter (first and second moment).
OPTIMIZER_STATE_FACTOR = 2
# Activation bytes relative to float32: a mixed policy keeps layer outputs in 16 bits (weights,
# gradients and Adam state stay float32).
ACTIVATION_BYTES_FACTOR = {"fp32": 1.0, "mixed": 0.5}
# Share of the summed layer outputs back-propagation keeps (some are recomputed or shared):
# calibrated on the largest batches NVIDIA publishes for ResNet-50 v1.5 in TensorFlow.
KEPT_ACTIVATION_FRACTION = 0.85
# Gradient bytes per parameter on the wire: Keras all-reduces float32 gradients under any policy.
GRADIENT_BYTES_FACTOR = {"fp32": 1.0, "mixed": 1.0}


def activation_bytes_per_example(model: ModelProfile, precision: str = "fp32") -> float:
    """Activation bytes one example keeps for back-propagation at `precision`: a share of the
    summed layer outputs, or a user's figure (`kept_activations_given`) whole."""
    kept = 1.0 if model.kept_activations_given else KEPT_ACTIVATION_FRACTION
    return model.activation_bytes_per_example * kept * ACTIVATION_BYTES_FACTOR[precision]


def memory_needed_bytes(
    model: ModelProfile, per_replica_batch: int, replicated_embedding: bool, precision: str = "fp32"
) -> float:
    """Bytes one GPU needs: weights, gradients, Adam state and activations.

    Sparse embedding tables count only when every replica holds them
    (all-reduce strategies); parameter servers keep them off the GPU.
    Activations take half the bytes under `mixed` precision.
    """
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
    if per_example <= 0:
        return 1 << 30
    return int((usable - static) // per_example)


def server_state_bytes(model: ModelProfile) -> float:
    """The variables and their Adam state all parameter servers hold, bytes."""
    return model.params * 4.0 * (1 + OPTIMIZER_STATE_FACTOR)
