"""docs/design.md and the code agree: every module and every RunConfig field has its row."""

import dataclasses
import re
from pathlib import Path

from components.core.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent
DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
# Packages whose `__init__.py` is empty: nothing to describe.
EMPTY_PACKAGES = {"components/__init__.py", "components/core/__init__.py", "pipelines/__init__.py"}


def _module_tables() -> dict[str, str]:
    """docs/design.md's module tables: file -> the row naming it."""
    named = {}
    tables = re.split(r"^Modules of `([^`]+/)`", DESIGN, flags=re.MULTILINE)
    for folder, text in zip(tables[1::2], tables[2::2], strict=True):
        rows = re.findall(r"^\| (`.*?`) \|", text.split("\n\n", 2)[1], flags=re.MULTILINE)
        for row in rows:
            for name in re.findall(r"`([^`]+)`", row):
                file = folder + (name + "__init__.py" if name.endswith("/") else name + ".py")
                named[file] = row
    return named


def _field_paths(cls, prefix=""):
    for field in dataclasses.fields(cls):
        default = field.default
        if field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        if dataclasses.is_dataclass(default):
            yield from _field_paths(type(default), f"{prefix}{field.name}.")
        else:
            yield prefix + field.name


def test_every_module_has_a_row_and_every_row_a_module():
    modules = {
        path.relative_to(ROOT).as_posix()
        for folder in ("components", "pipelines")
        for path in (ROOT / folder).rglob("*.py")
    } - EMPTY_PACKAGES
    named = set(_module_tables())
    assert modules - named == set(), "modules docs/design.md does not list"
    assert named - modules == set(), "rows of docs/design.md naming no module"


def test_every_run_config_field_has_a_row():
    rows = set(re.findall(r"^\| `([\w.]+)` \|", DESIGN, flags=re.MULTILINE))
    missing = [path for path in _field_paths(RunConfig) if path not in rows]
    assert missing == [], "RunConfig fields docs/design.md's table lacks"
