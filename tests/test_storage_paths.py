"""`gs://` URIs and Vertex AI's gcsfuse paths map onto each other, and nothing else changes."""

from __future__ import annotations

import pytest

from components.core.storage_paths import from_gcsfuse, to_gcsfuse


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("gs://bucket/runs/x", "/gcs/bucket/runs/x"),
        ("gs://bucket", "/gcs/bucket"),
        ("gs://bucket/shards/", "/gcs/bucket/shards/"),
    ],
)
def test_gs_and_gcsfuse_map_both_ways(uri, path):
    assert to_gcsfuse(uri) == path
    assert from_gcsfuse(path) == uri
    assert from_gcsfuse(to_gcsfuse(uri)) == uri


@pytest.mark.parametrize(
    "other", ["", "runs/x", "/tmp/gs://x", "/gcsx/bucket", "s3://bucket/x", "/gcs", "GS://b/x"]
)
def test_other_paths_are_left_alone(other):
    assert to_gcsfuse(other) == other
    assert from_gcsfuse(other) == other


def test_already_mapped_paths_stay_as_they_are():
    assert to_gcsfuse("/gcs/bucket/x") == "/gcs/bucket/x"
    assert from_gcsfuse("gs://bucket/x") == "gs://bucket/x"
