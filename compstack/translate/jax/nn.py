"""ONNX -> jax converters: nn ops (see :mod:`compstack.translate` for the contract).

Convolutions (``lax.conv_general_dilated``, also integer / quantized), pooling
(``lax.reduce_window``), normalizations, softmax family, LRN, Dropout, losses, Attention /
RotaryEmbedding, AffineGrid / GridSample / RoiAlign, RNN / GRU / LSTM (``lax.scan``).
Spatial attributes follow the ONNX spec's "auto_pad" / "pads" / "ceil_mode" rules, which
are those of ONNX Runtime. Where onnx.reference departs from the spec (MaxPool with
asymmetric pads or its Indices output, SAME_LOWER pooling with strides, Softmax before 13,
grouped ConvTranspose, LRN, LpNormalization p=1, NegativeLogLikelihoodLoss with
ignore_index=-1) the converters follow the spec / ONNX Runtime.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from compstack.translate.jax import TABLE, _common
from compstack.translate.jax._common import ints, norm_axis, out_dtype, shape_of

# --------------------------------------------------------------------------- helpers


def _wanted(ctx, j: int) -> bool:
    """Whether the node's output ``j`` exists and is used."""
    outs = ctx.node.outputs
    return j < len(outs) and outs[j] is not None and bool(outs[j].name)


def _conv_dims(n_spatial: int) -> lax.ConvDimensionNumbers:
    spec = tuple(range(n_spatial + 2))
    return lax.ConvDimensionNumbers(spec, spec, spec)


