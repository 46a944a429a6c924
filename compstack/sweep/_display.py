"""The sweep's progress display on stderr (rich): jobs done, running, failed, and the ETA."""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["SweepProgress"]

_BAD = ("mismatch", "failed", "crashed", "timeout", "oom")


class SweepProgress:
    """A progress bar on a terminal; otherwise (a pipe, a log, ``--json``) one line per
    job started and a ``N/M done`` line every :attr:`HEARTBEAT_S` seconds, so a sweep is
    never silent for 30 s; and one line per finished row (unless quiet)."""

    #: Seconds between the ``N/M done`` lines when there is no bar.
    HEARTBEAT_S = 25.0

    def __init__(self, enabled: bool = True) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(stderr=True)
        self.quiet = not enabled
        self.live = enabled and self.console.is_terminal
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("running {task.fields[running]}, failed {task.fields[failed]}"),
                            TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
                            console=self.console, transient=True) if self.live else None
        self.task: Any = None
        self.total = self.done_n = self.running = self.failed = 0
        self.t0 = self.jobs_t0 = time.monotonic()  # the lines' clock runs from the start; the ETA from the jobs'
        self.lines = enabled and not self.live
        self.phase = "preparing"  # the last status(): what the sweep is doing between job events
        self._stop = threading.Event()

    def __enter__(self) -> SweepProgress:
        if self.bar is not None:
            self.bar.__enter__()
            self.task = self.bar.add_task("preparing", total=None, running=0, failed=0, eta="-")
        if self.lines:
            threading.Thread(target=self._heartbeat, name="compstack-sweep-progress", daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def _line(self, text: str) -> None:
        if self.lines:
            self.console.print(f"[{time.monotonic() - self.t0:7.1f} s] {text}", highlight=False, markup=False)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.HEARTBEAT_S):
            jobs = f"{self.done_n}/{self.total} done, {self.running} running, {self.failed} failed"
            self._line(jobs if self.total else f"{self.phase} (no job started yet)")

    def _update(self) -> None:
        if self.bar is None:
            return
        eta = "-"
        if self.done_n:
            left = (time.monotonic() - self.jobs_t0) / self.done_n * (self.total - self.done_n)
            eta = f"{left:.0f} s"
        self.bar.update(self.task, total=self.total, completed=self.done_n, running=self.running,
                        failed=self.failed, eta=eta)

    def status(self, text: str) -> None:
        """What the sweep does now (``importing zoo:bert-base (3 of 62)``): the bar's label, or a line."""
        self.phase = text
        if self.bar is not None:
            self.bar.update(self.task, description=text)
        elif text.startswith("importing") or not self.total:  # each model's import is an event worth a line
            self._line(text)

    def begin(self, jobs: int, resumed: int) -> None:
        self.total, self.jobs_t0 = jobs, time.monotonic()
        self.status(f"jobs ({resumed} resumed)")
        self._update()

    def more(self, jobs: int, what: str) -> None:
        self.total += jobs
        self.status(what)
        self._update()

    def started(self, key: Any, model: str = "", at: float | None = None) -> None:
        """A job started: ``key`` is (model index, target; ``""`` for the model's reference)
        and ``model`` the model as given (``zoo:bert-base``). ``at`` (``time.monotonic()``):
        when it started, if this is heard later (the sweep's thread was importing the next
        model); a line heard over a second late says when the job started."""
        self.running += 1
        self._update()
        late = f" (started at {at - self.t0:.1f} s)" if at is not None and time.monotonic() - at > 1.0 else ""
        if isinstance(key, tuple) and len(key) == 2:
            self._line(f"start {key[1] or 'reference'} on {model or f'model {key[0] + 1}'}{late}")
        else:
            self._line(f"start {key}{late}")

    def finished(self, key: Any, status: str) -> None:
        self.running = max(0, self.running - 1)
        self.done_n += 1
        self.failed += status in _BAD
        self._update()

    def note(self, text: str) -> None:
        """One event worth a line of its own (``--cache-max-size`` pruned the store)."""
        if self.lines:
            self._line(text)
        elif not self.quiet:
            self.console.print(f"  {text}", highlight=False)

    def done(self, model: str, result: Any) -> None:
        line = f"  {model:<24} {result.target:<16} {result.status}" + (f" ({result.stage})" if result.stage else "")
        if self.lines:
            self._line(line.strip())
        elif not self.quiet:
            self.console.print(line, highlight=False)
