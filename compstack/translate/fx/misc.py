"""ONNX -> fx converters: Cast/CastLike/Constant, Resize/Upsample, quantization, grid
sampling and random ops (see :mod:`compstack.translate` for the contract).

Resize follows the ONNX spec's coordinate transformations exactly: for each resized axis
the interpolation is a static (output x input) weight matrix, computed in numpy at
conversion time from the spec's formulas (the same per-axis separable scheme as
``onnx.reference``), and applied as an index gather (``nearest``) or a matmul
(``linear``/``cubic``). ``F.interpolate`` is not used: its coordinate and rounding
conventions differ from ONNX's in several modes.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from compstack.translate import resize_source_coords
from compstack.translate.fx import TABLE
from compstack.translate.fx._util import (
    as_signed,
    as_unsigned,
    axis_of,
    is_float,
    known,
    need_static,
    out_shape_or_none,
    tdtype,
)

#: numpy dtype names Cast supports (float8, 4-bit and string types are not)
_TORCH_NAMES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                "float32", "float64", "bfloat16"}

def _target_dtype(ctx, dt):
    dt = np.dtype(dt)
    if dt.kind not in "biuf" or dt.name not in _TORCH_NAMES:
        raise ctx.unsupported(f"cast to/from {dt.name}")
    return tdtype(dt)


@TABLE.op("Cast", since=6)
def cast(ctx, x):
    """Cast: float -> int truncates toward zero, anything -> bool is ``!= 0`` (NaN ->
    True); float8/4-bit and string types are unsupported."""
    _target_dtype(ctx, ctx.dtype(0))
    out = _target_dtype(ctx, ctx.out_dtype(0))
    return x.to(out)


@TABLE.op("CastLike", since=15)
def cast_like(ctx, x, like):
    """CastLike: Cast to the second input's dtype."""
    _target_dtype(ctx, ctx.dtype(0))
    return x.to(_target_dtype(ctx, ctx.dtype(1)))


@TABLE.op("Constant", since=1)
def constant(ctx):
    """Constant (``value``, ``value_float(s)``, ``value_int(s)``) as a conversion-time array."""
    for name, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):
        value = ctx.attr(name, None)
        if value is not None:
            return np.asarray(value, dtype=dtype)
    raise ctx.unsupported("only tensor, float(s) and int(s) constants")


# ---------------------------------------------------------------------------------------
# Resize


def _nearest_coeffs(ratio, nearest_mode):
    if ratio == 1.0:
        return np.array([0.0, 1.0])
    if nearest_mode == "round_prefer_floor":
        return np.array([ratio <= 0.5, ratio > 0.5], dtype=np.float64)
    if nearest_mode == "round_prefer_ceil":
        return np.array([ratio < 0.5, ratio >= 0.5], dtype=np.float64)
    if nearest_mode == "floor":
        return np.array([1.0, 0.0])
    return np.array([0.0, 1.0])  # ceil


def _cubic_kernel(x, a):
    x = abs(x)
    if x <= 1:
        return (a + 2) * x**3 - (a + 3) * x**2 + 1
    if x < 2:
        return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return 0.0


def _coeffs(mode, ratio, scale, antialias, cubic_a, nearest_mode):
    """The interpolation taps around an output position whose source coordinate lies
    ``ratio`` (in (0, 1]) past the pixel on its left (ONNX Resize, ``mode``)."""
    if mode == "nearest":
        return _nearest_coeffs(ratio, nearest_mode)
    if mode == "linear":
        if not antialias:
            return np.array([1 - ratio, ratio])
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        args = (np.arange(start, start + 2 - 2 * start) - ratio) * s
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum()
    if not antialias:
        return np.array([_cubic_kernel(ratio + 1, cubic_a), _cubic_kernel(ratio, cubic_a),
                         _cubic_kernel(1 - ratio, cubic_a), _cubic_kernel(2 - ratio, cubic_a)])
    s = min(scale, 1.0)
    start = int(np.floor(-2 / s) + 1)
    c = np.array([_cubic_kernel(s * (i - ratio), cubic_a) for i in range(start, 2 - start)])
    return c / c.sum()


