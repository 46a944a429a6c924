"""ONNX -> jax converters: index ops (see :mod:`compstack.translate` for the contract).

Gathers and scatters (negative indices count from the end; out-of-range gather indices
are clamped, the spec leaves them undefined), TopK (ties: lower index first), Compress
with a static condition. Ops whose output shape depends on values (NonZero, Unique)
convert only when folded at conversion time.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from compstack.translate.jax import TABLE
from compstack.translate.jax._common import norm_axis, norm_index, shape_of


@TABLE.op("Gather", since=1)
def gather(ctx, x, indices):
    """ONNX Gather along ``axis`` (negative indices allowed)."""
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 0), len(shape))
    idx = norm_index(indices, shape[axis])
    return jnp.take(x, idx, axis=axis, mode="clip")


def _full_index(idx, axis):
    """The index tuple selecting ``out[i..] = data[i.. with idx[i..] at axis]``."""
    idx = jnp.asarray(idx)
    return tuple(idx if d == axis else lax.broadcasted_iota(idx.dtype, idx.shape, d) for d in range(idx.ndim))


@TABLE.op("GatherElements", since=11)
def gather_elements(ctx, x, indices):
    """ONNX GatherElements: ``out[i][j] = x[indices[i][j]][j]`` (for axis 0)."""
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 0), len(shape))
    idx = jnp.asarray(norm_index(indices, shape[axis]))
    return jnp.asarray(x)[_full_index(idx, axis)]


def _nd_index(idx, dims):
    """``indices[..., k]`` for each k, negatives wrapped by the data dims they index."""
    idx = jnp.asarray(idx)
    return tuple(jnp.where(idx[..., k] < 0, idx[..., k] + dims[k], idx[..., k]) for k in range(idx.shape[-1]))


@TABLE.op("GatherND", since=11)
def gather_nd(ctx, x, indices):
    """ONNX GatherND with ``batch_dims`` (12+)."""
    shape = shape_of(x)
    b = ctx.attr("batch_dims", 0)
    data = jnp.asarray(x)
    idx = jnp.asarray(indices)
    dims = shape[b:]

    def one(d, i):
        return d[_nd_index(i, dims)]

    if b == 0:
        return one(data, idx)
    nb = int(np.prod(shape[:b]))
    out = jax.vmap(one)(data.reshape((nb, *shape[b:])), idx.reshape((nb, *idx.shape[b:])))
    return out.reshape((*shape[:b], *out.shape[1:]))


def _scatter(ctx, ref, updates):
    reduction = ctx.attr("reduction", "none")
    if reduction == "none":
        return ref.set(updates)
    if reduction == "add":
        return ref.add(updates)
    if reduction == "mul":
        return ref.multiply(updates)
    if reduction == "max":
        return ref.max(updates)
    if reduction == "min":
        return ref.min(updates)
    raise ctx.unsupported(f"reduction={reduction!r}")


@TABLE.op("ScatterElements", since=11)
def scatter_elements(ctx, x, indices, updates):
    """ONNX ScatterElements, ``reduction`` none/add/mul/max/min (duplicate indices with
    ``none``: one of the updates wins, as the spec allows)."""
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 0), len(shape))
    idx = norm_index(indices, shape[axis])
    return _scatter(ctx, jnp.asarray(x).at[_full_index(idx, axis)], updates)


@TABLE.op("Scatter", since=9)
def scatter(ctx, x, indices, updates):
    """ONNX Scatter (deprecated in 11): ScatterElements without reduction."""
    return scatter_elements(ctx, x, indices, updates)


@TABLE.op("ScatterND", since=11)
def scatter_nd(ctx, x, indices, updates):
    """ONNX ScatterND, ``reduction`` none/add/mul/max/min (16/18)."""
    shape = shape_of(x)
    return _scatter(ctx, jnp.asarray(x).at[_nd_index(indices, shape)], updates)


@TABLE.op("Compress", since=9)
def compress(ctx, x, condition):
    """ONNX Compress with a static ``condition`` (the output shape depends on it)."""
    cond = np.asarray(ctx.static(1, "condition")).astype(bool).reshape(-1)
    keep = np.nonzero(cond)[0]
    axis = ctx.attr("axis", None)
    if axis is None:
        return jnp.take(jnp.reshape(x, -1), keep)
    return jnp.take(x, keep, axis=norm_axis(axis, jnp.ndim(x)))


def _topk(ctx, x, k, axis, largest):
    shape = shape_of(x)
    axis = norm_axis(axis, len(shape))
    x = jnp.asarray(x)
    iota = lax.broadcasted_iota(jnp.int64, x.shape, axis)
    if largest:
        vals, idx = lax.sort((x, -iota), dimension=axis, num_keys=2)
        vals, idx = jnp.flip(vals, axis), -jnp.flip(idx, axis)
    else:
        vals, idx = lax.sort((x, iota), dimension=axis, num_keys=2)
    return lax.slice_in_dim(vals, 0, k, axis=axis), lax.slice_in_dim(idx, 0, k, axis=axis)


@TABLE.op("TopK", since=1)
def topk_1(ctx, x):
    """ONNX TopK-1: ``k`` attribute, largest, sorted."""
    return _topk(ctx, x, ctx.attr("k"), ctx.attr("axis", -1), True)


@TABLE.op("TopK", since=10)
def topk(ctx, x, k):
    """ONNX TopK-10/11: static ``k`` input, ``largest``; always sorted (allowed for
    ``sorted=0``); ties give the lower index first, NaN is the largest."""
    kk = int(np.asarray(ctx.static(1, "k")).reshape(-1)[0])
    return _topk(ctx, x, kk, ctx.attr("axis", -1), bool(ctx.attr("largest", 1)))


@TABLE.op("NonZero", since=9)
def nonzero(ctx, x):
    """ONNX NonZero: only when folded (its output shape depends on the values)."""
    raise ctx.unsupported("output shape depends on run-time values (input is not known at compile time)")



@TABLE.op("TensorScatter", since=24)
def tensor_scatter(ctx, past, update, write_indices=None):
    """ONNX TensorScatter (KV-cache update): write ``update`` into ``past`` along ``axis``
    from each batch entry's ``write_indices`` (``mode`` linear, or circular: modulo the
    cache length)."""
    shape = shape_of(past)
    axis = norm_axis(ctx.attr("axis", -2), len(shape))
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.unsupported(f"mode={mode!r}")
    upd = jnp.asarray(update)
    start = jnp.zeros((shape[0],), jnp.int64) if write_indices is None else jnp.asarray(write_indices).astype(jnp.int64)
    bshape = [1] * upd.ndim
    bshape[0] = shape[0]
    pos = start.reshape(bshape) + lax.broadcasted_iota(jnp.int64, upd.shape, axis)
    if mode == "circular":
        pos = pos % shape[axis]
    index = tuple(pos if d == axis else lax.broadcasted_iota(jnp.int64, upd.shape, d) for d in range(upd.ndim))
    return jnp.asarray(past).at[index].set(upd, mode="drop")
