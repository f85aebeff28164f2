"""The error every layer raises for input a user can fix."""


class ConfigError(ValueError):
    """A configuration a user gave cannot be run; the message says what to do."""
