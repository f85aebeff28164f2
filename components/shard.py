"""KFP component: shard a TFDS dataset into per-worker TFRecord files."""

from kfp.dsl import Dataset, Output


def shard_dataset(shards: Output[Dataset], run_config: dict):
    """Shards the run's TFDS dataset into TFRecord files, at least one per training worker.

    Writes the train and test splits as round-robin TFRecord shards plus
    `manifest.json` (dataset, version, splits, example counts, feature spec,
    shard files). The manifest is also attached as the artifact's metadata.

    Args:
        shards: the shards folder.
        run_config: the run's settings as RunConfig JSON; its `data` section
            names the dataset (`digits` builds offline, others download), the
            TFDS data directory and the shard files per split.
    """
    from components.core import datasets
    from components.core.config import RunConfig

    data = RunConfig.from_dict(run_config).data
    manifest = datasets.shard_dataset(
        data.dataset, shards.path, num_shards=data.num_shards, data_dir=data.data_dir or None
    )
    shards.metadata.update(manifest.to_dict())
