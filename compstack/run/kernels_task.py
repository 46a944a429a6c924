"""Worker side of the ``kernels`` and ``profile`` jobs (run by :func:`compstack.run.jobs.execute`).

Stages: ``lower`` -> ``compile`` (:meth:`compstack.targets.base.Lowered.compile_with_kernels`,
never from the artifact cache: the kernel records exist only in the compiling process)
-> ``kernels`` -> for ``profile`` jobs ``run`` (a check that the target runs here) and
``profile`` (:meth:`compstack.targets.base.Compiled.profile`). Results go into
``JobOutcome.extra``: ``kernels`` (:meth:`KernelMap.to_json`) and ``profile``
(:meth:`KernelProfile.to_json`), or ``kernels_note``/``profile_note`` saying why not.
"""

from __future__ import annotations

from typing import Any, Callable

from compstack.core.errors import UnavailableError

__all__ = ["run_kernels_job"]


def run_kernels_job(job: Any, target: Any, model: Any, outcome: Any, stage: Callable[[str], None],
                    avail: Any) -> None:
    """Body of a ``kernels``/``profile`` job; a stack's exception propagates to
    :func:`compstack.run.jobs.execute`, which makes it the outcome."""
    from compstack.core.latency import LatencyConfig
    from compstack.run.jobs import _load_sets

    stage("lower")
    lowered = target.lower(model)
    outcome.lower_s = lowered.lower_s
    stage("compile")
    compiled = lowered.compile_with_kernels()
    outcome.compile_s = compiled.compile_s
    stage("kernels")
    kmap = compiled.kernels()
    outcome.extra["kernels"] = kmap.to_json() if kmap is not None else None
    if kmap is None:
        outcome.extra["kernels_note"] = f"{target.name}: kernel view not available for this target"
    if job.kind != "profile":
        return
    stage("run")
    if not avail.runs:
        raise UnavailableError(f"compiled; cannot run here: {avail.run_reason}")
    inputs = _load_sets(job.inputs_path)
    compiled.run(inputs[0])
    stage("profile")
    prof = compiled.profile(inputs, LatencyConfig(**(job.latency or {})), kmap)
    outcome.extra["profile"] = prof.to_json() if prof is not None else None
    if prof is not None:
        from compstack.run.jobs import record_thread_use

        record_thread_use(outcome, prof.end_to_end)
    if prof is None:
        outcome.extra["profile_note"] = f"{target.name}: per-kernel profiling not available for this target"
