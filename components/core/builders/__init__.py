"""TFDS builders that Strategist ships, registered on import.

TFDS registers a builder when its class is defined, and `tfds.builder` needs the
class to live in an importable package (DESIGN.md §3).
"""

from components.core.builders.digits import Digits

__all__ = ["Digits"]
