"""Shared helpers of the fx converters (dtypes, axes, static attributes, unsigned widening)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import torch

__all__ = [
    "NARROW_UNSIGNED",
    "axis_of",
    "full_like_shape",
    "is_float",
    "is_int",
    "known",
    "need_static",
    "normalize_index",
    "required_ints",
    "static_ints",
    "tdtype",
    "widen_call",
]

_BY_NAME = {
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e5m2fnuz": torch.float8_e5m2fnuz,
}

#: Unsigned dtypes torch stores but has few CPU kernels for: computed in int64 and cast back.
NARROW_UNSIGNED = (np.dtype(np.uint16), np.dtype(np.uint32))


def tdtype(dt: Any) -> torch.dtype:
    """The torch dtype of a numpy dtype (bfloat16 and float8 by name)."""
    dt = np.dtype(dt)
    if dt.name in _BY_NAME:
        return _BY_NAME[dt.name]
    if dt.kind not in "biuf":
        raise TypeError(f"no torch dtype for {dt}")
    return torch.from_numpy(np.empty(0, dt)).dtype


def is_float(dt: Any) -> bool:
    """Whether numpy dtype ``dt`` is a floating-point type (bfloat16 and float8 included)."""
    dt = np.dtype(dt)
    return dt.kind == "f" or dt.name in _BY_NAME


def is_int(dt: Any) -> bool:
    """Whether numpy dtype ``dt`` is a signed or unsigned integer type."""
    return np.dtype(dt).kind in "iu"


def axis_of(axis: int, rank: int) -> int:
    """``axis`` in ``[0, rank)`` (ONNX negative axes count from the end)."""
    return int(axis) + rank if int(axis) < 0 else int(axis)


def known(ctx: Any, i: int) -> np.ndarray | None:
    """Input ``i``'s value when known at conversion time (numpy), else None (omitted or
    computed at run time)."""
    if not ctx.has(i) or i >= len(ctx.statics):
        return None
    return ctx.statics[i]


def out_shape_or_none(ctx: Any, j: int = 0) -> tuple[int, ...] | None:
    """Static shape of output ``j`` from shape inference, None when unknown."""
    try:
        return ctx.out_shape(j)
    except Exception:  # noqa: BLE001 - UnsupportedError: unknown or symbolic
        return None


def static_ints(ctx: Any, i: int, what: str) -> list[int] | None:
    """Input ``i`` as a list of Python ints (it must be known at conversion time); None
    when omitted."""
    value = ctx.static(i, what)
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def required_ints(ctx: Any, i: int, what: str) -> list[int]:
    """:func:`static_ints` of an input the op requires.

    Raises:
        UnsupportedError: the input is computed at run time, or omitted (naming the node).
    """
    value = static_ints(ctx, i, what)
    if value is None:
        raise ctx.unsupported(f"input {i} ({what}) is required but omitted")
    return value


def need_static(ctx: Any, i: int, what: str) -> NoReturn:
    """Raise for input ``i``, needed at conversion time (its value, or shape inference's
    output shape in its place) and not known there.

    Raises:
        UnsupportedError: always: ``must be known at compile time`` for a run-time input
            (``ctx.static``'s message), ``omitted`` for an omitted one.
    """
    ctx.static(i, what)  # raises for a run-time input
    raise ctx.unsupported(f"input {i} ({what}) is omitted and the output shape is unknown")


_U64 = np.dtype(np.uint64)
_SIGNED_TWIN = {np.dtype(np.uint16): torch.int16, np.dtype(np.uint32): torch.int32, np.dtype(np.uint64): torch.int64}
_UNSIGNED = {np.dtype(np.uint16): torch.uint16, np.dtype(np.uint32): torch.uint32, np.dtype(np.uint64): torch.uint64}


def widen_call(ctx: Any, fn: Callable[..., Any], *xs: Any, out: int = 0, u64: str | None = None) -> Any:
    """``fn(*xs)``, working around torch's missing CPU kernels for wide unsigned ints.

    uint16/uint32 inputs are computed in int64 and the result cast to output ``out``'s
    dtype (exact: int64 holds them, and wrapping casts back keep the low bits). uint64
    inputs are reinterpreted as int64 (``Tensor.view``) when ``u64`` says how that stays
    exact: ``"bits"`` for ops on two's-complement bits (add, sub, mul, bitwise, equality,
    left shift), ``"order"`` for order-based ops (comparisons, max/min: the sign bit is
    flipped so int64 order is uint64 order).

    Raises:
        UnsupportedError: a uint64 input and no ``u64`` strategy.
    """
    dts = {ctx.dtype(i) for i, x in enumerate(xs) if x is not None and ctx.has(i)}
    if _U64 in dts:
        if u64 is None:
            raise ctx.unsupported("uint64 has no torch CPU kernel for this op")
        ys = [None if x is None else _u64_in(x, u64) for x in xs]
        y = fn(*ys)
        if ctx.out_dtype(out) != _U64:
            return y
        return (y ^ -(2**63) if u64 == "order" else y).view(torch.uint64)
    if not any(dt in NARROW_UNSIGNED for dt in dts):
        return fn(*xs)
    wide = [x.to(torch.int64) if x is not None else None for x in xs]
    return fn(*wide).to(tdtype(ctx.out_dtype(out)))


def _u64_in(x: Any, mode: str) -> Any:
    y = x.view(torch.int64)
    return y ^ -(2**63) if mode == "order" else y


def as_signed(ctx: Any, i: int, x: Any) -> Any:
    """Input ``i`` viewed as the signed int of the same width when it is uint16/32/64
    (same bits; torch lacks gather/index/flip kernels for those), else ``x``."""
    twin = _SIGNED_TWIN.get(ctx.dtype(i)) if x is not None and ctx.has(i) else None
    return x if twin is None else x.view(twin)


def as_unsigned(ctx: Any, j: int, y: Any) -> Any:
    """Output ``j`` viewed back as its uint16/32/64 dtype (inverse of :func:`as_signed`)."""
    back = _UNSIGNED.get(ctx.out_dtype(j))
    return y if back is None else y.view(back)


def moves_data(*inputs: int, outputs: tuple[int, ...] = (0,)) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for converters that only move data: the ``inputs`` they move are viewed
    as signed ints when uint16/32/64 (see :func:`as_signed`) and the ``outputs`` viewed
    back."""
    import functools

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def convert(ctx: Any, *args: Any) -> Any:
            if not any(i < len(args) and ctx.has(i) and ctx.dtype(i) in _SIGNED_TWIN for i in inputs):
                return fn(ctx, *args)
            args = tuple(as_signed(ctx, i, a) if i in inputs else a for i, a in enumerate(args))
            res = fn(ctx, *args)
            if isinstance(res, tuple):
                return tuple(as_unsigned(ctx, j, r) if j in outputs else r for j, r in enumerate(res))
            return as_unsigned(ctx, 0, res) if 0 in outputs else res

        return convert

    return deco


def full_like_shape(shape: Sequence[int], value: Any, dtype: Any) -> np.ndarray:
    """A numpy constant of ``shape`` filled with ``value`` (conversion-time output)."""
    return np.full(tuple(shape), value, dtype=np.dtype(dtype))


def normalize_index(idx: Any, size: Any) -> Any:
    """Runtime indices as int64 with negative ones wrapped by ``size`` (int or tensor)."""
    idx = idx.to(torch.int64)
    return torch.where(idx < 0, idx + size, idx)
