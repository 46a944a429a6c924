"""ONNX -> jax converters: reduce ops (see :mod:`compstack.translate` for the contract).

``Reduce*`` take their axes as an attribute before opset 18 (ReduceSum: 13) and as a
static input after. Empty axes reduce everything, unless ``noop_with_empty_axes`` is set:
then nothing is reduced and only the elementwise part applies (``ReduceSumSquare`` squares),
as in onnx.reference. Integer ``ReduceMean`` truncates toward zero.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from compstack.translate.jax import TABLE
from compstack.translate.jax._common import ints, norm_axes, norm_axis


def _out(x):
    return jnp.result_type(x)


def _is_int(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.integer)


def _mean(x, axis, keepdims):
    if _is_int(x.dtype):
        n = int(np.prod([x.shape[a] for a in axis])) if axis is not None else x.size
        s = jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
        return lax.div(s, jnp.asarray(max(n, 1), x.dtype))
    return jnp.mean(x, axis=axis, keepdims=keepdims)


def _logsumexp(x, axis, keepdims):
    finite = jnp.where(jnp.isinf(x), -jnp.inf, x)
    mx = jnp.max(finite, axis=axis, keepdims=True)
    mx = jnp.where(jnp.isfinite(mx), mx, jnp.zeros((), x.dtype))
    res = jnp.log(jnp.sum(jnp.exp(x - mx), axis=axis, keepdims=True)) + mx
    return res if keepdims else jnp.squeeze(res, axis=axis)


def _ident_max(dtype):
    if dtype == jnp.bool_:
        return False
    return jnp.iinfo(dtype).min if _is_int(dtype) else -jnp.inf


def _ident_min(dtype):
    if dtype == jnp.bool_:
        return True
    return jnp.iinfo(dtype).max if _is_int(dtype) else jnp.inf


#: op -> (reduce(x, axes or None, keepdims), value of an empty reduction or None)
_REDUCE = {
    "ReduceSum": (lambda x, a, k: jnp.sum(x, axis=a, keepdims=k, dtype=x.dtype), lambda d: 0),
    "ReduceMean": (_mean, lambda d: jnp.nan),
    "ReduceMax": (lambda x, a, k: jnp.max(x, axis=a, keepdims=k), _ident_max),
    "ReduceMin": (lambda x, a, k: jnp.min(x, axis=a, keepdims=k), _ident_min),
    "ReduceProd": (lambda x, a, k: jnp.prod(x, axis=a, keepdims=k, dtype=x.dtype), lambda d: 1),
    "ReduceL1": (lambda x, a, k: jnp.sum(jnp.abs(x), axis=a, keepdims=k, dtype=x.dtype), lambda d: 0),
    "ReduceL2": (lambda x, a, k: jnp.sqrt(jnp.sum(x * x, axis=a, keepdims=k)), lambda d: 0),
    "ReduceSumSquare": (lambda x, a, k: jnp.sum(x * x, axis=a, keepdims=k, dtype=x.dtype), lambda d: 0),
    "ReduceLogSum": (lambda x, a, k: jnp.log(jnp.sum(x, axis=a, keepdims=k)), lambda d: -jnp.inf),
    "ReduceLogSumExp": (_logsumexp, lambda d: -jnp.inf),
}


def _reduce(ctx, op, x, axes):
    fn, empty = _REDUCE[op]
    rank = jnp.ndim(x)
    keepdims = bool(ctx.attr("keepdims", 1))
    if len(axes) == 0:
        if ctx.attr("noop_with_empty_axes", 0):
            return fn(jnp.asarray(x), (), keepdims).astype(_out(x))
        axes = tuple(range(rank))
    axes = tuple(sorted(set(norm_axes(axes, rank))))
    x = jnp.asarray(x)
    if x.size == 0:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)
        return jnp.full(shape, empty(x.dtype), _out(x))
    return fn(x, axes, keepdims).astype(_out(x))


def _register(op: str, input_since: int) -> None:
    @TABLE.op(op, since=1)
    def convert_attr(ctx, x):
        return _reduce(ctx, op, x, tuple(ints(ctx.attr("axes"))))

    @TABLE.op(op, since=input_since)
    def convert(ctx, x, axes=None):
        return _reduce(ctx, op, x, tuple(ints(ctx.static(1, "axes")) if axes is not None else ()))

    convert_attr.__doc__ = f"ONNX {op} before {input_since}: ``axes`` attribute, ``keepdims``."
    convert.__doc__ = f"ONNX {op}-{input_since}: static ``axes`` input, ``keepdims``, ``noop_with_empty_axes``."


for _op in _REDUCE:
    _register(_op, 13 if _op == "ReduceSum" else 18)


def _arg(ctx, x, fn):
    rank = jnp.ndim(x)
    axis = norm_axis(ctx.attr("axis", 0), rank)
    keepdims = bool(ctx.attr("keepdims", 1))
    x = jnp.asarray(x)
    if ctx.attr("select_last_index", 0):
        n = x.shape[axis]
        idx = (n - 1) - fn(jnp.flip(x, axis), axis=axis, keepdims=keepdims)
    else:
        idx = fn(x, axis=axis, keepdims=keepdims)
    return idx.astype(jnp.int64)


@TABLE.op("ArgMax", since=1)
def argmax(ctx, x):
    """ONNX ArgMax (int64 indices; first maximum, or last with ``select_last_index``)."""
    return _arg(ctx, x, jnp.argmax)


@TABLE.op("ArgMin", since=1)
def argmin(ctx, x):
    """ONNX ArgMin (int64 indices; first minimum, or last with ``select_last_index``)."""
    return _arg(ctx, x, jnp.argmin)
