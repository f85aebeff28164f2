"""What a comparison raises on input it cannot use, and the JSON reader that raises it."""

from __future__ import annotations

import os
from typing import Any

from components.core import json_input, storage
from components.core.config import ConfigError


class ReportError(ConfigError):
    """A report, baseline, metrics record or price table cannot be used.

    The message says which file or field is wrong and what to do. It is a
    `ConfigError`, so the `strategist` command exits 2 on it.
    """


def read_json(path: str | os.PathLike[str], role: str) -> Any:
    """Reads one JSON file.

    Args:
        path: the file (local, `/gcs/` or `gs://`).
        role: what the file is for, used in error messages (`metrics`,
            `price table`, `report`, `baseline`).

    Returns:
        The parsed JSON value.

    Raises:
        ReportError: when the file is missing, unreadable or not valid JSON.
    """
    try:
        data = storage.read_bytes(path, limit=json_input.MAX_BYTES)
    except FileNotFoundError:
        raise ReportError(f"{role} {path}: file not found") from None
    except OSError as err:
        raise ReportError(f"{role} {path}: cannot read it ({err.strerror or err})") from None
    try:
        return json_input.parse(data, f"{role} {path}", f"pass the {role} JSON file")
    except ConfigError as err:
        raise ReportError(str(err)) from None
