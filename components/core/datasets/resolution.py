"""The run's data resolved before launch: its TFDS builder, its examples' form, its download."""

from __future__ import annotations

import os

from components.core import data_sources, storage, storage_access, tfds_source
from components.core.config import ConfigError, DataConfig
from components.core.datasets.manifest import Manifest
from components.core.input_spec import InputSpec

# Datasets Strategist builds without a network.
OFFLINE_DATASETS = ("digits",)
# Where TFDS downloads most datasets from; probed before a download so an
# offline machine fails in seconds instead of retrying for minutes.
_DOWNLOAD_PROBE = ("storage.googleapis.com", 443)


def tfds_builder_of(data: DataConfig):
    """The TFDS builder of `data`'s dataset, or None for files (`data.files`).

    Building one can import TensorFlow and read the dataset's metadata, seconds
    a time: a caller that needs it twice builds it once and passes it on.

    Raises:
        ConfigError: a dataset TFDS cannot find or build (`tfds_source.tfds_builder`).
    """
    if data.files:
        return None
    return tfds_source.tfds_builder(data.dataset, data.data_dir, data.dataset_module)


def describe(data: DataConfig, builder=None) -> InputSpec:
    """What the run's examples will look like, checked before anything is launched.

    Reads files' headers and small files whole; for TFDS, only the dataset's
    metadata (nothing is downloaded). Whether a TFDS dataset is prepared or can
    be is `check_available`'s, asked once the data is known to suit the model.

    Args:
        data: the run's data.
        builder: `tfds_builder_of(data)` when the caller has built it already
            (the pre-flight passes the same one to `check_available`); built
            here when None.

    Raises:
        ConfigError: anything `shard_data` would refuse that is known up front.
    """
    if data.files:
        features, label, num_classes, columns = _file_layout(data)
    else:
        if builder is None:
            builder = tfds_builder_of(data)
        features, label, num_classes = tfds_source.tfds_features(builder.info, data.label)
        columns = ()
    return Manifest(
        data.dataset, "", tuple(features), label, num_classes, {}, columns=columns
    ).input_spec


def check_available(data: DataConfig, builder) -> None:
    """Refuses a TFDS dataset that is neither prepared nor downloadable from here.

    Args:
        data: the run's data.
        builder: `tfds_builder_of(data)`, the one `describe` read; None for files.

    Raises:
        ConfigError: when the download host cannot be reached (`check_obtainable`).
    """
    if builder is None:
        return
    check_obtainable(builder, users_builder=bool(data.dataset_module))


def _file_layout(data: DataConfig):
    """(features, label, num_classes, columns) of `--data` files."""
    paths = data_sources.match_files(data.files)
    kind = os.path.splitext(paths[0])[1].lower()
    if kind == ".tfrecord":
        return (*data_sources.tfrecord_spec(data.feature_spec, data.label), ())
    source = read_arrays(paths, kind, data.label)
    return source.features, source.label, source.num_classes, source.columns


def read_arrays(paths: list[str], kind: str, label: str | None) -> data_sources.ArraySource:
    reader = data_sources.read_csv if kind == ".csv" else data_sources.read_npz
    return reader(paths, label)


def prepare(builder, *, probe_timeout_s: float = 3.0, users_builder: bool = False) -> None:
    """Downloads and prepares `builder` unless it already is.

    Raises:
        ConfigError: when the download host cannot be reached (`check_obtainable`).
    """
    import tensorflow_datasets as tfds

    if _is_prepared(builder):
        return
    _check_downloadable(builder, probe_timeout_s, users_builder)
    tfds.disable_progress_bar()  # progress goes through `log`, line by line
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False)
    )


def check_obtainable(builder, *, probe_timeout_s: float = 3.0, users_builder: bool = False) -> None:
    """Refuses a dataset that is not prepared and cannot be downloaded here.

    A dataset that needs a download is first checked against the network, so
    an offline machine fails in seconds with what to do, not after minutes of
    retries (and, for `compare`, before the pipeline's shard step). A user's
    builder (`users_builder`, from `--dataset-module`) is not: it may read
    local files.

    Raises:
        ConfigError: when the download host cannot be reached.
    """
    if not _is_prepared(builder):
        _check_downloadable(builder, probe_timeout_s, users_builder)


def _check_downloadable(builder, probe_timeout_s: float, users_builder: bool) -> None:
    """Refuses an unprepared dataset whose download host cannot be reached.

    Raises:
        ConfigError: naming the dataset, its folder and what to do.
    """
    offline = builder.name in OFFLINE_DATASETS or users_builder
    if not offline and not storage_access.reachable(_DOWNLOAD_PROBE, probe_timeout_s):
        raise ConfigError(
            f"dataset {builder.name!r} is not prepared in {builder.data_dir} and cannot be "
            f"downloaded: {_DOWNLOAD_PROBE[0]} is unreachable. Prepare it where there is a "
            "network (`tfds build` or a Strategist run) and pass that folder with --data-dir, "
            "or use --dataset digits, which needs no network"
        )


def _is_prepared(builder) -> bool:
    return storage.isdir(builder.data_dir) and any(
        p.endswith(".json") for p in storage.listdir(builder.data_dir)
    )
