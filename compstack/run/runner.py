"""Process isolation, as functions: each job in its own worker process with a
wall-clock limit and a memory limit (:class:`compstack.run.executors.ProcessExecutor`),
or inline (:class:`compstack.run.executors.InlineExecutor`). The executors define the
status words (``timeout``, ``oom``, ``crashed``); this module keeps the names callers use.
"""

from __future__ import annotations

from compstack.run.executors import InlineExecutor, Limits, ProcessExecutor
from compstack.run.jobs import Job, JobOutcome

__all__ = ["Limits", "run_isolated", "run_inline", "default_memory_mb"]


def default_memory_mb() -> int:
    """75 % of this machine's physical memory, in MiB (0 when it cannot be read)."""
    from compstack.core.procs import proc_kb

    return int((proc_kb("/proc/meminfo", "MemTotal") or 0) * 0.75 / 1024)


def run_isolated(job: Job, limits: Limits = Limits(), poll_s: float = 0.05) -> JobOutcome:
    """Run ``job`` in a fresh worker process under ``limits``; never raises for the
    stack's sake (:class:`~compstack.run.executors.ProcessExecutor`).

    Returns:
        The worker's outcome, or one with status ``timeout``, ``oom`` or ``crashed``.
    """
    return ProcessExecutor(poll_s).run(job, limits)


def run_inline(job: Job) -> JobOutcome:
    """Run ``job`` in this process (no isolation; for debugging with ``--no-isolate``)."""
    return InlineExecutor().run(job)
