"""Task ``evaluate``: run one small model on one target as explain and fuzz need it.

Explain compiles dozens of pieces of one model; on the pool executor
(:class:`compstack.run.executors.PoolExecutor`) a worker pays the stack's import once
for all of them, and a piece that crashes, hangs or overruns memory costs that job only
(``crashed``/``timeout``/``oom``, the executors' status words). The parent side is
:class:`compstack.explain.evaluate.Evaluator`.

The job names the model (``Job.model_path``: an ONNX file the parent wrote into its own
scratch folder, loaded with ``onnx_ir``; no store entry), its inputs
(``Job.inputs_path``, :func:`compstack.run.jobs.pack_sets` form, input set 0 is used),
and optionally ``Job.stages_dir`` (every stage's text is written there) and
``Job.artifact_dir`` (the compiled artifact is saved there). :class:`Params` says what
to do (``request``):

* ``run`` in mode ``compile``: lower, compile and run on the target as a comparison
  would (stages ``import`` -> ``lower`` -> ``compile`` -> ``run``);
* ``run`` in mode ``eager``: for a target with a translated path (``run_eager``), run
  compstack's translated JAX or FX program without the compiler (``jax.disable_jit()``;
  the FX ``GraphModule`` called directly): if that is already wrong, the bug is
  compstack's translation, not the stack's (stages ``import`` -> ``run``); a target
  without one is ``unsupported``;
* ``passes``: the names of the passes that change the model
  (:meth:`compstack.targets.base.Target.applied_passes`; None for a stack without a
  pass-level view), stage ``lower``;
* ``info``: nothing beyond the worker's ``import`` stage, whose outcome carries the
  stack's versions, availability and ``target.flags()``.

The outputs go to ``Job.outputs_path`` (``.npz``, :func:`compstack.core.inputs.encode_arrays`);
the typed result (:class:`Result`: passes, seconds per stage) is in ``JobOutcome.result``,
set also when the stack fails, so a failed evaluation still says where its time went.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compstack.run.jobs import Job, JobOutcome, load_sets, write_stages

__all__ = ["MODES", "REQUESTS", "Params", "Result", "records_stages", "run"]

#: How a ``run`` request runs the model (see the module docstring).
MODES = ("compile", "eager")
#: What an evaluate job is asked for (see the module docstring).
REQUESTS = ("run", "passes", "info")


@dataclass(frozen=True)
class Params:
    """An evaluate job's parameters (``Job.params``).

    Attributes:
        mode: ``compile`` or ``eager`` (:data:`MODES`).
        request: ``run``, ``passes`` or ``info`` (:data:`REQUESTS`).
    """

    mode: str = "compile"
    request: str = "run"

    def to_json(self) -> dict[str, Any]:
        """This as ``Job.params``."""
        return asdict(self)


@dataclass
class Result:
    """What an evaluate job found besides its outputs file.

    Attributes:
        passes: with request ``passes``, the passes that changed the model (None: the
            stack has no pass-level view, or another request).
        stage_seconds: wall time per stage of this task (``import``: loading the model
            and inputs; ``lower``, ``compile``, ``run``; the run stage includes writing
            the outputs), seconds, measured in the worker.
    """

    passes: list[str] | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """This result as JSON-ready data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Result":
        """Inverse of :meth:`to_json` (None: an empty result)."""
        return cls(**(data or {}))


class _Clock:
    """Calls ``stage`` and adds the wall time since the last call to the stage it ends."""

    def __init__(self, stage: Callable[[str], None], into: dict[str, float]) -> None:
        self.stage, self.into = stage, into
        self.name, self.mark = "import", time.perf_counter()

    def __call__(self, name: str) -> None:
        self.stop()
        self.name = name
        self.stage(name)

    def stop(self) -> None:
        now = time.perf_counter()
        self.into[self.name] = round(self.into.get(self.name, 0.0) + now - self.mark, 4)
        self.mark = now


def records_stages(job: Job) -> bool:
    """Whether the worker builds the target with ``record_stages`` (a job with ``stages_dir``)."""
    return bool(job.stages_dir)


def run(job: Job, target: Any, outcome: JobOutcome, stage: Callable[[str], None], avail: Any) -> None:
    """Body of an evaluate job (see the module docstring); a stack's exception
    propagates to :func:`compstack.run.worker.execute`, which makes it the outcome.

    Raises:
        ValueError: ``job.params`` names an unknown mode or request.
    """
    p = Params(**job.params)
    if p.mode not in MODES or p.request not in REQUESTS:
        raise ValueError(f"evaluate: unknown mode '{p.mode}' or request '{p.request}'")
    result = Result()
    clock = _Clock(stage, result.stage_seconds)
    try:
        if p.request != "info":
            _evaluate(job, target, p, result, clock)
    finally:
        clock.stop()
        outcome.result = result.to_json()


def _evaluate(job: Job, target: Any, p: Params, result: Result, clock: _Clock) -> None:
    import onnx_ir as ir

    from compstack.core.errors import UnsupportedError
    from compstack.core.inputs import encode_arrays

    if job.op_origins:  # user custom ops the model uses, as the parent named them
        from compstack.ops._registry import load_origins

        load_origins(job.op_origins)
    model = ir.load(job.model_path)
    if p.request == "passes":
        clock("lower")
        result.passes = target.applied_passes(model)
        return
    sets = load_sets(job.inputs_path)
    feeds = sets[0] if sets else {}
    if p.mode == "eager":
        clock("run")
        if not hasattr(target, "run_eager"):
            raise UnsupportedError(f"{target.name} has no translated program to run eagerly")
        outs = target.run_eager(model, feeds)
    else:
        clock("lower")
        lowered = target.lower(model)
        clock("compile")
        compiled = lowered.compile()
        if job.stages_dir:
            write_stages(lowered, Path(job.stages_dir), [], compiled)
        if job.artifact_dir:
            Path(job.artifact_dir).mkdir(parents=True, exist_ok=True)
            compiled.save(Path(job.artifact_dir))
        clock("run")
        outs = compiled.run(feeds)
    np.savez(job.outputs_path, **encode_arrays(outs))  # type: ignore[arg-type]  # numpy stubs: ** may bind allow_pickle
