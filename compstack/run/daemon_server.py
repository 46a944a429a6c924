"""The daemon's server: ``python -P -m compstack.run.daemon_server --serve SOCKET --idle SECONDS``.

It listens on a Unix socket (:mod:`compstack.run.daemon` finds or starts it), runs each
``{"op": "run", "job", "limits"}`` request on one :class:`~compstack.run.executors.PoolExecutor`
that keeps one idle worker per target, answers ``{"outcome": ...}``, and kills a job's
worker when its client goes away. ``{"op": "status"}`` and ``{"op": "stop"}`` answer the
server's status. Only peers of this uid are served (``SO_PEERCRED``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from compstack.run import events
from compstack.run.daemon import HEARTBEAT_S, _recv_line, _send, install
from compstack.run.executors import Limits, PoolExecutor
from compstack.run.jobs import Job
from compstack.run.pool import memory_floor_mb, shed_idle

__all__ = ["serve", "main"]


class _Server:
    def __init__(self, path: Path, idle_s: float) -> None:
        self.path = path
        self.idle_s = idle_s
        self.pool = PoolExecutor(max_idle=1)
        # long-lived threads start the workers: a worker's parent-death signal follows the
        # thread that forked it (prctl(2), PR_SET_PDEATHSIG), so no short-lived thread may
        self.runner = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="job")
        self.lock = threading.Lock()
        self.active = 0
        self.jobs = 0
        self.started = time.time()
        self.last = time.monotonic()
        self.stopping = threading.Event()

    def status(self) -> dict[str, Any]:
        from compstack.core.procs import tree_rss_bytes

        workers = [{**w, "rss_mb": round(tree_rss_bytes(w["pid"]) / 2**20, 1)} for w in self.pool.workers()]
        with self.lock:
            idle_for = 0.0 if self.active else time.monotonic() - self.last
            return {"pid": os.getpid(), "key": self.path.stem, "socket": str(self.path),
                    "uptime_s": round(time.time() - self.started, 1), "idle_s": round(idle_for, 1),
                    "idle_exit_s": self.idle_s, "jobs": self.jobs, "active": self.active, "workers": workers,
                    **install()}

    def _run(self, conn: socket.socket, msg: dict[str, Any]) -> None:
        job = Job(**msg["job"])
        limits = Limits(**msg.get("limits", {}))
        cancel = threading.Event()
        _send(conn, {"accepted": True})
        stages: queue.SimpleQueue[str] = queue.SimpleQueue()

        def run() -> Any:  # the job's stages (the pool worker's progress) go to this client alone
            with events.listening(stages.put, thread=True):
                return self.pool.run(job, limits, cancel)

        future = self.runner.submit(run)

        def watch() -> None:  # the client's EOF (it was interrupted or killed) cancels the job
            with contextlib.suppress(OSError):
                while conn.recv(1):
                    pass
            cancel.set()

        threading.Thread(target=watch, daemon=True).start()
        beat = time.monotonic()

        def forward() -> None:  # every stage the job reached, in order
            nonlocal beat
            with contextlib.suppress(OSError):
                while not stages.empty():
                    _send(conn, {"alive": True, "stage": stages.get()})
                    beat = time.monotonic()

        while True:  # the job's stages, and a heartbeat: the client tells a slow job from a hung server
            try:
                outcome = future.result(timeout=0.5)
                break
            except concurrent.futures.TimeoutError:
                pass
            forward()
            if time.monotonic() - beat >= HEARTBEAT_S:
                with contextlib.suppress(OSError):
                    _send(conn, {"alive": True})
                beat = time.monotonic()
        forward()  # the stages of a job that ended within the last half second
        with contextlib.suppress(OSError):
            _send(conn, {"outcome": asdict(outcome)})

    def handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                _, uid, _ = struct.unpack("3i", creds)
                if uid != os.getuid():
                    return
                msg = _recv_line(conn, bytearray())
                if msg is None:
                    return
                op = msg.get("op")
                if op == "status":
                    _send(conn, self.status())
                elif op == "stop":
                    _send(conn, self.status())
                    self.stopping.set()
                elif op == "run":
                    with self.lock:
                        self.active += 1
                    try:
                        self._run(conn, msg)
                    finally:
                        with self.lock:
                            self.active -= 1
                            self.jobs += 1
                            self.last = time.monotonic()
                else:
                    _send(conn, {"error": f"unknown op {op!r}"})
            except (OSError, ValueError, TypeError, KeyError) as exc:
                with contextlib.suppress(OSError):
                    _send(conn, {"error": f"bad request: {type(exc).__name__}: {exc}"})

    def idle(self) -> bool:
        with self.lock:
            return not self.active and time.monotonic() - self.last > self.idle_s

    def close(self) -> None:
        self.runner.shutdown(wait=False, cancel_futures=True)
        self.pool.close()


def serve(path: Path, idle_s: float) -> None:
    """Serve jobs on the Unix socket ``path`` until idle for ``idle_s`` seconds, stopped
    (``{"op": "stop"}``) or sent SIGTERM; the workers are killed on the way out."""
    os.chdir("/")
    os.umask(0o077)
    server = _Server(path, idle_s)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    listener.settimeout(0.5)
    signal.signal(signal.SIGTERM, lambda *_: server.stopping.set())
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} daemon {os.getpid()} listening on {path} (idle exit "
          f"{idle_s:g} s)", file=sys.stderr, flush=True)
    floor, checked = memory_floor_mb(), 0.0
    try:
        while not server.stopping.is_set() and not server.idle():
            if time.monotonic() - checked > 2.0:  # idle workers go first when the machine runs short
                checked = time.monotonic()
                if stopped := shed_idle(server.pool, floor):
                    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} stopped {stopped} idle worker(s): available "
                          f"memory under {floor:.0f} MiB", file=sys.stderr, flush=True)
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            threading.Thread(target=server.handle, args=(conn,), daemon=True).start()
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # first: no new client finds this server; a new one may take the name
        listener.settimeout(0.0)
        late = []
        while True:  # clients that connected before the unlink still get their answer
            try:
                conn, _ = listener.accept()
            except OSError:
                break
            t = threading.Thread(target=server.handle, args=(conn,), daemon=True)
            t.start()
            late.append(t)
        for t in late:
            t.join()
        listener.close()
        server.close()
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} daemon {os.getpid()} exits after {server.jobs} jobs",
              file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -P -m compstack.run.daemon --serve SOCKET --idle SECONDS``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4 or args[0] != "--serve" or args[2] != "--idle":
        print("usage: python -P -m compstack.run.daemon --serve SOCKET --idle SECONDS", file=sys.stderr)
        return 2
    serve(Path(args[1]), float(args[3]))
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
