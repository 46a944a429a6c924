"""Numerical comparison of one target's outputs against the reference outputs.

Per output: max absolute error, max relative error, relative L2 error
``||a - b||_2 / ||b||_2``, NaN/Inf counts, and the verdict of the one judge,
:func:`compstack.analysis.verdict.judge` (tolerance, then the float32 noise floor when
the caller has the float32 evaluation; the tolerances are defined there).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping

import numpy as np

from compstack.analysis.verdict import AGREEING, DEFAULT_TOLERANCES, Tolerance, judge, tolerance_for

__all__ = ["Tolerance", "DEFAULT_TOLERANCES", "OutputComparison", "compare_outputs", "tolerance_for"]


@dataclass
class OutputComparison:
    """Comparison of one output.

    Attributes:
        name: the output name.
        max_abs_err: ``max |a - b|`` over finite elements; NaN (None in JSON) when no
            element is finite in both (all NaN or inf), inf when the shapes differ.
        max_rel_err: ``max |a - b| / |b|`` over finite elements with ``b != 0``; NaN or inf
            as ``max_abs_err``.
        rel_l2: ``||a - b||_2 / ||b||_2`` (0 when both are zero).
        nan: NaN count in the target's output; ``ref_nan`` in the reference's.
        inf: ±Inf count in the target's output; ``ref_inf`` in the reference's.
        ok: the verdict agrees (kind ``ok`` or ``imprecise``).
        reason: why not ``ok`` (shape, dtype, NaN placement, tolerance, noise floor), else "".
        rtol, atol: the tolerance applied.
        kind: the verdict kind (:data:`compstack.analysis.verdict.KINDS`).
        rmse: RMSE against float64; ``floor`` the float32 noise floor's RMSE (None in
            JSON when there was no float32 evaluation); ``k`` the floor's multiplier.
        tolerance: ``default`` (per dtype) or ``user`` (``--rtol/--atol`` override).
    """

    name: str
    max_abs_err: float
    max_rel_err: float
    rel_l2: float
    nan: int
    ref_nan: int
    inf: int
    ref_inf: int
    ok: bool
    reason: str
    rtol: float
    atol: float
    kind: str = "ok"
    rmse: float = 0.0
    floor: float = float("nan")
    k: float = 2.0
    tolerance: str = "default"

    def to_dict(self) -> dict:
        """JSON-able form; non-finite floats become None."""
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in asdict(self).items()}


def _compare_one(name: str, actual: np.ndarray, ref: np.ndarray, expected_dtype: np.dtype | None,
                 rtol: float | None, atol: float | None, floor: np.ndarray | None) -> OutputComparison:
    v = judge(actual, ref, floor, rtol, atol, expected_dtype=expected_dtype)
    source = "user" if v.override else "default"
    if actual.shape != ref.shape:
        return OutputComparison(name, np.inf, np.inf, np.inf, 0, 0, 0, 0, False, v.detail, v.rtol, v.atol,
                                v.kind, tolerance=source)
    a = actual.astype(np.float64) if actual.dtype != object else actual
    b = ref.astype(np.float64) if ref.dtype != object else ref
    if a.dtype == object or b.dtype == object:
        return OutputComparison(name, 0.0, 0.0, 0.0, 0, 0, 0, 0, v.kind in AGREEING, v.detail, v.rtol, v.atol,
                                v.kind, tolerance=source)
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
    diff_f = diff[finite]
    norm_b = float(np.linalg.norm(b[finite])) if finite.any() else 0.0
    norm_d = float(np.linalg.norm(diff_f)) if diff_f.size else 0.0
    rel_l2 = norm_d / norm_b if norm_b > 0 else (0.0 if norm_d == 0 else np.inf)
    nz = finite & (b != 0)
    max_rel = float((diff[nz] / np.abs(b[nz])).max()) if nz.any() else 0.0
    none = a.size > 0 and not diff_f.size  # no element finite in both: no error was measured (NaN, shown "-")
    return OutputComparison(name, float(diff_f.max()) if diff_f.size else np.nan if none else 0.0,
                            np.nan if none else max_rel, rel_l2,
                            int(np.isnan(a).sum()), int(np.isnan(b).sum()), int(np.isinf(a).sum()),
                            int(np.isinf(b).sum()), v.kind in AGREEING, "" if v.kind == "ok" else v.detail,
                            v.rtol, v.atol, v.kind, v.rmse, v.floor, v.multiplier, source)


def compare_outputs(
    actual: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    expected_dtypes: Mapping[str, np.dtype] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    floors: Mapping[str, np.ndarray] | None = None,
) -> list[OutputComparison]:
    """Compare every reference output with the target's output of the same name.

    Args:
        actual: target outputs by name.
        reference: reference outputs by name (possibly float64 for float32 outputs).
        expected_dtypes: the model's declared output dtypes; selects the tolerance and
            checks the target's dtype. Default: the actual dtypes.
        rtol, atol: override the per-dtype defaults.
        floors: the float32 evaluation of each output (the noise floor); without one
            the tolerance alone judges that output.

    Returns:
        One :class:`OutputComparison` per reference output, in reference order. A
        missing output is a failed comparison.
    """
    expected_dtypes = expected_dtypes or {}
    out = []
    for name, ref in reference.items():
        if name not in actual:
            out.append(OutputComparison(name, np.inf, np.inf, np.inf, 0, 0, 0, 0, False,
                                        "output missing", 0.0, 0.0, "shape"))
            continue
        floor = (floors or {}).get(name)
        out.append(_compare_one(name, np.asarray(actual[name]), np.asarray(ref), expected_dtypes.get(name),
                                rtol, atol, None if floor is None else np.asarray(floor)))
    return out
