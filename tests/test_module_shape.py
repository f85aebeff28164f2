"""The product's modules stay small and import without cycles.

Every module in `components/` and `pipelines/` is at most 500 lines, and no module imports
(at the top or inside a function) one that, directly or not, imports it back.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("components", "pipelines")
MAX_LINES = 500


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the product under `root`."""
    found = {}
    for folder in FOLDERS:
        for path in (root / folder).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _run_time_nodes(tree: ast.AST):
    """Every node of `tree` but those under `if TYPE_CHECKING:`, which never run."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in _TYPE_CHECKING:
            for other in node.orelse:
                yield other
                yield from _run_time_nodes(other)
            continue
        yield node
        yield from _run_time_nodes(node)


_TYPE_CHECKING = ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the product's modules it imports anywhere in its source, functions included.

    Imports under `if TYPE_CHECKING:` (annotations only) do not run and do not count.
    `from package import name` counts as importing `package.name` when that is a module, else
    `package`; an import of a package's submodule counts as that submodule only (Python runs
    the package's `__init__` first, but that edge would make every package that re-exports
    its submodules look circular).
    """
    found = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in _run_time_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        [*package[: len(package) - node.level + 1], *filter(None, [base])]
                    )
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in found else base
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in found:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: its strongly connected parts of two modules or more."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            part = []
            while not part or part[-1] != module:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for module in sorted(graph):
            if module not in order:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def long_modules(root: Path = ROOT) -> dict[str, int]:
    """Modules over `MAX_LINES` lines: path -> lines."""
    lengths = {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in modules(root).values()
    }
    return {path: n for path, n in sorted(lengths.items()) if n > MAX_LINES}


def test_no_module_is_over_500_lines():
    assert long_modules() == {}, "split these modules by concept"


def test_no_import_cycle_among_the_products_modules():
    assert cycles(import_graph()) == [], "import cycles (function-level imports included)"


def test_a_planted_long_module_and_a_planted_cycle_are_caught(tmp_path):
    """The checks above fail on what they exist to catch."""
    core = tmp_path / "components" / "core"
    core.mkdir(parents=True)
    (tmp_path / "pipelines").mkdir()
    for package in (tmp_path / "components", core):
        (package / "__init__.py").write_text("")
    (core / "a.py").write_text("from components.core import b\n")
    # A cycle closed by an import inside a function, as `training` <-> `model_build` was.
    (core / "b.py").write_text("def f():\n    from components.core.a import g\n")
    (core / "c.py").write_text("from . import a\n" + "x = 1\n" * MAX_LINES)
    (core / "d.py").write_text("import components.core.c\n" * MAX_LINES)
    # Annotations only: never imported at run time, so no cycle.
    (core / "e.py").write_text("from components.core import f\n")
    (core / "f.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from components.core import e\n"
    )
    graph = import_graph(tmp_path)
    assert graph["components.core.c"] == {"components.core.a"}  # relative imports resolved
    assert cycles(graph) == [["components.core.a", "components.core.b"]]
    assert long_modules(tmp_path) == {"components/core/c.py": MAX_LINES + 1}
