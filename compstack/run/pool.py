"""Long-lived workers with per-request isolation.

:class:`WorkerProcess` is one worker process that serves one target and many requests
over a line protocol (``ready``, then ``progress``/``result`` lines per request), so the
stack is imported once per worker: :mod:`compstack.run.worker` ``--serve`` speaks it, and
the pool executor (:class:`compstack.run.executors.PoolExecutor`) drives it for every
command that uses pool workers (compare, conformance, explain and fuzz among them). Each
request has a wall-clock limit and optionally a memory limit; a worker that passes one
is killed (``timeout``/``oom``, at the stage it last reported), a worker
that dies is ``crashed`` (with the signal). Either way a fresh worker takes the next
request, so one bad request costs one cell of the table. :func:`run_pool` runs the
conformance cases of one target on the pool executor.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from compstack.core.procs import kill_escaped, popen, python_module_argv, run_tempdir, tree_rss_bytes
from compstack.run import events

__all__ = ["WorkerProcess", "Reply", "run_pool", "mem_available_mb", "memory_floor_mb", "shed_idle"]


_WHAT = {"compstack.run.worker": "pool worker"}


class WorkerProcess:
    """One worker process for one target (restarted by :meth:`request` when needed).

    Args:
        spec_path: the worker's JSON spec (target ref, options, cases file, cache dir).
        log_path: where the worker's stderr goes.
        module: the worker program (``python -P -m MODULE SPEC``); it speaks the same
            line protocol (``ready``, then ``progress``/``result`` per request line).
        env: variables added to the worker's environment (e.g. ``XLA_FLAGS``).
        args: the worker's arguments (default: ``[spec_path]``).
        python: the interpreter (default: this one); a versioned target's env
            (:mod:`compstack.run.releases`).
    """

    def __init__(self, spec_path: Path, log_path: Path, module: str = "compstack.run.worker",
                 env: dict[str, str] | None = None, args: list[str] | None = None,
                 python: str | None = None) -> None:
        self.module = module
        self.python = python
        self.args = [str(spec_path)] if args is None else list(args)
        self.env = env
        self.spec_path = spec_path
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.ready: dict[str, Any] = {}
        self.restarts = 0
        self._buf = b""
        self.eof = False

    def start(self, timeout: float) -> None:
        """Start the worker and wait for its ``ready`` line (target and cases loaded).

        Raises:
            RuntimeError: the worker died or did not get ready in ``timeout`` seconds.
        """
        self.eof = False
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            argv = python_module_argv(self.module, *self.args)
            self.proc = popen([self.python or argv[0], *argv[1:]],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                              env={**os.environ, **self.env} if self.env else None)
        self._buf = b""
        msg = self._read(timeout)
        if msg is None or "ready" not in msg:
            self.kill()
            raise RuntimeError(f"{_WHAT.get(self.module, 'worker')} did not start (see {self.log_path})")
        self.ready = msg

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None

    def _read(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON line from the worker, or None on EOF/timeout."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.eof = True
                    return None
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def request(self, line: str, timeout: float, memory_mb: int = 0, start_timeout: float = 120.0,
                poll_s: float = 0.05, cancel: threading.Event | None = None) -> "Reply":
        """Send one request line and wait for its ``result`` message, under limits.

        The worker is (re)started first when it is not running. Past ``timeout`` seconds
        (wall clock, from the request) the worker's process group is killed
        (``timeout``); when its resident memory, with its children's
        (:func:`compstack.core.procs.tree_rss_bytes`), passes ``memory_mb`` MiB it is
        killed (``oom``); a worker that dies or closes its pipe is ``crashed`` (with the
        signal or exit status). A killed or dead worker is restarted by the next request.

        Args:
            line: the request (one line, no newline).
            timeout: seconds for this request.
            memory_mb: resident-memory limit in MiB (0: none).
            start_timeout: seconds a (re)started worker may take to say ``ready``.
            poll_s: how often memory (and ``cancel``) is checked, seconds.
            cancel: when set (the job's client went away), the worker is killed and the
                request ends ``crashed`` with ``error`` ``cancelled``.

        Returns:
            A :class:`Reply`: ``status`` ``ok`` with the worker's ``result`` message, or
            ``timeout``/``oom``/``crashed`` with ``error``; ``stage`` the last reported stage;
            ``stage_seconds`` wall time per stage seen from here.
        """
        if self.proc is None:
            try:
                self.start(start_timeout)
            except RuntimeError as exc:
                self.restarts += 1
                return Reply("crashed", "import", str(exc), start_failed=True)
        assert self.proc is not None and self.proc.stdin is not None
        t0 = time.perf_counter()
        stage = "import"
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + timeout
        limit = memory_mb * 2**20
        peak = 0
        mark = time.perf_counter()
        spent: dict[str, float] = {}
        killed = ""
        while True:
            left = deadline - time.monotonic()
            msg = self._read(max(0.0, min(left, poll_s) if limit or cancel is not None else left))
            now = time.perf_counter()
            if msg is not None and ("progress" in msg or "result" in msg):  # time per stage, seen from here
                spent[stage] = round(spent.get(stage, 0.0) + now - mark, 4)
                mark = now
            if limit and not self.eof:  # at every message and poll: a job that answers fast is measured too
                peak = max(peak, tree_rss_bytes(self.proc.pid))
                if peak > limit:
                    killed = "oom"
                    break
            if msg is None:
                if self.eof:
                    break
                if cancel is not None and cancel.is_set():
                    killed = "cancelled"
                    break
                if time.monotonic() >= deadline:
                    killed = "timeout"
                    break
                continue
            if "progress" in msg:
                stage = msg["progress"]
                events.emit(stage)
            elif "result" in msg:
                kill_escaped()  # what the job started outside the worker's group (setsid, double fork)
                return Reply("ok", stage, result=msg["result"], stage_seconds=spent,
                             seconds=round(time.perf_counter() - t0, 4))
        reply = self._ended(killed, stage, peak, time.perf_counter() - t0, spent)
        kill_escaped()
        return reply

    def _ended(self, killed: str, stage: str, peak: int, seconds: float, spent: dict[str, float]) -> "Reply":
        """The :class:`Reply` of a request without a result: the worker is reaped (it closed
        its pipe) or was to be killed (``killed``: ``timeout``, ``oom``, ``cancelled``), and is
        killed now; the next request restarts it."""
        assert self.proc is not None
        if self.eof and not killed:  # the worker closed its pipe: it is dying; reap it to learn how
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        rc = self.proc.poll()
        if not killed and rc is None:
            killed = "timeout"
        self.kill()
        self.restarts += 1
        seconds = round(seconds, 4)
        if killed == "cancelled":
            return Reply("crashed", stage, error="cancelled", seconds=seconds, stage_seconds=spent)
        if killed:
            return Reply(killed, stage, peak_mb=peak / 2**20, seconds=seconds, stage_seconds=spent)
        return Reply("crashed", stage, returncode=rc, seconds=seconds, stage_seconds=spent)


@dataclass
class Reply:
    """How one request to a :class:`WorkerProcess` ended.

    Attributes:
        status: ``ok`` (``result`` holds the worker's answer), ``timeout``, ``oom`` or
            ``crashed`` (the worker was killed or died; see :meth:`WorkerProcess.request`).
        stage: the last stage the worker reported (``import`` before any).
        error: why, for a worker that did not start.
        result: the worker's ``result`` message.
        returncode: the dead worker's exit status (negative: killed by that signal).
        peak_mb: highest resident memory sampled, MiB (memory-limited requests).
        seconds: wall time of the request.
        stage_seconds: wall time per reported stage.
        start_failed: the (re)started worker did not get ready.
    """

    status: str
    stage: str = "import"
    error: str = ""
    result: Any = None
    returncode: int | None = None
    peak_mb: float = 0.0
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    start_failed: bool = False

    def how(self) -> str:
        """``signal SIGSEGV`` or ``exit status N`` of a crashed worker."""
        rc = self.returncode
        return f"signal {signal.Signals(-rc).name}" if rc is not None and rc < 0 else f"exit status {rc}"


#: Seconds a worker may take to import its stack and load the cases before it counts as crashed.
START_TIMEOUT_S = 120.0


def mem_available_mb() -> float | None:
    """``MemAvailable`` of ``/proc/meminfo`` (the kernel's estimate of memory a new process
    can take without swapping, proc(5)), MiB; None where it cannot be read."""
    from compstack.core.procs import proc_kb

    kb = proc_kb("/proc/meminfo", "MemAvailable")
    return None if kb is None else kb / 1024


def memory_floor_mb() -> float:
    """Below this much available memory a daemon stops its idle pool workers
    (:func:`shed_idle`): ``COMPSTACK_DAEMON_MEMORY_FLOOR_MB`` (0: never), else 15 % of the
    machine's memory, at least 2 GiB (3.6 GB on 24 GB). MiB. Read when a server starts (the
    variable is not in the daemon's key, as ``COMPSTACK_DAEMON_IDLE_S``: setting it does
    not start a second server beside a running one; ``compstack daemon stop`` applies it).

    Raises:
        UserError: the variable is not a number of MiB >= 0.
    """
    raw = os.environ.get("COMPSTACK_DAEMON_MEMORY_FLOOR_MB", "")
    if raw:
        try:
            value = float(raw)
            if not 0 <= value < float("inf"):  # NaN, negative or infinite (every idle worker stopped)
                raise ValueError
        except ValueError:
            from compstack.core.errors import UserError

            raise UserError(f"COMPSTACK_DAEMON_MEMORY_FLOOR_MB: '{raw}' is not a finite number of MiB >= 0") from None
        return value
    from compstack.run.runner import default_memory_mb

    return max(2048.0, default_memory_mb() / 0.75 * 0.15)


def shed_idle(pool: Any, floor_mb: float, available: Callable[[], float | None] = mem_available_mb) -> int:
    """Stop idle workers of ``pool`` (a :class:`compstack.run.executors.PoolExecutor`), the
    largest first, while the machine's available memory is under ``floor_mb``.

    A warm worker idles at 1 to 3 GB once its stack has compiled a real-size model; a
    daemon keeps one per target, and every daemon (one per environment) keeps its own. A
    real-tier export beside three daemons' idle workers was killed by the OOM killer at
    7 GB on 24 GB. The next job of a stopped worker's target starts a fresh one (seconds).

    Returns:
        How many workers were stopped.
    """
    stopped = 0
    while (left := available()) is not None and left < floor_mb:
        with pool._lock:
            idle = [w for ws in pool._idle.values() for w in ws if w.proc is not None]
            if not idle:
                return stopped
            w = max(idle, key=lambda w: tree_rss_bytes(w.proc.pid))
            pool._idle[w.key].remove(w)
            pool._all.remove(w)
        w.kill()
        stopped += 1
    return stopped


def _log_tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


def _case_row(name: str, outcome: Any, seconds: float) -> dict[str, Any]:
    """A conformance row from a ``conformance`` job's outcome: the task's
    :class:`~compstack.run.tasks.conformance.CaseResult`, or the executor's
    ``timeout``/``oom``/``crashed`` (or a failure outside the case) at its stage."""
    if outcome.result is not None:
        return dict(outcome.result)
    status = outcome.status if outcome.status in ("timeout", "oom", "crashed") else "failed"
    return {"case": name, "stage": outcome.stage or "import", "status": status, "error": outcome.error[:400],
            "seconds": round(seconds, 4)}


def run_pool(spec: dict[str, Any], names: Iterable[str], workers: int, timeout: float,
             on_result: Callable[[dict[str, Any]], None], start_timeout: float = START_TIMEOUT_S) -> dict[str, Any]:
    """Run the conformance cases ``names`` of one target on ``workers`` pool workers
    (:class:`compstack.run.executors.PoolExecutor`, task ``conformance``).

    Args:
        spec: ``target_ref``, ``options``, ``cases`` (the cases file), ``cache_dir``, and
            optionally ``target`` (the target's name, for the rows).
        names: case names.
        workers: worker processes (>= 1).
        timeout: per-case wall-clock limit, seconds.
        on_result: called with each result row as soon as it is known (thread-safe
            from the caller's side: calls are serialised by a lock).
        start_timeout: seconds the first worker may take to get ready. A worker that
            dies or hangs while starting makes every case of this target ``crashed``
            (stage ``import``, with the last line of its log) and returns
            ``start_error``; the caller goes on with the next target.

    Returns:
        The first worker's ``ready`` message (versions, availability), plus
        ``restarts``: how many workers were restarted after a timeout or crash.
    """
    from compstack.run.executors import Limits, PoolExecutor
    from compstack.run.jobs import Job
    from compstack.run.tasks.conformance import Params

    work = run_tempdir("compstack-conf-")
    todo: queue.Queue[str] = queue.Queue()
    for n in names:
        todo.put(n)
    lock = threading.Lock()
    errors: list[BaseException] = []
    executor = PoolExecutor(start_timeout_s=start_timeout)
    limits = Limits(timeout_s=timeout)

    def job(name: str, i: int) -> Job:
        return Job(model_path="", fingerprint="", target=spec.get("target", spec["target_ref"]),
                   target_ref=spec["target_ref"], inputs_path="", workdir=str(work / f"{i}"),
                   options=dict(spec.get("options") or {}), kind="conformance",
                   params=Params(str(spec["cases"]), name, spec.get("cache_dir")).to_json())

    def serve(i: int) -> None:
        try:
            while True:
                try:
                    name = todo.get_nowait()
                except queue.Empty:
                    return
                t0 = time.perf_counter()
                j = job(name, i)
                row = _case_row(name, executor.run(j, limits), time.perf_counter() - t0)
                shutil.rmtree(j.workdir, ignore_errors=True)
                with lock:
                    on_result(row)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    try:
        info = executor.ready(job("", 0))  # fail fast, and learn versions/availability, before fanning out
        if info.get("start_error"):  # crashed or hung while starting: this target's cases only
            for n in list(todo.queue):
                on_result({"case": n, "stage": "import", "status": "crashed", "error": info["start_error"],
                           "seconds": 0.0})
            return {"available": True, "versions": {}, "restarts": 0, "start_error": info["start_error"]}
        if not info.get("available", True):
            return info
        threads = [threading.Thread(target=serve, args=(i,), daemon=True) for i in range(max(1, workers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        executor.close()
        shutil.rmtree(work, ignore_errors=True)
    if errors:
        raise errors[0]
    info["restarts"] = executor.restarts
    return info
