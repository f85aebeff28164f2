"""Layer counts: a built Keras model's multiply-accumulates and activations per example."""

from __future__ import annotations

from typing import Any


def element_count(shape: Any) -> int:
    """Elements of a tensor of `shape` (an unknown dimension counts as 1)."""
    total = 1
    for dim in shape:
        total *= int(dim) if dim is not None else 1
    return total


def count_macs_and_activations(model: Any) -> tuple[int, int]:
    """Multiply-accumulates and kept activation values of one example's forward pass.

    Counts Dense, Conv1D/2D/3D (grouped too), DepthwiseConv2D and
    SeparableConv2D layers; element-wise layers (activations, batch norm,
    pooling, additions) add no MACs but their outputs count as activations.
    Nested models are walked.

    Args:
        model: a built tf_keras model.

    Returns:
        (MACs, activation values) for batch size 1.
    """
    macs = 0
    activations = 0
    for layer in model.layers:
        kind = type(layer).__name__
        if kind == "InputLayer":
            continue
        if hasattr(layer, "layers") and layer.layers:  # nested model
            inner_macs, inner_acts = count_macs_and_activations(layer)
            macs += inner_macs
            activations += inner_acts
            continue
        try:
            out_shape = tuple(layer.output.shape)[1:]
            in_shape = tuple(layer.input.shape)[1:]
        except (AttributeError, ValueError):
            continue
        out_size = element_count(out_shape)
        activations += out_size
        if kind == "Dense":
            units = int(out_shape[-1])
            macs += (out_size // units) * int(in_shape[-1]) * units
        elif kind in ("Conv1D", "Conv2D", "Conv3D"):
            kernel = element_count(layer.kernel_size)
            in_ch = int(in_shape[-1])
            groups = int(getattr(layer, "groups", 1) or 1)
            macs += out_size * kernel * in_ch // groups
        elif kind == "DepthwiseConv2D":
            macs += out_size * element_count(layer.kernel_size)
        elif kind == "SeparableConv2D":
            in_ch = int(in_shape[-1])
            spatial = out_size // int(out_shape[-1])
            macs += spatial * in_ch * element_count(layer.kernel_size) * int(layer.depth_multiplier)
            macs += out_size * in_ch * int(layer.depth_multiplier)
    return macs, activations
