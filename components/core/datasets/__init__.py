"""A run's data -> TFRecord shards with a manifest -> `tf.data` input pipelines.

`shard_data` turns a supervised TFDS dataset or the user's files
(`components.core.data_sources`) into per-worker TFRecord shard files plus
`manifest.json` (dataset, version, splits, example counts, how each feature
is stored, shard files with their sizes). `make_dataset_fn`
reads them back as a `dataset_fn(input_context)` that every `tf.distribute`
strategy accepts: files are split across input pipelines (so each worker reads
its own files), batches are per replica, and prefetching is AUTOTUNEd.
"""

from components.core.datasets.input_pipeline import (
    eval_dataset,
    inputs_by_name,
    make_dataset_fn,
    parse_fn,
)
from components.core.datasets.manifest import (
    EXAMPLE_RECORDS,
    MANIFEST_NAME,
    SPLITS,
    TFDS_FEATURES_NAME,
    TFDS_RECORDS,
    Manifest,
    ShardFile,
    SplitInfo,
    manifest_sha256,
)
from components.core.datasets.resolution import (
    check_available,
    check_obtainable,
    describe,
    prepare,
    tfds_builder_of,
)
from components.core.datasets.shard_files import deal_records, write_records, write_shards
from components.core.datasets.sharding import (
    default_shards_dir,
    import_shards,
    shard_data,
    shard_dataset,
)
from components.core.datasets.validation_share import (
    training_examples,
    validation_examples,
    validation_steps,
)
from components.core.datasets.verification import check_contents, load_manifest

__all__ = [
    "EXAMPLE_RECORDS",
    "MANIFEST_NAME",
    "SPLITS",
    "TFDS_FEATURES_NAME",
    "TFDS_RECORDS",
    "Manifest",
    "ShardFile",
    "SplitInfo",
    "check_available",
    "check_contents",
    "check_obtainable",
    "deal_records",
    "default_shards_dir",
    "describe",
    "eval_dataset",
    "import_shards",
    "inputs_by_name",
    "load_manifest",
    "make_dataset_fn",
    "manifest_sha256",
    "parse_fn",
    "prepare",
    "shard_data",
    "shard_dataset",
    "tfds_builder_of",
    "training_examples",
    "validation_examples",
    "validation_steps",
    "write_records",
    "write_shards",
]
