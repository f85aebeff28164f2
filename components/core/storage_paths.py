"""Cloud Storage URIs and their gcsfuse paths: `gs://bucket/x` <-> `/gcs/bucket/x`.

Vertex AI mounts every bucket the job can read at `/gcs/` (Cloud Storage FUSE), so
a training process or pipeline task there opens `gs://bucket/x` as the plain file
path `/gcs/bucket/x`; Vertex AI Pipelines hands artifacts to tasks in that form.
"""

from __future__ import annotations

GS_PREFIX = "gs://"
GCSFUSE_PREFIX = "/gcs/"


def to_gcsfuse(uri: str) -> str:
    """`gs://bucket/x` as Vertex AI's gcsfuse mount sees it: `/gcs/bucket/x`.

    Anything that is not a `gs://` URI is returned unchanged.
    """
    return GCSFUSE_PREFIX + uri[len(GS_PREFIX) :] if uri.startswith(GS_PREFIX) else uri


def from_gcsfuse(path: str) -> str:
    """The `gs://` URI of a gcsfuse path: `/gcs/bucket/x` -> `gs://bucket/x`.

    Anything that is not under `/gcs/` is returned unchanged.
    """
    return GS_PREFIX + path[len(GCSFUSE_PREFIX) :] if path.startswith(GCSFUSE_PREFIX) else path
