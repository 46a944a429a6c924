"""ONNX -> fx converters: reductions (Reduce*, ArgMax/ArgMin) and scans (CumSum, CumProd)
(see :mod:`compstack.translate` for the contract).

Reduce* from opset 18 (ReduceSum from 13) take ``axes`` as an input, known at conversion
time or else read off the static input and output shapes when they determine it (reducing
size-1 dims changes nothing); before that it is an attribute. Empty ``axes`` reduce over every axis
unless ``noop_with_empty_axes``, in which case only the elementwise part of the op is
applied (ReduceSumSquare gives ``x * x``, as the op's function body does).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from compstack.translate.fx import TABLE
from compstack.translate.fx._util import (
    NARROW_UNSIGNED,
    axis_of,
    is_int,
    known,
    need_static,
    out_shape_or_none,
    required_ints,
    static_ints,
    tdtype,
)


def _axes_from_shapes(ctx):
    """Reduced axes of a runtime ``axes`` input, from the static input and output shapes.

    With keepdims the dims whose size changed; without, the dims whose removal leaves the
    output shape, when every such choice agrees on the dims of size > 1 (which size-1 dims
    are reduced does not matter). ``[]``: nothing but size-1 dims reduced, the same as the
    no-op case.
    """
    in_shape, out_shape = list(ctx.shape(0)), out_shape_or_none(ctx)
    if out_shape is None:
        need_static(ctx, 1, "axes")  # neither the axes nor the output shape is known
    out = list(out_shape)
    rank = len(in_shape)
    if ctx.attr("keepdims", 1):
        if len(out) != rank:
            raise ctx.unsupported(f"output shape {out} does not match input {in_shape} with keepdims")
        return [d for d in range(rank) if in_shape[d] != out[d]]
    cands = [c for c in itertools.combinations(range(rank), rank - len(out))
             if [in_shape[d] for d in range(rank) if d not in c] == out]
    if len({tuple(d for d in c if in_shape[d] != 1) for c in cands}) != 1:
        raise ctx.unsupported(f"runtime axes: {in_shape} -> {out} is ambiguous")
    return list(cands[0])


def _axes(ctx, from_input):
    """The reduced axes, sorted and non-negative; ``[]`` for the no-op case."""
    rank = len(ctx.shape(0))
    if from_input and ctx.has(1) and known(ctx, 1) is None:
        return _axes_from_shapes(ctx)
    if from_input:
        axes = static_ints(ctx, 1, "axes") if ctx.has(1) else None
    else:
        axes = ctx.attr("axes", None)
    if not axes:
        return [] if ctx.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted({axis_of(a, rank) for a in axes})


def _acc(ctx):
    """Accumulator dtype: the input's (ONNX reductions keep it), int64 for uint16/uint32
    (computed widened, wrapping casts back keep the low bits)."""
    dt = ctx.dtype(0)
    return torch.int64 if dt in NARROW_UNSIGNED else tdtype(dt)


def _sum(ctx, x, dims, keep):
    return torch.sum(x, dims, keepdim=keep, dtype=_acc(ctx))


def _prod(ctx, x, dims, keep):
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, d, keepdim=keep, dtype=_acc(ctx))
    return x


def _mean(ctx, x, dims, keep):
    if not is_int(ctx.dtype(0)):
        return torch.mean(x, dims, keepdim=keep)
    count = int(np.prod([ctx.shape(0)[d] for d in dims], dtype=np.int64))
    # numpy's mean with an integer dtype truncates the quotient toward zero
    return torch.div(_sum(ctx, x, dims, keep), count, rounding_mode="trunc")


def _max(ctx, x, dims, keep):
    if ctx.dtype(0) == np.bool_:
        return torch.amax(x.to(torch.uint8), dims, keep).to(torch.bool)
    return torch.amax(x, dims, keepdim=keep)


def _min(ctx, x, dims, keep):
    if ctx.dtype(0) == np.bool_:
        return torch.amin(x.to(torch.uint8), dims, keep).to(torch.bool)
    return torch.amin(x, dims, keepdim=keep)


def _logsumexp(ctx, x, dims, keep):
    return torch.logsumexp(x, dims, keepdim=keep)


def _l2(ctx, x, dims, keep):
    s = _sum(ctx, x * x, dims, keep)
    if is_int(ctx.dtype(0)):
        return torch.sqrt(s.to(torch.float64)).to(tdtype(ctx.dtype(0)))
    return torch.sqrt(s)


def _log_sum(ctx, x, dims, keep):
    s = _sum(ctx, x, dims, keep)
    return torch.log(s).to(tdtype(ctx.dtype(0))) if is_int(ctx.dtype(0)) else torch.log(s)


#: op -> (reduction over dims, elementwise part applied without reduction (no-op case))
_REDUCERS = {
    "ReduceSum": (_sum, lambda x: x),
    "ReduceMean": (_mean, lambda x: x),
    "ReduceMax": (_max, lambda x: x),
    "ReduceMin": (_min, lambda x: x),
    "ReduceProd": (_prod, lambda x: x),
    "ReduceL1": (lambda ctx, x, d, k: _sum(ctx, torch.abs(x), d, k), torch.abs),
    "ReduceL2": (_l2, torch.abs),
    "ReduceLogSum": (_log_sum, torch.log),
    "ReduceLogSumExp": (_logsumexp, lambda x: x),
    "ReduceSumSquare": (lambda ctx, x, d, k: _sum(ctx, x * x, d, k), lambda x: x * x),
}


def _lowest(dt):
    return False if dt == np.bool_ else (np.iinfo(dt).min if is_int(dt) else -np.inf)


def _highest(dt):
    return True if dt == np.bool_ else (np.iinfo(dt).max if is_int(dt) else np.inf)


#: identity of the reductions torch cannot take over an empty set
_EMPTY = {"ReduceMax": _lowest, "ReduceMin": _highest, "ReduceLogSumExp": lambda dt: -np.inf}


def _reduce_converter(op, from_input):
    reducer, elementwise = _REDUCERS[op]

    def convert(ctx, x, axes=None):
        dt = ctx.dtype(0)
        if dt == np.uint64:
            raise ctx.unsupported("uint64 input (no torch CPU reduction kernels)")
        dims = _axes(ctx, from_input)
        if dt in NARROW_UNSIGNED:
            x = x.to(torch.int64)
            y = elementwise(x) if not dims else reducer(ctx, x, dims, bool(ctx.attr("keepdims", 1)))
            return y.to(tdtype(ctx.out_dtype(0)))
        if not dims:
            return elementwise(x)
        keep = bool(ctx.attr("keepdims", 1))
        if op in _EMPTY and any(ctx.shape(0)[d] == 0 for d in dims):
            # reducing an empty set: the reduction's identity (torch's amax/amin raise)
            return np.full(ctx.out_shape(0), _EMPTY[op](ctx.dtype(0)), dtype=ctx.dtype(0))
        return reducer(ctx, x, dims, keep)

    convert.__name__ = op.lower()
    convert.__doc__ = f"{op} with keepdims and noop_with_empty_axes ({'axes input' if from_input else 'axes attribute'})."
    return convert


for _op in _REDUCERS:
    TABLE.op(_op, since=1)(_reduce_converter(_op, from_input=False))
    TABLE.op(_op, since=13 if _op == "ReduceSum" else 18)(_reduce_converter(_op, from_input=True))


def _arg(fn):
    def convert(ctx, x):
        shape = ctx.shape(0)
        dt = ctx.dtype(0)
        if dt == np.uint64:
            x = x.view(torch.int64) ^ -(2**63)  # order-preserving map onto int64
        elif dt == np.bool_:
            x = x.to(torch.uint8)
        elif dt in NARROW_UNSIGNED:
            x = x.to(torch.int64)
        axis = axis_of(ctx.attr("axis", 0), len(shape))
        keep = bool(ctx.attr("keepdims", 1))
        if ctx.attr("select_last_index", 0):
            return (shape[axis] - 1) - fn(torch.flip(x, [axis]), axis, keepdim=keep)
        return fn(x, axis, keepdim=keep)

    return convert


TABLE.op("ArgMax", since=1)(_arg(torch.argmax))
TABLE.op("ArgMin", since=1)(_arg(torch.argmin))


def _scan(fn, identity):
    def convert(ctx, x, axis):
        rank = len(ctx.shape(0))
        ax = axis_of(required_ints(ctx, 1, "axis")[0], rank)
        n = ctx.shape(0)[ax]
        reverse, exclusive = ctx.attr("reverse", 0), ctx.attr("exclusive", 0)
        src = ctx.dtype(0)
        # wide unsigned ints: uint16/32 computed in int64 (cast back wraps like numpy),
        # uint64 on its int64 bits (sums and products wrap identically)
        if src in NARROW_UNSIGNED:
            x = x.to(torch.int64)
        elif src == np.uint64:
            x = x.view(torch.int64)
        dt = torch.int64 if src in NARROW_UNSIGNED or src == np.uint64 else tdtype(src)
        y = torch.flip(x, [ax]) if reverse else x
        y = fn(y, ax, dtype=dt)
        if exclusive:
            first = torch.full_like(y.narrow(ax, 0, 1), identity)
            y = torch.cat([first, y.narrow(ax, 0, n - 1)], ax)
        y = torch.flip(y, [ax]) if reverse else y
        if src in NARROW_UNSIGNED:
            return y.to(tdtype(src))
        return y.view(torch.uint64) if src == np.uint64 else y

    return convert


TABLE.op("CumSum", since=11)(_scan(torch.cumsum, 0))
TABLE.op("CumProd", since=26)(_scan(torch.cumprod, 1))
