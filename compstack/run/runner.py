"""Process isolation: each job runs in its own worker process with a wall-clock limit
and a memory limit.

The worker is ``python -m compstack.run.jobs JOB.json`` in a new session (its own process
group). The parent polls it: past the time limit the whole group is killed and the job
is ``timeout``; when the resident memory of the group (summed over ``/proc``) passes
the memory limit it is killed and the job is ``oom``; a worker that dies by a signal
(segfault, abort) or exits without a result is ``crashed``, with the signal and the
last stage the worker reported. The comparison goes on with the next job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from compstack.core.procs import child_kwargs, kill_group, python_module_argv, tree_rss_bytes
from compstack.run.jobs import Job, JobOutcome

__all__ = ["Limits", "run_isolated", "run_inline", "default_memory_mb"]



def default_memory_mb() -> int:
    """75 % of this machine's physical memory, in MiB (0 when it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(int(line.split()[1]) * 0.75 / 1024)
    except (OSError, ValueError, IndexError):
        pass
    return 0


@dataclass(frozen=True)
class Limits:
    """Per-job limits.

    Attributes:
        timeout_s: wall-clock seconds for the whole job (import to latency).
        memory_mb: resident memory of the worker and its children, in MiB (0 = none).
    """

    timeout_s: float = 900.0
    memory_mb: int = 0


def _last_stage(job: Job) -> str:
    try:
        lines = job.progress_path.read_text().strip().splitlines()
        return lines[-1].split()[1] if lines else "import"
    except OSError:
        return "import"


def _log_tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def run_isolated(job: Job, limits: Limits = Limits(), poll_s: float = 0.05) -> JobOutcome:
    """Run ``job`` in a worker process under ``limits``; never raises for the stack's sake.

    Returns:
        The worker's outcome, or one with status ``timeout``, ``oom`` or ``crashed``.
    """
    workdir = Path(job.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    job_file = workdir / "job.json"
    job.save(job_file)
    log_path = workdir / "worker.log"
    for stale in (job.result_path, job.progress_path):
        stale.unlink(missing_ok=True)
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    from compstack.core.threads import thread_env

    env.update(thread_env(job.threads))  # read once by OpenMP/BLAS/TVM runtimes at start-up
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(python_module_argv("compstack.run.jobs", str(job_file)),
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, **child_kwargs())
        t0 = time.monotonic()
        killed = ""
        peak = 0
        limit_bytes = limits.memory_mb * 2**20
        try:
            while proc.poll() is None:
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
                time.sleep(poll_s)
        except BaseException:  # Ctrl-C or a bug here: never leave a worker behind
            kill_group(proc)
            proc.wait()
            raise
        proc.wait()
    if killed == "timeout":
        return JobOutcome(target=job.target, status="timeout", stage=_last_stage(job),
                          error=f"killed after {limits.timeout_s:g} s wall-clock limit "
                                f"(in stage {_last_stage(job)})", log=_log_tail(log_path))
    if killed == "oom":
        return JobOutcome(target=job.target, status="oom", stage=_last_stage(job),
                          error=f"killed: resident memory {peak / 2**20:.0f} MiB passed the "
                                f"{limits.memory_mb} MiB limit (in stage {_last_stage(job)})",
                          log=_log_tail(log_path))
    kill_group(proc)  # leftovers of a finished worker (e.g. a compiler it spawned)
    if job.result_path.exists():
        try:
            return JobOutcome(**json.loads(job.result_path.read_text()))
        except (OSError, ValueError, TypeError) as exc:  # torn or foreign: the worker did not finish it
            return JobOutcome(target=job.target, status="crashed", stage=_last_stage(job),
                              error=f"worker left an unreadable result ({type(exc).__name__}) in stage "
                                    f"{_last_stage(job)}", log=_log_tail(log_path))
    rc = proc.returncode
    if rc < 0:
        sig = signal.Signals(-rc).name
        hint = " (possibly the kernel's OOM killer)" if -rc == signal.SIGKILL else ""
        error = f"worker died by {sig}{hint} in stage {_last_stage(job)}"
    else:
        error = f"worker exited with status {rc} without a result in stage {_last_stage(job)}"
    return JobOutcome(target=job.target, status="crashed", stage=_last_stage(job), error=error,
                      log=_log_tail(log_path))


def run_inline(job: Job) -> JobOutcome:
    """Run ``job`` in this process (no isolation; for debugging with ``--no-isolate``)."""
    from compstack.run.jobs import execute

    Path(job.workdir).mkdir(parents=True, exist_ok=True)
    return execute(job)
