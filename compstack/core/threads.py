"""Thread counts: what a comparison asks every stack for, and what the worker really ran.

A fair latency comparison gives every stack the same number of threads. ``--threads N``
(default: this machine's *physical* cores, see :func:`default_threads`) is applied in
two places:

* before the worker process starts, the environment every OpenMP/BLAS/TVM runtime
  reads at start-up (:func:`thread_env`: ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
  ``OPENBLAS_NUM_THREADS``, ``TVM_NUM_THREADS``);
* in the worker, each stack's own knob (``Target.apply_threads``: ORT's intra-op
  threads, IREE's task topology, torch's ``set_num_threads``, ...).

Then the worker *observes* what ran: :class:`ThreadSampler` reads every thread's CPU
time (``/proc/self/task/*/stat``, utime + stime) before and after the timed latency
loop. A thread is *busy* when it used at least :data:`BUSY_SHARE` of the busiest
thread's CPU time (and at least 2 % of the loop's wall time); ``cpu_per_wall`` is the
process's CPU seconds over the loop's wall seconds, the parallelism the stack really got
(on a loaded machine less than the threads it ran). Both go into every result row's
``flags["threads"]``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["default_threads", "requested_threads", "physical_cores", "thread_env", "ThreadSampler", "ThreadUse", "BUSY_SHARE",
           "first_cpus", "THREAD_ENV_VARS"]

#: A thread counts as busy when its CPU time is at least this share of the busiest one's.
BUSY_SHARE = 0.25
#: ... and at least this share of the loop's wall time.
BUSY_MIN_WALL = 0.02

#: Environment variables set before a worker starts (read once by the runtimes that use them).
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS")


def _usable_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def physical_cores() -> int:
    """Physical cores among the CPUs this process may use (SMT siblings counted once).

    Read from ``/sys/devices/system/cpu/cpu*/topology`` (package and core id); when that
    is unreadable, the number of usable logical CPUs.
    """
    cores = set()
    for cpu in _usable_cpus():
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topo.joinpath("physical_package_id").read_text().strip(),
                       topo.joinpath("core_id").read_text().strip()))
        except OSError:
            return len(_usable_cpus())
    return len(cores) or len(_usable_cpus())


def default_threads() -> int:
    """The default of ``--threads``: the physical cores (ONNX Runtime's own default, and
    what a second hardware thread of a core adds little to for dense kernels); the other
    stacks would otherwise each pick their own count (logical CPUs for TVM, IREE, XLA,
    torch), which is not the same comparison."""
    return physical_cores()


def requested_threads(threads: int | None) -> int:
    """The thread count every timing command asks each stack for: ``threads`` as given
    (``--threads N``; 0 leaves each stack at its own default), None -> :func:`default_threads`.
    The one rule compare, run, sweep and profile share (issue #28 part 2)."""
    return default_threads() if threads is None else threads


def first_cpus(n: int) -> set[int]:
    """The first ``n`` CPUs this process may use (for stacks whose only knob is affinity)."""
    cpus = _usable_cpus()
    return set(cpus[:max(1, n)])


def thread_env(n: int) -> dict[str, str]:
    """Environment for a worker that should use ``n`` threads (empty for ``n == 0``:
    each stack's own default)."""
    if n <= 0:
        return {}
    return {name: str(n) for name in THREAD_ENV_VARS}


@dataclass
class ThreadUse:
    """Threads a process used during one timed loop.

    Attributes:
        busy: threads whose CPU time passed the busy rule (module docstring).
        alive: threads of the process at the end of the loop.
        cpu_per_wall: CPU seconds of all threads / wall seconds of the loop.
        wall_s: the loop's wall time, seconds.
        top: the busiest threads' CPU share of the wall time (up to 8), with their names.
        caller_cpu_per_wall: CPU seconds of the thread that ran the loop / wall seconds.
        busy_besides_caller: busy threads other than the one that ran the loop (for
            stacks whose calling thread only submits and waits, e.g. IREE's local-task).
    """

    busy: int
    alive: int
    cpu_per_wall: float
    wall_s: float
    top: list[tuple[str, float]] = field(default_factory=list)
    caller_cpu_per_wall: float = 0.0
    busy_besides_caller: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _task_cpu() -> dict[str, tuple[float, str]]:
    """tid -> (CPU seconds, thread name) of every thread of this process."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[str, tuple[float, str]] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = ((int(fields[11]) + int(fields[12])) / tick, name)
    return out


class ThreadSampler:
    """Per-thread CPU time around a loop: ``with ThreadSampler() as s: loop()``, then ``s.use``.

    ``use`` is None where ``/proc/self/task`` cannot be read (not Linux).
    """

    def __init__(self) -> None:
        self.use: ThreadUse | None = None
        self._before: dict[str, tuple[float, str]] = {}
        self._t0 = 0.0

    def __enter__(self) -> "ThreadSampler":
        import threading

        self._caller = str(threading.get_native_id())
        self._before = _task_cpu()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        wall = time.perf_counter() - self._t0
        after = _task_cpu()
        if not after or wall <= 0:
            return
        rows = sorted(((cpu - self._before.get(tid, (0.0, ""))[0], name, tid) for tid, (cpu, name) in after.items()),
                      reverse=True)
        top = rows[0][0] if rows else 0.0
        floor = max(BUSY_SHARE * top, BUSY_MIN_WALL * wall)
        busy = [tid for d, _, tid in rows if d > 0 and d >= floor]
        caller = next((d for d, _, tid in rows if tid == self._caller), 0.0)
        self.use = ThreadUse(busy=len(busy), alive=len(after), cpu_per_wall=sum(d for d, _, _ in rows) / wall,
                             wall_s=wall, top=[(name, round(d / wall, 3)) for d, name, _ in rows[:8]],
                             caller_cpu_per_wall=caller / wall,
                             busy_besides_caller=sum(1 for tid in busy if tid != self._caller))
