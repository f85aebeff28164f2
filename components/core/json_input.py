"""JSON a user hands Strategist (manifests, reports, baselines, history): parsed or refused.

`json.loads` lets three kinds of bad file escape as something other than a
`JSONDecodeError`: bytes that are not UTF-8 (`UnicodeDecodeError`), nesting
deeper than the interpreter's recursion limit (`RecursionError`, e.g. 100,000
`[`), and both sit outside the `ValueError` a caller catches for syntax. Each
becomes one `ConfigError` line here.
"""

from __future__ import annotations

import json
import os
from typing import Any

from components.core import storage
from components.core.errors import ConfigError, ReportError

# The largest JSON file a user may hand in (a comparison of many runs is well under 1 MiB).
MAX_BYTES = 64 << 20


def parse(data: bytes | str, where: str, remedy: str) -> Any:
    """The JSON value in `data`.

    Args:
        data: the file's content.
        where: the file, as the message names it (`manifest /x/manifest.json`).
        remedy: what to do, ending the message.

    Raises:
        ConfigError: `data` is not UTF-8, not JSON, or nested too deeply.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text)
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 JSON text (a binary file?); {remedy}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{where} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
            f"{remedy}"
        ) from None
    except RecursionError:
        raise ConfigError(f"{where} nests too deeply to be read; {remedy}") from None


def read_json(path: str | os.PathLike[str], role: str) -> Any:
    """Reads one JSON file a user hands in.

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
        data = storage.read_bytes(path, limit=MAX_BYTES)
    except FileNotFoundError:
        raise ReportError(f"{role} {path}: file not found") from None
    except OSError as err:
        raise ReportError(f"{role} {path}: cannot read it ({err.strerror or err})") from None
    try:
        return parse(data, f"{role} {path}", f"pass the {role} JSON file")
    except ConfigError as err:
        raise ReportError(str(err)) from None
