"""The report's files: rendering every one, writing them atomically, reading reports back."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from components.core import storage
from components.core.comparison.errors import ReportError, read_json
from components.core.comparison.html import render_html
from components.core.comparison.plots import render_plots
from components.core.comparison.summary import summary_markdown

REPORT_JSON = "comparison.json"
REPORT_HTML = "report.html"
SUMMARY_MD = "summary.md"


def write_report(report: dict, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Writes the report files into `out_dir`, each atomically.

    Files: `comparison.json`, `report.html` (self-contained), `summary.md` and
    the plots in `PLOT_FILES`. A reader never sees a half-written file: each is
    written atomically by `storage.write_bytes` (a temporary file renamed over
    the target, or one Cloud Storage object upload).

    Args:
        report: `build_report` output.
        out_dir: the folder (local, `/gcs/` or `gs://`); created when missing.

    Returns:
        File name -> path of every file written.
    """
    storage.makedirs(out_dir)
    written = {}
    for name, data in render_files(report).items():
        written[name] = storage.join(out_dir, name)
        storage.write_bytes(written[name], data)
    return written


def render_files(report: dict) -> dict[str, bytes]:
    """File name -> content of every report file (JSON, HTML, Markdown, plots)."""
    plots = render_plots(report)
    return {
        REPORT_JSON: (json.dumps(report, indent=2, allow_nan=False) + "\n").encode(),
        REPORT_HTML: render_html(report, plots).encode(),
        SUMMARY_MD: summary_markdown(report).encode(),
        **plots,
    }


def load_metrics(paths: Iterable[str | os.PathLike[str]]) -> list[Any]:
    """Reads `metrics.json` files, the input of `build_report`.

    Args:
        paths: one file per training run.

    Returns:
        Their parsed content, in order (checked by `build_report`).

    Raises:
        ReportError: when a file is missing or not JSON.
    """
    return [read_json(path, "metrics") for path in paths]


def load_report(path: str | os.PathLike[str], role: str = "report") -> dict:
    """Reads a `comparison.json` (or the one inside a folder).

    Args:
        path: the file, or a folder holding `comparison.json`.
        role: what the file is for, used in error messages (`report`, `baseline`).

    Raises:
        ReportError: when the file is missing, not JSON or not an object.
    """
    target = os.fspath(path)
    if storage.isdir(target):
        target = storage.join(target, REPORT_JSON)
    raw = read_json(target, role)
    if not isinstance(raw, dict):
        raise ReportError(f"{role} {target}: expected a JSON object, got {type(raw).__name__}")
    return raw
