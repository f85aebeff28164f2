"""The errors every layer raises for input a user can fix."""

import re

_ERROR_LINE = re.compile(r"^\w+(Error|Exception): ")


class ConfigError(ValueError):
    """A configuration a user gave cannot be run; the message says what to do."""


class ReportError(ConfigError):
    """A report, baseline, metrics record or price table cannot be used.

    The message says which file or field is wrong and what to do. It is a
    `ConfigError`, so the `strategist` command exits 2 on it.
    """


def first_line(err: BaseException) -> str:
    """The line of an error a person needs: TensorFlow's traced errors end with it."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    line = (errors or lines or [type(err).__name__])[-1 if errors else 0]
    if "Exception encountered when calling layer" in line and line in lines[:-1]:
        line = f"{line} {lines[lines.index(line) + 1]}"  # what the layer said comes next
    return line if len(line) <= 300 else line[:297] + "..."