def resize_weights(mode, ctm, in_size, out_size, scale, roi=(0.0, 1.0), antialias=False, cubic_a=-0.75,
                   exclude_outside=False, nearest_mode="round_prefer_floor"):
    """The (out_size, in_size) interpolation matrix of one axis (ONNX Resize), and the mask
    of output positions that take ``extrapolation_value`` (or None).

    Taps are the ``n`` input pixels nearest the source coordinate (ties to the lower
    ones), edge-clamped; with ``exclude_outside`` the taps outside the input get weight 0
    and the rest are renormalised.
    """
    x, outside = resize_source_coords(ctm, out_size, in_size, scale, roi)
    weights = np.zeros((out_size, in_size), dtype=np.float64)
    for i in range(out_size):
        xi = float(x[i])
        ratio = 1.0 if xi == math.floor(xi) else xi - math.floor(xi)
        c = _coeffs(mode, ratio, scale, antialias, cubic_a, nearest_mode).astype(np.float64)
        n = len(c)
        pad = (n + 1) // 2
        xp = xi + pad
        p = math.floor(xp)
        frac = xp - p
        if n % 2 == 0:
            offset = -(n // 2) if frac == 0 else -(n // 2) + 1
        else:
            offset = -((n - 1) // 2) + (0 if frac <= 0.5 else 1)
        taps = p + offset + np.arange(n) - pad
        if exclude_outside:
            c = np.where((taps < 0) | (taps >= in_size), 0.0, c)
            total = c.sum()
            c = c / (total if total != 0 else 1.0)
        for t, w in zip(np.clip(taps, 0, in_size - 1), c):
            weights[i, t] += w
    return weights, outside


def _resize_plan(ctx, in_shape, scales, sizes, roi, axes):
    """Per-axis (scale, output size, roi) as ``onnx.reference`` and shape inference
    derive them (keep_aspect_ratio_policy included)."""
    r = len(in_shape)
    axes = list(range(r)) if axes is None else [axis_of(a, r) for a in axes]
    full_roi = [(0.0, 1.0)] * r
    if roi is not None and roi.size:
        roi = roi.reshape(-1).astype(np.float64)
        k = len(axes)
        for i, a in enumerate(axes):
            full_roi[a] = (float(roi[i]), float(roi[k + i]))
    scale = [1.0] * r
    out = list(in_shape)
    if sizes is not None:
        for i, a in enumerate(axes):
            out[a] = int(sizes[i])
            scale[a] = out[a] / in_shape[a]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise ctx.unsupported(f"keep_aspect_ratio_policy={policy!r}")
            common = (min if policy == "not_larger" else max)(scale[a] for a in axes)
            for a in axes:
                scale[a] = common
                out[a] = int(common * in_shape[a] + 0.5)
    else:
        for i, a in enumerate(axes):
            scale[a] = float(scales[i])
            out[a] = int(np.floor(scale[a] * in_shape[a]))
    return axes, scale, out, full_roi


def _resize(ctx, x, mode, ctm, nearest_mode, scales, sizes, roi, axes):
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.unsupported(f"mode={mode!r}")
    if ctm not in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                   "tf_crop_and_resize"):
        raise ctx.unsupported(f"coordinate_transformation_mode={ctm!r}")
    if nearest_mode not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        raise ctx.unsupported(f"nearest_mode={nearest_mode!r}")
    antialias = bool(ctx.attr("antialias", 0))
    if antialias and mode == "nearest":
        raise ctx.unsupported("antialias with mode nearest")
    in_shape = list(ctx.shape(0))
    axes, scale, out, full_roi = _resize_plan(ctx, in_shape, scales, sizes, roi, axes)
    expected = list(out_shape_or_none(ctx) or out)
    if expected != out:
        raise ctx.unsupported(f"output shape {out} disagrees with shape inference {expected}")
    dt = ctx.dtype(0)
    extrapolation = ctx.attr("extrapolation_value", 0.0)
    # linear/cubic: float32 for float32 and narrower floats, float64 for float64 and ints
    # (onnx.reference interpolates in float64 and saturate-casts back)
    cdt = np.float32 if is_float(dt) and dt != np.float64 else np.float64
    if mode == "nearest":
        compute = as_signed(ctx, 0, x)  # a gather: uint16/32/64 moved as their signed twins
    else:
        compute = x if dt == cdt else x.to(tdtype(cdt))
    for a in axes:
        if (math.isclose(scale[a], 1.0) and out[a] == in_shape[a]
                and math.isclose(full_roi[a][0], 0.0) and math.isclose(full_roi[a][1], 1.0)):
            continue
        w, outside = resize_weights(mode, ctm, in_shape[a], out[a], scale[a], full_roi[a], antialias,
                                    ctx.attr("cubic_coeff_a", -0.75), bool(ctx.attr("exclude_outside", 0)),
                                    nearest_mode)
        if mode == "nearest":
            src = torch.from_numpy(np.argmax(w, axis=1).astype(np.int64))
            compute = torch.index_select(compute, a, src)
        else:
            wt = torch.from_numpy(np.ascontiguousarray(w.T.astype(cdt)))
            compute = torch.movedim(torch.matmul(torch.movedim(compute, a, -1), wt), -1, a)
        if outside is not None and outside.any():
            shape = [1] * len(in_shape)
            shape[a] = out[a]
            mask = torch.from_numpy(outside.reshape(shape))
            compute = torch.where(mask, torch.full_like(compute, extrapolation), compute)
    if mode == "nearest":
        return as_unsigned(ctx, 0, compute)
    if dt == cdt:
        return compute
    if is_float(dt):
        return compute.to(tdtype(dt))
    info = np.iinfo(dt)
    # onnx.reference's saturate_cast: round half to even, clip to the type's range
    return torch.clamp(torch.round(compute), info.min, info.max).to(tdtype(dt))


def _empty(ctx, i):
    return 0 in ctx.shape(i)


def _runtime(ctx, i):
    """Input ``i`` is given, computed at run time and not statically empty."""
    return ctx.has(i) and known(ctx, i) is None and not _empty(ctx, i)


def _resize_operand(ctx, i):
    """Resize's roi/scales/sizes when known (an empty one counts as omitted)."""
    value = known(ctx, i) if ctx.has(i) else None
    return None if value is None or value.size == 0 else value


@TABLE.op("Resize", since=11)
def resize(ctx, x, roi=None, scales=None, sizes=None):
    """Resize: modes nearest/linear/cubic; every coordinate_transformation_mode;
    nearest_mode round_prefer_floor/round_prefer_ceil/floor/ceil; scales or sizes
    (known at conversion time), axes, keep_aspect_ratio_policy, antialias, cubic_coeff_a,
    exclude_outside, extrapolation_value."""
    sc = _resize_operand(ctx, 2)
    sz = _resize_operand(ctx, 3)
    if (sc is None and _runtime(ctx, 3) and ctx.attr("keep_aspect_ratio_policy", "stretch") == "stretch"
            and out_shape_or_none(ctx) is not None):
        # runtime sizes (stretch): the inferred output shape holds them
        axes = ctx.attr("axes", None) or list(range(len(ctx.shape(0))))
        sz = np.array([ctx.out_shape(0)[axis_of(a, len(ctx.shape(0)))] for a in axes], dtype=np.int64)
    if _runtime(ctx, 2) and sc is None:
        ctx.static(2, "scales")
    if _runtime(ctx, 3) and sz is None:
        ctx.static(3, "sizes")
    sc = None if sc is None else sc.reshape(-1)
    sz = None if sz is None else sz.reshape(-1)
    if sc is None and sz is None:
        raise ctx.unsupported("neither scales nor sizes")
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
    r = ctx.static(1, "roi") if ctx.has(1) and ctm == "tf_crop_and_resize" else None
    if ctm == "tf_crop_and_resize" and r is None:
        raise ctx.unsupported("tf_crop_and_resize without roi")
    return _resize(ctx, x, ctx.attr("mode", "nearest"), ctm, ctx.attr("nearest_mode", "round_prefer_floor"),
                   sc, sz, r, ctx.attr("axes", None))


def _upsample(ctx, x, scales):
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise ctx.unsupported(f"mode={mode!r}")
    mode = "linear" if mode == "bilinear" else mode
    return _resize(ctx, x, mode, "asymmetric", "floor", np.asarray(scales, dtype=np.float64).reshape(-1), None,
                   None, None)


@TABLE.op("Upsample", since=9)
def upsample(ctx, x, scales):
    """Upsample (deprecated): Resize with asymmetric coordinates, nearest rounding down."""
    return _upsample(ctx, x, ctx.static(1, "scales"))


@TABLE.op("Upsample", since=7)
def upsample_7(ctx, x):
    """Upsample-7: ``scales`` attribute."""
    return _upsample(ctx, x, ctx.attr("scales"))


# ---------------------------------------------------------------------------------------
# quantization

_QRANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
           np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767)}


