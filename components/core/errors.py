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


def printable(text: str) -> str:
    r"""`text` with every control character escaped (`\x1b`, `\r`), so echoing a name a
    user gave cannot move the cursor or clear the screen (ECMA-48 sequences start with
    ESC or a C1 character). A line break stays one: messages may span lines."""
    return "".join(char if _shown(char) else _escape(char) for char in text)


def _shown(char: str) -> bool:
    return char == "\n" or (char.isprintable() and not 0x80 <= ord(char) < 0xA0)


def _escape(char: str) -> str:
    return repr(char)[1:-1] if ord(char) < 0x100 else f"\\u{ord(char):04x}"


_URL_PASSWORD = re.compile(r"(^|//)([^/@:\s]*):[^/@\s]*@")


def masked_url(url: str) -> str:
    """`url` with the password of its `user:password@` part replaced by `***`."""
    return _URL_PASSWORD.sub(r"\1\2:***@", url)
