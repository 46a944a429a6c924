"""The version of compstack (one place; ``compstack.__version__`` re-exports it), and the
installed versions of the packages a cache key depends on."""

from __future__ import annotations

from collections.abc import Iterable

__version__ = "0.1.0"


def installed_versions(names: Iterable[str], missing: str = "-") -> dict[str, str]:
    """``{distribution: version}`` from the installed metadata of each of ``names``
    (nothing is imported); ``missing`` for one that is not installed."""
    import importlib.metadata

    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = missing
    return out
