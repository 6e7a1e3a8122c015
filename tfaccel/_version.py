"""The single source of tfaccel's version number."""

__version__ = "0.1.0"
