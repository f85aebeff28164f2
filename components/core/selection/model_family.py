"""Forward FLOPs per parameter of a model family, for a `--params` model without FLOPs."""

from __future__ import annotations

import dataclasses

from components.core.config import ConfigError
from components.core.model_profile import ACTIVATION_BYTES_PER_FLOP_LOW, ModelProfile

# Forward FLOPs per example and parameter (`select --model-family`): an MLP or an embedding
# model's dense part does a multiply-add per weight (2); a CNN reuses its weights across the
# image (ResNet-50: 8.2 GFLOPs over 25.6M parameters, about 320); a transformer does about 2
# per parameter per token (Kaplan et al. 2020, C_forward ~ 2N), so 2 x the sequence length.
FAMILY_FLOPS_PER_PARAM = {"mlp": 2.0, "embedding": 2.0, "cnn": 320.0}
FAMILIES = ("transformer", *FAMILY_FLOPS_PER_PARAM)


def flops_per_param(family: str | None, sequence_length: int | None) -> float | None:
    """Forward FLOPs per parameter and example of `family` (None without a family).

    Raises:
        ConfigError: a transformer without its sequence length, or one for another family.
    """
    if family == "transformer":
        if not sequence_length or sequence_length < 1:
            raise ConfigError("--model-family transformer: give --sequence-length (tokens)")
        return 2.0 * sequence_length
    if sequence_length is not None:
        raise ConfigError("--sequence-length is for transformers: give --model-family transformer")
    return FAMILY_FLOPS_PER_PARAM[family] if family else None


def with_transformer_activations(profile: ModelProfile) -> ModelProfile:
    """`profile` with a transformer's activations: `ACTIVATION_BYTES_PER_FLOP_LOW` of its
    forward FLOPs (a 1.3B GPT keeps 0.0022 bytes per FLOP, Korthikanti et al. 2022)."""
    activations = ACTIVATION_BYTES_PER_FLOP_LOW * profile.flops_per_example
    return dataclasses.replace(profile, activation_bytes_per_example=activations)
