"""The `tf.data` input pipeline: shard records parsed into (features, label) batches per replica."""

from __future__ import annotations

from typing import Any

from components.core import storage
from components.core.config import ConfigError
from components.core.data_sources import BYTES, FLOAT, IMAGE, INT, RAW_UINT8, StoredFeature
from components.core.datasets.manifest import TFDS_RECORDS, Manifest
from components.core.datasets.validation_share import TRAIN, held_out_counts

# Cache decoded examples in memory when the split is at most this big.
_CACHE_LIMIT_BYTES = 1 << 30


def parse_fn(manifest: Manifest, *, by_name: bool = False):
    """A function that turns a serialised record into (features, label).

    Features are a single tensor when there is one feature (or a CSV's numeric
    columns, stacked into one float32 vector in column order), else a dict
    keyed by feature name; `by_name` always gives the dict (a CSV's columns by
    column name: whole-number columns as int64, the others float32), for models
    with named inputs. Images are float32 in [0, 1];
    labels are int64 class ids, or float32 values for a regression.
    """
    import tensorflow as tf

    decode = record_decoder(
        manifest.record_format, (*manifest.features, manifest.label), manifest.root
    )
    stack = bool(manifest.columns) and not by_name
    label_dtype = tf.int64 if manifest.num_classes else tf.float32

    def parse(record):
        values = decode(record)
        features = {f.name: values[f.key] for f in manifest.features}
        label = tf.cast(values[manifest.label.key], label_dtype)
        if stack:
            # Integer columns join the one float32 vector as numbers.
            columns = [tf.cast(features[c], tf.float32) for c in manifest.columns]
            return tf.stack(columns, axis=-1), label
        if len(features) == 1 and not by_name:
            return next(iter(features.values())), label
        return features, label

    return parse


