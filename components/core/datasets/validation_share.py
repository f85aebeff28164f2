"""The validation share: the first records of each training shard file, held out from training.

`--validation-fraction F` holds out `round(F * n)` records (at least one) at the
start of each training shard file of `n` records. The rule depends only on the
manifest, so every task, on every strategy, holds out the same records, and
the counts are exact without reading the data.
"""

from __future__ import annotations

from components.core.config import ConfigError
from components.core.datasets.manifest import Manifest

TRAIN = "train"


def held_out_counts(manifest: Manifest, fraction: float) -> list[int]:
    """Records held out at the start of each training shard file (all 0 without a fraction).

    Raises:
        ConfigError: a shard file would keep no training record.
    """
    files = manifest.split(TRAIN).files
    if not fraction:
        return [0] * len(files)
    counts = [max(1, round(fraction * f.num_examples)) for f in files]
    for file, count in zip(files, counts, strict=True):
        if count >= file.num_examples:
            raise ConfigError(
                f"--validation-fraction {fraction:g} leaves no training example in {file.path} "
                f"({file.num_examples} examples): lower it, or shard with fewer --num-shards"
            )
    return counts


def validation_examples(manifest: Manifest, fraction: float) -> int:
    """Examples of the training split held out for validation."""
    return sum(held_out_counts(manifest, fraction))


def training_examples(manifest: Manifest, fraction: float) -> int:
    """Examples of the training split left to train on."""
    return manifest.split(TRAIN).num_examples - validation_examples(manifest, fraction)


def validation_steps(manifest: Manifest, fraction: float, batch_per_step: int) -> int:
    """Steps of one epoch's validation: the held-out examples, the last batch rounded up."""
    return -(-validation_examples(manifest, fraction) // batch_per_step)
