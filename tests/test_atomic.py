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


def _folders(parent) -> dict[str, str]:
    """Every folder below `parent` -> the text of its `saved_model.pb` (if it has one)."""
    found = {}
    for entry in os.scandir(parent):
        marker = os.path.join(entry.path, "saved_model.pb")
        if entry.is_dir() and os.path.exists(marker):
            with open(marker) as handle:
                found[entry.name] = handle.read()
    return found


def _write_model(final, text: str) -> None:
    with (
        atomic.staged_dir(final) as staging,
        open(os.path.join(staging, "saved_model.pb"), "w") as f,
    ):
        f.write(text)


def test_staged_dir_replaces_without_a_moment_lacking_a_complete_folder(tmp_path, monkeypatch):
    """At every rename and delete, the old or the new folder exists whole somewhere."""
    final = tmp_path / "model"
    _write_model(final, "old")
    moments = []
    real_replace, real_rmtree = os.replace, atomic.shutil.rmtree

    def replace(src, dst):
        moments.append(("replace", _folders(tmp_path)))
        real_replace(src, dst)
        moments.append(("replaced", _folders(tmp_path)))

    def rmtree(path, *args, **kwargs):
        moments.append(("rmtree", _folders(tmp_path)))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(atomic.os, "replace", replace)
    monkeypatch.setattr(atomic.shutil, "rmtree", rmtree)
    _write_model(final, "new")
    monkeypatch.undo()
    assert moments
    for what, folders in moments:
        assert "old" in folders.values() or folders.get("model") == "new", (what, folders)
    # The old folder is deleted only once the new one is in place.
    (rmtree_moment,) = [folders for what, folders in moments if what == "rmtree"]
    assert rmtree_moment["model"] == "new"
    assert (final / "saved_model.pb").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_staged_dir_keeps_the_old_folder_when_the_swap_fails(tmp_path, monkeypatch):
    final = tmp_path / "model"
    _write_model(final, "old")
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(src).startswith(".model-") and "-old-" not in src:
            raise OSError("disk full")  # the new folder cannot be moved in
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(OSError, match="disk full"):
        _write_model(final, "new")
    monkeypatch.undo()
    assert (final / "saved_model.pb").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_staged_dir_failing_body_leaves_final_and_no_temporaries(tmp_path):
    final = tmp_path / "model"
    _write_model(final, "old")
    with pytest.raises(RuntimeError), atomic.staged_dir(final):
        raise RuntimeError("export failed")
    assert (final / "saved_model.pb").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_staged_file_keeps_the_suffix_and_replaces_atomically(tmp_path):
    target = tmp_path / "pipeline.yaml"
    target.write_text("old")
    with atomic.staged_file(target) as tmp:
        assert tmp.endswith(".yaml") and os.path.dirname(tmp) == str(tmp_path)
        assert target.read_text() == "old"  # untouched until the block ends
        with open(tmp, "w") as handle:
            handle.write("new")
    assert target.read_text() == "new"
    with pytest.raises(RuntimeError), atomic.staged_file(target) as tmp:
        raise RuntimeError("compiler failed")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["pipeline.yaml"]
