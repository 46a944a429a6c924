"""ONNX -> fx converters: shape and layout ops (Reshape, Squeeze, Slice, Pad, Split, ...)
(see :mod:`compstack.translate` for the contract).

Shape operands (``shape``, ``axes``, ``starts``, ``pads``, ``repeats``...) must be known at
conversion time. Ops whose result depends only on static shapes (Shape, Size, EyeLike,
ConstantOfShape) return numpy arrays, so later shape arithmetic keeps being folded.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from compstack.translate import slice_bounds
from compstack.translate.fx import TABLE
from compstack.translate.fx._util import (
    as_signed,
    as_unsigned,
    axis_of,
    known,
    moves_data,
    out_shape_or_none,
    required_ints,
    static_ints,
    tdtype,
)


@TABLE.op("Identity", since=1)
def identity(ctx, x):
    """Identity."""
    return x


def _static_or_out_shape(ctx, i, what):
    """Input ``i`` as ints when known; for a runtime one, the node's static output shape
    (which it determines), else raise."""
    if known(ctx, i) is None and ctx.has(i):
        out = out_shape_or_none(ctx)
        if out is not None:
            return list(out)
    return static_ints(ctx, i, what)


@TABLE.op("Reshape", since=5)
def reshape(ctx, x, shape):
    """Reshape: 0 copies the input dim unless ``allowzero=1``; -1 is inferred. A runtime
    ``shape`` is taken from shape inference's output shape."""
    if known(ctx, 1) is None and out_shape_or_none(ctx) is not None:
        return torch.reshape(x, ctx.out_shape(0))  # a runtime shape: the inferred output
    target = required_ints(ctx, 1, "shape")
    if not ctx.attr("allowzero", 0) and 0 in target:
        in_shape = ctx.shape(0)
        target = [in_shape[i] if d == 0 else d for i, d in enumerate(target)]
    return torch.reshape(x, target)


