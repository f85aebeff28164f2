"""TFDS builders that Strategist ships, registered on import.

TFDS registers a builder when its class is defined, and `tfds.builder` needs the
class to live in an importable package: every process that imports this one (each
training process included) finds the builder by name.
"""

from components.core.builders.digits import Digits

__all__ = ["Digits"]
