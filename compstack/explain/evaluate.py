"""Run pieces of a model on a target through long-lived workers, and judge them.

One :class:`Evaluator` holds one pool executor (:class:`compstack.run.executors.PoolExecutor`)
per (target, options, mode, environment); each evaluation is an ``evaluate`` job
(:mod:`compstack.run.tasks.evaluate`), so a piece that crashes, hangs or overruns memory
costs that evaluation with the status words of every other job (``crashed``,
``timeout``, ``oom``) and a fresh worker takes the next one. Every evaluation is counted,
so explain can report how many compiles it used.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import onnx

from compstack.core.procs import run_tempdir

__all__ = ["EvalResult", "Evaluator", "Run"]


@dataclass(frozen=True)
class Run:
    """How to run a target: its name, options, mode and extra environment.

    Attributes:
        target: target name.
        options: target options as strings (``--option``).
        mode: ``compile`` or ``eager`` (see :mod:`compstack.run.tasks.evaluate`).
        env: environment variables for the worker (e.g. ``XLA_FLAGS``).
    """
    target: str
    options: tuple[tuple[str, str], ...] = ()
    mode: str = "compile"
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, target: str, options: Mapping[str, str] | None = None, mode: str = "compile",
           env: Mapping[str, str] | None = None) -> "Run":
        return cls(target, tuple(sorted((options or {}).items())), mode, tuple(sorted((env or {}).items())))

    def label(self) -> str:
        extra = [f"{k}={v}" for k, v in self.options] + [f"{k}={v}" for k, v in self.env]
        return self.target + (" (" + ", ".join(extra) + ")" if extra else "") + (" eager" if self.mode == "eager" else "")


@dataclass
class EvalResult:
    """One evaluation.

    Attributes:
        status: ``ok``, ``failed``, ``unsupported``, ``unavailable``, ``crashed``,
            ``timeout`` (``oom`` only under a memory limit, which explain does not set):
            the job system's words (:mod:`compstack.run.executors`).
        stage: where it stopped when not ok.
        error: one line.
        outputs: output name -> array (when ok).
        seconds: wall time of the evaluation, seconds.
        stage_seconds: wall time per stage (``import``, ``lower``, ``compile``, ``run``)
            (the task's own stages, plus the job's overhead counted as ``import``);
            empty when the worker was lost.
        log: the stack's traceback or the worker log's tail, when not ok.
    """

    status: str
    stage: str = ""
    error: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    log: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)


class Evaluator:
    """Evaluates ONNX models on targets; one pool of long-lived workers per :class:`Run`.

    Args:
        timeout_s: limit per evaluation (wall clock), seconds; a worker past it is
            killed and the evaluation is ``timeout``.
        op_origins: user custom-op declarations the workers import (named by the user).

    Use as a context manager (workers are stopped on exit). Thread-safe: evaluations of
    different targets may run at once from several threads (``compstack fuzz`` runs the
    targets of one graph side by side); each gets a worker of its own.
    """

    def __init__(self, timeout_s: float = 300.0, op_origins: list[str] | None = None) -> None:
        self.timeout_s = timeout_s
        self.op_origins = list(op_origins or [])
        self.work = run_tempdir("compstack-explain-")
        self.pools: dict[Run, Any] = {}
        self.refs: dict[str, str] = {}
        self.count: dict[str, int] = {}
        self._n = 0
        self._lock = threading.Lock()  # _n, count, pools and refs, when threads share the evaluator

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker and delete the scratch folder."""
        for pool in self.pools.values():
            pool.close()
        self.pools.clear()
        shutil.rmtree(self.work, ignore_errors=True)

    @property
    def compiles(self) -> int:
        """Evaluations run so far, all targets."""
        return sum(self.count.values())

    def _ref(self, target: str) -> str:
        """``module:Class`` of ``target``.

        Raises:
            UserError: an unknown target name.
        """
        with self._lock:
            if target not in self.refs:
                from compstack import targets as registry

                self.refs[target] = registry.ref(target)  # UserError for an unknown name
            return self.refs[target]

    def _job(self, run: Run, request: str, model: onnx.ModelProto | None = None,
             feeds: Mapping[str, np.ndarray] | None = None, stages: Path | None = None,
             artifact: Path | None = None) -> Any:
        """An ``evaluate`` job of ``run`` in a fresh folder holding ``model`` and ``feeds``."""
        from compstack.core.inputs import encode_arrays
        from compstack.run.jobs import Job, pack_sets
        from compstack.run.tasks.evaluate import Params

        ref = self._ref(run.target)
        with self._lock:
            self._n += 1
            base = self.work / f"e{self._n}"
        base.mkdir()
        if model is not None:
            onnx.save(model, str(base / "model.onnx"))
        if feeds is not None:
            np.savez(base / "inputs.npz", **encode_arrays(pack_sets([dict(feeds)])))  # type: ignore[arg-type]  # numpy stubs: ** may bind allow_pickle
        return Job(model_path=str(base / "model.onnx"), fingerprint="", target=run.target, target_ref=ref,
                   inputs_path=str(base / "inputs.npz"), workdir=str(base), options=dict(run.options),
                   stages_dir=str(stages) if stages else None, artifact_dir=str(artifact) if artifact else None,
                   kind="evaluate", op_origins=list(self.op_origins), env=dict(run.env),
                   params=Params(run.mode, request).to_json())

    def _execute(self, run: Run, job: Any, keep: bool = False) -> Any:
        """Run ``job`` on ``run``'s pool (started on first use) under this evaluator's
        limit; its folder is deleted afterwards unless ``keep``."""
        from compstack.run.executors import Limits, PoolExecutor

        with self._lock:
            pool = self.pools.get(run)
            if pool is None:
                pool = self.pools[run] = PoolExecutor()
        try:
            return pool.run(job, Limits(timeout_s=self.timeout_s))
        finally:
            if not keep:
                shutil.rmtree(job.workdir, ignore_errors=True)

    def info(self, run: Run) -> dict[str, Any]:
        """What a worker of ``run`` says once it has built the target (starting it):
        ``available``, ``reason`` (why not, one line), ``versions`` (stack -> version),
        ``flags`` (``Target.flags()`` with ``run``'s options), ``runs`` (whether its
        programs run on this machine).

        Raises:
            UserError: an unknown target name.
        """
        outcome = self._execute(run, self._job(run, "info"))
        flags = {k: v for k, v in outcome.flags.items() if k != "threads"}  # the job system's, not the target's
        return {"available": outcome.status == "ok", "reason": outcome.error, "versions": dict(outcome.versions),
                "flags": flags, "runs": bool(outcome.extra.get("runs_here", False))}

    def passes(self, run: Run, model: onnx.ModelProto) -> list[str] | None:
        """The passes of ``run``'s stack that change ``model`` (``Target.applied_passes``),
        or None when the stack has no pass-level view or the query failed.

        Raises:
            UserError: an unknown target name.
        """
        from compstack.run.tasks.evaluate import Result

        outcome = self._execute(run, self._job(run, "passes", model))
        return Result.from_json(outcome.result).passes if outcome.status == "ok" else None

    def run(self, run: Run, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
            stages: Path | None = None, artifact: Path | None = None) -> EvalResult:
        """Evaluate ``model`` on ``run`` with ``feeds``.

        Args:
            run: the target and how to run it.
            model: a valid ONNX model.
            feeds: graph input name -> array.
            stages: also write the target's stage texts into this folder.
            artifact: also save the compiled artifact into this folder.

        Returns:
            The :class:`EvalResult` (never raises for the stack's sake).

        Raises:
            UserError: an unknown target name.
        """
        from compstack.core.inputs import decode_arrays
        from compstack.run.tasks.evaluate import Result

        job = self._job(run, "run", model, feeds, stages, artifact)
        with self._lock:
            self.count[run.target] = self.count.get(run.target, 0) + 1
        t0 = time.perf_counter()
        outputs: dict[str, np.ndarray] = {}
        try:
            outcome = self._execute(run, job, keep=True)
            seconds = time.perf_counter() - t0
            if outcome.status == "ok":
                with np.load(job.outputs_path, allow_pickle=False) as data:
                    outputs = decode_arrays({k: data[k] for k in data.files})
        finally:
            shutil.rmtree(job.workdir, ignore_errors=True)
        stage_seconds = dict(Result.from_json(outcome.result).stage_seconds) if outcome.result else {}
        if stage_seconds:  # the job's own overhead (job file, target built, result read) is its import
            rest = seconds - sum(stage_seconds.values())
            stage_seconds["import"] = round(stage_seconds.get("import", 0.0) + max(rest, 0.0), 4)
        return EvalResult(outcome.status, outcome.stage, outcome.error, outputs, seconds, outcome.log, stage_seconds)
