"""Numerical comparison of one target's outputs against the reference outputs.

Per output: max absolute error, max relative error, relative L2 error
``||a - b||_2 / ||b||_2``, NaN/Inf counts, and a verdict. The verdict follows
``numpy.allclose``'s rule ``|a - b| <= atol + rtol * |b|`` elementwise, with
per-dtype defaults below; integers and bools must be equal. A NaN (or ±Inf) where the
reference has none, or none where the reference has one, is a mismatch.

Default tolerances: float32 ``rtol=1e-3`` is the ONNX backend test runner's
(``onnx/backend/test/runner``); its ``atol=1e-7`` is for single ops, so for whole
models compared against a float64 oracle we use ``atol=1e-5``. float16/bfloat16 have
10/8 mantissa bits, hence the looser bounds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping

import numpy as np

__all__ = ["Tolerance", "DEFAULT_TOLERANCES", "OutputComparison", "compare_outputs", "tolerance_for"]


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


@dataclass
class OutputComparison:
    """Comparison of one output.

    Attributes:
        name: the output name.
        max_abs_err: ``max |a - b|`` over finite elements.
        max_rel_err: ``max |a - b| / |b|`` over finite elements with ``b != 0``.
        rel_l2: ``||a - b||_2 / ||b||_2`` (0 when both are zero).
        nan: NaN count in the target's output; ``ref_nan`` in the reference's.
        inf: ±Inf count in the target's output; ``ref_inf`` in the reference's.
        ok: the verdict.
        reason: why not ok (shape, dtype, NaN placement, tolerance), else "".
        rtol, atol: the tolerance applied.
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

    def to_dict(self) -> dict:
        """JSON-able form; non-finite floats become None."""
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in asdict(self).items()}


def _compare_one(name: str, actual: np.ndarray, ref: np.ndarray, expected_dtype: np.dtype | None,
                 rtol: float | None, atol: float | None) -> OutputComparison:
    dtype = np.dtype(expected_dtype) if expected_dtype is not None else actual.dtype
    tol = tolerance_for(dtype, rtol, atol)
    if actual.shape != ref.shape:
        return OutputComparison(name, np.inf, np.inf, np.inf, 0, 0, 0, 0, False,
                                f"shape {list(actual.shape)} != reference {list(ref.shape)}", tol.rtol, tol.atol)
    a = actual.astype(np.float64)
    b = ref.astype(np.float64)
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    a_inf, b_inf = np.isinf(a), np.isinf(b)
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
    diff_f = diff[finite]
    max_abs = float(diff_f.max()) if diff_f.size else 0.0
    nz = finite & (b != 0)
    max_rel = float((diff[nz] / np.abs(b[nz])).max()) if nz.any() else 0.0
    norm_b = float(np.linalg.norm(b[finite])) if finite.any() else 0.0
    norm_d = float(np.linalg.norm(diff_f)) if diff_f.size else 0.0
    rel_l2 = norm_d / norm_b if norm_b > 0 else (0.0 if norm_d == 0 else np.inf)
    reason = ""
    if expected_dtype is not None and actual.dtype != dtype:
        reason = f"dtype {actual.dtype} != declared {dtype}"
    elif (a_nan != b_nan).any():
        reason = f"NaN placement differs ({int(a_nan.sum())} NaN vs reference {int(b_nan.sum())})"
    elif (a_inf != b_inf).any() or (np.sign(a[a_inf]) != np.sign(b[a_inf])).any():
        reason = f"Inf placement differs ({int(a_inf.sum())} Inf vs reference {int(b_inf.sum())})"
    elif not bool(np.all(diff_f <= tol.atol + tol.rtol * np.abs(b[finite]))):
        reason = f"outside tolerance rtol={tol.rtol:g} atol={tol.atol:g}"
    return OutputComparison(name, max_abs, max_rel, rel_l2, int(a_nan.sum()), int(b_nan.sum()),
                            int(a_inf.sum()), int(b_inf.sum()), reason == "", reason, tol.rtol, tol.atol)


def compare_outputs(
    actual: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    expected_dtypes: Mapping[str, np.dtype] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[OutputComparison]:
    """Compare every reference output with the target's output of the same name.

    Args:
        actual: target outputs by name.
        reference: reference outputs by name (possibly float64 for float32 outputs).
        expected_dtypes: the model's declared output dtypes; selects the tolerance and
            checks the target's dtype. Default: the actual dtypes.
        rtol, atol: override the per-dtype defaults.

    Returns:
        One :class:`OutputComparison` per reference output, in reference order. A
        missing output is a failed comparison.
    """
    expected_dtypes = expected_dtypes or {}
    out = []
    for name, ref in reference.items():
        if name not in actual:
            out.append(OutputComparison(name, np.inf, np.inf, np.inf, 0, 0, 0, 0, False,
                                        "output missing", 0.0, 0.0))
            continue
        out.append(_compare_one(name, np.asarray(actual[name]), np.asarray(ref),
                                expected_dtypes.get(name), rtol, atol))
    return out