def _quant_param(ctx, i, value, x_shape, axis, block_size):
    """Scale / zero point broadcast against the input: scalar, per-axis (1-D along
    ``axis``) or blocked (repeated ``block_size`` times along ``axis``)."""
    pshape = ctx.shape(i)
    if int(np.prod(pshape, dtype=np.int64)) == 1:
        return value.reshape(())
    if not block_size:
        shape = [1] * len(x_shape)
        shape[axis] = pshape[0]
        return value.reshape(shape)
    value = torch.repeat_interleave(value, block_size, axis)
    return value.narrow(axis, 0, x_shape[axis])


@TABLE.op("QuantizeLinear", since=10)
def quantize_linear(ctx, x, scale, zero_point=None):
    """QuantizeLinear to int8/uint8/int16/uint16: ``saturate(round_half_even(x / scale) +
    zero_point)``, per-tensor, per-axis or blocked."""
    out = ctx.out_dtype(0)
    if out not in _QRANGE:
        raise ctx.unsupported(f"output type {out}")
    x_shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 1), len(x_shape))
    block = ctx.attr("block_size", 0)
    s = _quant_param(ctx, 1, scale, x_shape, axis, block)
    q = torch.round(x / s).to(torch.int32)
    if zero_point is not None:
        q = q + _quant_param(ctx, 2, zero_point, x_shape, axis, block).to(torch.int32)
    lo, hi = _QRANGE[out]
    y = torch.clamp(q, lo, hi)
    return y.to(tdtype(out))


