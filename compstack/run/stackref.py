"""The checked oracle of a model too large for ``onnx.reference``.

Above :data:`compstack.run.refchoice.FLOAT64_MAX_FLOPS` or
:data:`~compstack.run.refchoice.FLOAT64_MAX_PARAMS` the NumPy reference evaluator takes too
long. The float64 reference is then the registry's ``large-reference``: compstack's
translated FX program run eagerly in float64 (``inductor-cpu`` with ``backend=aot_eager``,
``precision=float64``: TorchDynamo's debug backend, ATen ops, no code generation), in a
worker like any job. That is PyTorch's own accuracy gate for compiled models
(``torch/_dynamo/utils.py``, ``same(..., fp64_ref=...)``): the float64 reference is the
eager model in float64, and the noise floor is the eager model in float32. Here:

* the noise floor (:meth:`LargeOracle.floors`): the same translated program run eagerly
  in float32 (``large-floor``), once per model and only when a row is beyond tolerance;
* the cross-check (:meth:`LargeOracle.cross_check`), once a stack disagrees: ONNX Runtime
  with every graph optimisation off, in float32 (no float64 kernels for Conv, Erf or
  AveragePool in ORT's CPU provider), judged against the reference with the same noise
  floor. An ORT run that is itself beyond the floor means the reference, not the stack,
  is suspect (a defect of the translation would show on every stack);
* no undefined-behaviour rules: they read every intermediate value, which needs the
  whole model in NumPy, the cost this path avoids. A row note says so.

Without torch installed, or when the float64 run fails, the reference is ORT in float32
and the tolerance alone judges (:func:`compstack.run.refchoice.run_reference`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from compstack.run.jobs import JobOutcome
from compstack.run.oracle import CheckedOracle, CrossCheck

__all__ = ["LargeOracle", "LARGE_ROLE", "FLOOR_ROLE", "UB_NOTE", "is_large_reference"]

#: The registry role of the float64 reference of a large model (see the module docstring).
LARGE_ROLE = "large-reference"
#: The registry role of its float32 noise floor.
FLOOR_ROLE = "large-floor"
#: The row note when the undefined-behaviour rules could not run.
UB_NOTE = ("undefined-behaviour rules not run: with the eager float64 reference there is no onnx.reference "
           "evaluation, which they need for every intermediate value")


def is_large_reference(target: str, options: Mapping[str, str]) -> bool:
    """True when ``(target, options)`` is the registry's ``large-reference`` (:data:`LARGE_ROLE`)."""
    from compstack import targets as registry

    return (target, dict(options)) == registry.role_target(LARGE_ROLE)


#: ``run(target, options, latency, tag)``: one job of the comparison on its own model and inputs.
Run = Callable[..., JobOutcome]


class LargeOracle(CheckedOracle):
    """:class:`~compstack.run.oracle.CheckedOracle` for the ``large-reference``.

    Args:
        model_path: the ONNX file every stack got (never loaded here: it may be gigabytes).
        ref64: the float64 reference's outputs by name.
        run: the comparison's ``run(target, options, latency, tag)`` (compare's ``run``,
            sweep's ``run_now``), each job in its own worker.
        work: the comparison's scratch folder.
        cache: an :class:`compstack.run.oracle_cache.OracleCache` for the floor, or None.
    """

    reference_what = "the translated program in float64 (aot_eager)"
    note_if_bad = UB_NOTE

    def __init__(self, model_path: Path, ref64: Mapping[str, np.ndarray], run: Run, work: Path,
                 cache: Any = None) -> None:
        super().__init__(model_path, {}, ref64, lambda *a: JobOutcome("failed"), lambda p: (Path(), ""), work, cache)
        self._run = run
        self._floor_done = False
        self._ub = []

    def _outputs(self, role: str, tag: str) -> tuple[dict[str, np.ndarray] | None, str]:
        from compstack import targets as registry

        name, opts = registry.role_target(role)
        outcome = self._run(name, opts, False, tag)
        values: dict[str, Any] | None = outcome.extra.get("outputs") if outcome.status == "ok" else None
        if not values:
            return None, f"{name} ({_opts(opts)}): {outcome.status} in {outcome.stage}: {outcome.error}"[:300]
        return {k: np.asarray(v) for k, v in values.items()}, f"{name} ({_opts(opts)})"

    def f32(self) -> dict[str, np.ndarray] | None:
        """The translated program run eagerly in float32 (the noise floor's computation),
        outputs only; None when it failed (:attr:`f32_error` says why)."""
        if not self._floor_done:
            self._floor_done = True
            self._f32, what = self._outputs(FLOOR_ROLE, ".floor")
            if self._f32 is None:
                self._f32_error = what
        return self._f32

    def _compute_floors(self) -> dict[str, np.ndarray] | None:
        """The float32 eager run (no sequential-sum variant: that needs ``onnx.reference``)."""
        return self.f32()

    def may_be_undefined(self) -> bool:
        """Never: the rules cannot run here (:data:`UB_NOTE`)."""
        return False

    def undefined(self) -> list[str]:
        """None fire: the rules are not run on this path (:data:`UB_NOTE`)."""
        return []

    def _second_opinion(self) -> CrossCheck:
        from compstack.analysis.verdict import judge

        vals, what = self._outputs("second-oracle", ".oracle")
        if vals is None:
            return CrossCheck(error=f"could not be cross-checked: {what}")
        floors = self.floors()
        if not floors:  # a float32 run judged by the tolerance alone would call float32 noise a disagreement
            return CrossCheck(error=f"could not be cross-checked: no float32 noise floor ({self.f32_error})")
        disagree = {}
        for name, ref in self.ref64.items():
            if name in vals and judge(vals[name], ref, floors.get(name)).bad:
                disagree[name] = ["the whole model (float32, beyond the noise floor)"]
        return CrossCheck(f"{what}, float32", vals, disagree)


def _opts(opts: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in opts.items())
