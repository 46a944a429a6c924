"""Helpers shared by the JAX converter families (not a family: registers nothing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from compstack.core.errors import UnsupportedError

#: ``precision=`` of every dot/convolution (None: XLA's default for the platform, e.g. TF32
#: matmuls on recent NVIDIA GPUs; ``jax.lax.Precision.HIGHEST`` keeps full float32).
PRECISION: Any = None


def norm_axis(axis: int, rank: int) -> int:
    """``axis`` in ``[0, rank)`` (ONNX allows ``[-rank, rank)``)."""
    return int(axis) + rank if int(axis) < 0 else int(axis)


def norm_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Each of ``axes`` normalised with :func:`norm_axis`."""
    return tuple(norm_axis(a, rank) for a in axes)


def ints(value: Any) -> list[int]:
    """A static int list from an attribute or a known input (None -> empty)."""
    if value is None:
        return []
    return [int(v) for v in np.asarray(value).reshape(-1)]


def jdtype(dtype: Any) -> Any:
    """numpy dtype -> the dtype jax uses for it (identical under x64)."""
    return jnp.dtype(np.dtype(dtype))


def static_or_none(ctx: Any, i: int, what: str) -> np.ndarray | None:
    """``ctx.static(i, what)`` when input ``i`` is given and non-empty, else None."""
    if not ctx.has(i):
        return None
    value = ctx.static(i, what)
    return None if value.size == 0 else value


def norm_index(idx: Any, dim: Any) -> Any:
    """Negative indices counted from the end (``idx + dim`` where ``idx < 0``)."""
    if isinstance(idx, np.ndarray):
        return np.where(idx < 0, idx + np.asarray(dim, idx.dtype), idx)
    return jnp.where(idx < 0, idx + jnp.asarray(dim, idx.dtype), idx)


def out_dtype(ctx: Any, j: int, default: Any) -> Any:
    """``ctx.out_dtype(j)``, or ``default`` when shape inference left the output untyped."""
    try:
        return ctx.out_dtype(j)
    except UnsupportedError:  # shape inference left it untyped
        return default


def shape_of(x: Any) -> tuple[int, ...]:
    """Static shape of a traced or known value (JAX shapes are static at trace time, so this
    needs no shape inference)."""
    return tuple(int(d) for d in np.shape(x))