@TABLE.op("DequantizeLinear", since=10)
def dequantize_linear(ctx, x, scale, zero_point=None):
    """DequantizeLinear from integer types: ``(x - zero_point) * scale`` in the scale's
    (or ``output_dtype``'s) type, per-tensor, per-axis or blocked."""
    dt = ctx.dtype(0)
    if dt.kind not in "iu":
        raise ctx.unsupported(f"input type {dt}")
    x_shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 1), len(x_shape))
    block = ctx.attr("block_size", 0)
    dx = x.to(torch.float32)
    if zero_point is not None:
        dx = dx - _quant_param(ctx, 2, zero_point, x_shape, axis, block).to(torch.float32)
    y = dx * _quant_param(ctx, 1, scale, x_shape, axis, block)
    return y.to(tdtype(ctx.out_dtype(0)))


@TABLE.op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx, x):
    """DynamicQuantizeLinear: uint8 with a scale and zero point from the data's range
    (widened to include 0); outputs y, y_scale, y_zero_point."""
    maxx = torch.clamp(torch.amax(x), min=0)
    minx = torch.clamp(torch.amin(x), max=0)
    span = maxx - minx
    scale = torch.where(span == 0, torch.ones_like(span), span) / 255
    zp = torch.round(torch.clamp(-minx / scale, 0, 255))
    y = torch.clamp(torch.round(x / scale) + zp, 0, 255)
    return y.to(torch.uint8), scale, zp.to(torch.uint8)


# ---------------------------------------------------------------------------------------
# grids


@TABLE.op("AffineGrid", since=20)
def affine_grid(ctx, theta, size):
    """AffineGrid (2-D and 3-D) with ``align_corners``."""
    if known(ctx, 1) is None and out_shape_or_none(ctx) is not None:
        out = ctx.out_shape(0)  # (N, [D,] H, W, k): the channel count does not matter
        shape = [out[0], 1, *out[1:-1]]
    else:
        shape = [int(s) for s in ctx.static(1, "size")]
    return F.affine_grid(theta, shape, align_corners=bool(ctx.attr("align_corners", 0)))


@TABLE.op("GridSample", since=20)
def grid_sample(ctx, x, grid):
    """GridSample (``F.grid_sample``): modes linear/nearest (2-D and 3-D), cubic (2-D),
    padding_mode zeros/border/reflection, align_corners."""
    mode = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest", "cubic": "bicubic",
            "bicubic": "bicubic"}.get(ctx.attr("mode", "linear"))
    padding = ctx.attr("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise ctx.unsupported(f"mode={ctx.attr('mode')!r} padding_mode={padding!r}")
    rank = len(ctx.shape(0))
    if rank not in (4, 5) or (rank == 5 and mode == "bicubic"):
        raise ctx.unsupported(f"{rank - 2}-D {mode} sampling")
    align = bool(ctx.attr("align_corners", 0))
    if mode == "bicubic" and padding != "zeros":
        # ONNX moves a sampling coordinate outside [-1, 1] back inside (border: clamped to
        # the first/last pixel centre; reflection: reflected) before taking the 4x4
        # taps; torch's bicubic only pads each tap: move the grid here first
        if padding == "border":
            sizes = list(reversed(ctx.shape(0)[2:]))  # grid[..., 0] indexes W, [..., 1] H
            lo = torch.tensor([-1.0 if align else -1.0 + 1.0 / d for d in sizes], dtype=tdtype(ctx.dtype(1)))
            outside = (grid < -1) | (grid > 1)
            grid = torch.where(outside, torch.maximum(torch.minimum(grid, -lo), lo), grid)
        else:
            t = torch.remainder(grid + 1, 4)
            grid = torch.where(t > 2, 4 - t, t) - 1
    return F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)


