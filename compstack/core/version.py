"""The version of compstack (one place; ``compstack.__version__`` re-exports it)."""

__version__ = "0.1.0"
