"""ONNX -> fx converters: elementwise binary arithmetic, comparison, logic and bitwise ops,
variadic Max/Min/Mean/Sum and Clip (see :mod:`compstack.translate` for the contract).

Broadcasting is numpy's, as in torch. uint16/uint32 operands are computed in int64 and
cast back (see :func:`~compstack.translate.fx._util.widen_call`); uint64 is unsupported
where torch has no kernel.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from compstack.translate.fx import TABLE
from compstack.translate.fx._util import is_int, known, tdtype, widen_call


@TABLE.op("Add", since=7)
def add(ctx, a, b):
    """Add (numpy broadcasting; integer overflow wraps)."""
    return widen_call(ctx, torch.add, a, b, u64="bits")


@TABLE.op("Sub", since=7)
def sub(ctx, a, b):
    """Sub."""
    return widen_call(ctx, torch.sub, a, b, u64="bits")


@TABLE.op("Mul", since=7)
def mul(ctx, a, b):
    """Mul."""
    return widen_call(ctx, torch.mul, a, b, u64="bits")


@TABLE.op("Div", since=7)
def div(ctx, a, b):
    """Div: true division for floats, truncation toward zero for integers (ONNX Div, C semantics)."""
    if is_int(ctx.out_dtype()):
        return widen_call(ctx, functools.partial(torch.div, rounding_mode="trunc"), a, b)
    return torch.div(a, b)


@TABLE.op("Pow", since=7)
def pow_(ctx, a, b):
    """Pow: the output has the base's dtype (the exponent may have another type)."""
    if ctx.dtype(1) in (np.uint16, np.uint32, np.uint64) and ctx.dtype(0).kind == "f":
        # float base: the exponent's type only matters through its values
        y = torch.pow(a, b.to(torch.float64))
    else:
        y = widen_call(ctx, torch.pow, a, b)
    return y if ctx.dtype(1) == ctx.out_dtype() else y.to(tdtype(ctx.out_dtype()))


@TABLE.op("Mod", since=10)
def mod(ctx, a, b):
    """Mod: ``fmod=1`` is C fmod (sign of the dividend), ``fmod=0`` integer modulo with
    the sign of the divisor (numpy/Python ``%``)."""
    fn = torch.fmod if ctx.attr("fmod", 0) else torch.remainder
    return widen_call(ctx, fn, a, b)


def _variadic(fn, u64):
    def convert(ctx, *inputs):
        xs = [x for x in inputs if x is not None]
        return widen_call(ctx, lambda *ys: functools.reduce(fn, ys), *xs, u64=u64)

    return convert


TABLE.op("Max", since=8)(_variadic(torch.maximum, "order"))
TABLE.op("Min", since=8)(_variadic(torch.minimum, "order"))
TABLE.op("Sum", since=8)(_variadic(torch.add, "bits"))


@TABLE.op("Mean", since=8)
def mean(ctx, *inputs):
    """Mean of the inputs (accumulated in the input dtype, like the reference)."""
    xs = [x for x in inputs if x is not None]
    return functools.reduce(torch.add, xs) / len(xs)


def _compare(fn, u64):
    def convert(ctx, a, b):
        return widen_call(ctx, fn, a, b, u64=u64)

    return convert


TABLE.op("Equal", since=7)(_compare(torch.eq, "bits"))
TABLE.op("Less", since=7)(_compare(torch.lt, "order"))
TABLE.op("Greater", since=7)(_compare(torch.gt, "order"))
TABLE.op("LessOrEqual", since=12)(_compare(torch.le, "order"))
TABLE.op("GreaterOrEqual", since=12)(_compare(torch.ge, "order"))


@TABLE.op("And", since=7)
def and_(ctx, a, b):
    """And (bool)."""
    return torch.logical_and(a, b)


@TABLE.op("Or", since=7)
def or_(ctx, a, b):
    """Or (bool)."""
    return torch.logical_or(a, b)


@TABLE.op("Xor", since=7)
def xor(ctx, a, b):
    """Xor (bool)."""
    return torch.logical_xor(a, b)


@TABLE.op("Not", since=1)
def not_(ctx, x):
    """Not (bool)."""
    return torch.logical_not(x)


@TABLE.op("BitwiseAnd", since=18)
def bitwise_and(ctx, a, b):
    """BitwiseAnd."""
    return widen_call(ctx, torch.bitwise_and, a, b, u64="bits")


@TABLE.op("BitwiseOr", since=18)
def bitwise_or(ctx, a, b):
    """BitwiseOr."""
    return widen_call(ctx, torch.bitwise_or, a, b, u64="bits")


@TABLE.op("BitwiseXor", since=18)
def bitwise_xor(ctx, a, b):
    """BitwiseXor."""
    return widen_call(ctx, torch.bitwise_xor, a, b, u64="bits")


@TABLE.op("BitwiseNot", since=18)
def bitwise_not(ctx, x):
    """BitwiseNot."""
    return widen_call(ctx, torch.bitwise_not, x, u64="bits")


@TABLE.op("BitShift", since=11)
def bit_shift(ctx, a, b):
    """BitShift on unsigned ints (``direction`` LEFT/RIGHT; bits shifted out are lost)."""
    direction = ctx.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.unsupported(f"direction={direction!r}")
    if direction == "LEFT":
        return widen_call(ctx, torch.bitwise_left_shift, a, b, u64="bits")
    if ctx.dtype(0) == np.uint64:
        # logical shift of the int64 view: shift once and clear the sign bit, then the rest
        x, n = a.view(torch.int64), b.view(torch.int64)
        once = torch.bitwise_right_shift(x, 1) & (2**63 - 1)
        rest = torch.bitwise_right_shift(once, torch.clamp(n - 1, min=0))
        return torch.where(n == 0, x, torch.where(n >= 64, torch.zeros_like(x), rest)).view(torch.uint64)
    return widen_call(ctx, torch.bitwise_right_shift, a, b)


@TABLE.op("IsNaN", since=9)
def is_nan(ctx, x):
    """IsNaN."""
    return torch.isnan(x)


@TABLE.op("IsInf", since=10)
def is_inf(ctx, x):
    """IsInf with ``detect_positive``/``detect_negative``."""
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if pos and neg:
        return torch.isinf(x)
    if pos:
        return torch.isposinf(x)
    if neg:
        return torch.isneginf(x)
    return torch.zeros_like(x, dtype=torch.bool)


@TABLE.op("Clip", since=11)
def clip(ctx, x, lo=None, hi=None):
    """Clip with optional ``min``/``max`` inputs (NaN propagates; min > max gives max)."""
    bounds = []
    for i, value in ((1, lo), (2, hi)):
        arr = known(ctx, i)
        if arr is not None:
            value = arr.reshape(-1)[0].item() if arr.size else None
        bounds.append(value)

    def fn(y, lo, hi):
        if lo is not None:
            y = torch.clamp(y, min=lo)
        if hi is not None:
            y = torch.clamp(y, max=hi)
        return y

    return widen_call(ctx, lambda y: fn(y, *bounds), x)


@TABLE.op("Clip", since=6)
@TABLE.op("Clip", since=1)
def clip_6(ctx, x):
    """Clip-1/6: ``min``/``max`` attributes."""
    lo, hi = ctx.attr("min", None), ctx.attr("max", None)
    if lo is None and hi is None:
        return x
    return torch.clamp(x, lo, hi)


@TABLE.op("Relu", since=6)
def relu(ctx, x):
    """Relu (float and signed ints since 14)."""
    return torch.relu(x)
