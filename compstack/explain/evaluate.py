"""Run pieces of a model on a target through long-lived workers, and judge them.

One :class:`Evaluator` holds one worker per (target, options, mode, environment)
(:mod:`compstack.explain.worker`, driven by
:class:`compstack.run.pool.WorkerProcess`): a piece that crashes or hangs the
stack costs that evaluation (status ``crashed``/``timeout``) and a fresh worker takes
the next one. Every evaluation is counted, so explain can report how many compiles it
used.
"""

from __future__ import annotations

import json
import shutil
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
        mode: ``compile`` or ``eager`` (see :mod:`compstack.explain.worker`).
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
        status: ``ok``, ``failed``, ``unsupported``, ``unavailable``, ``crashed``, ``timeout``.
        stage: where it stopped when not ok.
        error: one line.
        outputs: output name -> array (when ok).
        seconds: wall time of the evaluation.
        stage_seconds: wall time per stage (``import``, ``lower``, ``compile``, ``run``)
            as the worker's progress messages delimit them.
    """

    status: str
    stage: str = ""
    error: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    log: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)


class Evaluator:
    """Evaluates ONNX models on targets; one long-lived worker per :class:`Run`.

    Args:
        timeout_s: limit per evaluation, seconds.
        op_origins: user custom-op declarations the workers import (named by the user).

    Use as a context manager (workers are stopped on exit).
    """

    def __init__(self, timeout_s: float = 300.0, op_origins: list[str] | None = None) -> None:
        self.timeout_s = timeout_s
        self.op_origins = list(op_origins or [])
        self.work = run_tempdir("compstack-explain-")
        self.workers: dict[Run, Any] = {}
        self.ready: dict[Run, dict[str, Any]] = {}
        self.count: dict[str, int] = {}
        self._n = 0

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for w in self.workers.values():
            w.kill()
        self.workers.clear()
        shutil.rmtree(self.work, ignore_errors=True)

    @property
    def compiles(self) -> int:
        """Evaluations run so far, all targets."""
        return sum(self.count.values())

    def _worker(self, run: Run) -> Any:
        from compstack import targets as registry
        from compstack.run.pool import WorkerProcess

        w = self.workers.get(run)
        if w is None:
            ref = next((e.ref for e in registry.entries() if e.name == run.target), None)
            if ref is None:
                from compstack.core.errors import UserError

                raise UserError(f"unknown target '{run.target}'; run `compstack targets` to list them")
            spec = self.work / f"spec{len(self.workers)}.json"
            spec.write_text(json.dumps({"target_ref": ref, "options": dict(run.options), "mode": run.mode,
                                        "op_origins": self.op_origins}))
            w = WorkerProcess(spec, self.work / f"worker{len(self.workers)}.log", module="compstack.explain.worker",
                              env=dict(run.env))
            self.workers[run] = w
        return w

    def info(self, run: Run) -> dict[str, Any]:
        """The worker's ``ready`` message (versions, flags, availability); starts it."""
        w = self._worker(run)
        if w.proc is None:
            try:
                w.start(120.0)
            except RuntimeError as exc:
                return {"available": False, "reason": str(exc), "versions": {}, "flags": {}}
        return dict(w.ready)

    def passes(self, run: Run, model: onnx.ModelProto) -> list[str] | None:
        """The passes of ``run``'s stack that change ``model`` (``Target.applied_passes``),
        or None when the stack has no pass-level view or the query failed."""
        self._n += 1
        path = self.work / f"p{self._n}.onnx"
        onnx.save(model, str(path))
        row = self._worker(run).run_case(json.dumps({"model": str(path), "passes": True}), self.timeout_s)
        path.unlink(missing_ok=True)
        return row.get("passes") if row.get("status") == "ok" else None

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
        """
        from compstack.core.inputs import decode_arrays, encode_arrays

        self._n += 1
        base = self.work / f"e{self._n}"
        base.mkdir()
        onnx.save(model, str(base / "model.onnx"))
        np.savez(base / "inputs.npz", **encode_arrays(dict(feeds)))  # type: ignore[arg-type]  # numpy stubs: ** may bind allow_pickle
        request = {"model": str(base / "model.onnx"), "inputs": str(base / "inputs.npz"),
                   "outputs": str(base / "outputs.npz"), "stages": str(stages) if stages else None,
                   "artifact": str(artifact) if artifact else None}
        w = self._worker(run)
        t0 = time.perf_counter()
        self.count[run.target] = self.count.get(run.target, 0) + 1
        row = w.run_case(json.dumps(request), self.timeout_s, stage_times=True)
        result = EvalResult(row.get("status", "failed"), row.get("stage", ""), row.get("error", ""),
                            seconds=time.perf_counter() - t0, log=row.get("log", ""),
                            stage_seconds=dict(row.get("stage_seconds") or {}))
        if result.status == "ok":
            with np.load(base / "outputs.npz", allow_pickle=False) as data:
                result.outputs = decode_arrays({k: data[k] for k in data.files})
        shutil.rmtree(base, ignore_errors=True)
        return result
