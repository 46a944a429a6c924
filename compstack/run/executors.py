"""Executors: where a job runs. One interface, three kinds, one set of status words.

Every executor takes a :class:`~compstack.run.jobs.Job` and :class:`Limits` and returns
its :class:`~compstack.run.jobs.JobOutcome`; it never raises for the stack's sake.

* :class:`InlineExecutor` (``inline``): in this process (tests, debugging,
  ``--no-isolate``). No limits: a crash is this process's.
* :class:`ProcessExecutor` (``process``): a fresh worker process per job
  (``python -P -m compstack.run.worker JOB.json``, its own session): most isolation.
* :class:`PoolExecutor` (``pool``): long-lived workers (``--serve``), one set per target
  (and thread count, custom-op origins, extra environment), reused across jobs, so a
  stack's import is paid once; a worker is restarted after a crash, hang or memory overrun.
* :class:`~compstack.run.daemon.DaemonExecutor` (``daemon``, the default of multi-target
  commands): the pool's workers kept by a background server across commands, so a warm
  re-run imports no stack (:mod:`compstack.run.daemon`).

Status words, the same for every isolating executor: past ``Limits.timeout_s`` (wall
clock) the worker's process group is killed and the job is ``timeout``; when the
resident memory of the worker and its children passes ``Limits.memory_mb`` it is killed
and the job is ``oom``; a worker that dies by a signal, exits without a result or leaves
an unreadable one is ``crashed``. Each names the last stage the worker reported.

A distributed executor is one more subclass of :class:`Executor`: jobs are JSON, so a
cluster task rebuilds them on its node and runs them on a local executor there
(:func:`compstack.sweep._ray.ray_job_task` runs :class:`ProcessExecutor`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compstack.core.procs import kill_escaped, kill_group, popen, python_module_argv, run_tempdir, tree_rss_bytes
from compstack.run import events
from compstack.run.jobs import Job, JobOutcome

__all__ = ["Executor", "InlineExecutor", "Limits", "PoolExecutor", "ProcessExecutor", "EXECUTORS", "EXECUTOR_NAMES",
           "make_executor", "open_executor", "LOST"]

#: Statuses an executor gives a job whose worker it lost (killed or died).
LOST = ("crashed", "timeout", "oom")


@dataclass(frozen=True)
class Limits:
    """Per-job limits.

    Attributes:
        timeout_s: wall-clock seconds for the whole job (import to latency).
        memory_mb: resident memory of the worker and its children, in MiB (0 = none).
    """

    timeout_s: float = 900.0
    memory_mb: int = 0


class Executor:
    """Runs jobs; see the module docstring. Use as a context manager, or call
    :meth:`close` when done (pool workers are killed then)."""

    name = ""

    def run(self, job: Job, limits: Limits = Limits()) -> JobOutcome:
        """Run ``job`` under ``limits``; never raises for the stack's sake.

        Returns:
            The worker's outcome, or one with status ``timeout``, ``oom`` or ``crashed``.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release workers (nothing for most executors)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tuning_limits(job: Job, limits: Limits) -> Limits:
    """``limits`` with the wall-clock limit grown by the job's tuning budget: a target
    option named ``tune`` is a budget (``tvm-llvm``'s MetaSchedule, ``tune=5m``), spent
    inside the compile, so the job gets that much more time (issue #26); so does a job of
    a ``--tuned`` run (``job.tuning_budget_s``: Inductor's max-autotune benchmarks inside
    its compile too). A bad value is left for the target's own option check to report.
    """
    budget = job.tuning_budget_s  # --tuned --budget: MetaSchedule, Inductor's max-autotune benchmarking
    text = (job.options or {}).get("tune")
    if text:
        from compstack.core.duration import parse_duration
        from compstack.core.errors import UserError

        try:
            budget = max(budget, parse_duration(str(text), "tune"))
        except UserError:
            pass
    if budget <= 0:
        return limits
    return dataclasses.replace(limits, timeout_s=limits.timeout_s + budget)


