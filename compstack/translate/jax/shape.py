"""ONNX -> jax converters: shape ops (see :mod:`compstack.translate` for the contract).

Shape-changing inputs (Reshape's shape, Slice's starts/ends, Pad's pads, Tile's repeats...)
must be known at conversion time (XLA needs static shapes). ``Shape``, ``Size`` and
``EyeLike`` return numpy values, so what is computed from them is folded in turn.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from onnx import helper

from compstack.translate import slice_bounds
from compstack.translate.jax import TABLE
from compstack.translate.jax._common import ints, jdtype, norm_axes, norm_axis, shape_of

# --------------------------------------------------------------------------- reshape family


def _reshape_target(in_shape, shape, allowzero: bool) -> list[int]:
    out = list(shape)
    if not allowzero:
        out = [in_shape[i] if d == 0 else d for i, d in enumerate(out)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        total = int(np.prod(in_shape))
        out[out.index(-1)] = total // known if known else 0
    return out


@TABLE.op("Reshape", since=5)
def reshape(ctx, x, shape):
    """ONNX Reshape with a static shape: ``0`` copies the input dim (unless ``allowzero``),
    ``-1`` is inferred."""
    target = _reshape_target(shape_of(x), ints(ctx.static(1, "target shape")), bool(ctx.attr("allowzero", 0)))
    return jnp.reshape(x, target)


@TABLE.op("Reshape", since=1)
def reshape_1(ctx, x):
    """ONNX Reshape-1: ``shape`` attribute."""
    return jnp.reshape(x, _reshape_target(shape_of(x), ints(ctx.attr("shape")), False))


@TABLE.op("Flatten", since=1)
def flatten(ctx, x):
    """ONNX Flatten to 2-D at ``axis`` (negative allowed)."""
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 1), len(shape))
    return jnp.reshape(x, (int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))))


def _squeeze(ctx, x, axes):
    shape = shape_of(x)
    if axes is None or len(axes) == 0:
        axes = [i for i, d in enumerate(shape) if d == 1]
    return jnp.reshape(x, [d for i, d in enumerate(shape) if i not in norm_axes(axes, len(shape))])


@TABLE.op("Squeeze", since=1)
def squeeze_1(ctx, x):
    """ONNX Squeeze before 13: ``axes`` attribute (all size-1 axes when absent)."""
    return _squeeze(ctx, x, ints(ctx.attr("axes")))


@TABLE.op("Squeeze", since=13)
def squeeze(ctx, x, axes=None):
    """ONNX Squeeze-13: optional static ``axes`` input."""
    return _squeeze(ctx, x, ints(ctx.static(1, "axes")) if axes is not None else None)


def _unsqueeze(ctx, x, axes):
    shape = list(shape_of(x))
    rank = len(shape) + len(axes)
    out = list(shape)
    for a in sorted(norm_axes(axes, rank)):
        out.insert(a, 1)
    return jnp.reshape(x, out)


@TABLE.op("Unsqueeze", since=1)
def unsqueeze_1(ctx, x):
    """ONNX Unsqueeze before 13: ``axes`` attribute (positions in the output)."""
    return _unsqueeze(ctx, x, ints(ctx.attr("axes")))


@TABLE.op("Unsqueeze", since=13)
def unsqueeze(ctx, x, axes):
    """ONNX Unsqueeze-13: static ``axes`` input (positions in the output)."""
    return _unsqueeze(ctx, x, ints(ctx.static(1, "axes")))


@TABLE.op("Transpose", since=1)
def transpose(ctx, x):
    """ONNX Transpose (``perm`` default: reversed axes)."""
    perm = ints(ctx.attr("perm")) or None
    return jnp.transpose(x, perm)


@TABLE.op("Concat", since=4)
def concat(ctx, *inputs):
    """ONNX Concat along ``axis`` (negative allowed from 11)."""
    xs = [x for x in inputs if x is not None]
    axis = norm_axis(ctx.attr("axis"), jnp.ndim(xs[0]))
    return jnp.concatenate([jnp.asarray(x) for x in xs], axis=axis)


def _split(ctx, x, sizes):
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 0), len(shape))
    n_out = len(ctx.node.outputs)
    dim = shape[axis]
    if not sizes:
        num = ctx.attr("num_outputs", None) or n_out
        if ctx.attr("num_outputs", None) is not None:
            chunk = -(-dim // num)
            sizes = [min(chunk, dim - k * chunk) for k in range(num)]
        else:
            sizes = [dim // num] * num
    outs, start = [], 0
    for s in sizes:
        outs.append(lax.slice_in_dim(jnp.asarray(x), start, start + s, axis=axis))
        start += s
    return tuple(outs)


@TABLE.op("Split", since=1)
def split_1(ctx, x, split=None):
    """ONNX Split before 13: ``split`` attribute (or a second input in Split-1)."""
    sizes = ints(ctx.static(1, "split")) if split is not None else ints(ctx.attr("split"))
    return _split(ctx, x, sizes)


@TABLE.op("Split", since=13)
def split(ctx, x, split=None):
    """ONNX Split-13/18: optional static ``split`` input, else ``num_outputs`` (the last
    chunk smaller) or equal parts."""
    return _split(ctx, x, ints(ctx.static(1, "split")) if split is not None else [])


@TABLE.op("Tile", since=6)
def tile(ctx, x, repeats):
    """ONNX Tile with static ``repeats``."""
    return jnp.tile(x, ints(ctx.static(1, "repeats")))


@TABLE.op("Expand", since=8)
def expand(ctx, x, shape):
    """ONNX Expand: bidirectional broadcast of ``x`` with a static ``shape``."""
    target = np.broadcast_shapes(tuple(shape_of(x)), tuple(ints(ctx.static(1, "shape"))))
    return jnp.broadcast_to(x, target)


# --------------------------------------------------------------------------- pad / slice


def _pad(ctx, x, pads, mode, value, axes=None):
    rank = jnp.ndim(x)
    if isinstance(mode, bytes):
        mode = mode.decode()
    axes = list(range(rank)) if axes is None else list(norm_axes(axes, rank))
    n = len(axes)
    widths = [(0, 0)] * rank
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[n + i])
    x = jnp.asarray(x)
    if mode == "constant":
        value = jnp.zeros((), x.dtype) if value is None else jnp.asarray(value).reshape(()).astype(x.dtype)
        return lax.pad(x, value, [(lo, hi, 0) for lo, hi in widths])
    if mode not in ("reflect", "edge", "wrap"):
        raise ctx.unsupported(f"mode={mode!r}")
    # Negative pads crop first, then the remaining (non-negative) pads use ``mode``.
    crop = tuple(slice(max(-lo, 0), x.shape[a] - max(-hi, 0)) for a, (lo, hi) in enumerate(widths))
    x = x[crop]
    return jnp.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in widths], mode=mode)


@TABLE.op("Pad", since=1)
def pad_2(ctx, x):
    """ONNX Pad before 11: ``pads`` (``paddings`` in Pad-1), ``mode``, ``value`` attributes."""
    pads = ints(ctx.attr("pads", ctx.attr("paddings")))
    return _pad(ctx, x, pads, ctx.attr("mode", "constant"), ctx.attr("value", 0.0))


@TABLE.op("Pad", since=11)
def pad(ctx, x, pads, value=None, axes=None):
    """ONNX Pad-11+: static ``pads`` (negative crops), optional ``constant_value``, ``axes``
    (18), modes constant / reflect / edge / wrap (19)."""
    p = ints(ctx.static(1, "pads"))
    ax = ints(ctx.static(3, "axes")) if axes is not None else None
    return _pad(ctx, x, p, ctx.attr("mode", "constant"), value, ax)


def _slice(ctx, x, starts, ends, axes, steps):
    shape = shape_of(x)
    rank = len(shape)
    axes = list(range(len(starts))) if not axes else list(norm_axes(axes, rank))
    steps = steps or [1] * len(starts)
    index = [slice(None)] * rank
    for s, e, a, st in zip(starts, ends, axes, steps):
        dim = shape[a]
        if st == 0:
            raise ctx.unsupported("step 0")
        s, e = slice_bounds(s, e, st, dim)
        index[a] = slice(s, e, st) if st > 0 else slice(s, e if e >= 0 else None, st)
    return jnp.asarray(x)[tuple(index)]


@TABLE.op("Slice", since=1)
def slice_1(ctx, x):
    """ONNX Slice before 10: ``starts``/``ends``/``axes`` attributes."""
    return _slice(ctx, x, ints(ctx.attr("starts")), ints(ctx.attr("ends")), ints(ctx.attr("axes")), None)


@TABLE.op("Slice", since=10)
def slice_(ctx, x, starts, ends, axes=None, steps=None):
    """ONNX Slice-10+: static inputs; negative indices count from the end, out-of-range
    ones are clamped (to ``[0, dim]``, or ``[-1, dim - 1]`` for the end of a negative step)."""
    return _slice(ctx, x, ints(ctx.static(1, "starts")), ints(ctx.static(2, "ends")),
                  ints(ctx.static(3, "axes")) if axes is not None else None,
                  ints(ctx.static(4, "steps")) if steps is not None else None)


# --------------------------------------------------------------------------- shape queries


@TABLE.op("Shape", since=1)
def shape(ctx, x):
    """ONNX Shape (``start``/``end`` from 15), as a conversion-time int64 array."""
    dims = list(shape_of(x))
    rank = len(dims)
    start = ctx.attr("start", 0)
    end = ctx.attr("end", None)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = rank if end is None else min(max(end + rank if end < 0 else end, 0), rank)
    return np.asarray(dims[start:end], np.int64)


@TABLE.op("Size", since=1)
def size(ctx, x):
    """ONNX Size, as a conversion-time int64 scalar."""
    return np.asarray(int(np.prod(shape_of(x))), np.int64)


@TABLE.op("Identity", since=1)
def identity(ctx, x):
    """ONNX Identity."""
    return x


# --------------------------------------------------------------------------- rearrangements


@TABLE.op("DepthToSpace", since=1)
def depth_to_space(ctx, x):
    """ONNX DepthToSpace, ``mode`` DCR (default) or CRD."""
    n, c, h, w = shape_of(x)
    b = ctx.attr("blocksize")
    mode = ctx.attr("mode", "DCR")
    if mode == "DCR":
        y = jnp.reshape(x, (n, b, b, c // (b * b), h, w))
        y = jnp.transpose(y, (0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        y = jnp.reshape(x, (n, c // (b * b), b, b, h, w))
        y = jnp.transpose(y, (0, 1, 4, 2, 5, 3))
    else:
        raise ctx.unsupported(f"mode={mode!r}")
    return jnp.reshape(y, (n, c // (b * b), h * b, w * b))


@TABLE.op("SpaceToDepth", since=1)
def space_to_depth(ctx, x):
    """ONNX SpaceToDepth, the inverse of DepthToSpace; ``mode`` DCR (default) or CRD (28)."""
    n, c, h, w = shape_of(x)
    b = ctx.attr("blocksize")
    mode = ctx.attr("mode", "DCR")
    y = jnp.reshape(x, (n, c, h // b, b, w // b, b))
    if mode == "DCR":
        y = jnp.transpose(y, (0, 3, 5, 1, 2, 4))
    elif mode == "CRD":
        y = jnp.transpose(y, (0, 1, 3, 5, 2, 4))
    else:
        raise ctx.unsupported(f"mode={mode!r}")
    return jnp.reshape(y, (n, c * b * b, h // b, w // b))


@TABLE.op("Trilu", since=14)
def trilu(ctx, x, k=None):
    """ONNX Trilu: upper or lower triangle of the last two axes, diagonal offset ``k``
    (which may be computed at run time)."""
    if k is None or isinstance(k, np.ndarray):
        kk = int(np.asarray(k).reshape(-1)[0]) if k is not None else 0
        return jnp.triu(x, kk) if ctx.attr("upper", 1) else jnp.tril(x, kk)
    rows, cols = shape_of(x)[-2:]
    r = lax.broadcasted_iota(jnp.int64, (rows, cols), 0)
    c = lax.broadcasted_iota(jnp.int64, (rows, cols), 1)
    diag = jnp.reshape(k, ()).astype(jnp.int64)
    keep = (c - r >= diag) if ctx.attr("upper", 1) else (c - r <= diag)
    return jnp.where(keep, x, jnp.zeros((), jnp.result_type(x)))


@TABLE.op("ReverseSequence", since=10)
def reverse_sequence(ctx, x, lens):
    """ONNX ReverseSequence: reverse the first ``lens[b]`` steps of each batch entry."""
    shape = shape_of(x)
    b_axis, t_axis = ctx.attr("batch_axis", 1), ctx.attr("time_axis", 0)
    n_t, n_b = shape[t_axis], shape[b_axis]
    t = jnp.arange(n_t)[:, None]
    ln = jnp.asarray(lens).astype(jnp.int64)[None, :]
    src = jnp.where(t < ln, ln - 1 - t, t)  # (T, B)
    if t_axis > b_axis:
        src = src.T
    idx_shape = [1] * len(shape)
    idx_shape[t_axis], idx_shape[b_axis] = n_t, n_b
    src = jnp.broadcast_to(jnp.reshape(src, idx_shape), shape)
    return jnp.take_along_axis(jnp.asarray(x), src, axis=t_axis)


@TABLE.op("CenterCropPad", since=18)
def center_crop_pad(ctx, x, shape):
    """ONNX CenterCropPad: crop or zero-pad each of ``axes`` to the static ``shape``, centred
    (an odd crop or pad puts the extra element at the end)."""
    rank = jnp.ndim(x)
    axes = norm_axes(ints(ctx.attr("axes")) or list(range(rank)), rank)
    target = ints(ctx.static(1, "shape"))
    in_shape = shape_of(x)
    x = jnp.asarray(x)
    index = [slice(None)] * rank
    widths = [(0, 0)] * rank
    for a, t in zip(axes, target):
        d = in_shape[a]
        if t < d:
            start = (d - t) // 2
            index[a] = slice(start, start + t)
        elif t > d:
            lo = (t - d) // 2
            widths[a] = (lo, t - d - lo)
    return jnp.pad(x[tuple(index)], widths)


# --------------------------------------------------------------------------- generators


@TABLE.op("Range", since=11)
def range_(ctx, start, limit, delta):
    """ONNX Range; the output length must be static (known inputs are folded before)."""
    n = ctx.out_shape(0)[0]
    dtype = jnp.result_type(start)
    s = jnp.asarray(start).reshape(()).astype(dtype)
    d = jnp.asarray(delta).reshape(()).astype(dtype)
    return s + jnp.arange(n, dtype=dtype) * d


@TABLE.op("ConstantOfShape", since=9)
def constant_of_shape(ctx, shape):
    """ONNX ConstantOfShape with a static shape (``value`` default float32 0)."""
    value = ctx.attr("value", None)
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    return jnp.full(ints(ctx.static(0, "shape")), value.reshape(-1)[0], dtype=jdtype(value.dtype))


@TABLE.op("EyeLike", since=9)
def eye_like(ctx, x):
    """ONNX EyeLike: ones on diagonal ``k`` (a conversion-time value)."""
    rows, cols = shape_of(x)
    dt = ctx.attr("dtype", None)
    dtype = helper.tensor_dtype_to_np_dtype(dt) if dt is not None else np.dtype(jnp.result_type(x))
    return np.eye(rows, cols, k=ctx.attr("k", 0), dtype=dtype)


@TABLE.op("OneHot", since=9)
def one_hot(ctx, indices, depth, values):
    """ONNX OneHot: static ``depth``; negative indices wrap, out-of-range ones are all off."""
    d = int(np.asarray(ctx.static(1, "depth")).reshape(-1)[0])
    rank = jnp.ndim(indices)
    axis = norm_axis(ctx.attr("axis", -1), rank + 1)
    idx = jnp.asarray(indices)
    idx = jnp.where(idx < 0, idx + d, idx)
    iota = lax.broadcasted_iota(idx.dtype, (*idx.shape[:axis], d, *idx.shape[axis:]), axis)
    hit = iota == jnp.expand_dims(idx, axis)
    vals = jnp.asarray(values)
    return jnp.where(hit, vals[1], vals[0])


@TABLE.op("Col2Im", since=18)
def col2im(ctx, x, image_shape, block_shape):
    """ONNX Col2Im: sum the (N, C * prod(block), L) columns back into (N, C, *image_shape)
    (static image/block shapes; pads, strides, dilations)."""
    image = ints(ctx.static(1, "image_shape"))
    block = ints(ctx.static(2, "block_shape"))
    nd = len(image)
    dil = ints(ctx.attr("dilations")) or [1] * nd
    pads = ints(ctx.attr("pads")) or [0] * (2 * nd)
    strides = ints(ctx.attr("strides")) or [1] * nd
    n_blocks = [(image[i] + pads[i] + pads[nd + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
                for i in range(nd)]
    kk = np.stack(np.meshgrid(*[np.arange(b) for b in block], indexing="ij"), 0).reshape(nd, -1, 1)
    ll = np.stack(np.meshgrid(*[np.arange(b) for b in n_blocks], indexing="ij"), 0).reshape(nd, 1, -1)
    pos = [ll[i] * strides[i] - pads[i] + kk[i] * dil[i] for i in range(nd)]  # each (K, L)
    valid = np.all([(p >= 0) & (p < image[i]) for i, p in enumerate(pos)], axis=0)
    flat = np.ravel_multi_index([np.clip(p, 0, image[i] - 1) for i, p in enumerate(pos)], image)
    flat = np.where(valid, flat, int(np.prod(image)))  # out of range: dropped
    n, ckl, length = shape_of(x)
    k = int(np.prod(block))
    cols = jnp.reshape(x, (n, ckl // k, k, length))
    out = jnp.zeros((n, ckl // k, int(np.prod(image))), jnp.result_type(x))
    out = out.at[:, :, flat].add(cols, mode="drop")
    return out.reshape((n, ckl // k, *image))
