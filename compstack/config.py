"""Settings read once: cache folder and results database.

Precedence: explicit argument (CLI flag) > environment variable > default.

* cache folder: ``--cache-dir`` > ``COMPSTACK_CACHE_DIR`` > ``~/.cache/compstack``
  (``$XDG_CACHE_HOME/compstack`` when set).

``COMPSTACK_SAVE_TEMPS`` and ``COMPSTACK_TOOL_*`` belong to the compiler-tool wrapper
and are read by :func:`compstack.tools.tool_settings`.
* results database: ``--db`` > ``COMPSTACK_DB`` > ``.compstack/results.sqlite``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings", "settings"]


@dataclass(frozen=True)
class Settings:
    """Resolved settings.

    Attributes:
        cache_dir: where compiled artifacts and exported zoo models are cached.
        db: the SQLite results database.
        db_busy_timeout_s: seconds a results write waits for another process's lock
            before the row goes to the journal (``COMPSTACK_DB_BUSY_TIMEOUT``, default 30).
    """

    cache_dir: Path
    db: Path
    db_busy_timeout_s: float = 30.0


def settings(cache_dir: str | Path | None = None, db: str | Path | None = None) -> Settings:
    """Resolve settings from the arguments and the environment (read here only)."""
    env = os.environ
    if cache_dir is None:
        cache_dir = env.get("COMPSTACK_CACHE_DIR") or (
            Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compstack"
        )
    if db is None:
        db = env.get("COMPSTACK_DB") or Path(".compstack") / "results.sqlite"
    try:
        busy = float(env.get("COMPSTACK_DB_BUSY_TIMEOUT") or 30.0)
    except ValueError:
        busy = 30.0
    busy = busy if 0 <= busy < 1e6 else 30.0
    return Settings(Path(cache_dir).expanduser(), Path(db).expanduser(), busy)
