"""Fixes to :mod:`onnx.reference` operators that break on shapes real models use.

Passed as ``new_ops`` to ``onnx.reference.ReferenceEvaluator`` (which lets a class
replace the stock implementation of the same op), by every float64 reference run
(:func:`compstack.ops._onnx.reference_ops`). Each fix implements the ONNX spec's own
definition and names the stock bug:

* ``GatherElements`` (onnx 1.17-1.19): the stock kernel uses ``np.choose``, which takes
  at most 64 choices, then falls back to a broken path that raises
  ``ValueError: cannot reshape array of size 1 into shape (1,128)`` once the gathered
  axis has more than 64 entries. BERT's exported ``position_ids``
  (``GatherElements`` over a ``[1, 512]`` buffer) hits it, and the float64 reference
  of every BERT fell back to ORT. The spec (Operators.md#GatherElements):
  ``out[i][j] = data[index[i][j]][j]`` for axis 0, negative indices counting from the end,
  which is :func:`numpy.take_along_axis`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["gather_elements", "spec_fixes"]


def gather_elements(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """ONNX ``GatherElements`` by the spec's definition (see the module docstring).

    Args:
        data: any dtype, rank r >= 1.
        indices: int32/int64, the same rank as ``data``; values in ``[-s, s-1]`` where
            ``s = data.shape[axis]``.
        axis: in ``[-r, r-1]``.

    Returns:
        An array of ``indices``' shape and ``data``'s dtype.
    """
    axis = axis + data.ndim if axis < 0 else axis
    idx = np.where(indices < 0, indices + data.shape[axis], indices)
    return np.take_along_axis(data, idx, axis=axis)


@functools.cache
def spec_fixes() -> tuple[type, ...]:
    """The ``new_ops`` classes of the fixes above (built on first use: ``onnx.reference``
    is imported only then)."""
    from onnx.reference.op_run import OpRun

    class GatherElements(OpRun):  # type: ignore[misc]  # onnx ships no type hints
        op_domain = ""

        def _run(self, data: Any, indices: Any, axis: int | None = None) -> tuple[np.ndarray]:
            return (gather_elements(np.asarray(data), np.asarray(indices), 0 if axis is None else int(axis)),)

    return (GatherElements,)
