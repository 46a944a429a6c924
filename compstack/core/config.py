"""Settings read once: cache folder and results database.

Precedence: explicit argument (CLI flag) > environment variable > default.

* cache folder: ``--cache-dir`` > ``COMPSTACK_CACHE_DIR`` > ``~/.cache/compstack``
  (``$XDG_CACHE_HOME/compstack`` when set).

``COMPSTACK_SAVE_TEMPS`` and ``COMPSTACK_TOOL_*`` belong to the compiler-tool wrapper
and are read by :func:`compstack.core.tools.tool_settings`.
* results database: ``--db`` > ``COMPSTACK_DB`` > ``.compstack/results.sqlite``.
* framework environments (:func:`framework_pythons`): ``COMPSTACK_PADDLE_PYTHON`` and
  ``COMPSTACK_MINDSPORE_PYTHON`` name the Python of the venv that holds PaddlePaddle /
  MindSpore (``scripts/setup_paddle_env.sh``, ``scripts/setup_mindspore_env.sh`` create
  them); ``COMPSTACK_TF_PYTHON`` optionally moves TensorFlow out of compstack's own Python.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FRAMEWORK_ENV_VARS", "Settings", "framework_pythons", "settings", "shared_store"]


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


def shared_store() -> bool:
    """``--shared-store`` (``COMPSTACK_SHARED_STORE=1``, inherited by workers): the store is
    shared with other users (:mod:`compstack.core.ownership`)."""
    return os.environ.get("COMPSTACK_SHARED_STORE", "") == "1"


def settings(cache_dir: str | Path | None = None, db: str | Path | None = None) -> Settings:
    """Resolve settings from the arguments and the environment (read here only)."""
    env = os.environ
    if cache_dir is not None and not str(cache_dir).strip():
        from compstack.core.errors import UserError

        raise UserError("--cache-dir: empty (give a folder; the current folder is never the store by default)")
    if cache_dir is None:
        xdg = env.get("XDG_CACHE_HOME") or ""
        # the XDG Base Directory spec: a relative $XDG_CACHE_HOME is invalid and ignored
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
        cache_dir = env.get("COMPSTACK_CACHE_DIR") or (base / "compstack")
    if db is None:
        db = env.get("COMPSTACK_DB") or Path(".compstack") / "results.sqlite"
    try:
        busy = float(env.get("COMPSTACK_DB_BUSY_TIMEOUT") or 30.0)
    except ValueError:
        busy = 30.0
    busy = busy if 0 <= busy < 1e6 else 30.0
    return Settings(Path(cache_dir).expanduser(), Path(db).expanduser(), busy)


#: The setting that names each foreign framework's Python (see :func:`framework_pythons`).
FRAMEWORK_ENV_VARS = {"tf": "COMPSTACK_TF_PYTHON", "paddle": "COMPSTACK_PADDLE_PYTHON",
                      "mindspore": "COMPSTACK_MINDSPORE_PYTHON"}


def framework_pythons() -> dict[str, str]:
    """``{framework: python}`` for each framework whose environment is configured
    (read from the environment here only; an unset or empty variable is left out)."""
    out = {}
    for framework, var in FRAMEWORK_ENV_VARS.items():
        value = os.environ.get(var, "").strip()
        if value:
            out[framework] = str(Path(value).expanduser())
    return out
