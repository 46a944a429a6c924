"""How compstack starts its own child processes: workers and compiler tools.

Two rules hold for every child:

* **The current folder is never on a worker's import path.** ``python -m MOD`` puts
  the current folder first on ``sys.path``, so a local ``onnxruntime.py`` would run
  inside the worker. Workers start with Python's safe-path flag ``-P`` (3.11+,
  `docs <https://docs.python.org/3/using/cmdline.html#cmdoption-P>`_); on 3.10, a
  ``-c`` stub drops ``sys.path[0]`` before running the module.
* **A child dies with its parent.** Each child asks the kernel for ``SIGKILL`` when its
  parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``), so a ``compstack`` killed by SIGTERM
  or SIGKILL never leaves a hung worker (or the compiler it started) behind. Each child
  also runs in its own session, so the parent can kill its whole process group.
* **Nothing a child starts outlives the job** (issue #27, class 5). A process that
  starts a child becomes a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``,
  `man 2 PR_SET_CHILD_SUBREAPER <https://man7.org/linux/man-pages/man2/PR_SET_CHILD_SUBREAPER.2const.html>`_),
  so a grandchild that escapes its worker's process group (``setsid`` and a double
  fork) is re-parented to it instead of to init; :func:`kill_escaped` kills and reaps
  those at the end of each job. An escaped process is a direct child that compstack did
  not start (:func:`popen` records every one it starts) and that is in another session
  than this process (every worker runs in its own session, so all it starts is too,
  while the processes a library starts in this process, such as Ray's, share ours).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["become_subreaper", "child_kwargs", "kill_escaped", "kill_group", "one_blas_thread", "popen",
           "python_code_argv", "python_module_argv", "without_current_folder",
           "run_tempdir", "tree_rss_bytes"]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
#: pid -> the Popen of every live child :func:`popen` started (not escaped, whatever its session).
_STARTED: dict[int, subprocess.Popen[Any]] = {}
#: Held while a child is started and recorded, and while escaped children are looked for.
_LOCK = threading.Lock()
_SUBREAPER: list[int] = []  # the pid that made the prctl call (a forked child must call it again)


def python_module_argv(module: str, *args: str) -> list[str]:
    """``[python, -P, -m, module, *args]``: run a compstack module as a program without
    the current folder on its import path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    stub = f"import sys, runpy; del sys.path[0]; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", stub, *args]


def python_code_argv(code: str, *args: str) -> list[str]:
    """``[python, -P, -c, code, *args]``: run a probe's code without the current folder on
    its import path (``-c`` puts it first; on 3.10 the code drops it itself)."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-c", code, *args]
    return [sys.executable, "-c", "import sys; del sys.path[0]\n" + code, *args]


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()  # resolved before any fork: the child only makes the call


def _die_with_parent(parent: int) -> None:
    """In the forked child, before ``exec``: SIGKILL me when my parent dies."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)


