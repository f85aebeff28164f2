"""Command-line values checked as they are parsed: numbers in range, seeds, files to write."""

from __future__ import annotations

import argparse
import os
import tempfile

from components.core.config import MAX_SEED, ConfigError


def _number(text: str, kind: type, noun: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (exit 2 with a clear message otherwise)."""
    value = _number(text, int, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def bounded_int(low: int, high: int):
    """argparse type: an integer from `low` to `high` (the bound a flag's help states)."""

    def parse(text: str) -> int:
        value = _number(text, int, "a whole number")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high:,}, got {value}")
        return value

    return parse


def whole_number(text: str) -> int:
    """argparse type: a whole number, also written 2e9, 1.5e6 or 350_000_000 (range unchecked)."""
    value = _number(text.replace("_", ""), float, "a number")
    if value != value or value in (float("inf"), float("-inf")) or value != int(value):
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text}")
    return int(value)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _number(text, int, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def seed(text: str) -> int:
    """argparse type: a random seed, 0 to 2**32 - 1."""
    value = _number(text, int, "a whole number")
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_SEED}, got {value}")
    return value


def output_file(path: str, flag: str = "-o") -> str:
    """Refuses a file destination Strategist may not replace; returns it.

    Only a regular file is ever replaced (atomically): a folder, a symlink, a
    device or a FIFO named as the output is refused, as is an empty path or a
    missing parent folder.

    Raises:
        ConfigError: saying what to pass instead.
    """
    if not path or not path.strip():
        raise ConfigError(f"{flag} is empty: pass the file to write, e.g. pipeline.yaml")
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {path} is a folder: pass a file path inside it")
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise ConfigError(
            f"{flag} {path} is not a regular file (a symlink, device or pipe): Strategist "
            "replaces only regular files; pass another path"
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConfigError(f"{flag} {path}: folder {parent} does not exist; create it first")
    try:  # the temporary file the atomic write needs beside it (/proc, read-only places)
        handle, probe = tempfile.mkstemp(prefix=".tmp-", dir=parent)
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        raise ConfigError(
            f"{flag} {path}: cannot write in {parent} ({err.strerror}); pass a writable place"
        ) from None
    return path


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = _number(text, float, "a number")
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be 0 or a positive number, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _number(text, float, "a number")
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number strictly between 0 and 1."""
    value = _number(text, float, "a number")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def fraction_or_zero(text: str) -> float:
    """argparse type: 0, or a number strictly between 0 and 1."""
    value = _number(text, float, "a number")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be 0 or more and below 1, got {value}")
    return value
