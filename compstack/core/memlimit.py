"""``--memory-limit`` for the compstack process itself (workers have theirs in
:mod:`compstack.run.runner`).

A daemon thread reads this process's resident anonymous memory (``RssAnon`` in
``/proc/self/status``: what the process allocated, not the page cache of a
memory-mapped model file, which the kernel can drop) every 50 ms. Past the limit it
sends ``SIGUSR1`` to the main thread, whose handler raises :class:`MemoryLimitError`
(one line, exit status 2, workers killed on the way out by the runner). If the main
thread is stuck in native code and does not unwind within a few seconds, the thread
prints the same line and ends the process with status 2.

``RLIMIT_AS`` is not used: JAX, TVM and CUDA reserve far more address space than they
touch, so an address-space limit breaks them at any useful size.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import cast

from compstack.core.errors import CompstackError

__all__ = ["MemoryLimitError", "guard_own_memory", "own_rss_mb"]

_state: dict[str, object] = {}


class MemoryLimitError(CompstackError):
    """The compstack process itself passed ``--memory-limit``."""


def own_rss_mb() -> float:
    """Resident anonymous memory of this process, MiB (0 when ``/proc`` has none)."""
    from compstack.core.procs import proc_kb

    return (proc_kb("/proc/self/status", "RssAnon") or 0) / 1024


def guard_own_memory(limit_mb: int, what: str, poll_s: float = 0.05, grace_s: float = 5.0) -> None:
    """Hold this process to ``limit_mb`` MiB of resident anonymous memory from now on.

    Call from the main thread; a second call changes the limit and the description.

    Args:
        limit_mb: the limit, MiB; 0 turns the guard off.
        what: what the process is doing, for the message (e.g. ``importing m.onnx``).
        poll_s: seconds between two reads of the resident memory.
        grace_s: how long the main thread has to unwind before the process is ended.
    """
    _state.update(limit=limit_mb, what=what)
    if not limit_mb or "thread" in _state or not Path("/proc/self/status").exists():
        return
    main = threading.main_thread().ident

    def handler(signum: int, frame: object) -> None:
        raise MemoryLimitError(str(_state["message"]))

    signal.signal(signal.SIGUSR1, handler)

    def watch() -> None:
        while True:
            limit = int(cast(int, _state["limit"]))
            rss = own_rss_mb()
            if limit and rss > limit:
                _state["message"] = (f"compstack itself used {rss:.0f} MiB while {_state['what']}, past "
                                     f"--memory-limit {limit} (MiB); raise it, or 0 for no limit")
                signal.pthread_kill(main, signal.SIGUSR1)  # type: ignore[arg-type]
                time.sleep(grace_s)
                if own_rss_mb() > limit:  # stuck in native code: end here
                    sys.stderr.write(f"compstack: error: {_state['message']}\n")
                    sys.stderr.flush()
                    os._exit(2)
            time.sleep(poll_s)

    thread = threading.Thread(target=watch, name="compstack-memory-limit", daemon=True)
    _state["thread"] = thread
    thread.start()
