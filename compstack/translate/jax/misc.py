"""ONNX -> jax converters: misc ops (see :mod:`compstack.translate` for the contract).

Cast / CastLike / Constant, (de)quantization, and Resize / Upsample. Resize implements the
spec's coordinate transforms and interpolation kernels itself (``jax.image.resize`` has
other conventions): per resized axis, the source positions and weights are computed at
conversion time with numpy (as onnx.reference does) and applied as one gather and a
weighted sum.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax
from onnx import helper

from compstack.translate import resize_source_coords
from compstack.translate.jax import TABLE
from compstack.translate.jax._common import (
    ints,
    norm_axes,
    norm_axis,
    shape_of,
    static_or_none,
)

# --------------------------------------------------------------------------- cast

_FLOAT8 = {np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
           np.dtype(ml_dtypes.float8_e4m3fnuz), np.dtype(ml_dtypes.float8_e5m2fnuz)}


def _cast(ctx, x, to: np.dtype, saturate: bool):
    x = jnp.asarray(x)
    if to.kind in "OSU":
        raise ctx.unsupported("string tensors")
    if to == np.bool_:
        return x != 0
    if to in _FLOAT8:
        if saturate and jnp.issubdtype(x.dtype, jnp.floating):
            info = ml_dtypes.finfo(to)
            x = jnp.clip(x, float(info.min), float(info.max))
        return x.astype(to)
    if to.itemsize < 1 or to.name in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn", "float8_e8m0fnu"):
        raise ctx.unsupported(f"cast to {to.name}")
    return x.astype(to)


@TABLE.op("Cast", since=6)
def cast(ctx, x):
    """ONNX Cast (float -> int truncates; to bool is ``x != 0``; float8 targets saturate
    when ``saturate=1``, the default); strings and sub-byte types are unsupported."""
    to = np.dtype(helper.tensor_dtype_to_np_dtype(ctx.attr("to")))
    return _cast(ctx, x, to, bool(ctx.attr("saturate", 1)))


@TABLE.op("CastLike", since=15)
def cast_like(ctx, x, like):
    """ONNX CastLike: Cast to the dtype of the second input."""
    return _cast(ctx, x, np.dtype(jnp.result_type(like)), bool(ctx.attr("saturate", 1)))


@TABLE.op("Constant", since=1)
def constant(ctx):
    """ONNX Constant: ``value`` / ``value_float(s)`` / ``value_int(s)`` (a conversion-time value)."""
    for name, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):
        v = ctx.attr(name, None)
        if v is not None:
            return np.asarray(v, dtype=dtype)
    raise ctx.unsupported("sparse or string constant")


# --------------------------------------------------------------------------- quantization


def _q_param(v, shape, axis, block):
    """Scale / zero point broadcastable to ``shape`` (per tensor, per axis, or blocked)."""
    v = jnp.asarray(v)
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    if not block:
        dims = [1] * len(shape)
        dims[axis] = v.size
        return v.reshape(dims)
    v = jnp.repeat(v, block, axis=axis)
    return v[tuple(slice(0, d) for d in shape)]


_QRANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
           np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767)}


@TABLE.op("QuantizeLinear", since=10)
def quantize_linear(ctx, x, scale, zero_point=None):
    """ONNX QuantizeLinear ``saturate(rint(x / scale) + zero_point)``: per tensor, per
    ``axis``, or blocked (``block_size``, 21); uint8/int8/uint16/int16 and float8 outputs."""
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 1), len(shape)) if len(shape) else 0
    block = ctx.attr("block_size", 0)
    if zero_point is not None:
        out = np.dtype(jnp.result_type(zero_point))
    elif ctx.attr("output_dtype", 0):
        out = np.dtype(helper.tensor_dtype_to_np_dtype(ctx.attr("output_dtype")))
    else:
        out = np.dtype(np.uint8)
    s = _q_param(scale, shape, axis, block)
    q = jnp.asarray(x) / s
    if out in _QRANGE:
        lo, hi = _QRANGE[out]
        qi = jnp.round(q).astype(jnp.int32)
        if zero_point is not None:
            qi = qi + _q_param(zero_point, shape, axis, block).astype(jnp.int32)
        return jnp.clip(qi, lo, hi).astype(out)
    if out in _FLOAT8:
        return _cast(ctx, q, out, bool(ctx.attr("saturate", 1)))
    raise ctx.unsupported(f"quantized type {out.name}")


@TABLE.op("DequantizeLinear", since=10)
def dequantize_linear(ctx, x, scale, zero_point=None):
    """ONNX DequantizeLinear ``(x - zero_point) * scale`` in float32, per tensor / axis / block."""
    shape = shape_of(x)
    axis = norm_axis(ctx.attr("axis", 1), len(shape)) if len(shape) else 0
    block = ctx.attr("block_size", 0)
    xs = jnp.asarray(x)
    if xs.dtype.itemsize < 1 or xs.dtype.name in ("int4", "uint4", "float4_e2m1fn"):
        raise ctx.unsupported(f"dequantize from {xs.dtype.name}")
    dx = xs.astype(jnp.float32)
    if zero_point is not None and np.dtype(xs.dtype) not in _FLOAT8:
        dx = dx - _q_param(zero_point, shape, axis, block).astype(jnp.float32)
    out = helper.tensor_dtype_to_np_dtype(ctx.attr("output_dtype")) if ctx.attr("output_dtype", 0) \
        else jnp.result_type(scale)
    return (dx * _q_param(scale, shape, axis, block)).astype(out)


@TABLE.op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx, x):
    """ONNX DynamicQuantizeLinear: uint8 with a scale/zero point from ``min(0, x)..max(0, x)``."""
    x = jnp.asarray(x).astype(jnp.float32)
    maxx = jnp.maximum(0.0, jnp.max(x))
    minx = jnp.minimum(0.0, jnp.min(x))
    scale = jnp.where(maxx == minx, jnp.float32(1.0), maxx - minx) / jnp.float32(255)
    zp = jnp.round(jnp.clip(-minx / scale, 0, 255))
    y = jnp.clip(jnp.round(x / scale) + zp, 0, 255)
    return y.astype(jnp.uint8), scale, zp.astype(jnp.uint8)


# --------------------------------------------------------------------------- resize


def _nearest_fn(mode: str):
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        if mode == "round_prefer_floor":
            return np.array([ratio <= 0.5, ratio > 0.5], np.float64)
        if mode == "round_prefer_ceil":
            return np.array([ratio < 0.5, ratio >= 0.5], np.float64)
        if mode == "floor":
            return np.array([1.0, 0.0])
        if mode == "ceil":
            return np.array([0.0, 1.0])
        raise ValueError(mode)

    return coeffs


def _linear_coeffs(ratio: float, scale: float) -> np.ndarray:
    return np.array([1 - ratio, ratio])


def _linear_coeffs_aa(ratio: float, scale: float) -> np.ndarray:
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    footprint = 2 - 2 * start
    args = (np.arange(start, start + footprint) - ratio) * scale
    c = np.clip(1 - np.abs(args), 0, 1)
    return c / c.sum()


def _cubic_fn(a: float, antialias: bool):
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            r1, r2 = ratio + 1, 1 - ratio
            return np.array([
                ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
                ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
                ((a + 2) * r2 - (a + 3)) * r2 * r2 + 1,
                ((a * (r2 + 1) - 5 * a) * (r2 + 1) + 8 * a) * (r2 + 1) - 4 * a,
            ])
        s = min(scale, 1.0)

        def k(v: float) -> float:
            v = abs(v)
            if v <= 1:
                return (a + 2) * v ** 3 - (a + 3) * v ** 2 + 1
            if v < 2:
                return a * v ** 3 - 5 * a * v ** 2 + 8 * a * v - 4 * a
            return 0.0

        i_start = int(np.floor(-2 / s) + 1)
        c = np.array([k(s * (i - ratio)) for i in range(i_start, 2 - i_start)])
        return c / c.sum()

    return coeffs


def _resize_axis(data, axis, in_n, out_n, scale, roi, get_coeffs, nearest, opts):
    x_ori, extrap = resize_source_coords(opts["ctm"], out_n, in_n, scale, roi)
    x_int = np.floor(x_ori)
    ratios = np.where(x_ori == x_int, 1.0, x_ori - x_int)
    coeffs = np.stack([np.asarray(get_coeffs(float(r), scale), np.float64) for r in ratios])
    n = coeffs.shape[1]
    pad = math.ceil(n / 2)
    xp = x_ori + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        offset = np.where(frac <= 0.5, base, base + 1)
    nbr = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if opts["exclude_outside"]:
        coeffs = np.where((nbr < 0) | (nbr >= in_n), 0.0, coeffs)
        total = coeffs.sum(axis=-1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    clamped = np.clip(nbr, 0, in_n - 1)
    shape_after = [1] * data.ndim
    shape_after[axis] = out_n
    if nearest:
        pick = clamped[np.arange(out_n), np.argmax(coeffs, axis=1)]
        res = jnp.take(data, pick, axis=axis)
    else:
        gathered = jnp.take(data, clamped.reshape(-1), axis=axis)
        gshape = list(data.shape)
        gshape[axis:axis + 1] = [out_n, n]
        gathered = gathered.reshape(gshape)
        cshape = [1] * len(gshape)
        cshape[axis], cshape[axis + 1] = out_n, n
        res = jnp.sum(gathered * jnp.asarray(coeffs.reshape(cshape), data.dtype), axis=axis + 1)
    if extrap is not None and extrap.any():
        res = jnp.where(jnp.asarray(extrap.reshape(shape_after)), jnp.asarray(opts["extrapolation_value"], res.dtype),
                        res)
    return res


def _resize(ctx, x, roi, scales, sizes, *, ctm, mode, nearest_mode, axes=None):
    shape = list(shape_of(x))
    r = len(shape)
    axes = list(range(r)) if axes is None else list(norm_axes(axes, r))
    roi_full = None
    if roi is not None and np.asarray(roi).size:
        roi = np.asarray(roi, np.float64).reshape(-1)
        roi_full = [0.0] * r + [1.0] * r
        na = len(axes)
        for i, a in enumerate(axes):
            roi_full[a], roi_full[r + a] = roi[i], roi[na + i]
    if sizes is not None:
        sz = [int(v) for v in np.asarray(sizes).reshape(-1)]
        out = list(shape)
        for i, a in enumerate(axes):
            out[a] = sz[i]
        fac = [out[i] / shape[i] for i in range(r)]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            if policy not in ("not_larger", "not_smaller"):
                raise ctx.unsupported(f"keep_aspect_ratio_policy={policy!r}")
            s = pick(fac[a] for a in axes)
            fac = [s if i in axes else 1.0 for i in range(r)]
            out = [int(s * shape[i] + 0.5) if i in axes else shape[i] for i in range(r)]
    elif scales is not None:
        sc = np.asarray(scales).reshape(-1)
        fac_arr = np.ones(r, sc.dtype)
        for i, a in enumerate(axes):
            fac_arr[a] = sc[i]
        fac = [float(v) for v in fac_arr]
        out = [int(v) for v in (fac_arr * np.array(shape))]
    else:
        raise ctx.unsupported("neither scales nor sizes")
    antialias = bool(ctx.attr("antialias", 0))
    if mode == "nearest":
        get = _nearest_fn(nearest_mode)
        nearest = True
        if nearest_mode not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            raise ctx.unsupported(f"nearest_mode={nearest_mode!r}")
    elif mode == "linear":
        get, nearest = (_linear_coeffs_aa if antialias else _linear_coeffs), False
    elif mode == "cubic":
        get, nearest = _cubic_fn(ctx.attr("cubic_coeff_a", -0.75), antialias), False
    else:
        raise ctx.unsupported(f"mode={mode!r}")
    known = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
             "half_pixel_symmetric")
    if ctm not in known:
        raise ctx.unsupported(f"coordinate_transformation_mode={ctm!r}")
    opts = {"ctm": ctm, "exclude_outside": bool(ctx.attr("exclude_outside", 0)),
            "extrapolation_value": ctx.attr("extrapolation_value", 0.0)}
    in_dtype = jnp.result_type(x)
    if nearest:
        data = jnp.asarray(x)
    else:
        work = jnp.float64 if in_dtype in (jnp.float64,) or not jnp.issubdtype(in_dtype, jnp.floating) \
            else jnp.float32
        data = jnp.asarray(x).astype(work)
    for a in axes:
        n_out, f = out[a], fac[a]
        a_roi = None if roi_full is None else (roi_full[a], roi_full[r + a])
        if math.isclose(f, 1.0) and n_out == data.shape[a] and (
                a_roi is None or (math.isclose(a_roi[0], 0.0) and math.isclose(a_roi[1], 1.0))):
            continue
        data = _resize_axis(data, a, data.shape[a], n_out, f, a_roi, get, nearest, opts)
    if jnp.issubdtype(in_dtype, jnp.integer):
        info = jnp.iinfo(in_dtype)
        data = jnp.clip(jnp.round(data), info.min, info.max)
    return data.astype(in_dtype)


@TABLE.op("Resize", since=10)
def resize_10(ctx, x, scales):
    """ONNX Resize-10: ``scales`` input, ``mode`` nearest/linear, asymmetric coordinates
    (nearest: floor), as Upsample."""
    mode = ctx.attr("mode", "nearest")
    return _resize(ctx, x, None, ctx.static(1, "scales"), None, ctm="asymmetric", mode=mode, nearest_mode="floor")


@TABLE.op("Resize", since=11)
def resize(ctx, x, roi=None, scales=None, sizes=None):
    """ONNX Resize-11+: modes nearest/linear/cubic (antialias), all coordinate
    transformation modes, nearest_mode, exclude_outside, extrapolation_value, axes and
    keep_aspect_ratio_policy (18); static roi/scales/sizes."""
    return _resize(ctx, x, static_or_none(ctx, 1, "roi"), static_or_none(ctx, 2, "scales"),
                   static_or_none(ctx, 3, "sizes"), ctm=ctx.attr("coordinate_transformation_mode", "half_pixel"),
                   mode=ctx.attr("mode", "nearest"), nearest_mode=ctx.attr("nearest_mode", "round_prefer_floor"),
                   axes=ints(ctx.attr("axes")) or None)


@TABLE.op("Upsample", since=7)
def upsample_7(ctx, x):
    """ONNX Upsample-7: ``scales`` attribute; nearest (floor) or linear, asymmetric."""
    return _resize(ctx, x, None, np.asarray(ctx.attr("scales"), np.float32), None, ctm="asymmetric",
                   mode=ctx.attr("mode", "nearest"), nearest_mode="floor")


@TABLE.op("Upsample", since=9)
def upsample(ctx, x, scales):
    """ONNX Upsample-9: static ``scales`` input; nearest (floor) or linear, asymmetric."""
    return _resize(ctx, x, None, ctx.static(1, "scales"), None, ctm="asymmetric",
                   mode=ctx.attr("mode", "nearest"), nearest_mode="floor")


@TABLE.op("BitCast", since=26)
def bitcast(ctx, x):
    """ONNX BitCast: reinterpret the bits as the same-width type ``to``."""
    to = np.dtype(helper.tensor_dtype_to_np_dtype(ctx.attr("to")))
    x = jnp.asarray(x)
    if to.kind in "OSU" or to.itemsize != x.dtype.itemsize:
        raise ctx.unsupported(f"bitcast {x.dtype} -> {to}")
    if to == np.bool_:
        return lax.bitcast_convert_type(x, jnp.uint8) != 0
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.uint8)
    return lax.bitcast_convert_type(x, to)


@TABLE.op("MelWeightMatrix", since=17)
def mel_weight_matrix(ctx, *inputs):
    """ONNX MelWeightMatrix: its inputs are sizes and frequencies, normally known, so the
    node is folded at conversion time; computed at run time it is unsupported."""
    raise ctx.unsupported("inputs computed at run time (the matrix is folded when they are known)")
