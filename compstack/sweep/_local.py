"""The local sweep executor: jobs on one of :mod:`compstack.run.executors` on this machine, N at a time."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from compstack.analysis.fault import killed_from_outside
from compstack.run.executors import Executor, Limits, open_executor
from compstack.run.jobs import Job, JobOutcome

__all__ = ["LocalExecutor"]


class _Gate:
    """Jobs run side by side; a job run again alone waits until none runs, and no job
    starts while one waits or runs alone."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.running = self.alone = 0  # jobs running; jobs waiting to run alone or running alone
        self.starts = 0  # jobs started so far
        self.solo = False

    def enter(self, alone: bool) -> tuple[int, int]:
        """Wait until the job may start; returns (its start number, jobs running then)."""
        with self.cond:
            if alone:
                self.alone += 1
                self.cond.wait_for(lambda: self.running == 0 and not self.solo)
                self.solo = True
            else:
                self.cond.wait_for(lambda: self.alone == 0)
            self.starts += 1
            self.running += 1
            return self.starts, self.running - 1

    def leave(self, alone: bool, entered: tuple[int, int]) -> bool:
        """The job ended; returns whether another job ran beside it."""
        with self.cond:
            self.running -= 1
            if alone:
                self.alone -= 1
                self.solo = False
            self.cond.notify_all()
            return entered[1] > 0 or self.starts > entered[0]


class LocalExecutor:
    """Jobs on a :mod:`compstack.run.executors` executor (default ``process``: each job
    in its own worker process), at most ``jobs`` at a time; ``exclusive`` runs (latency)
    go one at a time.

    Args:
        jobs: parallel jobs in phase 1 (default: the CPU count, at most 4).
        executor: an executor name or instance (:func:`compstack.run.executors.open_executor`).
    """

    name = "local"

    def __init__(self, jobs: int | None = None, executor: str | Executor = "") -> None:
        self.slots = max(1, jobs or min(4, os.cpu_count() or 1))
        self.executor, self._owned = open_executor(executor, multi=True)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": 1, "slots": self.slots}

    def run(self, jobs: list[tuple[Any, Job]], limits: Limits, exclusive: bool,
            on_start: Callable[..., None], on_done: Callable[[Any, JobOutcome], None],
            more: Callable[[], list[tuple[Any, Job]] | None] | None = None) -> None:
        """Run ``jobs``, then those ``more`` returns; callbacks are made in the calling
        thread, in finishing order, each with the time its event happened
        (``on_start(key, at)``, ``on_done(key, outcome, at)``; ``time.monotonic()``).

        ``more`` returns the next jobs, ``[]`` for none yet, or ``None`` when there are no
        more: a sweep prepares its next model while the jobs of the ones before it run. It
        is called in this thread whenever fewer jobs wait than its last answer held (at
        least the slots): one model's jobs stay queued while the next is prepared, since
        preparing (a real model's export: up to a minute) holds this thread.

        A job whose worker was killed from outside (:func:`killed_from_outside`: on a
        machine short of memory, the kernel's OOM killer takes the largest worker, which a
        job beside it may have made short) runs once more, alone: the others end first and
        no new one starts until it has. Its row says so; a second such death is its row.
        """
        todo: queue.Queue[tuple[Any, Job] | None] = queue.Queue()
        done: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        for item in jobs:
            todo.put(item)
        n = 1 if exclusive else (self.slots if more is not None else min(self.slots, len(jobs)))
        gate = _Gate()

        def worker() -> None:
            while True:
                item = todo.get()
                if item is None:  # no more jobs
                    return
                key, job = item

                def started(k: Any = key) -> None:  # when it started, not when the calling thread hears of it
                    done.put(("start", k, time.monotonic()))

                try:
                    outcome, crowded = self._run(job, limits, gate, False, started)
                    if killed_from_outside(outcome) and crowded:
                        first = outcome.error
                        outcome, _ = self._run(job, limits, gate, True)
                        outcome.extra.setdefault("notes", []).append(
                            f"run again alone: its worker was killed beside other jobs ({first})")
                    done.put(("done", key, (outcome, time.monotonic())))  # when it ended, as "start"
                except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                    done.put(("error", key, exc))
                    return

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        left, fed, ahead = len(jobs), more is None, n
        if fed:
            for _ in threads:
                todo.put(None)
        while left or not fed:
            if not fed and todo.qsize() < ahead:  # keep a batch queued: prepare the next jobs now
                new = more() if more is not None else None
                ahead = max(n, len(new or []))
                if new is None:
                    fed = True
                    for _ in threads:
                        todo.put(None)
                for item in new or []:
                    todo.put(item)
                left += len(new or [])
                try:
                    kind, key, value = done.get_nowait()
                except queue.Empty:
                    continue
            else:
                kind, key, value = done.get()
            if kind == "start":
                on_start(key, value)
            elif kind == "done":
                left -= 1
                on_done(key, *value)
            else:
                raise value

    def _run(self, job: Job, limits: Limits, gate: _Gate, alone: bool,
             started: Callable[[], None] = lambda: None) -> tuple[JobOutcome, bool]:
        """One job through ``gate`` (``started`` is called once it may start); returns its
        outcome and whether another job ran beside it."""
        entered = gate.enter(alone)
        try:
            started()
            outcome = self.executor.run(job, limits)
        finally:
            crowded = gate.leave(alone, entered)
        return outcome, crowded

    def close(self) -> None:
        """Release the executor's workers (when this sweep made it)."""
        if self._owned:
            self.executor.close()
