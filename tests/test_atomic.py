"""Atomic writes leave the modes a plain open() or mkdir() would, not mkstemp's private ones."""

from __future__ import annotations

import os
import stat

import pytest

from components.core import atomic


@pytest.fixture
def umask():
    def set_mask(mask: int) -> None:
        os.umask(mask)

    previous = os.umask(0o022)
    yield set_mask
    os.umask(previous)


@pytest.mark.parametrize(
    ("mask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)]
)
def test_modes_follow_the_umask(tmp_path, umask, mask, file_mode, dir_mode):
    umask(mask)
    atomic.write_json(tmp_path / "metrics.json", {"a": 1})
    with atomic.staged_dir(tmp_path / "model") as staging:
        (open(os.path.join(staging, "saved_model.pb"), "w")).close()
    assert stat.S_IMODE((tmp_path / "metrics.json").stat().st_mode) == file_mode
    assert stat.S_IMODE((tmp_path / "model").stat().st_mode) == dir_mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "model"]


def test_the_umask_is_read_unchanged(umask):
    umask(0o027)
    assert atomic._umask() == 0o027
    assert os.umask(0o027) == 0o027  # still in force after reading it
