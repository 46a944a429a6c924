"""Tasks ``kernels`` and ``profile``: the kernel map, and per-kernel times.

Stages: ``lower`` -> ``compile`` (:meth:`compstack.targets.base.Lowered.compile_with_kernels`,
never from the artifact cache: the kernel records exist only in the compiling process)
-> ``kernels`` -> for ``profile`` jobs ``run`` (a check that the target runs here) and
``profile`` (:meth:`compstack.targets.base.Compiled.profile`). The typed result is a
:class:`Result` in ``JobOutcome.result``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

from compstack.core.errors import UnavailableError
from compstack.run.jobs import Job, JobOutcome, load_sets, record_thread_use

__all__ = ["MODEL_TASK", "Result", "run"]


@dataclass
class Result:
    """What a kernels/profile job found.

    Attributes:
        kernels: :meth:`compstack.analysis.kernels.KernelMap.to_json`, or None.
        profile: :meth:`compstack.analysis.kernels.KernelProfile.to_json`, or None.
        kernels_note: why there is no kernel map ("" when there is one).
        profile_note: why there is no profile ("" when there is one, or none was asked).
    """

    kernels: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    kernels_note: str = ""
    profile_note: str = ""

    def to_json(self) -> dict[str, Any]:
        """This result as JSON-ready data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Result":
        """Inverse of :meth:`to_json` (None: an empty result)."""
        return cls(**(data or {}))


#: The worker loads the job's model and source before building the target
#: (:func:`compstack.run.jobs.load_job_model`) and passes the model to :func:`run`.
MODEL_TASK = True


def run(job: Job, target: Any, outcome: JobOutcome, stage: Callable[[str], None], avail: Any,
        model: Any = None) -> None:
    """Body of a ``kernels``/``profile`` job (``model``: the job's ``onnx_ir.Model``,
    loaded by the worker); a stack's exception propagates to
    :func:`compstack.run.worker.execute`, which makes it the outcome."""
    from compstack.core.latency import LatencyConfig

    result = Result()
    outcome.result = result.to_json()
    stage("lower")
    lowered = target.lower(model)
    outcome.lower_s = lowered.lower_s
    stage("compile")
    compiled = lowered.compile_with_kernels()
    outcome.compile_s = compiled.compile_s
    stage("kernels")
    kmap = compiled.kernels()
    result.kernels = kmap.to_json() if kmap is not None else None
    if kmap is None:
        result.kernels_note = f"{target.name}: kernel view not available for this target"
    outcome.result = result.to_json()
    if job.kind != "profile":
        return
    stage("run")
    if not avail.runs:
        raise UnavailableError(f"compiled; cannot run here: {avail.run_reason}")
    inputs = load_sets(job.inputs_path)
    compiled.run(inputs[0])
    stage("profile")
    prof = compiled.profile(inputs, LatencyConfig(**(job.latency or {})), kmap)
    result.profile = prof.to_json() if prof is not None else None
    if prof is not None:
        record_thread_use(outcome, prof.end_to_end)
    else:
        result.profile_note = f"{target.name}: per-kernel profiling not available for this target"
    outcome.result = result.to_json()