def child_kwargs() -> dict[str, Any]:
    """Keyword arguments for :class:`subprocess.Popen`/:func:`subprocess.run` that start
    the child in its own session and tie its life to this process (which becomes a child
    subreaper, :func:`become_subreaper`)."""
    become_subreaper()
    parent = os.getpid()
    return {"start_new_session": True, "preexec_fn": lambda: _die_with_parent(parent)}


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux 3.4+): orphans among its descendants
    are re-parented to it. Idempotent; returns whether it is one (False off Linux)."""
    if _SUBREAPER and _SUBREAPER[0] == os.getpid():
        return True
    if _PRCTL is None or _PRCTL(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return False
    _SUBREAPER[:] = [os.getpid()]
    return True


_ONE_BLAS_THREAD: list[int] = []  # the pid that set it (a forked child sets it again)


def one_blas_thread() -> None:
    """Run this process's BLAS (NumPy's OpenBLAS) in the calling thread, without its thread
    pool; once per process, before the first fork of :func:`popen`.

    :func:`popen` forks (its ``preexec_fn`` rules out ``vfork``), from the spawner thread,
    while another thread of this process may be inside a BLAS call: a sweep or a
    conformance run compares outputs (``numpy.linalg.norm``) while its workers start.
    OpenBLAS's ``pthread_atfork`` prepare handler shuts its thread pool down at every fork,
    and a call already queued on that pool then waits for ever: the driver spun at 100 %
    CPU in ``exec_blas_async`` (the repro is
    ``tests/test_trust_procs.py::test_blas_in_one_thread_while_another_forks_never_hangs``:
    with the pool, each of three runs hung within 20 s; with one thread, none). With one BLAS thread there is
    no pool to shut down. What this process computes with BLAS is comparisons and noise
    floors; the stacks run in the workers, which keep their own threads.
    Uses ``threadpoolctl`` (its ``threadpool_limits(1, "blas")``), after importing NumPy so
    that its BLAS is loaded when the limit is set.
    """
    if _ONE_BLAS_THREAD and _ONE_BLAS_THREAD[0] == os.getpid():
        return
    _ONE_BLAS_THREAD[:] = [os.getpid()]
    import numpy  # noqa: F401 - loads the BLAS the limit applies to
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def popen(args: Any, detached: bool = False, **kwargs: Any) -> subprocess.Popen[Any]:
    """Start a helper process (:class:`subprocess.Popen` ``args`` and ``kwargs``) in its own
    session, with the death signal (:func:`child_kwargs`; ``detached``: without it, for a
    server meant to outlive this command), and record it as compstack's own, so that
    :func:`kill_escaped` never takes it for an escaped process.

    Raises:
        OSError: the program cannot be started (as :class:`subprocess.Popen`).
    """
    one_blas_thread()
    extra = {"start_new_session": True} if detached else child_kwargs()
    kwargs["env"] = without_current_folder(os.environ if kwargs.get("env") is None else kwargs["env"])

    def start() -> subprocess.Popen[Any]:
        with _LOCK:
            proc = subprocess.Popen(args, **kwargs, **extra)
            _STARTED[proc.pid] = proc
        return proc

    return start() if detached else _SPAWNER.call(start)


def without_current_folder(env: Any) -> dict[str, str]:
    """A copy of ``env`` whose ``PYTHONPATH`` has no empty and no ``.`` entry: Python puts
    the current folder on ``sys.path`` for each (``PYTHONPATH=/x:`` does, ``-P`` or not),
    and a child started there would import from it (a worker, or TVM's ``popen_worker``
    that the worker starts with this environment)."""
    out = dict(env)
    if "PYTHONPATH" in out:
        kept = [p for p in out["PYTHONPATH"].split(os.pathsep) if p not in ("", ".")]
        if kept:
            out["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del out["PYTHONPATH"]
    return out


class _Spawner:
    """One thread that lives as long as the process and forks every child that has the
    death signal. ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child
    exits, not the process (`man 2 PR_SET_PDEATHSIG
    <https://man7.org/linux/man-pages/man2/PR_SET_PDEATHSIG.2const.html>`_: "the parent
    is considered to be the thread that created this process"): a pooled worker started
    by a conformance or daemon thread that then finished would be SIGKILLed in the
    middle of another thread's job. The thread is a daemon thread, so it ends with the
    process, and the children with it."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Any, list[Any], threading.Event]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def call(self, fn: Any) -> Any:
        """``fn()`` run on the spawner thread; its result, or its exception raised here."""
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._jobs = queue.SimpleQueue()  # a forked child starts its own
                self._thread = threading.Thread(target=self._serve, args=(self._jobs,), name="compstack-spawner",
                                                daemon=True)
                self._pid = os.getpid()
                self._thread.start()
            jobs = self._jobs
        if threading.current_thread() is self._thread:
            return fn()
        box: list[Any] = []
        done = threading.Event()
        jobs.put((fn, box, done))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Any, list[Any], threading.Event]]) -> None:
        while True:
            fn, box, done = jobs.get()
            try:
                box.append(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
                box.append(exc)
            done.set()


_SPAWNER = _Spawner()


def _stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, session)`` of ``pid`` from ``/proc/PID/stat``, or None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[3])


def _escaped() -> list[int]:
    me, session = os.getpid(), os.getsid(0)
    for pid, proc in list(_STARTED.items()):
        if proc.returncode is not None or proc.poll() is not None:
            del _STARTED[pid]
    found = []
    for child in _children(me):
        st = _stat(child)
        if st is not None and st[1] == me and st[2] != session and child not in _STARTED:
            found.append(child)
    return found


def kill_escaped() -> list[int]:
    """SIGKILL and reap every escaped process re-parented to this subreaper (see the module
    docstring), and whatever it started meanwhile; call at the end of each job.

    Returns:
        The pids killed (empty when there were none, or off Linux).
    """
    killed: list[int] = []
    with _LOCK:
        for _ in range(50):  # an escaped process may fork while it is being killed
            found = [p for p in _escaped() if p not in killed]
            if not found:
                break
            for pid in found:
                for p in [pid, *_descendants(pid)]:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                killed.append(pid)
            for pid in found:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
    return killed


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = _children(pid)
    while todo:
        p = todo.pop()
        if p not in out:
            out.append(p)
            todo.extend(_children(p))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_tempdir(prefix: str) -> Path:
    """A new temporary folder ``<tmp>/<prefix><pid>-XXXX`` for one run's work files.

    Folders of the same prefix left by runs whose process no longer exists (a
    ``compstack`` killed by SIGKILL cannot clean up after itself) are removed first.
    """
    import shutil
    import tempfile

    base = Path(tempfile.gettempdir())
    try:
        for old in base.glob(f"{prefix}*-*"):
            pid = old.name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
            out.extend(int(c) for c in text.split())
    except OSError:
        pass
    return out


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, bytes (``/proc/PID/statm``;
    0 for a process that is gone)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/statm").read_text().split()
            total += int(fields[1]) * _PAGE
        except OSError:
            continue
        todo.extend(_children(p))
    return total


def kill_group(proc: Any) -> None:
    """SIGKILL the process group ``proc`` leads (every worker and tool is started with
    ``start_new_session=True``); falls back to killing ``proc`` alone when the group
    cannot be signalled."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        proc.kill()


def proc_kb(path: str, name: str) -> int | None:
    """The ``NAME:  N kB`` field of a ``/proc`` status file (``/proc/meminfo``,
    ``/proc/self/status``: proc(5)), kB; None where the file or field cannot be read."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(f"{name}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None
