"""The library version (one place; the package, the cache keys and the CLI read it)."""

__version__ = "0.1.0"