def _prepare(job: Job, limits: Limits | None = None) -> Path:
    """Create the job folder, write ``job.json`` (with ``limits``' wall-clock limit as
    ``time_limit_s``), drop a stale result, progress and partial result."""
    if limits is not None:
        job.time_limit_s = limits.timeout_s
    workdir = Path(job.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    job_file = workdir / "job.json"
    job.save(job_file)
    for stale in (job.result_path, job.progress_path, job.partial_path):
        stale.unlink(missing_ok=True)
    return job_file


def _last_stage(job: Job) -> str:
    try:
        lines = job.progress_path.read_text().strip().splitlines()
        return lines[-1].split()[1] if lines else "import"
    except OSError:
        return "import"


def _log_tail(path: Path, n: int = 30, start: int = 0) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(start)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _lost(job: Job, status: str, limits: Limits, log: str, peak_mb: float = 0.0,
          returncode: int | None = None) -> JobOutcome:
    """A job whose worker was killed (``timeout``; ``oom``: its phase's peak is ``peak_mb`` at least) or died."""
    job.drop_tmp()  # the scratch the worker could not remove
    stage = _last_stage(job)
    if status == "timeout":
        error = f"killed after {limits.timeout_s:g} s wall-clock limit (in stage {stage})"
    elif status == "oom":
        error = f"killed: resident memory {peak_mb:.0f} MiB passed the {limits.memory_mb} MiB limit (in stage {stage})"
    elif returncode is not None and returncode < 0:
        hint = " (possibly the kernel's OOM killer)" if -returncode == signal.SIGKILL else ""
        error = f"worker died by {signal.Signals(-returncode).name}{hint} in stage {stage}"
    else:
        error = f"worker exited with status {returncode} without a result in stage {stage}"
    out = _with_partial(job, JobOutcome(target=job.target, status=status, stage=stage, error=error, log=log))
    if status == "oom" and peak_mb:  # the sd-unet IREE row had no peak though it was killed at 18,080 MiB
        key = "peak_rss_run_mb" if stage in ("run", "latency") else "peak_rss_compile_mb"
        out.extra[key] = max(out.extra.get(key) or 0.0, round(peak_mb, 1))
    return out


def _with_partial(job: Job, lost: JobOutcome) -> JobOutcome:
    """``lost`` with the fields the worker had already measured (``job.partial_path``:
    times, versions, flags, peak memory) when it wrote them before the phase it was
    lost in; a row never loses a field it measured (issue #23, part 3)."""
    try:
        done = JobOutcome.from_json(json.loads(job.partial_path.read_text()))
    except (OSError, ValueError, TypeError):
        return lost
    done.status, done.stage, done.error, done.log = lost.status, lost.stage, lost.error, lost.log
    return done


def _read_result(job: Job, log: str) -> JobOutcome | None:
    """The worker's ``result.json`` (None when there is none); a torn or foreign one is
    ``crashed``."""
    if not job.result_path.exists():
        return None
    try:
        return JobOutcome.from_json(json.loads(job.result_path.read_text()))
    except (OSError, ValueError, TypeError) as exc:  # torn or foreign: the worker did not finish it
        return JobOutcome(target=job.target, status="crashed", stage=_last_stage(job),
                          error=f"worker left an unreadable result ({type(exc).__name__}) in stage "
                                f"{_last_stage(job)}", log=log)


def _release(job: Job) -> tuple[str, dict[str, str], JobOutcome | None]:
    """The interpreter of ``job``'s worker and what it adds to the environment
    (:func:`compstack.run.releases.interpreter`), or the ``unavailable`` outcome of a
    release that cannot be provisioned here (one line naming it and why)."""
    import sys

    if "@" not in job.target:
        return sys.executable, {}, None
    from compstack.core.envs import EnvError
    from compstack.core.errors import UserError
    from compstack.run.releases import interpreter

    try:
        python, extra = interpreter(job.target, job.cache_dir)
    except (EnvError, UserError, OSError) as exc:
        return "", {}, JobOutcome(target=job.target, status="unavailable", stage="import", error=str(exc))
    return python, extra, None


def _worker_env(job: Job) -> dict[str, str]:
    from compstack.core.threads import thread_env

    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(thread_env(job.threads))  # read once by OpenMP/BLAS/TVM runtimes at start-up
    env.update(job.env)
    return env


class InlineExecutor(Executor):
    """In this process: no isolation and no limits (a crash or hang is this process's)."""

    name = "inline"

    def run(self, job: Job, limits: Limits = Limits()) -> JobOutcome:
        from compstack.run.worker import execute

        if "@" in job.target:  # a release runs in its own env's interpreter, never in this one
            return ProcessExecutor().run(job, limits)
        Path(job.workdir).mkdir(parents=True, exist_ok=True)
        return execute(job)


class ProcessExecutor(Executor):
    """A fresh worker process per job (see the module docstring).

    Args:
        poll_s: how often the worker's time and memory are checked, seconds.
    """

    name = "process"

    def __init__(self, poll_s: float = 0.05) -> None:
        self.poll_s = poll_s

    def run(self, job: Job, limits: Limits = Limits()) -> JobOutcome:
        python, extra, failed = _release(job)
        if failed is not None:
            return failed
        limits = tuning_limits(job, limits)
        job_file = _prepare(job, limits)
        log_path = Path(job.workdir) / "worker.log"
        argv = python_module_argv("compstack.run.worker", str(job_file))
        with open(log_path, "wb") as log:
            proc = popen([python, *argv[1:]], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env={**_worker_env(job), **extra})
            t0 = time.monotonic()
            killed = ""
            peak = 0
            limit_bytes = limits.memory_mb * 2**20
            seen, looked = "", 0.0
            try:
                while proc.poll() is None:
                    if time.monotonic() - looked >= 1.0:  # the worker's stage, for a progress display
                        looked, stage = time.monotonic(), _last_stage(job)
                        if stage != seen:
                            seen = stage
                            events.emit(stage)
                    if time.monotonic() - t0 > limits.timeout_s:
                        killed = "timeout"
                    elif limit_bytes:
                        rss = tree_rss_bytes(proc.pid)
                        peak = max(peak, rss)
                        if rss > limit_bytes:
                            killed = "oom"
                    if killed:
                        kill_group(proc)
                        break
                    time.sleep(self.poll_s)
            except BaseException:  # Ctrl-C or a bug here: never leave a worker behind
                kill_group(proc)
                proc.wait()
                kill_escaped()
                raise
            proc.wait()
        kill_escaped()  # what the job's code started outside the worker's group (setsid, double fork)
        if killed:
            return _lost(job, killed, limits, _log_tail(log_path), peak / 2**20)
        kill_group(proc)  # leftovers of a finished worker (e.g. a compiler it spawned)
        result = _read_result(job, _log_tail(log_path))
        if result is not None:
            return result
        return _lost(job, "crashed", limits, _log_tail(log_path), returncode=proc.returncode)


#: Seconds a pool worker may take to import its target class and say ``ready``.
POOL_START_TIMEOUT_S = 120.0
#: A pool worker above this resident memory (MiB, its process tree) when a job ends is stopped,
#: not kept: seven stacks' workers idling at 1.6-3 GB each after real-size models pushed a
#: real-tier sweep's next jobs into the OOM killer on 24 GB. The next job starts a fresh one.
RECYCLE_RSS_MB = 1536


class PoolExecutor(Executor):
    """Long-lived workers, one set per (target class, threads, custom-op origins, source
    file, ``Job.env``); thread-safe: concurrent jobs of one target get one worker each.

    Args:
        start_timeout_s: seconds a worker may take to start (:data:`POOL_START_TIMEOUT_S`).
        poll_s: how often a busy worker's memory is sampled, seconds.
        max_idle: idle workers kept per key (None: all); a worker returned beyond it is
            stopped, so a burst of parallel jobs leaves one warm worker per target, not one
            per job (the daemon keeps 1).
        recycle_rss_mb: a worker above this resident memory when its job ends is stopped
            (:data:`RECYCLE_RSS_MB`; 0: never).
    """

    name = "pool"

    def __init__(self, start_timeout_s: float = POOL_START_TIMEOUT_S, poll_s: float = 0.05,
                 max_idle: int | None = None, recycle_rss_mb: int = RECYCLE_RSS_MB) -> None:
        self.start_timeout_s = start_timeout_s
        self.recycle_rss_mb = recycle_rss_mb
        self.poll_s = poll_s
        self.max_idle = max_idle
        self._idle: dict[tuple[Any, ...], list[Any]] = {}
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._work: Path | None = None
        self._count = 0
        self.restarts = 0

    @staticmethod
    def _key(job: Job) -> tuple[Any, ...]:
        # a user's file source is imported into the worker: keep it to its own workers
        return (job.target_ref, job.threads, tuple(job.op_origins), job.file_source, tuple(sorted(job.env.items())),
                job.target.partition("@")[2])  # a release's workers run in its own env

    def _checkout(self, job: Job, python: str = "", extra: dict[str, str] | None = None) -> Any:
        from compstack.run.pool import WorkerProcess

        key = self._key(job)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if idle:
                return idle.pop()
            if self._work is None:
                self._work = run_tempdir("compstack-pool-")
            n = self._count  # never reused: a restarted worker re-reads its spec
            self._count += 1
            spec = self._work / f"spec{n}.json"
            spec.write_text(json.dumps({"target_ref": job.target_ref}))
            from compstack.core.threads import thread_env

            w = WorkerProcess(spec, self._work / f"worker{n}.log", module="compstack.run.worker",
                              env={"PYTHONUNBUFFERED": "1", **thread_env(job.threads), **job.env, **(extra or {})},
                              args=["--serve", str(spec)], python=python or None)
            w.key = key  # type: ignore[attr-defined]
            self._all.append(w)
            return w

    def _checkin(self, w: Any) -> None:
        from compstack.core.procs import tree_rss_bytes

        big = (self.recycle_rss_mb and w.proc is not None and w.proc.poll() is None
               and tree_rss_bytes(w.proc.pid) > self.recycle_rss_mb * 2**20)
        with self._lock:
            idle = self._idle.setdefault(w.key, [])
            if big or (self.max_idle is not None and len(idle) >= self.max_idle):
                w.kill()
                self._all.remove(w)
                return
            idle.append(w)

    def workers(self) -> list[dict[str, Any]]:
        """The live workers: ``target_ref``, ``threads``, ``pid`` and ``busy`` (running a job)."""
        with self._lock:
            idle = {id(w) for ws in self._idle.values() for w in ws}
            return [{"target_ref": w.key[0], "threads": w.key[1], "pid": w.proc.pid, "busy": id(w) not in idle}
                    for w in self._all if w.proc is not None]

    def ready(self, job: Job) -> dict[str, Any]:
        """The ``ready`` message of a worker for ``job``'s target (``versions``,
        ``available``, ``reason``), starting one; ``start_error`` (with the last line of
        its log) when it died or hung while starting; ``available`` False with the reason
        for a release that cannot be provisioned."""
        python, extra, failed = _release(job)
        if failed is not None:
            return {"available": False, "versions": {}, "reason": failed.error}
        w = self._checkout(job, python, extra)
        try:
            if w.proc is None:
                w.start(self.start_timeout_s)
            return dict(w.ready)
        except RuntimeError as exc:
            why = f"{exc}: {_log_tail(w.log_path, 1).strip()[:300]}".rstrip(": ")
            return {"available": True, "versions": {}, "start_error": why}
        finally:
            self._checkin(w)

    def run(self, job: Job, limits: Limits = Limits(), cancel: threading.Event | None = None) -> JobOutcome:
        """As :meth:`Executor.run`; ``cancel``, when set while the job runs, kills its
        worker (the daemon sets it when the job's client goes away)."""
        python, extra, failed = _release(job)
        if failed is not None:
            return failed
        limits = tuning_limits(job, limits)
        job_file = _prepare(job, limits)
        w = self._checkout(job, python, extra)
        try:
            start = w.log_path.stat().st_size if w.log_path.exists() else 0
            reply = w.request(str(job_file), limits.timeout_s, limits.memory_mb, self.start_timeout_s, self.poll_s,
                              cancel)
            log = _log_tail(w.log_path, start=start)
            if reply.status == "ok":
                result = _read_result(job, log)
                if result is not None:
                    return result
                return _lost(job, "crashed", limits, log, returncode=None)
            self.restarts += 1
            if reply.start_failed:
                return JobOutcome(target=job.target, status="crashed", stage="import",
                                  error=f"{reply.error}: {_log_tail(w.log_path, 1).strip()[:300]}", log=log)
            if reply.status == "crashed":
                result = _read_result(job, log)  # a worker that died after writing (or tearing) it
                if result is not None:
                    return result
            return _lost(job, reply.status, limits, log, reply.peak_mb, reply.returncode)
        finally:
            self._checkin(w)

    def close(self) -> None:
        import shutil

        with self._lock:
            for w in self._all:
                w.kill()
            self._all.clear()
            self._idle.clear()
            if self._work is not None:
                shutil.rmtree(self._work, ignore_errors=True)
                self._work = None


#: Executor name -> class; ``daemon`` (:class:`compstack.run.daemon.DaemonExecutor`, which
#: builds on the classes above) adds itself when :mod:`compstack.run.daemon` is imported,
#: which :func:`make_executor` does.
EXECUTORS: dict[str, type[Executor]] = {"inline": InlineExecutor, "process": ProcessExecutor, "pool": PoolExecutor}
#: Every executor's name.
EXECUTOR_NAMES = ("inline", "process", "pool", "daemon")


def make_executor(name: str) -> Executor:
    """A new executor by name (:data:`EXECUTORS`).

    Raises:
        ValueError: an unknown name.
    """
    import compstack.run.daemon  # noqa: F401 - registers "daemon"

    if name not in EXECUTORS:
        raise ValueError(f"unknown executor '{name}' (known: {', '.join(EXECUTORS)})")
    return EXECUTORS[name]()


def open_executor(choice: "str | Executor", isolate: bool = True, multi: bool = False) -> tuple[Executor, bool]:
    """The executor a command runs its jobs on, and whether the command owns it (and so
    closes it when done).

    Args:
        choice: an :class:`Executor` (the caller's: reused across commands, not closed
            here), an executor name, or ``""`` for the default: ``inline`` when
            ``isolate`` is False (``--no-isolate``), else the ``COMPSTACK_EXECUTOR``
            environment variable when set (``process``, ``pool`` or ``daemon``), else
            ``daemon`` for a command of several targets (``multi``: workers kept warm
            across commands, :mod:`compstack.run.daemon`) and ``process`` for one.
        isolate: False asks for ``inline`` when ``choice`` is ``""``.
        multi: the command runs jobs of more than one target.

    Raises:
        ValueError: an unknown executor name.
        UserError: ``COMPSTACK_EXECUTOR`` names an unknown executor.
    """
    if isinstance(choice, Executor):
        return choice, False
    if not choice:
        default = "daemon" if multi else "process"
        choice = (os.environ.get("COMPSTACK_EXECUTOR", "") or default) if isolate else "inline"
    try:
        return make_executor(choice), True
    except ValueError as exc:
        if choice == os.environ.get("COMPSTACK_EXECUTOR"):
            from compstack.core.errors import UserError

            raise UserError(f"COMPSTACK_EXECUTOR: {exc}") from None  # bad input: one line in every command
        raise
