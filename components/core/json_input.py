"""JSON a user hands Strategist (manifests, reports, baselines, history, run folders).

One reader for every file and every JSON text that comes from outside: each
bad input is one `ConfigError` line (the CLI exits 2), never a hang or a
traceback. Refused:

- a file that is not a regular file (a FIFO would block the reader forever,
  `/dev/zero` never ends), or larger than `MAX_BYTES`;
- bytes that are not UTF-8 (`UnicodeDecodeError` otherwise);
- nesting deeper than `MAX_DEPTH` (`json.loads` and every recursive walk of
  the value would raise `RecursionError` on 100,000 `[`);
- an integer of more than `MAX_INT_DIGITS` digits (Python refuses to convert
  past 4,300 with a `ValueError`; no count or size Strategist takes needs 19);
- `NaN`, `Infinity` and numbers beyond float range (`1e400`): not JSON by
  RFC 8259, and no quantity Strategist reads may be non-finite.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from components.core import storage
from components.core.errors import ConfigError, ReportError

# The largest JSON file a user may hand in (a comparison of many runs is well under 1 MiB).
MAX_BYTES = 64 << 20
# The deepest nesting taken: Strategist's own records nest 6 levels at most.
MAX_DEPTH = 64
# An int64 has 19 digits; a longer integer is no count, size or seed Strategist takes.
MAX_INT_DIGITS = 20

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class _Refused(ValueError):
    """A value the hooks below refuse, carried out of `json.loads`."""


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-')):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"a number beyond float range ({text[:40]})")
    return value


def _constant(name: str) -> float:
    raise _Refused(f"{name}, which is not a JSON number (a non-finite value)")


def depth(text: str) -> int:
    """How deeply `text`'s arrays and objects nest (brackets inside strings not counted)."""
    deepest = level = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub('""', text)):
        level += 1 if bracket in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def parse(data: bytes | str, where: str, remedy: str) -> Any:
    """The JSON value in `data`.

    Args:
        data: the file's content, or a JSON text a user typed.
        where: the file or flag, as the message names it (`manifest /x/manifest.json`).
        remedy: what to do, ending the message.

    Raises:
        ConfigError: `data` is not UTF-8, not strict JSON, nested too deeply,
            or holds an integer too long or a number not finite.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 JSON text (a binary file?); {remedy}") from None
    if depth(text) > MAX_DEPTH:
        raise ConfigError(f"{where} nests deeper than {MAX_DEPTH} levels; {remedy}")
    try:
        return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except _Refused as err:
        raise ConfigError(f"{where} holds {err}; {remedy}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{where} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
            f"{remedy}"
        ) from None
    except (RecursionError, ValueError) as err:
        raise ConfigError(f"{where} cannot be read as JSON ({err}); {remedy}") from None


def load(path: str | os.PathLike[str], where: str, remedy: str) -> Any:
    """The JSON value of a file a user handed over (read within `MAX_BYTES`, then `parse`).

    Raises:
        FileNotFoundError: when there is none (callers often take that as "no record").
        ConfigError: anything else that makes it unreadable, in one line.
    """
    try:
        data = storage.read_bytes(path, limit=MAX_BYTES)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise ConfigError(f"{where} cannot be read ({err.strerror or err}); {remedy}") from None
    return parse(data, where, remedy)


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
