"""The local executor: :func:`compstack.run.runner.run_isolated` on this machine, N at a time."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from compstack.run.jobs import Job, JobOutcome
from compstack.run.runner import Limits, run_isolated

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """Each job in its own worker process (:func:`~compstack.run.runner.run_isolated`), at
    most ``jobs`` at a time; ``exclusive`` runs (latency) go one at a time.

    Args:
        jobs: parallel jobs in phase 1 (default: the CPU count, at most 4).
    """

    name = "local"

    def __init__(self, jobs: int | None = None) -> None:
        self.slots = max(1, jobs or min(4, os.cpu_count() or 1))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": 1, "slots": self.slots}

    def run(self, jobs: list[tuple[Any, Job]], limits: Limits, exclusive: bool,
            on_start: Callable[[Any], None], on_done: Callable[[Any, JobOutcome], None]) -> None:
        """Run ``jobs``; callbacks are made in the calling thread, in finishing order."""
        todo: queue.Queue[tuple[Any, Job] | None] = queue.Queue()
        done: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        for item in jobs:
            todo.put(item)
        n = 1 if exclusive else min(self.slots, len(jobs))

        def worker() -> None:
            while True:
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                key, job = item  # type: ignore[misc]
                done.put(("start", key, None))
                try:
                    done.put(("done", key, run_isolated(job, limits)))
                except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                    done.put(("error", key, exc))
                    return

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        left = len(jobs)
        while left:
            kind, key, value = done.get()
            if kind == "start":
                on_start(key)
            elif kind == "done":
                left -= 1
                on_done(key, value)
            else:
                raise value

    def close(self) -> None:
        """Nothing to release."""