# ---------------------------------------------------------------------------------------
# random


def _proxy_input(ctx, x):
    if not isinstance(x, torch.fx.Proxy):
        raise ctx.unsupported("random op on a conversion-time constant")
    return x


@TABLE.op("RandomNormalLike", since=1)
def random_normal_like(ctx, x):
    """RandomNormalLike (torch's generator; ``seed`` ignored)."""
    x = _proxy_input(ctx, x)
    y = torch.randn_like(x, dtype=tdtype(ctx.out_dtype(0)))
    return y * ctx.attr("scale", 1.0) + ctx.attr("mean", 0.0)


@TABLE.op("RandomUniformLike", since=1)
def random_uniform_like(ctx, x):
    """RandomUniformLike in ``[low, high)`` (torch's generator; ``seed`` ignored)."""
    x = _proxy_input(ctx, x)
    low, high = ctx.attr("low", 0.0), ctx.attr("high", 1.0)
    return torch.rand_like(x, dtype=tdtype(ctx.out_dtype(0))) * (high - low) + low


@TABLE.op("Bernoulli", since=15)
def bernoulli(ctx, x):
    """Bernoulli draws with the input's probabilities (torch's generator; ``seed`` ignored)."""
    x = _proxy_input(ctx, x)
    return torch.bernoulli(x).to(tdtype(ctx.out_dtype(0)))


# ---------------------------------------------------------------------------------------
# bit reinterpretation, windows, Col2Im


@TABLE.op("BitCast", since=26)
def bit_cast(ctx, x):
    """BitCast between types of the same width (``Tensor.view(dtype)``)."""
    src, dst = _target_dtype(ctx, ctx.dtype(0)), _target_dtype(ctx, ctx.out_dtype(0))
    if ctx.dtype(0).itemsize != ctx.out_dtype(0).itemsize:
        raise ctx.unsupported("bit widths differ")
    return x if src == dst else x.view(dst)


def _window_size(ctx):
    value = known(ctx, 0)
    if value is not None:
        return int(np.asarray(value).reshape(-1)[0])
    out = out_shape_or_none(ctx)
    if out is None:
        need_static(ctx, 0, "size")
    return out[0]


def _window(fn):
    def convert(ctx, size):
        n = _window_size(ctx)
        denom = n if ctx.attr("periodic", 1) else n - 1
        k = np.arange(n, dtype=np.float64)
        return fn(k, denom).astype(ctx.out_dtype(0))

    return convert


TABLE.op("HannWindow", since=17)(_window(lambda k, d: np.sin(k * np.pi / d) ** 2))
TABLE.op("HammingWindow", since=17)(_window(lambda k, d: 25 / 46 - (21 / 46) * np.cos(2 * np.pi * k / d)))
TABLE.op("BlackmanWindow", since=17)(_window(
    lambda k, d: 0.42 - 0.5 * np.cos(2 * np.pi * k / d) + 0.08 * np.cos(4 * np.pi * k / d)))


@TABLE.op("Col2Im", since=18)
def col2im(ctx, x, image_shape, block_shape):
    """Col2Im for 2-D images (``F.fold``; asymmetric pads fold onto the padded canvas,
    then crop)."""
    image = [int(v) for v in ctx.static(1, "image_shape")]
    block = [int(v) for v in ctx.static(2, "block_shape")]
    if len(image) != 2:
        raise ctx.unsupported(f"{len(image)}-D images (torch folds 2-D ones)")
    dil, strides = (tuple(ctx.attr(name, None) or (1, 1)) for name in ("dilations", "strides"))
    pads = list(ctx.attr("pads", None) or [0, 0, 0, 0])
    canvas = tuple(image[i] + pads[i] + pads[i + 2] for i in range(2))
    y = F.fold(x, canvas, tuple(block), dilation=dil, padding=0, stride=strides)
    return y[:, :, pads[0]:pads[0] + image[0], pads[1]:pads[1] + image[1]]