@TABLE.op("Flatten", since=1)
def flatten(ctx, x):
    """Flatten to 2-D at ``axis`` (default 1; negative from 11)."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 1), len(shape))
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    cols = int(np.prod(shape[axis:], dtype=np.int64))
    return torch.reshape(x, (rows, cols))


def _squeeze(ctx, x, axes):
    shape = ctx.shape(0)
    if axes is None or len(axes) == 0:
        dims = [i for i, d in enumerate(shape) if d == 1]
    else:
        dims = sorted({axis_of(a, len(shape)) for a in axes})
    out = [d for i, d in enumerate(shape) if i not in dims]
    return torch.reshape(x, out) if dims else x


@TABLE.op("Squeeze", since=13)
def squeeze(ctx, x, axes=None):
    """Squeeze the ``axes`` input (all size-1 dims when omitted; a runtime one: reshape to
    the inferred output shape)."""
    if ctx.has(1) and known(ctx, 1) is None:
        return torch.reshape(x, _static_or_out_shape(ctx, 1, "axes"))
    return _squeeze(ctx, x, static_ints(ctx, 1, "axes") if ctx.has(1) else None)


@TABLE.op("Squeeze", since=1)
def squeeze_1(ctx, x):
    """Squeeze before 13: ``axes`` attribute."""
    return _squeeze(ctx, x, ctx.attr("axes", None))


def _unsqueeze(ctx, x, axes):
    rank = len(ctx.shape(0)) + len(axes)
    for a in sorted(axis_of(a, rank) for a in axes):
        x = torch.unsqueeze(x, a)
    return x


@TABLE.op("Unsqueeze", since=13)
def unsqueeze(ctx, x, axes):
    """Unsqueeze at the ``axes`` input (positions in the output; a runtime one: reshape to
    the inferred output shape)."""
    if known(ctx, 1) is None:
        return torch.reshape(x, _static_or_out_shape(ctx, 1, "axes"))
    return _unsqueeze(ctx, x, static_ints(ctx, 1, "axes"))


@TABLE.op("Unsqueeze", since=1)
def unsqueeze_1(ctx, x):
    """Unsqueeze before 13: ``axes`` attribute."""
    return _unsqueeze(ctx, x, ctx.attr("axes"))


@TABLE.op("Transpose", since=1)
def transpose(ctx, x):
    """Transpose by ``perm`` (default: reversed dims)."""
    perm = ctx.attr("perm", None)
    if perm is None:
        perm = list(reversed(range(len(ctx.shape(0)))))
    return torch.permute(x, [int(p) for p in perm])


@TABLE.op("Concat", since=4)
def concat(ctx, *xs):
    """Concat along ``axis``."""
    rank = len(ctx.shape(0))
    return torch.cat([x for x in xs if x is not None], axis_of(ctx.attr("axis"), rank))


def _split(ctx, x, sizes):
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 0), len(shape))
    n_out = len(ctx.node.outputs)
    if sizes is None:
        num = ctx.attr("num_outputs", None) or n_out
        dim = shape[axis]
        chunk = -(-dim // num)
        sizes = [chunk] * (num - 1) + [dim - chunk * (num - 1)]
    parts = torch.split(x, [int(s) for s in sizes], axis)
    return tuple(parts[i] for i in range(len(sizes)))


@TABLE.op("Split", since=13)
def split(ctx, x, sizes=None):
    """Split by the ``split`` input or, when omitted, into ``num_outputs`` (18) or as many
    outputs as the node has, the last chunk smaller when uneven. A runtime ``split`` is
    read off the inferred output shapes."""
    if ctx.has(1) and known(ctx, 1) is None:
        axis = axis_of(ctx.attr("axis", 0), len(ctx.shape(0)))
        shapes = [out_shape_or_none(ctx, j) for j in range(len(ctx.node.outputs))]
        if all(s is not None for s in shapes):
            return _split(ctx, x, [s[axis] for s in shapes if s is not None])  # all are
    return _split(ctx, x, static_ints(ctx, 1, "split") if ctx.has(1) else None)


@TABLE.op("Split", since=2)
def split_2(ctx, x):
    """Split before 13: ``split`` attribute."""
    return _split(ctx, x, ctx.attr("split", None))


@TABLE.op("Tile", since=6)
def tile(ctx, x, repeats):
    """Tile by the ``repeats`` input (a runtime one: output dims / input dims)."""
    if known(ctx, 1) is None and out_shape_or_none(ctx) is not None:
        reps = [o // i if i else 1 for o, i in zip(ctx.out_shape(0), ctx.shape(0))]
        return x.repeat(reps)
    return x.repeat(static_ints(ctx, 1, "repeats"))


@TABLE.op("Expand", since=8)
def expand(ctx, x, shape):
    """Expand: numpy broadcast of the input with ``shape`` (either may have 1s; a runtime
    ``shape``: the inferred output shape)."""
    out = np.broadcast_shapes(tuple(ctx.shape(0)), tuple(_static_or_out_shape(ctx, 1, "shape")))
    return torch.broadcast_to(x, out) if out != tuple(ctx.shape(0)) else x


def _pad_index(mode, size, lo, hi):
    """Source indices (into a dim of ``size``) of positions ``lo..hi-1`` for the non-constant
    Pad modes (numpy's ``reflect``/``edge``/``wrap``)."""
    pos = np.arange(lo, hi)
    if mode == "edge":
        return np.clip(pos, 0, size - 1)
    if mode == "wrap":
        return np.mod(pos, size)
    if size == 1:
        return np.zeros_like(pos)
    period = 2 * (size - 1)
    j = np.mod(pos, period)
    return np.where(j >= size, period - j, j)


def _pad(ctx, x, pads, value, mode, axes=None):
    shape = ctx.shape(0)
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [axis_of(a, rank) for a in axes]
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = int(pads[i]), int(pads[len(axes) + i])
    if mode == "constant":
        if isinstance(value, (int, float, bool)) or value is None:
            value = 0 if value is None else value
            if not any(begin + end):
                return x
            torch_pads = []
            for b, e in zip(reversed(begin), reversed(end)):
                torch_pads += [b, e]
            if ctx.dtype(0) == np.bool_:
                return F.pad(x.to(torch.uint8), torch_pads, value=int(value)).to(torch.bool)
            return F.pad(x, torch_pads, value=value)
        # runtime constant: pad with zeros, then select the pad value where padded
        mask = np.ones(shape, dtype=bool)
        mask = np.pad(mask, [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)], constant_values=False)
        mask = mask[tuple(slice(max(-b, 0), mask.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))]
        padded = _pad(ctx, x, pads, 0, "constant", axes)
        return torch.where(torch.from_numpy(mask), padded, value.reshape(()))
    if mode not in ("reflect", "edge", "wrap"):
        raise ctx.unsupported(f"mode={mode!r}")
    x = as_signed(ctx, 0, x)  # torch has no index_select for uint16/32/64
    for a in range(rank):
        b, e = begin[a], end[a]
        if b == 0 and e == 0:
            continue
        lo, hi = max(-b, 0), shape[a] - max(-e, 0)
        size = hi - lo
        if size <= 0 and (b > 0 or e > 0):
            raise ctx.unsupported(f"{mode} padding of an empty dim")
        idx = _pad_index(mode, size, -max(b, 0), size + max(e, 0)) + lo
        x = torch.index_select(x, a, torch.from_numpy(idx.astype(np.int64)))
    return as_unsigned(ctx, 0, x)


