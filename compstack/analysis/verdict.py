"""The one judge: is a target's output right, only as imprecise as float32, or wrong?

Every command that judges outputs (compare, run, sweep, conformance, fuzz, explain) calls
:func:`judge`. The rule is PyTorch's accuracy gate for compiled models
(``torch/_dynamo/utils.py``, ``same(..., fp64_ref=...)``): an output passes when it is
close to the float64 reference within the tolerance, or when its RMSE against float64 is
at most ``k`` times the RMSE of an honest float32 computation (the reference evaluator in
float32: the noise floor) plus ``tol/10``; ``k`` is 2, or 3 for float16/bfloat16 outputs
and for outputs under 1,000 elements (noise dominates small tensors), as there. On top:

* NaN or Inf where the float64 reference has none (or the reverse) is always wrong (``nan``);
* integers and booleans must be exact;
* without a float32 floor (no float32 evaluation, or NaN in it) the tolerance alone decides.

Kinds, per output (:data:`KINDS`): ``ok`` (within tolerance), ``imprecise`` (beyond
tolerance, within the noise floor: agrees, shown apart), ``wrong``, ``nan``, ``shape``
(shape or dtype differ), and two that blame no stack: ``reference-suspect`` (a second,
independent float64 oracle disagrees with ``onnx.reference``) and ``undefined`` (a rule of
undefined behaviour fired on the inputs, :mod:`compstack.analysis.ub`).

Tolerances default per dtype (:data:`DEFAULT_TOLERANCES`); an explicit ``rtol``/``atol``
is the user's override and each verdict says so. float32 ``rtol=1e-3`` is the ONNX
backend test runner's (``onnx/backend/test/runner``); its ``atol=1e-7`` is for single
ops, so for whole models compared against a float64 oracle we use ``atol=1e-5``.
float16/bfloat16 have 10/8 mantissa bits, hence the looser bounds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Mapping

import numpy as np

__all__ = ["Verdict", "judge", "KINDS", "AGREEING", "BAD", "row_kind", "mark", "shown_status", "Tolerance", "DEFAULT_TOLERANCES",
           "tolerance_for"]

@dataclass(frozen=True)
class Tolerance:
    """``|a - b| <= atol + rtol * |b|``, elementwise."""

    rtol: float
    atol: float


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-7, 1e-9),
    "float32": Tolerance(1e-3, 1e-5),
    "float16": Tolerance(1e-2, 1e-3),
    "bfloat16": Tolerance(2e-2, 1e-2),
}


def tolerance_for(dtype: np.dtype, rtol: float | None = None, atol: float | None = None) -> Tolerance:
    """The tolerance for an output of ``dtype``, with optional overrides.

    Integers and bools get ``Tolerance(0, 0)`` (exact) unless overridden.
    """
    base = DEFAULT_TOLERANCES.get(np.dtype(dtype).name, Tolerance(0.0, 0.0))
    return Tolerance(base.rtol if rtol is None else rtol, base.atol if atol is None else atol)


#: Verdict kinds, from good to bad, then the two that blame no stack.
KINDS = ("ok", "imprecise", "wrong", "nan", "shape", "reference-suspect", "undefined")
#: Kinds that count as the stack agreeing with the model's meaning (exit codes, summaries).
AGREEING = frozenset({"ok", "imprecise"})
#: Kinds that say the stack computed something else than the model means.
BAD = frozenset({"wrong", "nan", "shape"})


@dataclass(frozen=True)
class Verdict:
    """The judgement of one output.

    Attributes:
        kind: one of :data:`KINDS`.
        rmse: RMSE of the target against float64 (finite elements). For a ``shape``
            verdict (shape or dtype differs) this, ``floor``, ``max_abs`` and ``max_rel`` are
            NaN: no element was compared (None in :meth:`to_dict`).
        floor: RMSE of the float32 reference against float64 (the noise floor); NaN when
            there was no float32 evaluation.
        max_abs: max absolute error against float64 (finite elements).
        max_rel: max ``|a - b| / |b|`` over finite elements with ``b != 0``.
        multiplier: the ``k`` used.
        rtol, atol: the tolerance applied.
        override: True when ``rtol``/``atol`` came from the user (``--rtol/--atol``).
        detail: one line for the reader (for ``reference-suspect`` the op(s), for
            ``undefined`` the rule that fired).
    """

    kind: str
    rmse: float = 0.0
    floor: float = 0.0
    max_abs: float = 0.0
    multiplier: float = 2.0
    detail: str = ""
    max_rel: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    override: bool = False

    @property
    def bad(self) -> bool:
        """True for ``wrong``, ``nan`` and ``shape``: what explain chases."""
        return self.kind in BAD

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; non-finite floats become None."""
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    with np.errstate(all="ignore"):
        return float(np.sqrt(np.mean(np.square(a - b))))


