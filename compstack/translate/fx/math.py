"""ONNX -> fx converters: unary math (abs, rounding, exp/log, trigonometric and hyperbolic
functions, erf, sigmoid, tanh) and Det (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import numpy as np
import torch

from compstack.translate.fx import TABLE
from compstack.translate.fx._util import widen_call

_UNARY = {
    ("Neg", 6): torch.neg,
    ("Reciprocal", 6): torch.reciprocal,
    ("Sqrt", 6): torch.sqrt,
    ("Exp", 6): torch.exp,
    ("Log", 6): torch.log,
    ("Ceil", 6): torch.ceil,
    ("Floor", 6): torch.floor,
    ("Erf", 9): torch.erf,
    ("Sin", 7): torch.sin,
    ("Cos", 7): torch.cos,
    ("Tan", 7): torch.tan,
    ("Asin", 7): torch.asin,
    ("Acos", 7): torch.acos,
    ("Atan", 7): torch.atan,
    ("Sinh", 9): torch.sinh,
    ("Cosh", 9): torch.cosh,
    ("Asinh", 9): torch.asinh,
    ("Acosh", 9): torch.acosh,
    ("Atanh", 9): torch.atanh,
    ("Sigmoid", 6): torch.sigmoid,
    ("Tanh", 6): torch.tanh,
}


def _unary(op, fn):
    def convert(ctx, x):
        return widen_call(ctx, fn, x)

    convert.__name__ = op.lower()
    convert.__doc__ = f"{op} (elementwise ``torch.{fn.__name__}``)."
    return convert


for (_op, _since), _fn in _UNARY.items():
    TABLE.op(_op, since=_since)(_unary(_op, _fn))


@TABLE.op("Abs", since=6)
def abs_(ctx, x):
    """Abs (the identity on unsigned ints; the minimum signed int stays itself)."""
    if ctx.dtype(0).kind == "u":
        return x
    return torch.abs(x)


@TABLE.op("Round", since=11)
def round_(ctx, x):
    """Round: half to even (``torch.round`` also rounds half to even)."""
    return torch.round(x)


@TABLE.op("Sign", since=9)
def sign(ctx, x):
    """Sign: NaN stays NaN (``torch.sign(nan)`` is 0)."""
    dt = ctx.dtype(0)
    if dt.kind == "u":
        return widen_call(ctx, torch.sign, x)
    y = torch.sign(x)
    return torch.where(torch.isnan(x), x, y) if dt.kind == "f" else y


@TABLE.op("Det", since=11)
def det(ctx, x):
    """Det of the last two dimensions."""
    if np.dtype(ctx.dtype(0)) == np.float16:
        return torch.linalg.det(x.to(torch.float32)).to(torch.float16)
    return torch.linalg.det(x)
