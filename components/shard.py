"""KFP component: shard a TFDS dataset into per-worker TFRecord files."""

from kfp.dsl import Dataset, Output


def shard_dataset(
    shards: Output[Dataset],
    dataset: str = "digits",
    num_shards: int = 8,
    data_dir: str = "",
):
    """Shards a TFDS dataset into TFRecord files, at least one per training worker.

    Writes the train and test splits as round-robin TFRecord shards plus
    `manifest.json` (dataset, version, splits, example counts, feature spec,
    shard files). The manifest is also attached as the artifact's metadata.

    Args:
        shards: the shards folder.
        dataset: TFDS dataset name; `digits` builds offline, others download.
        num_shards: TFRecord files per split; use at least the number of workers.
        data_dir: TFDS data directory; empty for TFDS's default.
    """
    from components.core import datasets

    manifest = datasets.shard_dataset(
        dataset, shards.path, num_shards=num_shards, data_dir=data_dir or None
    )
    shards.metadata.update(manifest.to_dict())
