"""A pool of long-lived conformance workers with per-case isolation.

Each worker (:mod:`compstack.conformance.worker`) serves one target and many cases, so
the stack is imported once per worker. The pool hands one case at a time to each
worker and waits for its answer with a per-case wall-clock limit. A worker that
passes the limit is killed (its case is ``timeout``, at the stage it last reported); a
worker that dies is ``crashed`` (with the signal). Either way a fresh worker takes the
next case, so one bad case costs one cell of the table.
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
from pathlib import Path
from typing import Any, Callable, Iterable

from compstack.core.procs import child_kwargs, python_module_argv, run_tempdir

__all__ = ["WorkerProcess", "run_pool"]


class WorkerProcess:
    """One worker process for one target (restarted by :meth:`run_case` when needed).

    Args:
        spec_path: the worker's JSON spec (target ref, options, cases file, cache dir).
        log_path: where the worker's stderr goes.
        module: the worker program (``python -P -m MODULE SPEC``); it speaks the same
            line protocol (``ready``, then ``progress``/``result`` per request line).
        env: variables added to the worker's environment (e.g. ``XLA_FLAGS``).
    """

    def __init__(self, spec_path: Path, log_path: Path, module: str = "compstack.conformance.worker",
                 env: dict[str, str] | None = None) -> None:
        self.module = module
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
            self.proc = subprocess.Popen(python_module_argv(self.module, str(self.spec_path)),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         env={**os.environ, **self.env} if self.env else None, **child_kwargs())
        self._buf = b""
        msg = self._read(timeout)
        if msg is None or "ready" not in msg:
            self.kill()
            raise RuntimeError(f"conformance worker did not start (see {self.log_path})")
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

    def run_case(self, name: str, timeout: float, start_timeout: float = 120.0,
                 stage_times: bool = False) -> dict[str, Any]:
        """Run one case; returns its result row (``timeout``/``crashed`` rows included,
        and ``crashed`` when a restarted worker does not start); with ``stage_times``
        the row of a finished case has ``stage_seconds``: wall time per stage."""
        if self.proc is None:
            try:
                self.start(start_timeout)
            except RuntimeError as exc:
                self.restarts += 1
                return {"case": name, "stage": "import", "status": "crashed", "error": str(exc), "seconds": 0.0}
        assert self.proc is not None and self.proc.stdin is not None
        t0 = time.perf_counter()
        stage = "import"
        try:
            self.proc.stdin.write((name + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + timeout
        mark = time.perf_counter()
        spent: dict[str, float] = {}
        while True:
            msg = self._read(max(0.0, deadline - time.monotonic()))
            now = time.perf_counter()
            if msg is not None and ("progress" in msg or "result" in msg):  # time per stage, seen from here
                spent[stage] = round(spent.get(stage, 0.0) + now - mark, 4)
                mark = now
            if msg is None:
                break
            if "progress" in msg:
                stage = msg["progress"]
            elif "result" in msg:
                return {**msg["result"], "stage_seconds": spent} if stage_times else msg["result"]
        if self.eof:  # the worker closed its pipe: it is dying; reap it to learn how
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        timed_out = not self.eof and self.proc.poll() is None
        rc = self.proc.poll()
        self.kill()
        self.restarts += 1
        if timed_out:
            status, error = "timeout", f"killed after {timeout:g} s in stage {stage}"
        else:
            how = f"signal {signal.Signals(-rc).name}" if rc is not None and rc < 0 else f"exit status {rc}"
            status, error = "crashed", f"worker died ({how}) in stage {stage}"
        return {"case": name, "stage": stage, "status": status, "error": error,
                "seconds": round(time.perf_counter() - t0, 4)}


#: Seconds a worker may take to import its stack and load the cases before it counts as crashed.
START_TIMEOUT_S = 120.0


def _log_tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


def run_pool(spec: dict[str, Any], names: Iterable[str], workers: int, timeout: float,
             on_result: Callable[[dict[str, Any]], None], start_timeout: float = START_TIMEOUT_S) -> dict[str, Any]:
    """Run ``names`` on ``workers`` worker processes of one target.

    Args:
        spec: the worker spec (``target_ref``, ``options``, ``cases``, ``cache_dir``).
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
    work = run_tempdir("compstack-conf-")
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec))
    todo: queue.Queue[str] = queue.Queue()
    for n in names:
        todo.put(n)
    lock = threading.Lock()
    pool = [WorkerProcess(spec_path, work / f"worker{i}.log") for i in range(max(1, workers))]
    errors: list[BaseException] = []

    def serve(w: WorkerProcess) -> None:
        try:
            while True:
                try:
                    name = todo.get_nowait()
                except queue.Empty:
                    return
                row = w.run_case(name, timeout)
                with lock:
                    on_result(row)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
        finally:
            w.kill()

    try:
        try:
            pool[0].start(start_timeout)  # fail fast, and learn versions/availability, before fanning out
        except RuntimeError as exc:  # crashed or hung while starting: this target's cases only
            why = f"{exc}: {_log_tail(pool[0].log_path)}".rstrip(": ")
            for n in list(todo.queue):
                on_result({"case": n, "stage": "import", "status": "crashed", "error": why, "seconds": 0.0})
            return {"available": True, "versions": {}, "restarts": 0, "start_error": why}
        info = dict(pool[0].ready)
        if not info.get("available", True):
            pool[0].kill()
            return info
        threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in pool]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for w in pool:
            w.kill()
        shutil.rmtree(work, ignore_errors=True)
    if errors:
        raise errors[0]
    info["restarts"] = sum(w.restarts for w in pool)
    return info
