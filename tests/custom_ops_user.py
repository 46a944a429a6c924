"""User custom ops for tests/test_custom_ops.py (a module a user would write)."""

from __future__ import annotations

import numpy as np

from compstack.ops import TensorType, custom_op


def _gather_shape(table: TensorType, ids: TensorType) -> TensorType:
    if table.rank != 2 or ids.rank != 1:
        raise ValueError(f"table must be 2-D and ids 1-D, got ranks {table.rank} and {ids.rank}")
    return TensorType((ids.shape[0], table.shape[1]), table.dtype)


@custom_op(
    "mylib::gather_rows",
    inputs=["table: T", "ids: int64"],
    outputs=["rows: T"],
    dtypes={"T": ["float32", "float16"]},
    shape=_gather_shape,
    kernels={"cpu": "mylib_gather_rows"},
    sources=["custom_ops_user.cc"],
    test_shapes=[((10, 4), (3,)), ((16, 1), (1,)), ((12, 7), (5,))],
)
def gather_rows(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Rows of table [V, D] at ids [N] (int64, negative counts from the end) -> [N, D]."""
    return table[ids]


@custom_op("mylib::ref_only", inputs=["x: float32"], outputs=["y: float32"], shape=lambda x: x,
           test_shapes=[((3,),)])
def ref_only(x: np.ndarray) -> np.ndarray:
    """2 * x, with a NumPy reference and no kernel (runs on the reference target only)."""
    return 2 * x
