"""ONNX -> fx converters: indexing ops (Gather*, Scatter*, Where, Compress, TopK, OneHot,
ReverseSequence) (see :mod:`compstack.translate` for the contract).

Runtime indices may be negative (counting from the end of the indexed dim): they are
wrapped with ``torch.where`` before torch sees them; indices known at conversion time
are wrapped in numpy.
"""

from __future__ import annotations

import numpy as np
import torch

from compstack.translate.fx import TABLE
from compstack.translate.fx._util import (
    axis_of,
    known,
    moves_data,
    normalize_index,
    out_shape_or_none,
    required_ints,
    tdtype,
)


def _indices(ctx, i, idx, size):
    """Input ``i`` (indices into a dim of ``size``) as int64 with negatives wrapped."""
    arr = known(ctx, i)
    if arr is not None:
        arr = np.asarray(arr).astype(np.int64)
        return torch.from_numpy(np.where(arr < 0, arr + size, arr))
    return normalize_index(idx, size)


@TABLE.op("Gather", since=13)
@moves_data(0)
def gather(ctx, x, idx):
    """Gather along ``axis`` (output: data dims before axis, index dims, data dims after)."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 0), len(shape))
    arr = known(ctx, 1)
    if arr is not None and np.ndim(arr) == 0:
        i = int(arr)
        return torch.select(x, axis, i + shape[axis] if i < 0 else i)
    ishape = list(ctx.shape(1))
    flat = _indices(ctx, 1, idx, shape[axis]).reshape(-1)
    y = torch.index_select(x, axis, flat)
    return y.reshape(list(shape[:axis]) + ishape + list(shape[axis + 1:]))


TABLE.op("Gather", since=1)(gather)


@TABLE.op("GatherElements", since=11)
@moves_data(0)
def gather_elements(ctx, x, idx):
    """GatherElements along ``axis`` (``torch.gather``)."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 0), len(shape))
    return torch.gather(x, axis, _indices(ctx, 1, idx, shape[axis]))


def _linear_index(ctx, idx, dims):
    """Row-major linear index of the last axis of ``idx`` (coordinates into ``dims``),
    negative coordinates wrapped."""
    k = len(dims)
    idx = idx.to(torch.int64)
    sizes = torch.tensor(dims, dtype=torch.int64)
    idx = torch.where(idx < 0, idx + sizes, idx)
    strides = [int(np.prod(dims[j + 1:], dtype=np.int64)) for j in range(k)]
    return (idx * torch.tensor(strides, dtype=torch.int64)).sum(-1)


@TABLE.op("GatherND", since=12)
@moves_data(0)
def gather_nd(ctx, x, idx):
    """GatherND with ``batch_dims``: the index tuples are linearised and gathered from the
    data reshaped to (batch, indexed, rest)."""
    dshape, ishape = list(ctx.shape(0)), list(ctx.shape(1))
    b = ctx.attr("batch_dims", 0)
    k = ishape[-1]
    batch = int(np.prod(dshape[:b], dtype=np.int64))
    indexed = dshape[b:b + k]
    rest = int(np.prod(dshape[b + k:], dtype=np.int64))
    n_idx = int(np.prod(ishape[b:-1], dtype=np.int64))
    data = x.reshape(batch, int(np.prod(indexed, dtype=np.int64)), rest)
    lin = _linear_index(ctx, idx.reshape(batch, n_idx, k), indexed)
    y = torch.gather(data, 1, lin.unsqueeze(-1).expand(batch, n_idx, rest))
    return y.reshape(ishape[:-1] + dshape[b + k:])


_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _reduction(ctx):
    reduction = ctx.attr("reduction", "none")
    if reduction != "none" and reduction not in _REDUCE:
        raise ctx.unsupported(f"reduction={reduction!r}")
    return reduction


