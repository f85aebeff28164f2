"""The errors every layer raises for input a user can fix."""


class ConfigError(ValueError):
    """A configuration a user gave cannot be run; the message says what to do."""


class ReportError(ConfigError):
    """A report, baseline, metrics record or price table cannot be used.

    The message says which file or field is wrong and what to do. It is a
    `ConfigError`, so the `strategist` command exits 2 on it.
    """
