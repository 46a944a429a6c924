"""ONNX -> jax converters: math ops (see :mod:`compstack.translate` for the contract).

Matrix products (MatMul, Gemm, Einsum, MatMulInteger, QLinearMatMul), Det, cumulative
sums/products, DFT / STFT and the window functions. Every dot uses
:data:`compstack.translate.jax._common.PRECISION`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from onnx import helper

from compstack.translate.jax import TABLE, _common
from compstack.translate.jax._common import norm_axis


@TABLE.op("MatMul", since=1)
def matmul(ctx, a, b):
    """ONNX MatMul (numpy ``matmul`` broadcasting, 1-D operands promoted)."""
    return jnp.matmul(a, b, precision=_common.PRECISION)


@TABLE.op("Gemm", since=7)
def gemm(ctx, a, b, c=None):
    """ONNX Gemm ``alpha * A' @ B' + beta * C`` (C broadcast unidirectionally)."""
    if ctx.attr("transA", 0):
        a = jnp.transpose(a)
    if ctx.attr("transB", 0):
        b = jnp.transpose(b)
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    y = jnp.matmul(a, b, precision=_common.PRECISION)
    dtype = jnp.result_type(a)
    if alpha != 1.0:
        y = y * jnp.asarray(alpha, dtype) if jnp.issubdtype(dtype, jnp.floating) else (y * alpha).astype(dtype)
    if c is not None and beta != 0:
        if beta != 1.0:
            c = c * jnp.asarray(beta, dtype) if jnp.issubdtype(dtype, jnp.floating) else (c * beta).astype(dtype)
        y = y + c
    return y.astype(dtype)


@TABLE.op("Einsum", since=12)
def einsum(ctx, *xs):
    """ONNX Einsum (numpy ``einsum`` equation, explicit or implicit output)."""
    eq = ctx.attr("equation")
    if isinstance(eq, bytes):
        eq = eq.decode()
    return jnp.einsum(eq.replace(" ", ""), *xs, precision=_common.PRECISION).astype(jnp.result_type(xs[0]))


@TABLE.op("MatMulInteger", since=10)
def matmul_integer(ctx, a, b, a_zp=None, b_zp=None):
    """ONNX MatMulInteger: int32 ``(A - a_zero_point) @ (B - b_zero_point)``; a 1-D
    ``a_zero_point`` is per row of A, a 1-D ``b_zero_point`` per column of B."""
    ai = jnp.asarray(a).astype(jnp.int32)
    bi = jnp.asarray(b).astype(jnp.int32)
    if a_zp is not None:
        zp = jnp.asarray(a_zp).astype(jnp.int32)
        ai = ai - (zp[:, None] if zp.ndim == 1 and zp.shape[0] > 1 else zp)
    if b_zp is not None:
        bi = bi - jnp.asarray(b_zp).astype(jnp.int32)
    return jnp.matmul(ai, bi, preferred_element_type=jnp.int32)


@TABLE.op("Det", since=11)
def det(ctx, x):
    """ONNX Det: determinant of the trailing square matrices."""
    return jnp.linalg.det(x).astype(jnp.result_type(x))


def _window(ctx, size, fn):
    n = int(np.asarray(ctx.static(0, "size")).reshape(-1)[0])
    periodic = ctx.attr("periodic", 1)
    denom = n if periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    w = fn(k, denom) if n > 1 else np.ones(n)
    dt = ctx.attr("output_datatype", 1)
    return w.astype(helper.tensor_dtype_to_np_dtype(dt))


@TABLE.op("HannWindow", since=17)
def hann_window(ctx, size):
    """ONNX HannWindow (static size; computed at conversion time)."""
    return _window(ctx, size, lambda k, d: np.sin(np.pi * k / d) ** 2)


@TABLE.op("HammingWindow", since=17)
def hamming_window(ctx, size):
    """ONNX HammingWindow (static size)."""
    return _window(ctx, size, lambda k, d: 25 / 46 - (1 - 25 / 46) * np.cos(2 * np.pi * k / d))


@TABLE.op("BlackmanWindow", since=17)
def blackman_window(ctx, size):
    """ONNX BlackmanWindow (static size)."""
    return _window(ctx, size, lambda k, d: 0.42 - 0.5 * np.cos(2 * np.pi * k / d) + 0.08 * np.cos(4 * np.pi * k / d))


def _cumulative(ctx, x, axis, fn, identity):
    ax = norm_axis(int(np.asarray(ctx.static(1, "axis")).reshape(-1)[0]), jnp.ndim(x))
    reverse, exclusive = ctx.attr("reverse", 0), ctx.attr("exclusive", 0)
    if reverse:
        x = jnp.flip(x, ax)
    y = fn(x, axis=ax)
    if exclusive:
        n = jnp.shape(x)[ax]
        y = lax.slice_in_dim(y, 0, max(n - 1, 0), axis=ax)
        widths = [(0, 0)] * jnp.ndim(x)
        widths[ax] = (1, 0)
        y = jnp.pad(y, widths, constant_values=identity)
    if reverse:
        y = jnp.flip(y, ax)
    return y.astype(jnp.result_type(x))


@TABLE.op("CumSum", since=11)
def cumsum(ctx, x, axis):
    """ONNX CumSum along a static ``axis``; ``exclusive`` and ``reverse``."""
    return _cumulative(ctx, x, axis, jnp.cumsum, 0)


@TABLE.op("CumProd", since=26)
def cumprod(ctx, x, axis):
    """ONNX CumProd along a static ``axis``; ``exclusive`` and ``reverse``."""
    return _cumulative(ctx, x, axis, jnp.cumprod, 1)


def _requantize(acc, scale, y_zp, dtype):
    """``saturate(rint(acc * scale) + y_zero_point)`` in ``dtype`` (float32 arithmetic)."""
    y = jnp.round(acc.astype(jnp.float32) * scale)
    if y_zp is not None:
        y = y + jnp.asarray(y_zp).astype(jnp.float32)
    info = jnp.iinfo(dtype)
    return jnp.clip(y, info.min, info.max).astype(dtype)


@TABLE.op("QLinearMatMul", since=10)
def qlinear_matmul(ctx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp=None):
    """ONNX QLinearMatMul: int32 product of the zero-point-shifted operands, requantized
    with ``a_scale * b_scale / y_scale`` (per tensor, or per row of A / column of B)."""
    ai = jnp.asarray(a).astype(jnp.int32)
    bi = jnp.asarray(b).astype(jnp.int32)
    sa, sb = jnp.asarray(a_scale, jnp.float32), jnp.asarray(b_scale, jnp.float32)
    if a_zp is not None:
        zp = jnp.asarray(a_zp).astype(jnp.int32)
        ai = ai - (zp[..., None] if zp.ndim >= 1 and zp.size > 1 else zp)
    if b_zp is not None:
        bi = bi - jnp.asarray(b_zp).astype(jnp.int32)
    if sa.ndim >= 1 and sa.size > 1:
        sa = sa[..., None]
    acc = jnp.matmul(ai, bi, preferred_element_type=jnp.int32)
    dtype = jnp.result_type(y_zp) if y_zp is not None else jnp.result_type(a)
    return _requantize(acc, sa * sb / jnp.asarray(y_scale, jnp.float32), y_zp, dtype)


# --------------------------------------------------------------------------- spectral


def _to_complex(x):
    """(..., 1) real or (..., 2) real/imag pairs -> complex (...). Real signals are
    transformed in double precision, complex ones in their own (numpy's choices, which
    onnx.reference and the ONNX node tests' expected outputs follow)."""
    x = jnp.asarray(x)
    if x.shape[-1] == 1:
        return x[..., 0].astype(jnp.float64)
    if x.dtype not in (jnp.float32, jnp.float64):
        x = x.astype(jnp.float32)
    return lax.complex(x[..., 0], x[..., 1])


def _from_complex(c, dtype):
    return jnp.stack([jnp.real(c), jnp.imag(c)], axis=-1).astype(dtype)


def _dft(ctx, x, n, axis):
    rank = jnp.ndim(x)
    axis = norm_axis(axis, rank)
    if axis == rank - 1:
        raise ctx.unsupported("axis on the real/imaginary dimension")
    inverse, onesided = ctx.attr("inverse", 0), ctx.attr("onesided", 0)
    dtype = jnp.result_type(x)
    if n is None:
        n = 2 * (jnp.shape(x)[axis] - 1) if inverse and onesided else jnp.shape(x)[axis]
    sig = _to_complex(x)
    if inverse:
        if onesided:
            return jnp.fft.irfft(sig, n=n, axis=axis)[..., None].astype(dtype)
        return _from_complex(jnp.fft.ifft(sig, n=n, axis=axis), dtype)
    out = jnp.fft.fft(sig, n=n, axis=axis)
    if onesided:
        out = lax.slice_in_dim(out, 0, n // 2 + 1, axis=axis)
    return _from_complex(out, dtype)


@TABLE.op("DFT", since=17)
def dft_17(ctx, x, dft_length=None):
    """ONNX DFT-17: ``axis`` attribute (default 1); static ``dft_length``; inverse, onesided."""
    n = None if dft_length is None else int(np.asarray(ctx.static(1, "dft_length")).reshape(-1)[0])
    return _dft(ctx, x, n, ctx.attr("axis", 1))


@TABLE.op("DFT", since=20)
def dft(ctx, x, dft_length=None, axis=None):
    """ONNX DFT-20: static ``dft_length`` and ``axis`` inputs (default -2); inverse, onesided."""
    n = None if dft_length is None else int(np.asarray(ctx.static(1, "dft_length")).reshape(-1)[0])
    ax = -2 if axis is None else int(np.asarray(ctx.static(2, "axis")).reshape(-1)[0])
    return _dft(ctx, x, n, ax)


@TABLE.op("STFT", since=17)
def stft(ctx, x, frame_step, window=None, frame_length=None):
    """ONNX STFT: frames of the window's length every static ``frame_step``, windowed, DFT of
    ``frame_length`` (default the window's length); ``onesided``."""
    step = int(np.asarray(ctx.static(1, "frame_step")).reshape(-1)[0])
    xs = jnp.asarray(x)
    length = xs.shape[-2]
    if frame_length is not None:
        n = int(np.asarray(ctx.static(3, "frame_length")).reshape(-1)[0])
    else:
        n = jnp.shape(window)[0] if window is not None else length
    win = jnp.shape(window)[0] if window is not None else n
    frames = 1 + (length - n) // step
    idx = np.arange(frames)[:, None] * step + np.arange(win)[None, :]
    valid = idx < length
    sl = jnp.take(xs, np.minimum(idx, length - 1).reshape(-1), axis=-2).reshape(
        (*xs.shape[:-2], frames, win, xs.shape[-1]))
    sl = jnp.where(valid[..., None], sl, jnp.zeros((), xs.dtype))
    if window is not None:
        sl = sl * jnp.reshape(window, (win, 1))
    out = jnp.fft.fft(_to_complex(sl), n=n, axis=-1)
    if ctx.attr("onesided", 1):
        out = out[..., :n // 2 + 1]
    return _from_complex(out, xs.dtype)
