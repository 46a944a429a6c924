"""Peak resident memory of a worker, per phase, read from the kernel.

A worker reports two high-water marks per row (issue #23, part 4):

* compile: the peak of import + lower + compile (or loading the cached artifact);
* run: the peak of the run and latency phases alone.

The kernel keeps one high-water mark per process, ``VmHWM`` in ``/proc/self/status``
(``proc(5)``). Writing ``5`` to ``/proc/self/clear_refs`` resets it to the current
resident size (Linux >= 4.0, ``Documentation/admin-guide/mm/soft-dirty.rst`` and
``proc(5)``, "clear_refs"), which is how the run phase is separated from the compile
phase: :func:`phase_peaks` reads the mark after compile, resets it, and reads it again
after the run. Where ``/proc`` is not there (macOS) the compile peak falls back to
``getrusage(RUSAGE_SELF).ru_maxrss`` and the run peak is unknown (``None``): that mark
cannot be reset.

A compiler the stack runs as a child process (``iree-compile``, TVM's linker) is not in
the worker's own mark; :func:`children_peak_mb` gives the largest waited-for child's
mark (``RUSAGE_CHILDREN``), and the compile peak is the larger of the two.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

__all__ = ["children_peak_mb", "hwm_mb", "reset_hwm"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _maxrss_mb(who: int) -> float:
    """``ru_maxrss`` in MiB (KiB on Linux, bytes on macOS: ``getrusage(2)``)."""
    value = float(resource.getrusage(who).ru_maxrss)
    return value / 2**20 if sys.platform == "darwin" else value / 1024


def hwm_mb() -> float:
    """This process's resident-memory high-water mark since start or the last
    :func:`reset_hwm`, in MiB (``VmHWM``; ``ru_maxrss`` where ``/proc`` is missing)."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return _maxrss_mb(resource.RUSAGE_SELF)


def reset_hwm() -> bool:
    """Reset this process's high-water mark to its current resident size (write ``5``
    to ``/proc/self/clear_refs``). Returns False where the kernel does not allow it
    (no ``/proc``, Linux < 4.0, a sandbox): then a later :func:`hwm_mb` still includes
    everything before."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def children_peak_mb() -> float:
    """The largest high-water mark of this process's waited-for children (and their
    descendants), in MiB (``getrusage(RUSAGE_CHILDREN).ru_maxrss``); 0 when none ran."""
    return _maxrss_mb(resource.RUSAGE_CHILDREN)
