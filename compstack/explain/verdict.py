"""Is a target's output wrong, or only as imprecise as float32 itself?

The rule is PyTorch's accuracy gate for compiled models (``torch/_dynamo/utils.py``,
``same(..., fp64_ref=...)``): an output passes when it is close to the float64 reference
within the tolerance, or when its RMSE against float64 is at most ``k`` times the RMSE
of an honest float32 computation (the reference evaluator in float32) plus ``tol/10``;
``k`` is 2, or 3 for float16/bfloat16 outputs and for outputs under 1,000 elements
(noise dominates small tensors), as there. On top of that:

* NaN or Inf where the float64 reference has none (or the reverse) is always wrong;
* integers and booleans must be exact;
* an output the reference itself cannot compute stably (NaN in the float32 floor) is
  judged by the tolerance alone.

The verdict keeps both numbers, so "the stack is imprecise" (error above the tolerance
but within k x the float32 floor: the model is ill-conditioned in float32) and "the
stack is wrong" (above both) are told apart.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["Verdict", "judge", "KINDS"]

#: Verdict kinds, from good to bad.
KINDS = ("ok", "imprecise", "wrong", "nan", "shape")


@dataclass(frozen=True)
class Verdict:
    """The judgement of one output.

    Attributes:
        kind: ``ok`` (within tolerance), ``imprecise`` (beyond tolerance, within the
            noise floor), ``wrong`` (beyond both), ``nan`` (NaN/Inf pattern differs),
            ``shape`` (shape or dtype differ).
        rmse: RMSE of the target against float64.
        floor: RMSE of float32 reference against float64 (the noise floor).
        max_abs: max absolute error against float64.
        multiplier: the ``k`` used.
        detail: one line for the reader.
    """

    kind: str
    rmse: float = 0.0
    floor: float = 0.0
    max_abs: float = 0.0
    multiplier: float = 2.0
    detail: str = ""

    @property
    def bad(self) -> bool:
        """True for ``wrong``, ``nan`` and ``shape``: what explain chases."""
        return self.kind in ("wrong", "nan", "shape")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    with np.errstate(all="ignore"):
        return float(np.sqrt(np.mean(np.square(a - b))))


def judge(out: Any, ref64: Any, ref32: Any, rtol: float = 1e-3, atol: float = 1e-5,
          multiplier: float | None = None) -> Verdict:
    """Judge ``out`` (the target's value of a tensor) against the references.

    Args:
        out: the target's array.
        ref64: the float64 reference's array (same shape).
        ref32: the float32 reference's array (the noise floor's computation).
        rtol, atol: the tolerance (compstack's float32 defaults).
        multiplier: ``k``; default PyTorch's choice (see the module docstring).

    Returns:
        A :class:`Verdict`.
    """
    o, r64, r32 = np.asarray(out), np.asarray(ref64), np.asarray(ref32)
    if o.shape != r64.shape:
        return Verdict("shape", detail=f"shape {list(o.shape)} != reference {list(r64.shape)}")
    if o.dtype.kind in "biu" or r64.dtype.kind in "biu" or o.dtype == object:
        same = bool(np.array_equal(o, r64.astype(o.dtype, copy=False) if o.dtype != object else r64))
        n = 0 if same else int(np.sum(o != r64))
        worst = 0.0
        if not same and o.dtype != object and o.size:
            worst = float(np.max(np.abs(o.astype(np.float64) - r64.astype(np.float64))))
        return Verdict("ok" if same else "wrong", max_abs=worst,
                       detail="" if same else f"{n} of {o.size} elements differ")
    a, b, c = o.astype(np.float64), r64.astype(np.float64), r32.astype(np.float64)
    fin_a, fin_b = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fin_a, fin_b) or not np.array_equal(np.isnan(a), np.isnan(b)):
        bad = int(np.sum(fin_a != fin_b))
        return Verdict("nan", detail=f"{bad} element(s) NaN/Inf where the float64 reference is not (or the reverse)")
    both = fin_a & fin_b
    if not np.array_equal(a[~both], b[~both]):  # an Inf of the wrong sign
        return Verdict("nan", detail="Inf of a different sign than the float64 reference")
    a, b, c = a[both], b[both], c[both]
    max_abs = float(np.max(np.abs(a - b))) if a.size else 0.0
    res, floor = _rmse(a, b), _rmse(c, b)
    if multiplier is None:
        multiplier = 3.0 if o.dtype.name in ("float16", "bfloat16") or o.size < 1000 else 2.0
    close = bool(np.all(np.abs(a - b) <= atol + rtol * np.abs(b)))
    if close:
        return Verdict("ok", res, floor, max_abs, multiplier)
    if math.isnan(floor):
        return Verdict("wrong", res, floor, max_abs, multiplier, "beyond tolerance; the float32 floor is NaN")
    tol = max(rtol, atol)
    if res <= multiplier * floor + tol / 10.0:
        return Verdict("imprecise", res, floor, max_abs, multiplier,
                       f"beyond tolerance, but within {multiplier:g}x the float32 noise floor "
                       f"(RMSE {res:.3g} vs floor {floor:.3g}): the model is ill-conditioned in float32")
    return Verdict("wrong", res, floor, max_abs, multiplier,
                   f"RMSE {res:.3g} is {res / floor if floor else math.inf:.3g}x the float32 noise floor {floor:.3g}")