def _exact(o: np.ndarray, r64: np.ndarray, tol: tuple[float, float, bool]) -> Verdict:
    same = bool(np.array_equal(o, r64.astype(o.dtype, copy=False) if o.dtype != object else r64))
    n = 0 if same else int(np.sum(o != r64))
    worst = 0.0
    if not same and o.dtype != object and o.size:
        worst = float(np.max(np.abs(o.astype(np.float64) - r64.astype(np.float64))))
    return Verdict("ok" if same else "wrong", max_abs=worst, detail="" if same else f"{n} of {o.size} elements differ",
                   rtol=tol[0], atol=tol[1], override=tol[2])


def judge(out: Any, ref64: Any, ref32: Any = None, rtol: float | None = None, atol: float | None = None,
          multiplier: float | None = None, expected_dtype: Any = None) -> Verdict:
    """Judge ``out`` (the target's value of a tensor) against the references.

    Args:
        out: the target's array (any shape and dtype).
        ref64: the float64 reference's array (the same shape).
        ref32: the float32 reference's array (the noise floor's computation), or None
            when there is none (the tolerance alone decides).
        rtol, atol: the user's tolerance override; None for the per-dtype default of
            ``out``'s dtype (float32: ``rtol=1e-3, atol=1e-5``, see
            :data:`DEFAULT_TOLERANCES`).
        multiplier: ``k``; default PyTorch's choice (see the module docstring).
        expected_dtype: the model's declared dtype of the output; a different dtype
            is a ``shape`` verdict. None: not checked.

    Returns:
        A :class:`Verdict` (never ``reference-suspect`` or ``undefined``: see :func:`mark`).
    """
    o, r64 = np.asarray(out), np.asarray(ref64)
    t = tolerance_for(np.dtype(expected_dtype) if expected_dtype is not None else o.dtype, rtol, atol)
    tol = (t.rtol, t.atol, rtol is not None or atol is not None)
    unmeasured = dict(rmse=math.nan, floor=math.nan, max_abs=math.nan, max_rel=math.nan)  # no element compared
    if o.shape != r64.shape:
        return Verdict("shape", detail=f"shape {list(o.shape)} != reference {list(r64.shape)}",
                       rtol=tol[0], atol=tol[1], override=tol[2], **unmeasured)
    if expected_dtype is not None and o.dtype != np.dtype(expected_dtype):
        return Verdict("shape", detail=f"dtype {o.dtype} != declared {np.dtype(expected_dtype)}",
                       rtol=tol[0], atol=tol[1], override=tol[2], **unmeasured)
    if o.dtype.kind in "biu" or r64.dtype.kind in "biu" or o.dtype == object:
        return _exact(o, r64, tol)
    a, b = o.astype(np.float64), r64.astype(np.float64)
    c = np.full_like(b, np.nan) if ref32 is None else np.asarray(ref32).astype(np.float64)
    fin_a, fin_b = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fin_a, fin_b) or not np.array_equal(np.isnan(a), np.isnan(b)):
        bad = int(np.sum((fin_a != fin_b) | (np.isnan(a) != np.isnan(b))))
        return Verdict("nan", detail=f"{bad} element(s) NaN/Inf where the float64 reference is not (or the reverse)",
                       rtol=tol[0], atol=tol[1], override=tol[2])
    both = fin_a & fin_b
    infs = ~both & ~np.isnan(a)  # NaN where the reference has NaN agrees; an Inf must have its sign
    if not np.array_equal(a[infs], b[infs]):
        return Verdict("nan", detail="Inf of a different sign than the float64 reference",
                       rtol=tol[0], atol=tol[1], override=tol[2])
    a, b, c = a[both], b[both], c[both]
    diff = np.abs(a - b)
    max_abs = float(np.max(diff)) if a.size else 0.0
    nz = b != 0
    max_rel = float(np.max(diff[nz] / np.abs(b[nz]))) if nz.any() else 0.0
    res, floor = _rmse(a, b), _rmse(c, b)
    if multiplier is None:
        multiplier = 3.0 if o.dtype.name in ("float16", "bfloat16") or o.size < 1000 else 2.0
    nums = dict(rmse=res, floor=floor, max_abs=max_abs, multiplier=multiplier, max_rel=max_rel,
                rtol=tol[0], atol=tol[1], override=tol[2])
    if bool(np.all(diff <= tol[1] + tol[0] * np.abs(b))):
        return Verdict("ok", **nums)  # type: ignore[arg-type]
    if math.isnan(floor):
        return Verdict("wrong", detail=f"outside tolerance rtol={tol[0]:g} atol={tol[1]:g} (max abs err "
                       f"{max_abs:.3g}); no float32 noise floor", **nums)  # type: ignore[arg-type]
    if res <= multiplier * floor + max(tol[0], tol[1]) / 10.0:
        return Verdict("imprecise", detail=f"beyond tolerance, but within {multiplier:g}x the float32 noise floor "
                       f"(RMSE {res:.3g} vs floor {floor:.3g}): the model is ill-conditioned in float32",
                       **nums)  # type: ignore[arg-type]
    times = (f"{res / floor:.3g}x the float32 noise floor {floor:.3g}" if floor > 0 else
             "beyond a float32 noise floor of 0 (float32 computes this exactly)")  # never "infx ... floor 0"
    return Verdict("wrong", detail=f"RMSE {res:.3g} is {times}", **nums)  # type: ignore[arg-type]