@TABLE.op("ScatterElements", since=11)
@moves_data(0, 2)
def scatter_elements(ctx, x, idx, updates):
    """ScatterElements along ``axis`` with ``reduction`` none/add/mul/max/min (duplicate
    indices with ``none``: one of the updates wins, as the spec allows)."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 0), len(shape))
    index = _indices(ctx, 1, idx, shape[axis])
    reduction = _reduction(ctx)
    if reduction == "none":
        return torch.scatter(x, axis, index, updates)
    return torch.scatter_reduce(x, axis, index, updates, _REDUCE[reduction], include_self=True)


TABLE.op("Scatter", since=9)(scatter_elements)


@TABLE.op("ScatterND", since=11)
@moves_data(0, 2)
def scatter_nd(ctx, x, idx, updates):
    """ScatterND with ``reduction`` none/add/mul/max/min: index tuples linearised over the
    data reshaped to (indexed, rest)."""
    dshape, ishape = list(ctx.shape(0)), list(ctx.shape(1))
    k = ishape[-1]
    indexed = dshape[:k]
    rest = int(np.prod(dshape[k:], dtype=np.int64))
    n_idx = int(np.prod(ishape[:-1], dtype=np.int64))
    data = x.reshape(int(np.prod(indexed, dtype=np.int64)), rest)
    lin = _linear_index(ctx, idx.reshape(n_idx, k), indexed)
    upd = updates.reshape(n_idx, rest)
    reduction = _reduction(ctx)
    if reduction == "none":
        y = torch.index_put(data, (lin,), upd)
    elif reduction == "add":
        y = torch.index_put(data, (lin,), upd, accumulate=True)
    else:
        y = torch.scatter_reduce(data, 0, lin.unsqueeze(-1).expand(n_idx, rest), upd, _REDUCE[reduction],
                                 include_self=True)
    return y.reshape(dshape)


@TABLE.op("Where", since=9)
def where(ctx, cond, x, y):
    """Where (numpy broadcasting of the three operands)."""
    return torch.where(cond, x, y)


@TABLE.op("Compress", since=11)
@moves_data(0)
def compress(ctx, x, condition):
    """Compress with a condition known at conversion time (a runtime one gives a dynamic
    shape); without ``axis`` the input is flattened first."""
    cond = np.asarray(ctx.static(1, "condition (the output shape depends on it)")).astype(bool).reshape(-1)
    axis = ctx.attr("axis", None)
    if axis is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = axis_of(axis, len(ctx.shape(0)))
    keep = np.nonzero(cond)[0].astype(np.int64)
    return torch.index_select(x, axis, torch.from_numpy(keep))


@TABLE.op("TopK", since=11)
def top_k(ctx, x, k):
    """TopK (``largest``, ``sorted``): a stable sort, so equal values keep the lower index
    first as the spec requires; indices int64."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", -1), len(shape))
    if known(ctx, 1) is None and out_shape_or_none(ctx) is not None:
        kk = ctx.out_shape(0)[axis]  # a runtime k: the inferred output size
    else:
        kk = required_ints(ctx, 1, "k")[0]
    dt = ctx.dtype(0)
    xs = x.to(torch.int64) if dt in (np.uint16, np.uint32) else x
    res = torch.sort(xs, dim=axis, descending=bool(ctx.attr("largest", 1)), stable=True)
    values = res[0].narrow(axis, 0, kk)
    if dt in (np.uint16, np.uint32):
        values = values.to(tdtype(dt))
    return values, res[1].narrow(axis, 0, kk)


TABLE.op("TopK", since=10)(top_k)


@TABLE.op("NonZero", since=9)
def non_zero(ctx, x):
    """NonZero: unsupported (its output shape depends on the data)."""
    raise ctx.unsupported("the output shape depends on the input values (dynamic shape)")


@TABLE.op("OneHot", since=11)
def one_hot(ctx, indices, depth, values):
    """OneHot along ``axis``: negative indices wrap; out-of-range ones give all ``off``."""
    in_shape = ctx.shape(0)
    rank = len(in_shape) + 1
    axis = axis_of(ctx.attr("axis", -1), rank)
    if known(ctx, 1) is None and out_shape_or_none(ctx) is not None:
        d = ctx.out_shape(0)[axis]  # a runtime depth: the inferred output size
    else:
        d = int(np.asarray(ctx.static(1, "depth")).reshape(-1)[0])
    idx = torch.where(indices < 0, indices + d, indices)
    shape = [1] * rank
    shape[axis] = d
    targets = torch.arange(d, dtype=tdtype(ctx.dtype(0))).reshape(shape)
    hot = torch.unsqueeze(idx, axis) == targets
    vals = known(ctx, 2)
    out = tdtype(ctx.out_dtype(0))
    if vals is not None:
        off, on = (torch.tensor(v, dtype=out) for v in np.asarray(vals).reshape(-1)[:2])
    else:
        off, on = values[0], values[1]
    return torch.where(hot, on, off)


@TABLE.op("ReverseSequence", since=10)
@moves_data(0)
def reverse_sequence(ctx, x, lens):
    """ReverseSequence: reverse the first ``sequence_lens[b]`` steps of each batch entry
    (a gather along ``time_axis``)."""
    shape = list(ctx.shape(0))
    rank = len(shape)
    t_axis = axis_of(ctx.attr("time_axis", 0), rank)
    b_axis = axis_of(ctx.attr("batch_axis", 1), rank)
    t_shape, b_shape = [1] * rank, [1] * rank
    t_shape[t_axis] = shape[t_axis]
    b_shape[b_axis] = shape[b_axis]
    t = torch.arange(shape[t_axis], dtype=torch.int64).reshape(t_shape)
    n = lens.to(torch.int64).reshape(b_shape)
    src = torch.where(t < n, n - 1 - t, t)
    return torch.gather(x, t_axis, src.expand(shape))


@TABLE.op("TensorScatter", since=24)
def tensor_scatter(ctx, past, update, write_indices=None):
    """TensorScatter (KV-cache update): ``update`` written into ``past`` along ``axis`` from
    ``write_indices[b]`` per batch entry (``mode`` linear, or circular: wrapping)."""
    shape, ushape = list(ctx.shape(0)), list(ctx.shape(1))
    rank = len(shape)
    axis = axis_of(ctx.attr("axis", -2), rank)
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular") or axis == 0:
        raise ctx.unsupported(f"mode={mode!r} axis={axis}")
    batch, seq = shape[0], ushape[axis]
    start = (write_indices.to(torch.int64) if write_indices is not None
             else torch.zeros(batch, dtype=torch.int64)).reshape(batch, 1)
    pos = start + torch.arange(seq, dtype=torch.int64).reshape(1, seq)
    if mode == "circular":
        pos = torch.remainder(pos, shape[axis])
    view = [batch] + [1] * (rank - 1)
    view[axis] = seq
    index = pos.reshape(view).expand(ushape)
    return torch.scatter(past, axis, index, update)
