"""cairn: interruption-proof runs for AI coding agents."""

__version__ = "0.1.0"
