"""docs/design.md and the code agree.

Every module has one row in its folder's table, every row names a module that exists, and each
row begins with what its module's docstring says it is, so a module renamed, removed or given
another concept leaves a row this test rejects. Every RunConfig field has its row, and the
layers import the way the design says.
"""

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from components.core.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent
DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
# Packages whose `__init__.py` is empty: nothing to describe.
EMPTY_PACKAGES = {"components/__init__.py", "components/core/__init__.py", "pipelines/__init__.py"}


def _module_rows(design: str) -> dict[str, str]:
    """docs/design.md's module tables: file -> its row's concept cell.

    Raises:
        AssertionError: a row names no module or several, or two rows name one module.
    """
    rows = {}
    tables = re.split(r"^Modules of `([^`]+/)`[^\n]*\n", design, flags=re.MULTILINE)
    for folder, text in zip(tables[1::2], tables[2::2], strict=True):
        table = text.lstrip("\n").split("\n\n", 1)[0]
        for line in table.splitlines()[2:]:
            name_cell, concept = line.strip("| ").split(" | ", 1)
            names = re.findall(r"`([^`]+)`", name_cell)
            assert len(names) == 1, f"one module per row: {line!r}"
            name = names[0]
            file = folder + (name + "__init__.py" if name.endswith("/") else name + ".py")
            assert file not in rows, f"two rows for {file}"
            rows[file] = concept
    return rows


def _modules() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for folder in ("components", "pipelines")
        for path in (ROOT / folder).rglob("*.py")
    } - EMPTY_PACKAGES


def _summary(file: str) -> str:
    """The module docstring's summary (its first paragraph), on one line."""
    doc = ast.get_docstring(ast.parse((ROOT / file).read_text(encoding="utf-8"))) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


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
    modules, named = _modules(), set(_module_rows(DESIGN))
    assert modules - named == set(), "modules docs/design.md does not list"
    assert named - modules == set(), "rows of docs/design.md naming no module"


def test_every_core_module_has_a_row():
    core = {m for m in _modules() if m.startswith("components/core/")}
    assert core and core <= set(_module_rows(DESIGN))


@pytest.mark.parametrize("file", sorted(_modules()))
def test_each_row_begins_with_its_modules_docstring(file):
    summary = _summary(file)
    assert summary, f"{file} has no module docstring"
    row = _module_rows(DESIGN).get(file, "")
    assert row.startswith(summary), (
        f"docs/design.md's row of {file} must begin with its docstring's summary:\n"
        f"  docstring: {summary}\n  row:       {row}"
    )


def test_a_stale_row_is_caught():
    """The checks above fail on the stale rows they exist to catch."""
    good = "Modules of `components/core/`:\n\n| module | concept |\n| --- | --- |\n"
    summary = _summary("components/core/atomic.py")
    assert _module_rows(good + f"| `atomic` | {summary} More. |\n") == {
        "components/core/atomic.py": f"{summary} More."
    }
    # a row whose concept drifted from its docstring
    drifted = _module_rows(good + "| `atomic` | Writes files. |\n")["components/core/atomic.py"]
    assert not drifted.startswith(summary)
    # a row naming a module that does not exist
    gone = _module_rows(good + "| `no_such_module` | Anything. |\n")
    assert set(gone) - _modules() == {"components/core/no_such_module.py"}
    # two modules in one row
    with pytest.raises(AssertionError, match="one module per row"):
        _module_rows(good + "| `atomic`, `signals` | Both. |\n")


def test_every_run_config_field_has_a_row():
    rows = set(re.findall(r"^\| `([\w.]+)` \|", DESIGN, flags=re.MULTILINE))
    missing = [path for path in _field_paths(RunConfig) if path not in rows]
    assert missing == [], "RunConfig fields docs/design.md's table lacks"


def test_the_core_imports_neither_kfp_nor_the_layers_above_it():
    """docs/design.md: imports go one way, down the layers."""
    above = re.compile(
        r"^(kfp|google_cloud_pipeline_components|pipelines)(\.|$)|^components\.(?!core(\.|$))"
    )
    found = []
    for path in (ROOT / "components" / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if above.match(n)]
    assert found == []


def _listed_modules(doc: str) -> set[str]:
    """The module names a package docstring's `Modules:` list names."""
    listing = doc.split("\nModules:\n", 1)[1]
    return set(re.findall(r"`(\w+)`", listing))


def _packages_listing_modules() -> list[Path]:
    packages = sorted(p.parent for p in (ROOT / "components").rglob("__init__.py"))
    return [
        p
        for p in packages
        if "\nModules:\n" in (ast.get_docstring(ast.parse((p / "__init__.py").read_text())) or "")
    ]


def test_the_selector_package_lists_its_modules():
    assert ROOT / "components" / "core" / "selection" in _packages_listing_modules()


@pytest.mark.parametrize("package", _packages_listing_modules())
def test_a_package_docstring_that_lists_its_modules_lists_all(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "__main__"}
    missing = modules - _listed_modules(doc)
    assert missing == set(), f"{package.relative_to(ROOT)}/__init__.py does not list {missing}"


def test_a_modules_list_missing_one_is_caught():
    doc = "Package.\n\nModules:\n\n* `topology`: the hardware;\n* `cost`, `rules`: money, rules.\n"
    assert _listed_modules(doc) == {"topology", "cost", "rules"}
    assert {"topology", "cost", "rules", "history"} - _listed_modules(doc) == {"history"}