def record_decoder(record_format: str, stored, root: str):
    """record -> {key: the value as the model receives it} for `stored` features."""
    import tensorflow as tf

    if record_format == TFDS_RECORDS:
        import tensorflow_datasets as tfds

        # https://www.tensorflow.org/datasets/api_docs/python/tfds/features/FeatureConnector#from_config
        # TFDS reads the file itself: through `local_view` under a rehearsal.
        connector = tfds.features.FeatureConnector.from_config(storage.local_view(root))

        def decode(record):
            flat = _flatten(connector.deserialize_example(record))
            return {f.key: _from_tfds(flat[f.key], f) for f in stored}

        return decode
    spec = {f.key: _parse_spec(f) for f in stored}

    def decode(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {f.key: _from_example(parsed[f.key], f) for f in stored}

    return decode


def _flatten(example, prefix: str = "") -> dict[str, Any]:
    """A decoded TFDS example with nested dicts flattened to `outer/inner` keys."""
    flat = {}
    for key, value in example.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _model_dtype(feature: StoredFeature):
    import tensorflow as tf

    return tf.as_dtype(feature.dtype)


def _from_tfds(value, feature: StoredFeature):
    import tensorflow as tf

    if feature.encoding == IMAGE:
        return tf.cast(value, tf.float32) / 255.0
    if feature.encoding == BYTES:
        return value
    return tf.cast(value, _model_dtype(feature))


def _parse_spec(feature: StoredFeature):
    import tensorflow as tf

    if feature.encoding in (IMAGE, RAW_UINT8):
        return tf.io.FixedLenFeature([], tf.string)
    dtype = {FLOAT: tf.float32, INT: tf.int64, BYTES: tf.string}[feature.encoding]
    if None in feature.shape:
        return tf.io.VarLenFeature(dtype)
    return tf.io.FixedLenFeature(list(feature.shape), dtype)


def _from_example(value, feature: StoredFeature):
    import tensorflow as tf

    shape = [-1 if d is None else d for d in feature.shape]
    if feature.encoding == IMAGE:
        channels = feature.shape[-1] if feature.shape and feature.shape[-1] else 0
        image = tf.io.decode_image(value, channels=channels, expand_animations=False)
        image.set_shape(feature.shape or None)
        return tf.cast(image, tf.float32) / 255.0
    if feature.encoding == RAW_UINT8:
        return tf.cast(tf.reshape(tf.io.decode_raw(value, tf.uint8), shape), tf.float32) / 255.0
    if isinstance(value, tf.SparseTensor):
        return tf.reshape(tf.sparse.to_dense(value), shape)
    return value


def make_dataset_fn(
    manifest: Manifest,
    split: str,
    global_batch_size: int,
    *,
    training: bool = True,
    seed: int = 0,
    per_worker_order: bool = False,
    by_name: bool = False,
    preprocess=None,
    validation_fraction: float = 0.0,
    held_out: bool = False,
):
    """A `dataset_fn(input_context)` for `DatasetCreator` and every strategy.

    Each input pipeline (one per worker) reads only its own shard files; the
    batch is the per-replica share of `global_batch_size`. Training data is
    cached (when small), shuffled and repeated; `steps_per_epoch` bounds an
    epoch.

    Under `ParameterServerStrategy` TensorFlow traces `dataset_fn` once, with
    `InputContext(1, 0)`, and runs that one function on every worker, so file
    sharding cannot tell the workers apart and a fixed shuffle seed would give
    every worker the same stream. With `per_worker_order` each worker reads the
    whole split, as TensorFlow's parameter-server guide does for `Model.fit`
    (shuffle and repeat, `steps_per_epoch` bounding an epoch), in its own order:
    the shuffle seed adds the worker's clock (microseconds) when its dataset is
    created. Parameter-server training is asynchronous, so its order was never
    reproducible anyway.

    `by_name` yields features as a dict by name (`parse_fn`).
    `preprocess(features, label) -> (inputs, label)`, a model module's, is
    mapped over each example after the cache, so random augmentation differs
    per epoch.

    With a `validation_fraction`, the training split's first records of each
    file are held out (`validation_share`): training reads the rest, and
    `held_out` reads only them, in order, repeated, so that a fixed number of
    validation steps is the same on every task (under `per_worker_order`,
    shuffled in each worker's own order, so the workers' batches differ).

    Raises:
        ConfigError: when there are fewer shard files than input pipelines.
    """
    import tensorflow as tf

    # TensorFlow opens the files itself: through `local_view` under a rehearsal.
    files = [storage.local_view(path) for path in manifest.file_paths(split)]
    info = manifest.split(split)
    total_bytes = sum(f.num_bytes for f in info.files)
    parse = parse_fn(manifest, by_name=by_name)
    # Variable-size features are padded to the longest of each batch.
    variable = any(None in f.shape for f in manifest.features)
    held = held_out_counts(manifest, validation_fraction) if split == TRAIN else [0] * len(files)
    # Per file: records skipped, then records read (-1: the rest).
    skips = [0] * len(files) if held_out else held
    takes = held if held_out else [-1] * len(files)

    def records(path, skip, take):
        return tf.data.TFRecordDataset(path).skip(skip).take(take)

    def dataset_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        pipelines = input_context.num_input_pipelines if input_context else 1
        pipeline_id = input_context.input_pipeline_id if input_context else 0
        if len(files) < pipelines:
            raise ConfigError(
                f"{len(files)} shard files of {split!r} cannot feed {pipelines} input "
                f"pipelines: shard with --num-shards {pipelines} or more"
            )
        batch = (
            input_context.get_per_replica_batch_size(global_batch_size)
            if input_context
            else global_batch_size
        )
        mine = slice(pipeline_id, None, pipelines)
        ds = tf.data.Dataset.from_tensor_slices(
            (files[mine], tf.constant(skips[mine], tf.int64), tf.constant(takes[mine], tf.int64))
        )
        ds = ds.interleave(
            records,
            cycle_length=min(4, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=not training,
        )
        ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        if total_bytes <= _CACHE_LIMIT_BYTES:
            ds = ds.cache()
        if preprocess is not None:
            ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
        order = seed
        if per_worker_order:
            order = seed + tf.cast(tf.timestamp() * 1e6, tf.int64) % (2**31)
        if training:
            ds = ds.shuffle(min(info.num_examples, 10_000), seed=order).repeat()
        elif held_out:
            if per_worker_order:
                ds = ds.shuffle(min(sum(held), 10_000), seed=order)
            ds = ds.repeat()
        if variable:
            ds = ds.padded_batch(batch, drop_remainder=training)
        else:
            ds = ds.batch(batch, drop_remainder=training)
        return ds.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def eval_dataset(
    manifest: Manifest,
    split: str = "test",
    batch_size: int = 256,
    preprocess=None,
    *,
    by_name: bool = False,
    validation_fraction: float = 0.0,
):
    """The whole `split`, in order, in one process (through `preprocess`).

    With a `validation_fraction`, the training split without its held-out share.
    """
    return make_dataset_fn(
        manifest,
        split,
        batch_size,
        training=False,
        preprocess=preprocess,
        by_name=by_name,
        validation_fraction=validation_fraction,
    )(None)


def inputs_by_name(manifest: Manifest, model) -> bool:
    """Whether `model` takes a CSV's columns by name rather than as one vector.

    True when the data has columns and every one of the model's Keras inputs
    is named after one of them: such a model gets `parse_fn(by_name=True)`.
    """
    names = list(getattr(model, "input_names", None) or [])
    return bool(manifest.columns) and bool(names) and set(names) <= set(manifest.columns)
