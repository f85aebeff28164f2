"""What a comparison raises on input it cannot use, and the JSON reader that raises it."""

from __future__ import annotations

from components.core.errors import ReportError
from components.core.json_input import read_json

__all__ = ["ReportError", "read_json"]