def _same_pads(auto_pad: str, in_sz: list[int], k_eff: list[int], strides: list[int]) -> list[int]:
    """ONNX ``SAME_UPPER``/``SAME_LOWER`` pads (begins then ends): output ``ceil(in / stride)``,
    the odd pad at the end for UPPER, at the beginning for LOWER."""
    begins, ends = [], []
    for n, k, s in zip(in_sz, k_eff, strides):
        out = -(-n // s)
        total = max(0, (out - 1) * s + k - n)
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def _spatial_attrs(ctx, kernel: list[int], in_sz: list[int]):
    """(strides, dilations, pads begins+ends) of a conv/pool node, auto_pad resolved."""
    nd = len(kernel)
    strides = ints(ctx.attr("strides")) or [1] * nd
    dilations = ints(ctx.attr("dilations")) or [1] * nd
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    k_eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(auto_pad, in_sz, k_eff, strides)
    elif auto_pad in ("NOTSET", "VALID", ""):
        pads = ints(ctx.attr("pads")) or [0] * (2 * nd)
        if auto_pad == "VALID":
            pads = [0] * (2 * nd)
    else:
        raise ctx.unsupported(f"auto_pad={auto_pad!r}")
    return strides, dilations, pads, auto_pad


# --------------------------------------------------------------------------- matmul-like conv


@TABLE.op("Conv", since=1)
def conv(ctx, x, w, b=None):
    """ONNX Conv (1d/2d/3d): pads, strides, dilations, group, auto_pad."""
    x_shape, w_shape = shape_of(x), shape_of(w)
    nd = len(x_shape) - 2
    kernel = ints(ctx.attr("kernel_shape")) or list(w_shape[2:])
    strides, dilations, pads, _ = _spatial_attrs(ctx, kernel, list(x_shape[2:]))
    y = lax.conv_general_dilated(
        x, jnp.asarray(w, x.dtype), window_strides=strides, padding=[(pads[i], pads[nd + i]) for i in range(nd)],
        rhs_dilation=dilations, dimension_numbers=_conv_dims(nd), feature_group_count=ctx.attr("group", 1),
        precision=_common.PRECISION)
    if b is not None:
        y = y + jnp.reshape(b, (-1,) + (1,) * nd)
    return y.astype(jnp.result_type(x))


@TABLE.op("ConvTranspose", since=1)
def conv_transpose(ctx, x, w, b=None):
    """ONNX ConvTranspose: pads / auto_pad / output_padding / output_shape, groups, dilations.

    As the reference: with explicit (or no) pads, ``output_shape`` crops or zero-extends the
    end of each spatial axis; with SAME_* auto_pad, the pads come from ``output_shape``
    (default ``in * stride``), the odd one at the start for SAME_LOWER."""
    x_shape, w_shape = shape_of(x), shape_of(w)
    nd = len(x_shape) - 2
    group = ctx.attr("group", 1)
    kernel = list(w_shape[2:])
    strides = ints(ctx.attr("strides")) or [1] * nd
    dilations = ints(ctx.attr("dilations")) or [1] * nd
    out_pad = ints(ctx.attr("output_padding")) or [0] * nd
    out_shape = ints(ctx.attr("output_shape")) or None
    if out_shape is not None and len(out_shape) == nd + 2:
        out_shape = out_shape[2:]
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    k_eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    natural = [s * (n - 1) + op + k for s, n, op, k in zip(strides, x_shape[2:], out_pad, k_eff)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = out_shape or [n * s for n, s in zip(x_shape[2:], strides)]
        total = [nat - t for nat, t in zip(natural, target)]
        if auto_pad == "SAME_UPPER":
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            pads = [t - t // 2 for t in total] + [t // 2 for t in total]
        out_shape = None
    elif auto_pad in ("NOTSET", "VALID", ""):
        pads = ints(ctx.attr("pads")) or [0] * (2 * nd)
    else:
        raise ctx.unsupported(f"auto_pad={auto_pad!r}")
    c_in, m_per_group = w_shape[0], w_shape[1]
    # (C, M/g, k...) -> (g, C/g, M/g, k...) -> (g, M/g, C/g, k...) -> (M, C/g, k...), flipped.
    wk = jnp.reshape(jnp.asarray(w, x.dtype), (group, c_in // group, m_per_group, *kernel))
    wk = jnp.swapaxes(wk, 1, 2).reshape((group * m_per_group, c_in // group, *kernel))
    wk = jnp.flip(wk, axis=tuple(range(2, nd + 2)))
    lo = [k - 1 - pads[i] for i, k in enumerate(k_eff)]
    hi = [k - 1 - pads[nd + i] + out_pad[i] for i, k in enumerate(k_eff)]
    y = lax.conv_general_dilated(
        x, wk, window_strides=[1] * nd, padding=[(max(a, 0), max(c, 0)) for a, c in zip(lo, hi)],
        lhs_dilation=strides, rhs_dilation=dilations, dimension_numbers=_conv_dims(nd),
        feature_group_count=group, precision=_common.PRECISION)
    crop = [slice(None), slice(None)]
    for a, c in zip(lo, hi):
        crop.append(slice(-a if a < 0 else 0, c if c < 0 else None))
    y = y[tuple(crop)]
    if out_shape is not None:
        widths = [(0, 0), (0, 0)]
        idx = [slice(None), slice(None)]
        for i, t in enumerate(out_shape):
            have = y.shape[2 + i]
            widths.append((0, max(0, t - have)))
            idx.append(slice(0, t))
        y = jnp.pad(y[tuple(idx)], widths)
    if b is not None:
        y = y + jnp.reshape(b, (-1,) + (1,) * nd)
    return y.astype(jnp.result_type(x))


@TABLE.op("ConvInteger", since=10)
def conv_integer(ctx, x, w, x_zp=None, w_zp=None):
    """ONNX ConvInteger: int32 convolution of ``x - x_zero_point`` and ``w - w_zero_point``."""
    x_shape, w_shape = shape_of(x), shape_of(w)
    nd = len(x_shape) - 2
    kernel = ints(ctx.attr("kernel_shape")) or list(w_shape[2:])
    strides, dilations, pads, _ = _spatial_attrs(ctx, kernel, list(x_shape[2:]))
    xi = jnp.asarray(x).astype(jnp.int32)
    wi = jnp.asarray(w).astype(jnp.int32)
    if x_zp is not None:
        xi = xi - jnp.asarray(x_zp).astype(jnp.int32)
    if w_zp is not None:
        zp = jnp.asarray(w_zp).astype(jnp.int32)
        wi = wi - (zp.reshape((-1,) + (1,) * (nd + 1)) if zp.ndim == 1 else zp)
    return lax.conv_general_dilated(
        xi, wi, window_strides=strides, padding=[(pads[i], pads[nd + i]) for i in range(nd)],
        rhs_dilation=dilations, dimension_numbers=_conv_dims(nd), feature_group_count=ctx.attr("group", 1),
        preferred_element_type=jnp.int32)


@TABLE.op("QLinearConv", since=10)
def qlinear_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp=None, b=None):
    """ONNX QLinearConv: int32 convolution of the zero-point-shifted operands (+ int32 bias),
    requantized with ``x_scale * w_scale / y_scale`` (``w_scale`` per output channel or not)."""
    x_shape, w_shape = shape_of(x), shape_of(w)
    nd = len(x_shape) - 2
    kernel = ints(ctx.attr("kernel_shape")) or list(w_shape[2:])
    strides, dilations, pads, _ = _spatial_attrs(ctx, kernel, list(x_shape[2:]))
    xi = jnp.asarray(x).astype(jnp.int32) - jnp.asarray(x_zp).astype(jnp.int32)
    wi = jnp.asarray(w).astype(jnp.int32)
    zp = jnp.asarray(w_zp).astype(jnp.int32)
    wi = wi - (zp.reshape((-1,) + (1,) * (nd + 1)) if zp.ndim == 1 and zp.size > 1 else zp)
    acc = lax.conv_general_dilated(
        xi, wi, window_strides=strides, padding=[(pads[i], pads[nd + i]) for i in range(nd)],
        rhs_dilation=dilations, dimension_numbers=_conv_dims(nd), feature_group_count=ctx.attr("group", 1),
        preferred_element_type=jnp.int32)
    if b is not None:
        acc = acc + jnp.reshape(jnp.asarray(b).astype(jnp.int32), (-1,) + (1,) * nd)
    ws = jnp.asarray(w_scale, jnp.float32)
    if ws.ndim == 1 and ws.size > 1:
        ws = ws.reshape((-1,) + (1,) * nd)
    scale = jnp.asarray(x_scale, jnp.float32) * ws / jnp.asarray(y_scale, jnp.float32)
    y = acc.astype(jnp.float32) * scale
    dtype = jnp.result_type(y_zp) if y_zp is not None else jnp.result_type(x)
    if y_zp is not None:
        y = y + jnp.asarray(y_zp).astype(jnp.float32)
    info = jnp.iinfo(dtype)
    return jnp.round(jnp.clip(y, info.min, info.max)).astype(dtype)


# --------------------------------------------------------------------------- pooling


def _pool_geometry(ctx, x_shape):
    """(kernel, strides, dilations, (pad_lo, pad_hi) per spatial axis incl. ceil-mode
    extra, output spatial sizes, explicit pads) of a pooling node."""
    kernel = ints(ctx.attr("kernel_shape"))
    in_sz = list(x_shape[2:])
    nd = len(kernel)
    strides, dilations, pads, auto_pad = _spatial_attrs(ctx, kernel, in_sz)
    ceil_mode = ctx.attr("ceil_mode", 0)
    out, lohi = [], []
    for i in range(nd):
        k_eff = (kernel[i] - 1) * dilations[i] + 1
        lo, hi = pads[i], pads[nd + i]
        span = in_sz[i] + lo + hi - k_eff
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-in_sz[i] // strides[i])
        elif ceil_mode:
            o = -(-span // strides[i]) + 1
            if (o - 1) * strides[i] >= in_sz[i] + lo:
                o -= 1
        else:
            o = span // strides[i] + 1
        extra = max(0, (o - 1) * strides[i] + k_eff - (in_sz[i] + lo + hi))
        out.append(o)
        lohi.append((lo, hi + extra))
    return kernel, strides, dilations, lohi, out, pads


def _reduce_window(x, init, op, kernel, strides, dilations, lohi):
    return lax.reduce_window(x, init, op, (1, 1, *kernel), (1, 1, *strides),
                             [(0, 0), (0, 0), *lohi], window_dilation=(1, 1, *dilations))


@TABLE.op("MaxPool", since=1)
def max_pool(ctx, x):
    """ONNX MaxPool: pads, strides, dilations, ceil_mode, auto_pad (no ``Indices`` output)."""
    if _wanted(ctx, 1):
        return _max_pool_with_indices(ctx, x)
    kernel, strides, dilations, lohi, _, _ = _pool_geometry(ctx, shape_of(x))
    dtype = jnp.result_type(x)
    init = -jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min
    return _reduce_window(x, jnp.asarray(init, dtype), lax.max, kernel, strides, dilations, lohi)


def _max_pool_with_indices(ctx, x):
    """MaxPool with its ``Indices`` output: flat indices into the input (row-major, or
    column-major over the spatial axes with ``storage_order=1``); first maximum wins."""
    x_shape = shape_of(x)
    kernel, strides, dilations, lohi, out, _ = _pool_geometry(ctx, x_shape)
    nd = len(kernel)
    spatial = x_shape[2:]
    # Gather every window element explicitly: (N, C, *out, K) values and their positions.
    grids = []
    for i in range(nd):
        pos = np.arange(out[i])[:, None] * strides[i] + np.arange(kernel[i])[None, :] * dilations[i] - lohi[i][0]
        grids.append(pos)
    mesh_out = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    mesh_k = np.meshgrid(*[np.arange(k) for k in kernel], indexing="ij")
    coords = [grids[i][mesh_out[i][..., None], mesh_k[i].reshape(-1)[None]] for i in range(nd)]
    # coords[i]: (*out, K) positions along spatial axis i
    valid = np.ones(coords[0].shape, bool)
    for i in range(nd):
        valid &= (coords[i] >= 0) & (coords[i] < spatial[i])
    clamped = [np.clip(c, 0, spatial[i] - 1) for i, c in enumerate(coords)]
    flat_sp = np.ravel_multi_index(clamped, spatial)
    xf = jnp.reshape(x, (*x_shape[:2], -1))
    vals = jnp.take(xf, jnp.asarray(flat_sp.reshape(-1)), axis=2).reshape((*x_shape[:2], *valid.shape))
    dtype = jnp.result_type(x)
    low = -jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min
    vals = jnp.where(valid, vals, jnp.asarray(low, dtype))
    arg = jnp.argmax(vals, axis=-1)
    y = jnp.max(vals, axis=-1)
    if ctx.attr("storage_order", 0):
        strides_sp = np.ones(nd, np.int64)
        for i in range(1, nd):
            strides_sp[i] = strides_sp[i - 1] * spatial[i - 1]
        flat_sp = sum(clamped[i] * strides_sp[i] for i in range(nd))
    chosen = jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(flat_sp), vals.shape), arg[..., None], -1)[..., 0]
    n_sp = int(np.prod(spatial))
    nc = (jnp.arange(x_shape[0])[:, None] * x_shape[1] + jnp.arange(x_shape[1])[None, :]) * n_sp
    idx = chosen.astype(jnp.int64) + nc.reshape(nc.shape + (1,) * nd)
    return y, idx


@TABLE.op("AveragePool", since=1)
def average_pool(ctx, x):
    """ONNX AveragePool: ceil_mode, count_include_pad (explicit pads count, ceil-mode
    overhang never does), auto_pad, dilations."""
    x_shape = shape_of(x)
    kernel, strides, dilations, lohi, _, pads = _pool_geometry(ctx, x_shape)
    nd = len(kernel)
    dtype = jnp.result_type(x)
    total = _reduce_window(x, jnp.zeros((), dtype), lax.add, kernel, strides, dilations, lohi)
    # Count of the cells each window averages over, computed statically.
    ones = np.ones((1, 1, *x_shape[2:]), np.float64)
    if ctx.attr("count_include_pad", 0):
        explicit = [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)]
        ones = np.pad(ones, explicit, constant_values=1.0)
        extra = [(0, 0), (0, 0)] + [(0, lohi[i][1] - pads[nd + i]) for i in range(nd)]
        ones = np.pad(ones, extra)
        count_lohi = [(0, 0)] * nd
    else:
        count_lohi = lohi
    count = lax.reduce_window(jnp.asarray(ones), 0.0, lax.add, (1, 1, *kernel), (1, 1, *strides),
                              [(0, 0), (0, 0), *count_lohi], window_dilation=(1, 1, *dilations))
    return (total / count.astype(dtype)).astype(dtype)


@TABLE.op("LpPool", since=11)
def lp_pool(ctx, x):
    """ONNX LpPool ``(sum |x|^p) ** (1/p)`` over each window (padding contributes 0)."""
    p = ctx.attr("p", 2)
    kernel, strides, dilations, lohi, _, _ = _pool_geometry(ctx, shape_of(x))
    dtype = jnp.result_type(x)
    s = _reduce_window(jnp.abs(x) ** p, jnp.zeros((), dtype), lax.add, kernel, strides, dilations, lohi)
    return (s ** (1.0 / p)).astype(dtype)


@TABLE.op("GlobalAveragePool", since=1)
def global_average_pool(ctx, x):
    """ONNX GlobalAveragePool: mean over the spatial axes, kept as size 1."""
    return jnp.mean(x, axis=tuple(range(2, jnp.ndim(x))), keepdims=True).astype(jnp.result_type(x))


@TABLE.op("GlobalMaxPool", since=1)
def global_max_pool(ctx, x):
    """ONNX GlobalMaxPool: max over the spatial axes, kept as size 1."""
    return jnp.max(x, axis=tuple(range(2, jnp.ndim(x))), keepdims=True)


@TABLE.op("GlobalLpPool", since=2)
def global_lp_pool(ctx, x):
    """ONNX GlobalLpPool ``(sum |x|^p) ** (1/p)`` over the spatial axes."""
    p = ctx.attr("p", 2)
    s = jnp.sum(jnp.abs(x) ** p, axis=tuple(range(2, jnp.ndim(x))), keepdims=True)
    return (s ** (1.0 / p)).astype(jnp.result_type(x))


@TABLE.op("MaxUnpool", since=9)
def max_unpool(ctx, x, indices, output_shape=None):
    """ONNX MaxUnpool: scatter ``x`` at the flat ``indices`` of a zero tensor of the shape
    MaxPool's attributes imply; a given ``output_shape`` zero-pads that at the end (as the
    ONNX node tests and onnx.reference: the indices stay relative to the implied shape)."""
    x_shape = shape_of(x)
    kernel = ints(ctx.attr("kernel_shape"))
    nd = len(kernel)
    strides = ints(ctx.attr("strides")) or [1] * nd
    pads = ints(ctx.attr("pads")) or [0] * (2 * nd)
    shape = list(x_shape[:2]) + [(x_shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[nd + i]
                                 for i in range(nd)]
    out = jnp.zeros(int(np.prod(shape)), jnp.result_type(x))
    out = out.at[jnp.reshape(indices, -1)].set(jnp.reshape(x, -1)).reshape(shape)
    if output_shape is not None:
        target = ints(ctx.static(2, "output_shape"))
        out = jnp.pad(out[tuple(slice(0, t) for t in target)],
                      [(0, max(0, t - d)) for t, d in zip(target, shape)])
    return out


# --------------------------------------------------------------------------- normalization


def _chan(v, nd):
    return jnp.reshape(v, (-1,) + (1,) * nd)


@TABLE.op("BatchNormalization", since=6)
def batch_norm(ctx, x, scale, bias, mean, var):
    """ONNX BatchNormalization. Inference: the given running mean/var. Training mode
    (``training_mode=1``, 14+): batch statistics, and the updated running mean/var as
    outputs 1-2 (``momentum``)."""
    if ctx.version < 7 and not ctx.attr("is_test", 0):
        raise ctx.unsupported("training mode (is_test=0)")
    nd = jnp.ndim(x) - 2
    eps = ctx.attr("epsilon", 1e-5)
    dtype = jnp.result_type(x)
    training = ctx.attr("training_mode", 0) if ctx.version >= 14 else 0
    if not training:
        if ctx.version >= 9 and _wanted(ctx, 1):
            raise ctx.unsupported("training outputs without training_mode")
        y = _chan(scale, nd) * (x - _chan(mean, nd)) / jnp.sqrt(_chan(var, nd) + eps) + _chan(bias, nd)
        return y.astype(dtype)
    axes = (0, *range(2, nd + 2))
    bmean, bvar = jnp.mean(x, axis=axes), jnp.var(x, axis=axes)
    momentum = ctx.attr("momentum", 0.9)
    y = _chan(scale, nd) * (x - _chan(bmean, nd)) / jnp.sqrt(_chan(bvar, nd) + eps) + _chan(bias, nd)
    run_mean = mean * momentum + bmean * (1 - momentum)
    run_var = var * momentum + bvar * (1 - momentum)
    return y.astype(dtype), run_mean.astype(dtype), run_var.astype(dtype)


@TABLE.op("InstanceNormalization", since=6)
def instance_norm(ctx, x, scale, bias):
    """ONNX InstanceNormalization: per (n, c) mean/variance over the spatial axes."""
    nd = jnp.ndim(x) - 2
    axes = tuple(range(2, nd + 2))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.var(x, axis=axes, keepdims=True)
    y = _chan(scale, nd) * (x - mean) / jnp.sqrt(var + ctx.attr("epsilon", 1e-5)) + _chan(bias, nd)
    return y.astype(jnp.result_type(x))


def _stash(ctx, x):
    """The compute dtype of the normalization's first stage (``stash_type``)."""
    dtype = jnp.result_type(x)
    if ctx.attr("stash_type", 1) == 1 and dtype in (jnp.float16, jnp.bfloat16):
        return jnp.float32
    return dtype


@TABLE.op("LayerNormalization", since=17)
def layer_norm(ctx, x, scale, bias=None):
    """ONNX LayerNormalization over axes ``[axis, rank)``; optional Mean / InvStdDev outputs."""
    rank = jnp.ndim(x)
    axis = norm_axis(ctx.attr("axis", -1), rank)
    axes = tuple(range(axis, rank))
    xs = jnp.asarray(x).astype(_stash(ctx, x))
    mean = jnp.mean(xs, axis=axes, keepdims=True)
    diff = xs - mean
    var = jnp.mean(diff * diff, axis=axes, keepdims=True)
    inv = 1.0 / jnp.sqrt(var + ctx.attr("epsilon", 1e-5))
    y = (diff * inv).astype(jnp.result_type(x)) * scale
    if bias is not None:
        y = y + bias
    outs = [y.astype(jnp.result_type(x))]
    for j, v in ((1, mean), (2, inv)):
        if _wanted(ctx, j):
            outs.append(v.astype(out_dtype(ctx, j, jnp.result_type(x))))
        else:
            outs.append(None)
    return tuple(outs)


@TABLE.op("RMSNormalization", since=23)
def rms_norm(ctx, x, scale):
    """ONNX RMSNormalization: ``x / sqrt(mean(x^2) + epsilon) * scale`` over ``[axis, rank)``."""
    rank = jnp.ndim(x)
    axis = norm_axis(ctx.attr("axis", -1), rank)
    xs = jnp.asarray(x).astype(_stash(ctx, x))
    ms = jnp.mean(xs * xs, axis=tuple(range(axis, rank)), keepdims=True)
    y = xs * (1.0 / jnp.sqrt(ms + ctx.attr("epsilon", 1e-5)))
    return (y.astype(jnp.result_type(x)) * scale).astype(jnp.result_type(x))


def _group_norm(ctx, x, scale, bias, per_channel: bool):
    shape = shape_of(x)
    groups = ctx.attr("num_groups")
    n, c = shape[0], shape[1]
    xs = jnp.asarray(x).astype(_stash(ctx, x))
    xg = xs.reshape((n, groups, -1))
    mean = jnp.mean(xg, axis=-1, keepdims=True)
    var = jnp.var(xg, axis=-1, keepdims=True)
    y = ((xg - mean) / jnp.sqrt(var + ctx.attr("epsilon", 1e-5))).reshape(shape).astype(jnp.result_type(x))
    nd = len(shape) - 2
    if not per_channel:  # opset 18: one scale/bias per group
        scale = jnp.repeat(jnp.asarray(scale), c // groups)
        bias = jnp.repeat(jnp.asarray(bias), c // groups)
    return (y * _chan(scale, nd) + _chan(bias, nd)).astype(jnp.result_type(x))


@TABLE.op("GroupNormalization", since=18)
def group_norm_18(ctx, x, scale, bias):
    """ONNX GroupNormalization-18: scale/bias per group."""
    return _group_norm(ctx, x, scale, bias, per_channel=False)


@TABLE.op("GroupNormalization", since=21)
def group_norm(ctx, x, scale, bias):
    """ONNX GroupNormalization-21: scale/bias per channel, ``stash_type``."""
    return _group_norm(ctx, x, scale, bias, per_channel=True)


@TABLE.op("LpNormalization", since=1)
def lp_normalization(ctx, x):
    """ONNX LpNormalization: ``x / ||x||_p`` along ``axis`` (p 1 or 2); 0 where the norm is 0."""
    axis = ctx.attr("axis", -1)
    p = ctx.attr("p", 2)
    if p == 1:
        norm = jnp.sum(jnp.abs(x), axis=axis, keepdims=True)
    elif p == 2:
        norm = jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=True))
    else:
        raise ctx.unsupported(f"p={p}")
    return jnp.where(norm == 0, jnp.zeros((), jnp.result_type(x)), x / norm).astype(jnp.result_type(x))


@TABLE.op("MeanVarianceNormalization", since=9)
def mean_variance_normalization(ctx, x):
    """ONNX MeanVarianceNormalization ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)``."""
    axes = tuple(ints(ctx.attr("axes")) or [0, 2, 3])
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(x * x, axis=axes, keepdims=True) - mean * mean
    return ((x - mean) / (jnp.sqrt(var) + 1e-9)).astype(jnp.result_type(x))


@TABLE.op("LRN", since=1)
def lrn(ctx, x):
    """ONNX LRN: ``x / (bias + alpha / size * sum of squares over the channel window) ** beta``."""
    size = ctx.attr("size")
    alpha, beta, bias = ctx.attr("alpha", 1e-4), ctx.attr("beta", 0.75), ctx.attr("bias", 1.0)
    rank = jnp.ndim(x)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    window = (1, size) + (1,) * (rank - 2)
    dtype = jnp.result_type(x)
    sq = lax.reduce_window(x * x, jnp.zeros((), dtype), lax.add, window, (1,) * rank,
                           [(0, 0), (lo, hi)] + [(0, 0)] * (rank - 2))
    return (x / (bias + (alpha / size) * sq) ** beta).astype(dtype)


# --------------------------------------------------------------------------- softmax family


def _coerced_2d(ctx, x, fn):
    """Opset < 13 softmax family: flatten to 2-D at ``axis`` (default 1), apply on axis 1."""
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 1), len(shape))
    flat = jnp.reshape(x, (int(np.prod(shape[:axis])), -1))
    return jnp.reshape(fn(flat, 1), shape)


def _hardmax(x, axis):
    arg = jnp.argmax(x, axis=axis, keepdims=True)
    iota = lax.broadcasted_iota(arg.dtype, jnp.shape(x), axis % jnp.ndim(x))
    return (iota == arg).astype(jnp.result_type(x))


_SOFTMAX = {
    "Softmax": lambda x, axis: jax.nn.softmax(x, axis=axis),
    "LogSoftmax": lambda x, axis: jax.nn.log_softmax(x, axis=axis),
    "Hardmax": _hardmax,
}


def _register_softmax(op: str, fn) -> None:
    @TABLE.op(op, since=1)
    def convert_old(ctx, x):
        return _coerced_2d(ctx, x, fn)

    @TABLE.op(op, since=13)
    def convert(ctx, x):
        return fn(x, norm_axis(ctx.attr("axis", -1), jnp.ndim(x))).astype(jnp.result_type(x))

    convert_old.__doc__ = f"ONNX {op} before 13: on the input flattened to 2-D at ``axis``."
    convert.__doc__ = f"ONNX {op}-13: along ``axis`` (default -1)."


for _op, _fn in _SOFTMAX.items():
    _register_softmax(_op, _fn)


# --------------------------------------------------------------------------- misc nn


@TABLE.op("Dropout", since=7)
def dropout(ctx, x, ratio=None, training_mode=None):
    """ONNX Dropout: identity (and an all-true mask) at inference or with ``ratio`` 0;
    random masks (training with a non-zero ratio) are unsupported."""
    if training_mode is not None and bool(np.asarray(ctx.static(2, "training_mode")).reshape(-1)[0]):
        r = 0.5 if ratio is None else float(np.asarray(ctx.static(1, "ratio")).reshape(-1)[0])
        if r != 0:
            raise ctx.unsupported("training_mode=True (random mask)")
    if _wanted(ctx, 1):
        return x, jnp.ones(jnp.shape(x), bool)
    return x


# --------------------------------------------------------------------------- losses


def _nll(ctx, logp, target, weight):
    """NegativeLogLikelihoodLoss on log-probabilities ``logp`` (N, C, d...)."""
    reduction = ctx.attr("reduction", "mean")
    ignore = ctx.attr("ignore_index", None)
    dtype = jnp.result_type(logp)
    t = jnp.asarray(target).astype(jnp.int64)
    c = jnp.shape(logp)[1]
    safe = jnp.clip(t, 0, c - 1)
    picked = -jnp.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
    mask = None if ignore is None else t != ignore
    if mask is not None:
        picked = jnp.where(mask, picked, jnp.zeros((), dtype))
    w = None
    if weight is not None:
        w = jnp.take(jnp.asarray(weight), safe)
        if mask is not None:
            w = jnp.where(mask, w, jnp.zeros((), dtype))
    elif mask is not None:
        w = mask.astype(dtype)
    if w is not None and weight is not None:
        picked = picked * w
    if reduction == "none":
        return picked.astype(dtype)
    if reduction == "sum":
        return jnp.sum(picked).astype(dtype)
    if reduction != "mean":
        raise ctx.unsupported(f"reduction={reduction!r}")
    if w is not None:
        return (jnp.sum(picked) / jnp.sum(w)).astype(dtype)
    return jnp.mean(picked).astype(dtype)


@TABLE.op("NegativeLogLikelihoodLoss", since=12)
def nll_loss(ctx, x, target, weight=None):
    """ONNX NegativeLogLikelihoodLoss: ``reduction`` none/sum/mean (weighted mean with
    ``weight``), ``ignore_index``."""
    return _nll(ctx, x, target, weight)


@TABLE.op("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(ctx, x, target, weight=None):
    """ONNX SoftmaxCrossEntropyLoss: NLL of ``log_softmax(x, axis=1)``; optional log_prob output."""
    logp = jax.nn.log_softmax(x, axis=1)
    loss = _nll(ctx, logp, target, weight)
    if _wanted(ctx, 1):
        return loss, logp
    return loss


# --------------------------------------------------------------------------- transformer ops


@TABLE.op("RotaryEmbedding", since=23)
def rotary_embedding(ctx, x, cos, sin, position_ids=None):
    """ONNX RotaryEmbedding: 4-D (batch, heads, seq, head) or 3-D (batch, seq, hidden) with
    ``num_heads``; ``interleaved``; ``rotary_embedding_dim`` (the rest passes through)."""
    shape = shape_of(x)
    y = jnp.asarray(x)
    if len(shape) == 4:
        y = jnp.transpose(y, (0, 2, 1, 3))
    else:
        heads = ctx.attr("num_heads", 0)
        if not heads:
            raise ctx.unsupported("3-D input without num_heads")
        y = y.reshape((shape[0], shape[1], heads, shape[2] // heads))
    dim = ctx.attr("rotary_embedding_dim", 0) or y.shape[3]
    rot, rest = y[..., :dim], y[..., dim:]
    if position_ids is not None:
        cos, sin = jnp.take(cos, position_ids, axis=0), jnp.take(sin, position_ids, axis=0)
    cos, sin = jnp.expand_dims(cos, 2), jnp.expand_dims(sin, 2)
    if ctx.attr("interleaved", 0):
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., :dim // 2], rot[..., dim // 2:]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if ctx.attr("interleaved", 0):
        rot = jnp.stack([real, imag], axis=-1).reshape(rot.shape)
    else:
        rot = jnp.concatenate([real, imag], axis=-1)
    out = jnp.concatenate([rot, rest], axis=-1).astype(jnp.result_type(x))
    return jnp.transpose(out, (0, 2, 1, 3)) if len(shape) == 4 else out.reshape(shape)


@TABLE.op("Attention", since=23)
def attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
    """ONNX Attention (23/24): 3-D or 4-D Q/K/V, GQA head repetition, boolean or additive
    masks, ``is_causal`` (bottom-right aligned with a past cache), ``scale``, ``softcap``,
    ``softmax_precision``, past/present key/value, ``nonpad_kv_seqlen``, and the
    ``qk_matmul_output_mode`` output; fully masked rows give 0 (the spec's reference)."""
    dtype = jnp.result_type(q)
    q_shape = shape_of(q)
    rank = len(q_shape)
    qh, kvh = ctx.attr("q_num_heads", None), ctx.attr("kv_num_heads", None)
    Q, K, V = jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)
    b = q_shape[0]
    if rank == 3:
        if not qh or not kvh:
            raise ctx.unsupported("3-D inputs need q_num_heads and kv_num_heads")
        Q = Q.reshape((b, Q.shape[1], qh, -1)).transpose(0, 2, 1, 3)
        K = K.reshape((b, K.shape[1], kvh, -1)).transpose(0, 2, 1, 3)
        V = V.reshape((b, V.shape[1], kvh, -1)).transpose(0, 2, 1, 3)
    scale = ctx.attr("scale", None)
    if scale is None:
        scale = 1 / np.sqrt(Q.shape[3])
    s = jnp.asarray(np.sqrt(scale), dtype)
    if past_key is not None:
        K = jnp.concatenate([jnp.asarray(past_key), K], axis=2)
        V = jnp.concatenate([jnp.asarray(past_value), V], axis=2)
    present_k, present_v = K, V
    nq, nkv = Q.shape[2], K.shape[2]
    neg_inf = jnp.asarray(-jnp.inf, dtype)
    zero = jnp.zeros((), dtype)
    bias = jnp.zeros((nq, nkv), dtype)
    mask = None if attn_mask is None else jnp.asarray(attn_mask)
    if mask is not None and nkv - mask.shape[-1] > 0:
        pad = [(0, 0)] * (mask.ndim - 1) + [(0, nkv - mask.shape[-1])]
        mask = jnp.pad(mask, pad, constant_values=False if mask.dtype == jnp.bool_ else -jnp.inf)
    if mask is not None:
        mask = jnp.where(mask, zero, neg_inf) if mask.dtype == jnp.bool_ else mask.astype(dtype)
    i_idx = np.arange(nq)[:, None]
    j_idx = np.arange(nkv)[None, :]
    offset = (jnp.asarray(nonpad_kv_seqlen).reshape(-1, 1, 1, 1).astype(jnp.int64) - nq
              if nonpad_kv_seqlen is not None and past_key is None else past_key.shape[2] if past_key is not None else 0)
    if ctx.attr("is_causal", 0):
        base = bias if mask is None else mask
        bias = base + jnp.where(j_idx <= i_idx + offset, zero, neg_inf)
    elif mask is not None:
        bias = bias + mask
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    if left >= 0 or right >= 0:
        diff = (i_idx + offset) - j_idx
        allowed = jnp.ones(jnp.shape(diff), bool)
        if left >= 0:
            allowed &= diff <= left
        if right >= 0:
            allowed &= -diff <= right
        bias = bias + jnp.where(allowed, zero, neg_inf)
    if nonpad_kv_seqlen is not None:
        keep = jnp.arange(nkv)[None, :] < jnp.asarray(nonpad_kv_seqlen).reshape(-1, 1)
        bias = bias + jnp.where(keep, zero, neg_inf).reshape(b, 1, 1, nkv)
    hq, hk = Q.shape[1], K.shape[1]
    if hq != hk and hq % hk == 0:
        K = jnp.repeat(K, hq // hk, axis=1)
        V = jnp.repeat(V, hq // hk, axis=1)
    qk = jnp.matmul(Q * s, jnp.swapaxes(K * s, 2, 3), precision=_common.PRECISION)
    softcap = ctx.attr("softcap", 0.0)
    if softcap and softcap > 0:
        qk = jnp.tanh(qk / softcap) * softcap
    with_bias = qk + bias
    mode = ctx.attr("qk_matmul_output_mode", 0)
    qk_out = with_bias if mode == 2 else qk
    logits = with_bias
    prec = ctx.attr("softmax_precision", None)
    if prec is not None:
        from onnx import helper

        logits = logits.astype(helper.tensor_dtype_to_np_dtype(prec))
    mx = jnp.max(logits, axis=-1, keepdims=True)
    safe = jnp.where(jnp.isneginf(mx), jnp.zeros((), logits.dtype), mx)
    e = jnp.exp(logits - safe)
    tot = jnp.sum(e, axis=-1, keepdims=True)
    probs = e / jnp.where(tot == 0, jnp.ones((), logits.dtype), tot)
    dead = jnp.isneginf(jnp.max(bias, axis=-1, keepdims=True))
    probs = jnp.where(dead, jnp.zeros((), probs.dtype), probs)
    if mode == 3:
        qk_out = probs
    probs = probs.astype(dtype)
    y = jnp.matmul(probs, V, precision=_common.PRECISION)
    if rank == 3:
        y = jnp.transpose(y, (0, 2, 1, 3)).reshape((b, nq, -1))
    outs: list[jax.Array | None] = [y.astype(dtype)]
    outs.append(present_k if _wanted(ctx, 1) else None)
    outs.append(present_v if _wanted(ctx, 2) else None)
    outs.append(jnp.broadcast_to(qk_out, (b, hq, nq, nkv)).astype(dtype) if _wanted(ctx, 3) else None)
    return tuple(outs)


# --------------------------------------------------------------------------- spatial sampling


def _affine_base_grid(sizes: list[int], align_corners: int) -> np.ndarray:
    """The normalised homogeneous grid (…, x, y[, z], 1) of AffineGrid, as onnx.reference."""
    is_2d = len(sizes) == 2
    zeros = np.zeros(sizes)
    grid = [np.ones(sizes)]
    for dim, n in enumerate(sizes):
        if align_corners == 1:
            a = np.arange(-1, 1 + 0.0001, 2.0 / (n - 1)) if n > 1 else np.array([-1.0])
        else:
            step = 2.0 / n
            a = np.arange(-1 + step / 2, 1, step)
        shape = [1] * len(sizes)
        shape[dim] = n
        grid = [np.reshape(a, shape) + zeros, *grid]
    del is_2d
    return np.stack(grid, axis=len(sizes))


@TABLE.op("AffineGrid", since=20)
def affine_grid(ctx, theta, size):
    """ONNX AffineGrid: ``theta`` (N, 2, 3) or (N, 3, 4) applied to the normalised grid of
    the static ``size`` (``align_corners``)."""
    sizes = ints(ctx.static(1, "size"))
    spatial = sizes[2:]
    base = _affine_base_grid(spatial, ctx.attr("align_corners", 0))  # (*spatial, nd + 1)
    nd = len(spatial)
    flat = jnp.asarray(base.reshape(-1, nd + 1).T, jnp.result_type(theta))  # (nd + 1, P)
    g = jnp.matmul(theta, flat, precision=_common.PRECISION)  # (N, nd, P)
    return jnp.transpose(g, (0, 2, 1)).reshape((sizes[0], *spatial, nd))


def _gs_reflect(x, lo: float, hi: float):
    rng = hi - lo
    below, above = x < lo, x > hi
    dx = jnp.where(below, lo - x, x - hi)
    n = jnp.trunc(dx / rng)
    r = dx - n * rng
    even = jnp.fmod(n, 2) == 0
    return jnp.where(below, jnp.where(even, lo + r, hi - r), jnp.where(above, jnp.where(even, hi - r, lo + r), x))


def _cubic_w(t, a: float = -0.75):
    t = jnp.abs(t)
    return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]


@TABLE.op("GridSample", since=16)
def grid_sample(ctx, x, grid):
    """ONNX GridSample (2-D and N-D): modes nearest / (bi)linear / (bi)cubic, padding
    zeros / border / reflection, ``align_corners`` (the reference's tap rules)."""
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(ctx.attr("mode", "linear"), ctx.attr("mode", "linear"))
    if ctx.version < 20 and ctx.attr("mode", None) is None:
        mode = "linear"
    padding = ctx.attr("padding_mode", "zeros")
    align = bool(ctx.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border", "reflection"):
        raise ctx.unsupported(f"mode={mode!r}, padding_mode={padding!r}")
    n, c, *dims = shape_of(x)
    nd = len(dims)
    g = jnp.asarray(grid)
    out_sp = g.shape[1:-1]
    taps = []
    for i in range(nd):
        v = g[..., nd - 1 - i]
        d = dims[i]
        pos = (v + 1) / 2.0 * (d - 1) if align else ((v + 1) * d - 1) / 2.0
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if mode == "nearest":
            pos = jnp.round(pos)
        outside = (pos < lo) | (pos > hi)
        if padding == "border":
            pos = jnp.where(outside, jnp.clip(pos, 0, d - 1), pos)
        elif padding == "reflection":
            pos = jnp.where(outside, _gs_reflect(pos, lo, hi), pos)
        if mode == "nearest":
            idx, wts = [jnp.trunc(pos)], [jnp.ones_like(pos)]
        else:
            p0 = jnp.floor(pos)
            t = pos - p0
            if mode == "linear":
                idx, wts = [p0, p0 + 1], [1 - jnp.abs(t), jnp.abs(t)]
            else:
                idx, wts = [p0 - 1, p0, p0 + 1, p0 + 2], _cubic_w(t)
        resolved = []
        for j, w in zip(idx, wts):
            if padding == "zeros":
                ok = (j >= 0) & (j < d)
            else:
                ok = jnp.ones(j.shape, bool)
                if padding == "reflection":
                    j = jnp.trunc(_gs_reflect(j, lo, hi))
            resolved.append((jnp.clip(j, 0, d - 1).astype(jnp.int32), w, ok))
        taps.append(resolved)
    xf = jnp.reshape(x, (n, c, -1))
    strides = [int(np.prod(dims[i + 1:])) for i in range(nd)]
    total: jax.Array | None = None
    for combo in np.ndindex(*[len(t) for t in taps]):
        flat: jax.Array | int = 0
        weight: jax.Array | float = 1.0
        valid: jax.Array | bool = True
        for i, k in enumerate(combo):
            j, wi, oki = taps[i][k]
            flat = flat + j * strides[i]
            weight = weight * wi
            valid = valid & oki
        vals = jnp.take_along_axis(xf, jnp.reshape(flat, (n, 1, -1)), axis=2, mode="clip")
        contrib = jnp.where(jnp.reshape(valid, (n, 1, -1)),
                            vals * jnp.reshape(weight, (n, 1, -1)).astype(xf.dtype), jnp.zeros((), xf.dtype))
        total = contrib if total is None else total + contrib
    assert total is not None  # np.ndindex yields at least one tap combination (one empty one when nd == 0)
    return total.reshape((n, c, *out_sp)).astype(jnp.result_type(x))


# --------------------------------------------------------------------------- recurrent


def _rnn_activation(name: str, alpha, beta):
    name = name.lower()
    if name == "sigmoid":
        return jax.nn.sigmoid
    if name == "tanh":
        return jnp.tanh
    if name == "relu":
        return lambda v: jnp.maximum(v, 0)
    if name == "affine":
        return lambda v: v * (1.0 if alpha is None else alpha) + (0.0 if beta is None else beta)
    if name == "leakyrelu":
        return lambda v: jnp.where(v > 0, v, v * (0.01 if alpha is None else alpha))
    if name == "thresholdedrelu":
        return lambda v: jnp.where(v > (1.0 if alpha is None else alpha), v, 0)
    if name == "scaledtanh":
        return lambda v: (1.0 if alpha is None else alpha) * jnp.tanh(v * (1.0 if beta is None else beta))
    if name == "hardsigmoid":
        return lambda v: jnp.clip(v * (0.2 if alpha is None else alpha) + (0.5 if beta is None else beta), 0, 1)
    if name == "elu":
        return lambda v: jnp.where(v > 0, v, (1.0 if alpha is None else alpha) * jnp.expm1(v))
    if name == "softsign":
        return lambda v: v / (1 + jnp.abs(v))
    if name == "softplus":
        return lambda v: jnp.logaddexp(v, 0)
    return None


_PARAMS = {"affine": (True, True), "leakyrelu": (True, False), "thresholdedrelu": (True, False),
           "scaledtanh": (True, True), "hardsigmoid": (True, True), "elu": (True, False)}


def _rnn_activations(ctx, defaults: list[str], n_dir: int):
    """Per direction, the activation functions (``activations`` with ``activation_alpha`` /
    ``activation_beta`` consumed in order by the functions that take them)."""
    names = ctx.attr("activations", None) or defaults * n_dir
    alphas = list(ctx.attr("activation_alpha", None) or [])
    betas = list(ctx.attr("activation_beta", None) or [])
    fns = []
    for name in names:
        name = name.decode() if isinstance(name, bytes) else name
        uses_a, uses_b = _PARAMS.get(name.lower(), (False, False))
        a = alphas.pop(0) if uses_a and alphas else None
        b = betas.pop(0) if uses_b and betas else None
        fn = _rnn_activation(name, a, b)
        if fn is None:
            raise ctx.unsupported(f"activation {name!r}")
        fns.append(fn)
    per = len(defaults)
    if len(fns) == per and n_dir == 2:
        fns = fns * 2
    return [fns[d * per:(d + 1) * per] for d in range(n_dir)]


def _reverse_within(xs, lens, t_len):
    """Reverse each batch entry's first ``lens[b]`` steps of time-major (T, B, F) ``xs``."""
    if lens is None:
        return jnp.flip(xs, 0)
    t = jnp.arange(t_len)[:, None]
    src = jnp.where(t < lens[None, :], lens[None, :] - 1 - t, t)  # (T, B)
    return jnp.take_along_axis(xs, jnp.broadcast_to(src[..., None], xs.shape), axis=0)


def _recurrent(ctx, kind: str, x, w, r, b, seq_lens, h0, c0=None, p=None):
    """RNN / GRU / LSTM (spec semantics): directions, layout, activations, clip,
    ``sequence_lens`` (steps past an entry's length output 0 and keep the state)."""
    dtype = jnp.result_type(x)
    layout = ctx.attr("layout", 0)
    direction = ctx.attr("direction", "forward")
    n_dir = 2 if direction == "bidirectional" else 1
    xs = jnp.asarray(x)
    if layout:
        xs = jnp.swapaxes(xs, 0, 1)
        h0 = None if h0 is None else jnp.swapaxes(jnp.asarray(h0), 0, 1)
        c0 = None if c0 is None else jnp.swapaxes(jnp.asarray(c0), 0, 1)
    t_len, batch = xs.shape[0], xs.shape[1]
    hidden = shape_of(r)[-1]
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[kind]
    defaults = {"rnn": ["Tanh"], "gru": ["Sigmoid", "Tanh"], "lstm": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    acts = _rnn_activations(ctx, defaults, n_dir)
    clip = ctx.attr("clip", None)

    def cl(v):
        return jnp.clip(v, -clip, clip) if clip is not None else v

    lens = None if seq_lens is None else jnp.asarray(seq_lens).astype(jnp.int32)
    mask = None if lens is None else (jnp.arange(t_len)[:, None] < lens[None, :])[..., None]  # (T, B, 1)
    zeros_h = jnp.zeros((batch, hidden), dtype)
    ys, hs, cs = [], [], []
    for d in range(n_dir):
        wd, rd = jnp.asarray(w)[d], jnp.asarray(r)[d]
        bd = jnp.zeros((2 * gates * hidden,), dtype) if b is None else jnp.asarray(b)[d]
        wb, rb = bd[:gates * hidden], bd[gates * hidden:]
        h_init = zeros_h if h0 is None else jnp.asarray(h0)[d]
        c_init = zeros_h if c0 is None else jnp.asarray(c0)[d]
        pd = jnp.zeros((3 * hidden,), dtype) if p is None else jnp.asarray(p)[d]
        seq = xs if d == 0 and direction != "reverse" else _reverse_within(xs, lens, t_len)
        xw = jnp.einsum("tbi,gi->tbg", seq, wd, precision=_common.PRECISION) + wb
        f_acts = acts[d]

        def step(carry, inp, rd=rd, rb=rb, pd=pd, f_acts=f_acts):
            h, c = carry
            xw_t, m_t = inp
            if kind == "rnn":
                h_new = f_acts[0](cl(xw_t + h @ rd.T + rb))
                c_new = c
            elif kind == "gru":
                zr = xw_t[:, :2 * hidden] + h @ rd[:2 * hidden].T + rb[:2 * hidden]
                z = f_acts[0](cl(zr[:, :hidden]))
                rr = f_acts[0](cl(zr[:, hidden:]))
                rh, rbh = rd[2 * hidden:], rb[2 * hidden:]
                if ctx.attr("linear_before_reset", 0):
                    pre = xw_t[:, 2 * hidden:] + rr * (h @ rh.T + rbh)
                else:
                    pre = xw_t[:, 2 * hidden:] + (rr * h) @ rh.T + rbh
                hh = f_acts[1](cl(pre))
                h_new = (1 - z) * hh + z * h
                c_new = c
            else:
                g = xw_t + h @ rd.T + rb
                i_, o_, f_, c_ = (g[:, k * hidden:(k + 1) * hidden] for k in range(4))
                p_i, p_o, p_f = pd[:hidden], pd[hidden:2 * hidden], pd[2 * hidden:]
                i_g = f_acts[0](cl(i_ + p_i * c))
                f_g = 1 - i_g if ctx.attr("input_forget", 0) else f_acts[0](cl(f_ + p_f * c))
                c_new = f_g * c + i_g * f_acts[1](cl(c_))
                o_g = f_acts[0](cl(o_ + p_o * c_new))
                h_new = o_g * f_acts[2](c_new)
            if m_t is not None:
                h_new = jnp.where(m_t, h_new, h)
                c_new = jnp.where(m_t, c_new, c)
                y = jnp.where(m_t, h_new, jnp.zeros((), dtype))
            else:
                y = h_new
            return (h_new, c_new), y

        if mask is None:
            (h_last, c_last), y = lax.scan(lambda cr, xt: step(cr, (xt, None)), (h_init, c_init), xw)
        else:
            (h_last, c_last), y = lax.scan(step, (h_init, c_init), (xw, mask))
        if not (d == 0 and direction != "reverse"):
            y = _reverse_within(y, lens, t_len)
        ys.append(y)
        hs.append(h_last)
        cs.append(c_last)
    y = jnp.stack(ys, axis=1).astype(dtype)  # (T, D, B, H)
    yh = jnp.stack(hs, axis=0).astype(dtype)
    yc = jnp.stack(cs, axis=0).astype(dtype)
    if layout:
        y = jnp.transpose(y, (2, 0, 1, 3))
        yh, yc = jnp.swapaxes(yh, 0, 1), jnp.swapaxes(yc, 0, 1)
    outs = [y if _wanted(ctx, 0) else None, yh if _wanted(ctx, 1) else None]
    if kind == "lstm":
        outs.append(yc if _wanted(ctx, 2) else None)
    return tuple(outs)


@TABLE.op("RNN", since=7)
def rnn(ctx, x, w, r, b=None, seq_lens=None, h0=None):
    """ONNX RNN ``H = f(X W^T + H R^T + Wb + Rb)``: directions, layout, activations, clip,
    sequence_lens."""
    return _recurrent(ctx, "rnn", x, w, r, b, seq_lens, h0)


@TABLE.op("GRU", since=7)
def gru(ctx, x, w, r, b=None, seq_lens=None, h0=None):
    """ONNX GRU (gates z, r, h; ``linear_before_reset``)."""
    return _recurrent(ctx, "gru", x, w, r, b, seq_lens, h0)


@TABLE.op("LSTM", since=7)
def lstm(ctx, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
    """ONNX LSTM (gates i, o, f, c; peepholes, ``input_forget``)."""
    return _recurrent(ctx, "lstm", x, w, r, b, seq_lens, h0, c0, p)


@TABLE.op("RoiAlign", since=10)
def roi_align(ctx, x, rois, batch_indices):
    """ONNX RoiAlign: bilinear samples on a grid in each output bin, averaged (``avg``) or
    maxed (``max``, of the weighted corners, as the reference); ``coordinate_transformation_mode``
    half_pixel (16+ default) or output_half_pixel; the adaptive grid (``sampling_ratio=0``)
    needs known ``rois``."""
    n, c, h, w = shape_of(x)
    ph_n, pw_n = ctx.attr("output_height", 1), ctx.attr("output_width", 1)
    ratio = ctx.attr("sampling_ratio", 0)
    scale = ctx.attr("spatial_scale", 1.0)
    mode = ctx.attr("mode", "avg").lower()
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.version >= 16 else "output_half_pixel")
    half = ctm.lower() == "half_pixel"
    r = jnp.asarray(rois).astype(jnp.float64)
    off = 0.5 if half else 0.0
    x0, y0 = r[:, 0] * scale - off, r[:, 1] * scale - off
    rw, rh = r[:, 2] * scale - off - x0, r[:, 3] * scale - off - y0
    if not half:
        rw, rh = jnp.maximum(rw, 1.0), jnp.maximum(rh, 1.0)
    bh, bw = rh / ph_n, rw / pw_n
    if ratio > 0:
        gh = gw = np.full(r.shape[0], ratio)
        max_gh = max_gw = ratio
    elif isinstance(rois, np.ndarray):
        rr = np.asarray(rois, np.float64)
        rwn = rr[:, 2] * scale - off - (rr[:, 0] * scale - off)
        rhn = rr[:, 3] * scale - off - (rr[:, 1] * scale - off)
        if not half:
            rwn, rhn = np.maximum(rwn, 1.0), np.maximum(rhn, 1.0)
        gh, gw = np.ceil(rhn / ph_n).astype(np.int64), np.ceil(rwn / pw_n).astype(np.int64)
        max_gh, max_gw = max(int(gh.max(initial=1)), 1), max(int(gw.max(initial=1)), 1)
    else:
        raise ctx.unsupported("sampling_ratio=0 (adaptive) with rois computed at run time")
    gh_j, gw_j = jnp.asarray(gh, jnp.float64), jnp.asarray(gw, jnp.float64)

    def axis_samples(start, bin_size, grid, n_out, n_grid, size):
        o = jnp.arange(n_out, dtype=jnp.float64)[None, :, None]
        i = jnp.arange(n_grid, dtype=jnp.float64)[None, None, :]
        v = start[:, None, None] + o * bin_size[:, None, None] + (i + 0.5) * bin_size[:, None, None] / grid[:, None,
                                                                                                             None]
        outside = (v < -1.0) | (v > size)
        v = jnp.maximum(v, 0.0)
        low = jnp.floor(v)
        at_end = low >= size - 1
        low = jnp.where(at_end, size - 1, low)
        high = jnp.where(at_end, size - 1, low + 1)
        v = jnp.where(at_end, low, v)
        frac = v - low
        in_grid = i < grid[:, None, None]
        return low.astype(jnp.int32), high.astype(jnp.int32), frac, outside, in_grid

    yl, yh, ly, y_out, y_in = axis_samples(y0, bh, gh_j, ph_n, max_gh, h)  # (R, PH, GH)
    xl, xh, lx, x_out, x_in = axis_samples(x0, bw, gw_j, pw_n, max_gw, w)  # (R, PW, GW)

    def grid5(a, b):  # (R, PH, GH) x (R, PW, GW) -> (R, PH, PW, GH, GW)
        return a[:, :, None, :, None], b[:, None, :, None, :]

    ylo, xlo = grid5(yl, xl)
    yhi, xhi = grid5(yh, xh)
    lyy, lxx = grid5(ly, lx)
    yo, xo = grid5(y_out, x_out)
    yi, xi = grid5(y_in, x_in)
    dead = yo | xo
    wts = [(1 - lyy) * (1 - lxx), (1 - lyy) * lxx, lyy * (1 - lxx), lyy * lxx]
    wts = [jnp.where(dead, 0.0, wt) for wt in wts]
    poss = [ylo * w + xlo, ylo * w + xhi, yhi * w + xlo, yhi * w + xhi]
    dtype = jnp.result_type(x)
    feat = jnp.take(jnp.reshape(x, (n, c, h * w)), jnp.asarray(batch_indices).astype(jnp.int32), axis=0, mode="clip")
    shape5 = jnp.broadcast_shapes(ylo.shape, xlo.shape)
    terms = []
    for pos, wt in zip(poss, wts):
        idx = jnp.broadcast_to(pos, shape5).reshape((shape5[0], 1, -1))
        vals = jnp.take_along_axis(feat, idx, axis=2, mode="clip").reshape((shape5[0], c, *shape5[1:]))
        terms.append(vals.astype(jnp.float64) * jnp.broadcast_to(wt, shape5)[:, None])
    valid = jnp.broadcast_to(yi & xi, shape5)[:, None]
    if mode == "avg":
        total = jnp.sum(jnp.where(valid, terms[0] + terms[1] + terms[2] + terms[3], 0.0), axis=(-2, -1))
        count = jnp.maximum(gh_j * gw_j, 1.0)[:, None, None, None]
        out = total / count
    elif mode == "max":
        m = jnp.maximum(jnp.maximum(terms[0], terms[1]), jnp.maximum(terms[2], terms[3]))
        out = jnp.max(jnp.where(valid, m, -jnp.inf), axis=(-2, -1))
    else:
        raise ctx.unsupported(f"mode={mode!r}")
    return out.astype(dtype)
