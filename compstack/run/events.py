"""Stage events of running jobs, for a progress display (issue #23, part 3).

The executors call :func:`emit` with each stage a worker reports (``lower``,
``compile``, ``run``, ``latency``: the pool worker's ``progress`` messages, a fresh
worker's ``progress`` file); a display subscribes with :func:`listening` for as long as
it shows. Emitting with nobody listening costs a list lookup. A listener may also be
this thread's alone (:func:`listening` ``thread=True``): the daemon runs several clients'
jobs at once, one thread each, and sends each job's stages to its own client.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

__all__ = ["emit", "listening"]

_LISTENERS: list[Callable[[str], None]] = []
_LOCK = threading.Lock()
_THREAD = threading.local()  # .fns: this thread's own listeners


def emit(stage: str) -> None:
    """Tell every listener that the running job entered ``stage``; a listener's error
    is never the job's."""
    with _LOCK:
        listeners = list(_LISTENERS)
    listeners += getattr(_THREAD, "fns", [])
    for fn in listeners:
        with contextlib.suppress(Exception):
            fn(stage)


@contextlib.contextmanager
def listening(fn: Callable[[str], None], thread: bool = False) -> Iterator[None]:
    """Call ``fn(stage)`` for every stage event while the ``with`` block runs: every
    thread's events, or (``thread``) only those emitted by the calling thread."""
    if thread:
        fns = _THREAD.__dict__.setdefault("fns", [])
        fns.append(fn)
        try:
            yield
        finally:
            fns.remove(fn)
        return
    with _LOCK:
        _LISTENERS.append(fn)
    try:
        yield
    finally:
        with _LOCK:
            _LISTENERS.remove(fn)
