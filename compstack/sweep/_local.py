"""The local sweep executor: jobs on one of :mod:`compstack.run.executors` on this machine, N at a time."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from compstack.run.executors import Executor, Limits, open_executor
from compstack.run.jobs import Job, JobOutcome

__all__ = ["LocalExecutor"]


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
        """
        todo: queue.Queue[tuple[Any, Job] | None] = queue.Queue()
        done: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        for item in jobs:
            todo.put(item)
        n = 1 if exclusive else (self.slots if more is not None else min(self.slots, len(jobs)))

        def worker() -> None:
            while True:
                item = todo.get()
                if item is None:  # no more jobs
                    return
                key, job = item
                done.put(("start", key, time.monotonic()))  # when it started, not when this thread hears of it
                try:
                    outcome = self.executor.run(job, limits)
                    done.put(("done", key, (outcome, time.monotonic())))  # when it ended, likewise
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

    def close(self) -> None:
        """Release the executor's workers (when this sweep made it)."""
        if self._owned:
            self.executor.close()
