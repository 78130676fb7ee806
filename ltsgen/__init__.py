"""ltsgen: long-context research data, streaming loaders and position-encoding experiments."""

__version__ = "0.1.0"