@TABLE.op("Pad", since=11)
def pad(ctx, x, pads, constant_value=None, axes=None):
    """Pad (constant/reflect/edge/wrap; negative pads crop first; optional ``axes``, 18)."""
    value = None
    if ctx.has(2):
        cv = known(ctx, 2)
        value = constant_value if cv is None else (np.asarray(cv).reshape(-1)[0].item() if cv.size else None)
    ax = static_ints(ctx, 3, "axes") if ctx.has(3) else None
    return _pad(ctx, x, static_ints(ctx, 1, "pads"), value, ctx.attr("mode", "constant"), ax)


@TABLE.op("Pad", since=2)
def pad_2(ctx, x):
    """Pad before 11: ``pads``, ``mode`` and ``value`` attributes."""
    return _pad(ctx, x, ctx.attr("pads"), ctx.attr("value", 0.0), ctx.attr("mode", "constant"))


@TABLE.op("Pad", since=1)
def pad_1(ctx, x):
    """Pad-1: the pads attribute is called ``paddings``."""
    return _pad(ctx, x, ctx.attr("paddings"), ctx.attr("value", 0.0), ctx.attr("mode", "constant"))


def _slice(ctx, x, starts, ends, axes, steps):
    shape = ctx.shape(0)
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * rank
    flips = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = axis_of(a, rank)
        dim = shape[a]
        if st == 0:
            raise ctx.unsupported("step 0")
        s, e = slice_bounds(s, e, st, dim)
        if st > 0:
            index[a] = slice(s, e, st)
        else:
            if len(range(s, e, st)) == 0:
                index[a] = slice(0, 0)
            else:
                # torch has no negative steps: flip, then slice forward
                flips.append(a)
                index[a] = slice(dim - 1 - s, dim - 1 - e, -st)
    if flips:
        x = torch.flip(x, flips)
    if all(i == slice(None) for i in index):
        return x
    return x[tuple(index)]


@TABLE.op("Slice", since=10)
@moves_data(0)
def slice_(ctx, x, starts, ends, axes=None, steps=None):
    """Slice (negative and out-of-range starts/ends clamped as in the spec; negative steps
    through ``flip``)."""
    return _slice(ctx, x, static_ints(ctx, 1, "starts"), static_ints(ctx, 2, "ends"),
                  static_ints(ctx, 3, "axes") if ctx.has(3) else None,
                  static_ints(ctx, 4, "steps") if ctx.has(4) else None)