def mark(v: Verdict, kind: str, detail: str) -> Verdict:
    """``v`` relabelled ``reference-suspect`` or ``undefined`` (its numbers kept).

    Args:
        v: a verdict from :func:`judge`.
        kind: ``reference-suspect`` or ``undefined``.
        detail: the op(s) the oracles disagree on, or the undefined-behaviour rule.

    Raises:
        ValueError: ``kind`` is neither.
    """
    if kind not in ("reference-suspect", "undefined"):
        raise ValueError(f"mark: {kind} is not reference-suspect or undefined")
    return replace(v, kind=kind, detail=f"{detail} (was {v.kind}: {v.detail})" if v.detail else detail)


def row_kind(kinds: Iterable[str] | Iterable[Mapping[str, Any]]) -> str:
    """One row's verdict from its outputs' kinds: the worst of them.

    Order: ``shape`` > ``nan`` > ``wrong`` > ``reference-suspect`` > ``undefined`` >
    ``imprecise`` > ``ok``. Accepts kinds or output dicts (their ``kind`` key; a dict
    without one, from before verdicts, counts as ``ok`` when its ``ok`` is true).

    Returns:
        The row's kind; ``ok`` for no outputs.
    """
    order = ("ok", "imprecise", "undefined", "reference-suspect", "wrong", "nan", "shape")
    worst = "ok"
    for k in kinds:
        kind = k if isinstance(k, str) else str(k.get("kind") or ("ok" if k.get("ok", True) else "wrong"))
        if kind in order and order.index(kind) > order.index(worst):
            worst = kind
    return worst


def shown_status(status: str, outputs: Iterable[Mapping[str, Any]]) -> str:
    """The word a table shows for a row: its status, but ``imprecise`` for an ``ok`` row
    with an imprecise output (it agrees, and exit codes and summaries count it as ``ok``).

    Args:
        status: the row's status (:data:`compstack.core.results.STATUSES`).
        outputs: the row's per-output dicts (their ``kind``).
    """
    return "imprecise" if status == "ok" and row_kind(list(outputs)) == "imprecise" else status
