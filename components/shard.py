"""KFP component: shard the run's data (TFDS or files) into per-worker TFRecord files."""

from kfp.dsl import Dataset, Output


def shard_dataset(shards: Output[Dataset], run_config: dict):
    """Shards the run's data into TFRecord files, at least one per training worker.

    Writes the train and test splits as TFRecord shards plus `manifest.json`
    (dataset, version, splits, example counts, how features are stored, shard
    files); or, when the run's `data.shards_dir` names existing shards, checks
    every record of them and links them into the artifact. The manifest is also
    attached as the artifact's metadata.

    Args:
        run_config: the run's settings as RunConfig JSON; its `data` section
            names the TFDS dataset (`digits` builds offline, others download)
            or the files, the TFDS data directory and the shard files per split.

    Returns:
        shards: the shards folder (TFRecord files and manifest.json).
    """
    from components.core import datasets
    from components.core.config import RunConfig

    data = RunConfig.from_dict(run_config).data
    if data.shards_dir:
        manifest = datasets.import_shards(data.shards_dir, shards.path)
    else:
        manifest = datasets.shard_data(data, shards.path)
    shards.metadata.update(manifest.to_dict())