@TABLE.op("Slice", since=1)
@moves_data(0)
def slice_1(ctx, x):
    """Slice before 10: ``starts``/``ends``/``axes`` attributes."""
    return _slice(ctx, x, ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes", None), None)


@TABLE.op("Shape", since=1)
def shape_(ctx, x):
    """Shape (``start``/``end`` from 15): a conversion-time constant."""
    shape = ctx.shape(0)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    return np.array(shape[start:end], dtype=np.int64)


@TABLE.op("Size", since=1)
def size(ctx, x):
    """Size: a conversion-time constant."""
    return np.array(int(np.prod(ctx.shape(0), dtype=np.int64)), dtype=np.int64)


@TABLE.op("DepthToSpace", since=11)
def depth_to_space(ctx, x):
    """DepthToSpace (``mode`` DCR or CRD)."""
    b, c, h, w = ctx.shape(0)
    bs = ctx.attr("blocksize")
    mode = ctx.attr("mode", "DCR")
    if mode == "DCR":
        y = x.reshape(b, bs, bs, c // (bs * bs), h, w).permute(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        y = x.reshape(b, c // (bs * bs), bs, bs, h, w).permute(0, 1, 4, 2, 5, 3)
    else:
        raise ctx.unsupported(f"mode={mode!r}")
    return y.reshape(b, c // (bs * bs), h * bs, w * bs)


@TABLE.op("SpaceToDepth", since=1)
def space_to_depth(ctx, x):
    """SpaceToDepth (``mode`` DCR, or CRD from opset 28)."""
    b, c, h, w = ctx.shape(0)
    bs = ctx.attr("blocksize")
    mode = ctx.attr("mode", "DCR")
    y = x.reshape(b, c, h // bs, bs, w // bs, bs)
    if mode == "DCR":
        y = y.permute(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        y = y.permute(0, 1, 3, 5, 2, 4)
    else:
        raise ctx.unsupported(f"mode={mode!r}")
    return y.reshape(b, c * bs * bs, h // bs, w // bs)


@TABLE.op("Range", since=11)
def range_(ctx, start, limit, delta):
    """Range with runtime operands: ``start + arange(n) * delta``, ``n`` from shape
    inference (all-known operands are folded before conversion)."""
    (n,) = ctx.out_shape(0)
    dt = tdtype(ctx.out_dtype(0))
    steps = torch.arange(n, dtype=dt)
    return steps * delta.reshape(()) + start.reshape(())


@TABLE.op("ConstantOfShape", since=9)
def constant_of_shape(ctx, shape):
    """ConstantOfShape of a statically known output shape (``value`` attribute, default
    float32 0)."""
    value = ctx.attr("value", None)
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(ctx.out_shape(0), value[0], dtype=value.dtype)


@TABLE.op("Trilu", since=14)
@moves_data(0)
def trilu(ctx, x, k=None):
    """Trilu: upper (default) or lower triangle of the last two dims, diagonal offset k
    (a runtime k: a column - row >= k mask)."""
    upper = ctx.attr("upper", 1)
    if ctx.has(1) and known(ctx, 1) is None:
        rows, cols = ctx.shape(0)[-2:]
        diff = torch.arange(cols).reshape(1, cols) - torch.arange(rows).reshape(rows, 1)
        kk = k.reshape(()).to(torch.int64)
        keep = diff >= kk if upper else diff <= kk
        return torch.where(keep, x, torch.zeros_like(x))
    kk = required_ints(ctx, 1, "k")[0] if ctx.has(1) else 0
    return torch.triu(x, kk) if upper else torch.tril(x, kk)


@TABLE.op("EyeLike", since=9)
def eye_like(ctx, x):
    """EyeLike: a conversion-time constant (``dtype`` default: the input's, ``k``)."""
    rows, cols = ctx.shape(0)
    return np.eye(rows, cols, ctx.attr("k", 0), dtype=ctx.out_dtype(0))


@TABLE.op("CenterCropPad", since=18)
def center_crop_pad(ctx, x, shape):
    """CenterCropPad: centre crop or zero-pad each of ``axes`` to ``shape`` (the larger half
    of an odd difference goes at the end)."""
    in_shape = ctx.shape(0)
    rank = len(in_shape)
    axes = ctx.attr("axes", None) or list(range(rank))
    if known(ctx, 1) is None and out_shape_or_none(ctx) is not None:
        target = [ctx.out_shape(0)[axis_of(a, rank)] for a in axes]
    else:
        target = required_ints(ctx, 1, "shape")
    begin, end = [0] * rank, [0] * rank
    for a, t in zip(axes, target):
        a = axis_of(a, rank)
        d = int(t) - in_shape[a]
        # crop: negative pads; pad: positive ones; floor half first
        if d < 0:
            begin[a] = -((-d) // 2)
            end[a] = d - begin[a]
        else:
            begin[a] = d // 2
            end[a] = d - begin[a]
    torch_pads = []
    for b, e in zip(reversed(begin), reversed(end)):
        torch_pads += [b, e]
    return F.pad(x, torch_pads)
