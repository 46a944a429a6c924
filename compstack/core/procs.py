"""How compstack starts its own child processes: workers and compiler tools.

Two rules hold for every child:

* **The current folder is never on a worker's import path.** ``python -m MOD`` puts
  the current folder first on ``sys.path``, so a local ``onnxruntime.py`` would run
  inside the worker. Workers start with Python's safe-path flag ``-P`` (3.11+,
  `docs <https://docs.python.org/3/using/cmdline.html#cmdoption-P>`_); on 3.10, a
  ``-c`` stub drops ``sys.path[0]`` before running the module.
* **A child dies with its parent.** Each child asks the kernel for ``SIGKILL`` when its
  parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``), so a ``compstack`` killed by SIGTERM
  or SIGKILL never leaves a hung worker (or the compiler it started) behind. Each child
  also runs in its own session, so the parent can kill its whole process group.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from pathlib import Path
from typing import Any

__all__ = ["child_kwargs", "kill_group", "python_module_argv", "run_tempdir", "tree_rss_bytes"]

_PR_SET_PDEATHSIG = 1


def python_module_argv(module: str, *args: str) -> list[str]:
    """``[python, -P, -m, module, *args]``: run a compstack module as a program without
    the current folder on its import path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    stub = f"import sys, runpy; del sys.path[0]; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", stub, *args]


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()  # resolved before any fork: the child only makes the call


def _die_with_parent(parent: int) -> None:
    """In the forked child, before ``exec``: SIGKILL me when my parent dies."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)


def child_kwargs() -> dict[str, Any]:
    """Keyword arguments for :class:`subprocess.Popen`/:func:`subprocess.run` that start
    the child in its own session and tie its life to this process."""
    parent = os.getpid()
    return {"start_new_session": True, "preexec_fn": lambda: _die_with_parent(parent)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_tempdir(prefix: str) -> Path:
    """A new temporary folder ``<tmp>/<prefix><pid>-XXXX`` for one run's work files.

    Folders of the same prefix left by runs whose process no longer exists (a
    ``compstack`` killed by SIGKILL cannot clean up after itself) are removed first.
    """
    import shutil
    import tempfile

    base = Path(tempfile.gettempdir())
    try:
        for old in base.glob(f"{prefix}*-*"):
            pid = old.name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
            out.extend(int(c) for c in text.split())
    except OSError:
        pass
    return out


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, bytes (``/proc/PID/statm``;
    0 for a process that is gone)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/statm").read_text().split()
            total += int(fields[1]) * _PAGE
        except OSError:
            continue
        todo.extend(_children(p))
    return total


def kill_group(proc: Any) -> None:
    """SIGKILL the process group ``proc`` leads (every worker and tool is started with
    ``start_new_session=True``); falls back to killing ``proc`` alone when the group
    cannot be signalled."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        proc.kill()
