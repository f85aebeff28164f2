"""The selection package: what importing it loads, and where the research stays."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_selector_loads_no_research_and_no_comparison():
    code = (
        "import sys, components.core.selection as s; s.recommend; s.load_history; "
        "print(sorted(m for m in sys.modules if 'evidence' in m or 'comparison' in m "
        "or m.startswith('research')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_product_never_imports_the_research():
    """`research/` imports the product, never the reverse (function-level imports too)."""
    importers = []
    for path in [*ROOT.glob("components/**/*.py"), *ROOT.glob("pipelines/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n == "research" or n.startswith("research.") for n in names):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == []
