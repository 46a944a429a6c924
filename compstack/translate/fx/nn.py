"""ONNX -> fx converters: activations, softmax family, matrix products, convolutions,
pooling, normalizations and losses (see :mod:`compstack.translate` for the contract).

Padding follows the ONNX convention ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``;
asymmetric pads, pads torch's pooling kernels reject and ``ceil_mode`` windows are handled
by padding the input explicitly (``F.pad``) and pooling without padding, so the torch
kernels only ever see the floor-mode geometry.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from compstack.translate.fx import TABLE
from compstack.translate.fx._util import (
    axis_of,
    is_float,
    is_int,
    known,
    tdtype,
    widen_call,
)

# ---------------------------------------------------------------------------------------
# activations


@TABLE.op("LeakyRelu", since=6)
def leaky_relu(ctx, x):
    """LeakyRelu (``alpha`` 0.01)."""
    return F.leaky_relu(x, ctx.attr("alpha", 0.01))


@TABLE.op("PRelu", since=9)
def prelu(ctx, x, slope):
    """PRelu: ``x > 0 ? x : x * slope`` (slope broadcast unidirectionally)."""
    return torch.where(x > 0, x, x * slope)


@TABLE.op("Elu", since=6)
def elu(ctx, x):
    """Elu: ``x > 0 ? x : alpha * expm1(x)``."""
    alpha = ctx.attr("alpha", 1.0)
    return torch.where(x > 0, x, torch.expm1(x) * alpha)


@TABLE.op("Selu", since=6)
def selu(ctx, x):
    """Selu with the ``alpha``/``gamma`` attributes."""
    alpha = ctx.attr("alpha", 1.67326319217681884765625)
    gamma = ctx.attr("gamma", 1.05070102214813232421875)
    return torch.where(x > 0, x, torch.expm1(x) * alpha) * gamma


@TABLE.op("Celu", since=12)
def celu(ctx, x):
    """Celu: ``max(0, x) + min(0, alpha * expm1(x / alpha))``."""
    return F.celu(x, ctx.attr("alpha", 1.0))


@TABLE.op("ThresholdedRelu", since=10)
def thresholded_relu(ctx, x):
    """ThresholdedRelu: ``x > alpha ? x : 0``."""
    return torch.where(x > ctx.attr("alpha", 1.0), x, torch.zeros_like(x))


@TABLE.op("Shrink", since=9)
def shrink(ctx, x):
    """Shrink: ``x < -lambd ? x + bias : x > lambd ? x - bias : 0`` (integers computed in
    float64 and truncated, like the reference)."""
    bias, lambd = ctx.attr("bias", 0.0), ctx.attr("lambd", 0.5)
    dt = ctx.dtype(0)
    xf = x.to(torch.float64) if is_int(dt) else x
    y = torch.where(xf < -lambd, xf + bias, torch.where(xf > lambd, xf - bias, torch.zeros_like(xf)))
    return y.to(tdtype(dt)) if is_int(dt) else y


@TABLE.op("Softplus", since=1)
def softplus(ctx, x):
    """Softplus: ``log(1 + exp(x))``, computed stably."""
    return F.softplus(x)


@TABLE.op("Softsign", since=1)
def softsign(ctx, x):
    """Softsign: ``x / (1 + |x|)``."""
    return x / (torch.abs(x) + 1)


@TABLE.op("Mish", since=18)
def mish(ctx, x):
    """Mish: ``x * tanh(softplus(x))``."""
    return F.mish(x)


@TABLE.op("HardSigmoid", since=6)
def hard_sigmoid(ctx, x):
    """HardSigmoid: ``max(0, min(1, alpha * x + beta))``."""
    return torch.clamp(x * ctx.attr("alpha", 0.2) + ctx.attr("beta", 0.5), 0, 1)


@TABLE.op("HardSwish", since=14)
def hard_swish(ctx, x):
    """HardSwish: ``x * max(0, min(1, x / 6 + 0.5))``."""
    return x * torch.clamp(x * (1.0 / 6.0) + 0.5, 0, 1)


@TABLE.op("Gelu", since=20)
def gelu(ctx, x):
    """Gelu (``approximate`` none: ``x/2 (1 + erf(x/sqrt 2))``, tanh: the tanh approximation)."""
    approximate = ctx.attr("approximate", "none")
    if approximate == "none":
        # spelled out: F.gelu(inf) is NaN on CPU, the formula gives inf
        return x * 0.5 * (torch.erf(x * (1 / math.sqrt(2))) + 1)
    if approximate == "tanh":
        return x * 0.5 * (torch.tanh((x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)) + 1)
    raise ctx.unsupported(f"approximate={approximate!r}")


@TABLE.op("Swish", since=24)
def swish(ctx, x):
    """Swish: ``x * sigmoid(alpha * x)``."""
    alpha = ctx.attr("alpha", 1.0)
    return x * torch.sigmoid(x * alpha if alpha != 1.0 else x)


def _coerced_2d(ctx, x, fn):
    """Softmax-family semantics before opset 13: the input is coerced to 2-D at ``axis``."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", 1), len(shape))
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    y = fn(x.reshape(rows, -1), 1)
    return y.reshape(shape)


@TABLE.op("Softmax", since=13)
def softmax(ctx, x):
    """Softmax along ``axis`` (default -1)."""
    return torch.softmax(x, ctx.attr("axis", -1))


@TABLE.op("Softmax", since=1)
def softmax_1(ctx, x):
    """Softmax before 13: over the 2-D coercion at ``axis`` (default 1)."""
    return _coerced_2d(ctx, x, torch.softmax)


@TABLE.op("LogSoftmax", since=13)
def log_softmax(ctx, x):
    """LogSoftmax along ``axis`` (default -1)."""
    return torch.log_softmax(x, ctx.attr("axis", -1))


@TABLE.op("LogSoftmax", since=1)
def log_softmax_1(ctx, x):
    """LogSoftmax before 13: over the 2-D coercion at ``axis``."""
    return _coerced_2d(ctx, x, torch.log_softmax)


def _hardmax(x, axis, size, dtype):
    one_hot = F.one_hot(torch.argmax(x, axis), size).to(dtype)
    return torch.movedim(one_hot, -1, axis)


@TABLE.op("Hardmax", since=13)
def hardmax(ctx, x):
    """Hardmax: 1 at the first maximum along ``axis``, 0 elsewhere."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", -1), len(shape))
    return _hardmax(x, axis, shape[axis], tdtype(ctx.dtype(0)))


@TABLE.op("Hardmax", since=1)
def hardmax_1(ctx, x):
    """Hardmax before 13: over the 2-D coercion at ``axis``."""
    shape = ctx.shape(0)
    cols = int(np.prod(shape[axis_of(ctx.attr("axis", 1), len(shape)):], dtype=np.int64))
    dt = tdtype(ctx.dtype(0))
    return _coerced_2d(ctx, x, lambda v, _: _hardmax(v, 1, cols, dt))


# ---------------------------------------------------------------------------------------
# matrix products


@TABLE.op("MatMul", since=1)
def matmul(ctx, a, b):
    """MatMul (numpy semantics: 1-D operands are promoted and the added dim removed)."""
    return widen_call(ctx, torch.matmul, a, b)


@TABLE.op("Gemm", since=7)
def gemm(ctx, a, b, c=None):
    """Gemm: ``alpha * A' @ B' + beta * C`` (C broadcast unidirectionally)."""
    if ctx.attr("transA", 0):
        a = a.transpose(0, 1)
    if ctx.attr("transB", 0):
        b = b.transpose(0, 1)
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    y = torch.matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None and beta != 0.0:
        y = y + (c * beta if beta != 1.0 else c)
    return y


def _zero_point(ctx, i, zp, rank, axis):
    """A MatMulInteger/ConvInteger zero point as int32, per-row/channel ones reshaped."""
    if zp is None:
        return None
    zp = zp.to(torch.int32)
    zshape = ctx.shape(i)
    if len(zshape) == 1 and zshape[0] > 1 and rank >= 2:
        shape = [1] * rank
        shape[axis] = zshape[0]
        zp = zp.reshape(shape)
    return zp


@TABLE.op("MatMulInteger", since=10)
def matmul_integer(ctx, a, b, a_zp=None, b_zp=None):
    """MatMulInteger: int8/uint8 operands minus their zero points, int32 product (computed
    in int64; exact)."""
    ra, rb = len(ctx.shape(0)), len(ctx.shape(1))
    a = a.to(torch.int32)
    b = b.to(torch.int32)
    azp = _zero_point(ctx, 2, a_zp, ra, ra - 2) if ctx.has(2) else None
    bzp = _zero_point(ctx, 3, b_zp, rb, rb - 1) if ctx.has(3) else None
    if azp is not None:
        a = a - azp
    if bzp is not None:
        b = b - bzp
    return torch.matmul(a.to(torch.int64), b.to(torch.int64)).to(torch.int32)


@TABLE.op("Einsum", since=12)
def einsum(ctx, *xs):
    """Einsum (numpy equation syntax)."""
    return torch.einsum(ctx.attr("equation").replace(" ", ""), *xs)


# ---------------------------------------------------------------------------------------
# convolution


def _torch_pad(begin, end):
    """ONNX per-dim (begin, end) pads -> ``F.pad``'s last-dim-first list."""
    out = []
    for b, e in zip(reversed(begin), reversed(end)):
        out += [int(b), int(e)]
    return out


def _spatial_attrs(ctx, n, kernel):
    strides = list(ctx.attr("strides", None) or [1] * n)
    dilations = list(ctx.attr("dilations", None) or [1] * n)
    return [int(k) for k in kernel], strides, dilations


def _conv_pads(ctx, in_sp, kernel, strides, dilations):
    """Conv begin/end pads from ``pads`` or ``auto_pad`` (SAME: output ``ceil(in / stride)``)."""
    n = len(in_sp)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(n):
            out = -(-in_sp[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in_sp[i])
            small = total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        return begin, end
    if auto_pad == "VALID":
        return [0] * n, [0] * n
    if auto_pad != "NOTSET":
        raise ctx.unsupported(f"auto_pad={auto_pad!r}")
    pads = list(ctx.attr("pads", None) or [0] * (2 * n))
    return pads[:n], pads[n:]


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _spatial_rank(ctx, table):
    n = len(ctx.shape(0)) - 2
    if n not in table:
        raise ctx.unsupported(f"{n}-D spatial input (torch has 1-D to 3-D kernels)")
    return n


@TABLE.op("Conv", since=1)
def conv(ctx, x, w, b=None):
    """Conv 1-D to 3-D with pads (asymmetric ones applied with ``F.pad``), strides,
    dilations, group and auto_pad."""
    n = _spatial_rank(ctx, _CONV)
    in_sp = ctx.shape(0)[2:]
    kernel, strides, dilations = _spatial_attrs(ctx, n, ctx.attr("kernel_shape", None) or ctx.shape(1)[2:])
    begin, end = _conv_pads(ctx, in_sp, kernel, strides, dilations)
    if begin == end and min(begin) >= 0:
        padding = begin
    else:
        x = F.pad(x, _torch_pad(begin, end))
        padding = [0] * n
    return _CONV[n](x, w, b, strides, padding, dilations, ctx.attr("group", 1))


@TABLE.op("ConvInteger", since=10)
def conv_integer(ctx, x, w, x_zp=None, w_zp=None):
    """ConvInteger: uint8/int8 convolution minus zero points, int32 output (computed in
    float64, exact for realistic sizes)."""
    n = _spatial_rank(ctx, _CONV)
    in_sp = ctx.shape(0)[2:]
    kernel, strides, dilations = _spatial_attrs(ctx, n, ctx.attr("kernel_shape", None) or ctx.shape(1)[2:])
    begin, end = _conv_pads(ctx, in_sp, kernel, strides, dilations)
    xf = x.to(torch.float64)
    wf = w.to(torch.float64)
    if x_zp is not None:
        xf = xf - x_zp.to(torch.float64)
    if w_zp is not None:
        zp = w_zp.to(torch.float64)
        if len(ctx.shape(3)) == 1 and ctx.shape(3)[0] > 1:
            zp = zp.reshape([-1] + [1] * (n + 1))
        wf = wf - zp
    xf = F.pad(xf, _torch_pad(begin, end))
    y = _CONV[n](xf, wf, None, strides, 0, dilations, ctx.attr("group", 1))
    return torch.round(y).to(torch.int32)


@TABLE.op("ConvTranspose", since=1)
def conv_transpose(ctx, x, w, b=None):
    """ConvTranspose with pads, output_padding, output_shape (pads then derived as in
    the spec: SAME_UPPER puts the smaller half first, otherwise the larger), auto_pad,
    strides, dilations and group."""
    n = _spatial_rank(ctx, _CONV_T)
    in_sp = ctx.shape(0)[2:]
    kernel, strides, dilations = _spatial_attrs(ctx, n, ctx.attr("kernel_shape", None) or ctx.shape(1)[2:])
    out_pad = list(ctx.attr("output_padding", None) or [0] * n)
    group = ctx.attr("group", 1)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    full = [strides[i] * (in_sp[i] - 1) + (kernel[i] - 1) * dilations[i] + 1 for i in range(n)]
    output_shape = ctx.attr("output_shape", None)
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = list(output_shape)[-n:] if output_shape is not None else [in_sp[i] * strides[i] for i in range(n)]
        begin = []
        for i in range(n):
            total = full[i] + out_pad[i] - out[i]
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
    else:
        if auto_pad not in ("NOTSET", "VALID"):
            raise ctx.unsupported(f"auto_pad={auto_pad!r}")
        pads = list(ctx.attr("pads", None) or [0] * (2 * n))
        if auto_pad == "VALID":
            pads = [0] * (2 * n)
        begin = pads[:n]
        out = [full[i] + out_pad[i] - pads[i] - pads[n + i] for i in range(n)]
    fn = _CONV_T[n]
    # direct torch kernel when its symmetric padding/output_padding express the geometry
    extra = [out[i] - (full[i] - 2 * begin[i]) for i in range(n)]
    if all(bg >= 0 for bg in begin) and all(0 <= e < max(strides[i], dilations[i]) for i, e in enumerate(extra)):
        return fn(x, w, b, strides, begin, extra, group, dilations)
    y = fn(x, w, None, strides, 0, 0, group, dilations)
    y = F.pad(y, _torch_pad([-bg for bg in begin], [out[i] - (full[i] - begin[i]) for i in range(n)]))
    if b is not None:
        y = y + b.reshape([-1] + [1] * n)
    return y


# ---------------------------------------------------------------------------------------
# pooling


def _pool_geometry(ctx, in_sp, kernel, strides, dilations):
    """Pooling geometry: begin pads, end pads, output sizes and the extra end padding
    ``ceil_mode`` windows need (negative: trailing input no window reads).

    Output size (ONNX pooling, shape inference): floor or ceil of
    ``(in + pads - dilated_kernel) / stride + 1``, in ceil mode dropping a last window
    that would start in the end padding; SAME auto_pad gives ``ceil(in / stride)``.
    """
    n = len(in_sp)
    window = [(kernel[i] - 1) * dilations[i] + 1 for i in range(n)]
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    ceil_mode = ctx.attr("ceil_mode", 0)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-in_sp[i] // strides[i]) for i in range(n)]
        begin, end = [], []
        for i in range(n):
            total = max(0, (out[i] - 1) * strides[i] + window[i] - in_sp[i])
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
            end.append(total - begin[-1])
    elif auto_pad in ("NOTSET", "VALID"):
        pads = list(ctx.attr("pads", None) or [0] * (2 * n)) if auto_pad == "NOTSET" else [0] * (2 * n)
        begin, end = pads[:n], pads[n:]
        out = []
        for i in range(n):
            span = in_sp[i] + begin[i] + end[i] - window[i]
            o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
            if ceil_mode and (o - 1) * strides[i] >= in_sp[i] + begin[i]:
                o -= 1
            out.append(o)
    else:
        raise ctx.unsupported(f"auto_pad={auto_pad!r}")
    extra = [(out[i] - 1) * strides[i] + window[i] - (in_sp[i] + begin[i] + end[i]) for i in range(n)]
    return begin, end, out, extra


def _pool_setup(ctx):
    shape = ctx.shape(0)
    n = len(shape) - 2
    if n not in (1, 2, 3):
        raise ctx.unsupported(f"{n}-D spatial input (torch has 1-D to 3-D kernels)")
    kernel, strides, dilations = _spatial_attrs(ctx, n, ctx.attr("kernel_shape"))
    begin, end, out, extra = _pool_geometry(ctx, shape[2:], kernel, strides, dilations)
    return shape, n, kernel, strides, dilations, begin, end, out, extra


#: By rank; called with a run-time bool ``return_indices`` (torch's stubs overload only its literals).
_MAX_POOL: dict[int, Callable[..., Any]] = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


@TABLE.op("MaxPool", since=1)
def max_pool(ctx, x):
    """MaxPool 1-D to 3-D (pads, auto_pad, ceil_mode, dilations; int8/uint8 pooled in
    float32) and its optional Indices output (flat index into the input, row-major or,
    with ``storage_order=1``, column-major over the spatial dims)."""
    shape, n, kernel, strides, dilations, begin, end, _, extra = _pool_setup(ctx)
    dt = ctx.dtype(0)
    xf = x if is_float(dt) else x.to(torch.float32)
    want_idx = len(ctx.node.outputs) > 1 and ctx.node.outputs[1] is not None and bool(ctx.node.outputs[1].name)
    direct = begin == end and all(e == 0 for e in extra) and all(0 <= begin[i] <= kernel[i] // 2 for i in range(n))
    if direct:
        padded_sp, offset = list(shape[2:]), [0] * n
        res = _MAX_POOL[n](xf, kernel, strides, begin, dilations, return_indices=want_idx)
    else:
        xf = F.pad(xf, _torch_pad(begin, [end[i] + extra[i] for i in range(n)]), value=-math.inf)
        padded_sp = [shape[2 + i] + begin[i] + end[i] + extra[i] for i in range(n)]
        offset = begin
        res = _MAX_POOL[n](xf, kernel, strides, 0, dilations, return_indices=want_idx)
    y = res[0] if want_idx else res
    if not is_float(dt):
        y = y.to(tdtype(dt))
    if not want_idx:
        return y
    idx = res[1]
    # torch: flat index over the (padded) spatial dims of one (n, c) plane
    coords = []
    rem = idx
    for i in reversed(range(n)):
        coords.append(torch.remainder(rem, padded_sp[i]) - offset[i])
        rem = torch.div(rem, padded_sp[i], rounding_mode="floor")
    coords.reverse()
    in_sp = shape[2:]
    order = list(range(n)) if ctx.attr("storage_order", 0) == 0 else list(reversed(range(n)))
    flat = coords[order[0]]
    for i in order[1:]:
        flat = flat * in_sp[i] + coords[i]
    plane = int(np.prod(in_sp, dtype=np.int64))
    base = torch.arange(shape[0] * shape[1], dtype=torch.int64).reshape([shape[0], shape[1]] + [1] * n) * plane
    return y, flat + base


def _window_sum(ctx, x, n, kernel, strides, dilations, channels):
    """Sum over each pooling window: a depthwise convolution with a ones kernel."""
    ones = torch.ones([channels, 1] + list(kernel), dtype=tdtype(ctx.dtype(0)))
    return _CONV[n](x, ones, None, strides, 0, dilations, channels)


def _window_counts(in_sp, begin, end, out, kernel, strides, dilations, include_pad):
    """Per-output-position number of elements a window reads (static), as ONNX counts
    them: real inputs, plus explicit pads with ``count_include_pad`` (never the extra
    ``ceil_mode`` padding)."""
    counts = None
    for i in range(len(in_sp)):
        lo, hi = (-begin[i], in_sp[i] + end[i]) if include_pad else (0, in_sp[i])
        pos = (np.arange(out[i])[:, None] * strides[i] - begin[i] + np.arange(kernel[i])[None, :] * dilations[i])
        c = ((pos >= lo) & (pos < hi)).sum(axis=1).astype(np.float64)
        counts = c if counts is None else np.multiply.outer(counts, c)
    return counts


@TABLE.op("AveragePool", since=19)
def average_pool(ctx, x):
    """AveragePool 1-D to 3-D: pads, auto_pad, ceil_mode (extra windows average only what
    they cover), count_include_pad, dilations."""
    shape, n, kernel, strides, dilations, begin, end, out, extra = _pool_setup(ctx)
    include = bool(ctx.attr("count_include_pad", 0))
    if (begin == end and all(e == 0 for e in extra) and all(d == 1 for d in dilations)
            and all(0 <= begin[i] <= kernel[i] // 2 for i in range(n))):
        fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
        return fn(x, kernel, strides, begin, False, include)
    total = _window_sum(ctx, _pad_pool_input(x, n, begin, end, extra), n, kernel, strides, dilations, shape[1])
    counts = _window_counts(shape[2:], begin, end, out, kernel, strides, dilations, include)
    return total / torch.from_numpy(counts.astype(ctx.dtype(0)))


def _pad_pool_input(x, n, begin, end, extra):
    return F.pad(x, _torch_pad(begin, [end[i] + extra[i] for i in range(n)]))


TABLE.op("AveragePool", since=1)(average_pool)


@TABLE.op("LpPool", since=18)
def lp_pool(ctx, x):
    """LpPool: ``(sum |x|^p) ^ (1/p)`` over each window (pads contribute 0)."""
    shape, n, kernel, strides, dilations, begin, end, _, extra = _pool_setup(ctx)
    p = ctx.attr("p", 2)
    powered = torch.abs(x) ** p if p != 2 else x * x
    total = _window_sum(ctx, _pad_pool_input(powered, n, begin, end, extra), n, kernel, strides, dilations, shape[1])
    return total ** (1.0 / p) if p != 2 else torch.sqrt(total)


TABLE.op("LpPool", since=11)(lp_pool)


@TABLE.op("GlobalAveragePool", since=1)
def global_average_pool(ctx, x):
    """GlobalAveragePool: mean over the spatial dims, kept."""
    return torch.mean(x, dim=list(range(2, len(ctx.shape(0)))), keepdim=True)


@TABLE.op("GlobalMaxPool", since=1)
def global_max_pool(ctx, x):
    """GlobalMaxPool: max over the spatial dims, kept."""
    return torch.amax(x, dim=list(range(2, len(ctx.shape(0)))), keepdim=True)


@TABLE.op("GlobalLpPool", since=2)
def global_lp_pool(ctx, x):
    """GlobalLpPool: the Lp norm over the spatial dims, kept."""
    p = ctx.attr("p", 2)
    dims = list(range(2, len(ctx.shape(0))))
    return torch.sum(torch.abs(x) ** p, dim=dims, keepdim=True) ** (1.0 / p)


@TABLE.op("MaxUnpool", since=11)
def max_unpool(ctx, x, indices, output_shape=None):
    """MaxUnpool: scatter ``X`` into zeros of the pooling-inferred shape at ``I``'s flat
    indices, then zero-pad at the end up to ``output_shape`` when given (as the reference
    and the node tests define it)."""
    shape = ctx.shape(0)
    n = len(shape) - 2
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    strides = list(ctx.attr("strides", None) or [1] * n)
    pads = list(ctx.attr("pads", None) or [0] * (2 * n))
    inferred = list(shape[:2]) + [(shape[2 + i] - 1) * strides[i] - pads[i] - pads[n + i] + kernel[i]
                                  for i in range(n)]
    total = int(np.prod(inferred, dtype=np.int64))
    flat = torch.zeros(total, dtype=tdtype(ctx.dtype(0)))
    flat = flat.scatter(0, indices.reshape(-1).to(torch.int64), x.reshape(-1))
    y = flat.reshape(inferred)
    out = list(ctx.out_shape(0))
    if out != inferred:
        y = F.pad(y, _torch_pad([0] * len(out), [o - i for o, i in zip(out, inferred)]))
    return y


# ---------------------------------------------------------------------------------------
# normalization


def _channel(v, rank):
    return v.reshape([-1] + [1] * (rank - 2))


@TABLE.op("BatchNormalization", since=15)
def batch_norm(ctx, x, scale, bias, mean, var):
    """BatchNormalization in inference mode (``training_mode=1`` is unsupported)."""
    if ctx.attr("training_mode", 0) or sum(1 for o in ctx.node.outputs if o is not None and o.name) > 1:
        raise ctx.unsupported("training mode (running statistics outputs)")
    if ctx.attr("spatial", 1) != 1:
        raise ctx.unsupported("spatial=0 (opset 7/9 per-activation statistics)")
    rank = len(ctx.shape(0))
    eps = ctx.attr("epsilon", 1e-5)
    return _channel(scale, rank) * (x - _channel(mean, rank)) / torch.sqrt(_channel(var, rank) + eps) + _channel(bias, rank)


TABLE.op("BatchNormalization", since=7)(batch_norm)


@TABLE.op("InstanceNormalization", since=6)
def instance_norm(ctx, x, scale, bias):
    """InstanceNormalization: per (n, c) mean and biased variance over the spatial dims."""
    rank = len(ctx.shape(0))
    dims = list(range(2, rank))
    mean = torch.mean(x, dim=dims, keepdim=True)
    var = torch.mean((x - mean) ** 2, dim=dims, keepdim=True)
    eps = ctx.attr("epsilon", 1e-5)
    return _channel(scale, rank) * (x - mean) / torch.sqrt(var + eps) + _channel(bias, rank)


def _stash(ctx, x):
    """``stash_type`` 1: statistics in float32 (inputs of lower precision are upcast)."""
    dt = ctx.dtype(0)
    if ctx.attr("stash_type", 1) == 1 and dt != np.float64 and dt != np.float32:
        return x.to(torch.float32)
    return x


@TABLE.op("LayerNormalization", since=17)
def layer_norm(ctx, x, scale, bias=None):
    """LayerNormalization over dims ``axis..``; optional Mean and InvStdDev outputs."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", -1), len(shape))
    dims = list(range(axis, len(shape)))
    eps = ctx.attr("epsilon", 1e-5)
    xs = _stash(ctx, x)
    mean = torch.mean(xs, dim=dims, keepdim=True)
    diff = xs - mean
    var = torch.mean(diff * diff, dim=dims, keepdim=True)
    inv = 1 / torch.sqrt(var + eps)
    dt = tdtype(ctx.dtype(0))
    y = (diff * inv).to(dt) * scale
    if bias is not None:
        y = y + bias
    outs = [y]
    for j, v in ((1, mean), (2, inv)):
        if len(ctx.node.outputs) > j and ctx.node.outputs[j] is not None and ctx.node.outputs[j].name:
            outs.append(v.to(tdtype(ctx.out_dtype(j))))
    return tuple(outs) if len(outs) > 1 else y


@TABLE.op("RMSNormalization", since=23)
def rms_norm(ctx, x, scale):
    """RMSNormalization over dims ``axis..``: ``x / sqrt(mean(x^2) + epsilon) * scale``."""
    shape = ctx.shape(0)
    axis = axis_of(ctx.attr("axis", -1), len(shape))
    xs = _stash(ctx, x)
    ms = torch.mean(xs * xs, dim=list(range(axis, len(shape))), keepdim=True)
    y = xs * (1 / torch.sqrt(ms + ctx.attr("epsilon", 1e-5)))
    return y.to(tdtype(ctx.dtype(0))) * scale


@TABLE.op("GroupNormalization", since=21)
def group_norm(ctx, x, scale, bias):
    """GroupNormalization (scale and bias per channel, opset 21)."""
    return _group_norm(ctx, x, scale, bias, per_channel=True)


@TABLE.op("GroupNormalization", since=18)
def group_norm_18(ctx, x, scale, bias):
    """GroupNormalization-18 (scale and bias per group)."""
    return _group_norm(ctx, x, scale, bias, per_channel=False)


def _group_norm(ctx, x, scale, bias, per_channel):
    shape = ctx.shape(0)
    groups = ctx.attr("num_groups")
    n, c = shape[0], shape[1]
    xs = _stash(ctx, x).reshape(n, groups, -1)
    mean = torch.mean(xs, dim=2, keepdim=True)
    diff = xs - mean
    var = torch.mean(diff * diff, dim=2, keepdim=True)
    y = (diff / torch.sqrt(var + ctx.attr("epsilon", 1e-5))).reshape(shape).to(tdtype(ctx.dtype(0)))
    rank = len(shape)
    if not per_channel:
        scale = torch.repeat_interleave(scale, c // groups)
        bias = torch.repeat_interleave(bias, c // groups)
    return y * _channel(scale, rank) + _channel(bias, rank)


@TABLE.op("LpNormalization", since=1)
def lp_normalization(ctx, x):
    """LpNormalization: ``x / ||x||_p`` along ``axis`` (p 1 or 2; a zero norm gives 0)."""
    p = ctx.attr("p", 2)
    if p not in (1, 2):
        raise ctx.unsupported(f"p={p}")
    axis = ctx.attr("axis", -1)
    norm = torch.sum(torch.abs(x), axis, keepdim=True) if p == 1 else torch.sqrt(torch.sum(x * x, axis, keepdim=True))
    return torch.where(norm == 0, torch.zeros_like(x), x / norm)


@TABLE.op("LRN", since=13)
def lrn(ctx, x):
    """LRN: ``x / (bias + alpha / size * sum_{c' in window} x[c']^2) ^ beta`` with the window
    ``[c - floor((size-1)/2), c + ceil((size-1)/2)]`` (torch's F.local_response_norm centres
    even windows the other way)."""
    size = ctx.attr("size")
    shape = ctx.shape(0)
    c = shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = x * x
    pad = [0, 0] * (len(shape) - 2) + [lo, hi]
    sqp = F.pad(sq, pad)
    total = sqp.narrow(1, 0, c)
    for k in range(1, size):
        total = total + sqp.narrow(1, k, c)
    alpha, beta, bias = ctx.attr("alpha", 1e-4), ctx.attr("beta", 0.75), ctx.attr("bias", 1.0)
    return x / (total * (alpha / size) + bias) ** beta


@TABLE.op("MeanVarianceNormalization", since=13)
def mvn(ctx, x):
    """MeanVarianceNormalization: ``(x - mean) / sqrt(var + 1e-9)`` over ``axes`` (default
    0, 2, 3), as in the op's function body."""
    axes = [int(a) for a in ctx.attr("axes", [0, 2, 3])]
    mean = torch.mean(x, dim=axes, keepdim=True)
    var = torch.mean(x * x, dim=axes, keepdim=True) - mean * mean
    return (x - mean) / torch.sqrt(var + 1e-9)


@TABLE.op("Dropout", since=12)
def dropout(ctx, x, ratio=None, training_mode=None):
    """Dropout in inference mode: the identity (mask all True); training mode known at
    conversion time is unsupported."""
    if ctx.has(2):
        mode = known(ctx, 2)
        if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
            raise ctx.unsupported("training_mode (random mask)")
    if len(ctx.node.outputs) > 1 and ctx.node.outputs[1] is not None and ctx.node.outputs[1].name:
        return x, torch.ones_like(x, dtype=torch.bool)
    return x


TABLE.op("Dropout", since=7)(dropout)


# ---------------------------------------------------------------------------------------
# losses


def _weighted_nll(ctx, logp, target, weight):
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("mean", "sum", "none"):
        raise ctx.unsupported(f"reduction={reduction!r}")
    ignore = ctx.attr("ignore_index", None)  # None: torch's default, -100
    target = target.to(torch.int64)
    return F.nll_loss(logp, target, weight, ignore_index=-100 if ignore is None else int(ignore), reduction=reduction)


@TABLE.op("NegativeLogLikelihoodLoss", since=13)
def nll_loss(ctx, x, target, weight=None):
    """NegativeLogLikelihoodLoss (reduction none/sum/mean, optional weight and
    ignore_index; mean divides by the summed weights of the counted targets)."""
    return _weighted_nll(ctx, x, target, weight)


@TABLE.op("SoftmaxCrossEntropyLoss", since=13)
def softmax_cross_entropy(ctx, x, target, weight=None):
    """SoftmaxCrossEntropyLoss: NLL of log_softmax over dim 1; optional log_prob output."""
    logp = torch.log_softmax(x, 1)
    loss = _weighted_nll(ctx, logp, target, weight)
    if len(ctx.node.outputs) > 1 and ctx.node.outputs[1] is not None and ctx.node.outputs[1].name:
        return loss, logp
    return loss


# ---------------------------------------------------------------------------------------
# attention


def _to_heads(ctx, i, x, heads):
    b, s, hidden = ctx.shape(i)
    return x.reshape(b, s, heads, hidden // heads).transpose(1, 2)


def _output_wanted(ctx, j):
    return len(ctx.node.outputs) > j and ctx.node.outputs[j] is not None and bool(ctx.node.outputs[j].name)


def _neg_inf_where(mask, dt):
    """Boolean attend-mask -> additive bias (True: 0, False: -inf), select-not-multiply."""
    return torch.where(mask, torch.zeros((), dtype=dt), torch.full((), -math.inf, dtype=dt))


@TABLE.op("Attention", since=23)
def attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
    """Attention (23-25): 3-D inputs split into heads, scale applied as sqrt(scale) to Q and
    K, past key/value concatenation, boolean or additive ``attn_mask`` (padded with
    -inf/False to the key length), ``is_causal`` aligned bottom-right to the cache
    (``nonpad_kv_seqlen`` gives a per-batch frontier), sliding windows, grouped-query
    heads, ``softcap``, ``softmax_precision``, every ``qk_matmul_output_mode``; a query
    row whose keys are all masked gives zeros (as the reference and function body)."""
    dt = tdtype(ctx.dtype(0))
    rank = len(ctx.shape(0))
    q_heads, kv_heads = ctx.attr("q_num_heads", None), ctx.attr("kv_num_heads", None)
    if rank == 3:
        if q_heads is None or kv_heads is None:
            raise ctx.unsupported("3-D inputs without q_num_heads/kv_num_heads")
        q, k, v = _to_heads(ctx, 0, q, q_heads), _to_heads(ctx, 1, k, kv_heads), _to_heads(ctx, 2, v, kv_heads)
    elif rank != 4:
        raise ctx.unsupported(f"rank-{rank} inputs")
    batch = ctx.shape(0)[0]
    q_len = ctx.shape(0)[-2] if rank == 4 else ctx.shape(0)[1]
    head_size = (ctx.shape(0)[-1] // q_heads) if rank == 3 else ctx.shape(0)[-1]
    scale = ctx.attr("scale", None)
    scale = 1 / math.sqrt(head_size) if scale is None else scale
    root = torch.tensor(np.sqrt(np.float64(scale)), dtype=dt)
    if past_key is not None:
        k = torch.cat([past_key, k], 2)
    if past_value is not None:
        v = torch.cat([past_value, v], 2)
    present_k, present_v = k, v
    past_len = ctx.shape(4)[2] if past_key is not None else 0
    kv_len = past_len + (ctx.shape(1)[-2] if rank == 4 else ctx.shape(1)[1])

    bias = torch.zeros((q_len, kv_len), dtype=dt)
    if attn_mask is not None:
        pad = kv_len - ctx.shape(3)[-1]
        is_bool = ctx.dtype(3) == np.bool_
        if pad > 0:
            m = attn_mask.to(torch.uint8) if is_bool else attn_mask
            m = F.pad(m, [0, pad], value=0 if is_bool else -math.inf)
            attn_mask = m.to(torch.bool) if is_bool else m
        if is_bool:
            attn_mask = _neg_inf_where(attn_mask, dt)
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    windowed = left >= 0 or right >= 0
    if nonpad_kv_seqlen is not None and past_key is None:
        offset = (nonpad_kv_seqlen.to(torch.int64) - q_len).reshape(-1, 1, 1)  # per batch
    else:
        offset = past_len
    i_idx = torch.arange(q_len).reshape(q_len, 1)
    j_idx = torch.arange(kv_len).reshape(1, kv_len)
    per_batch = not isinstance(offset, int)

    def frontier_bias(allowed):
        b = _neg_inf_where(allowed, dt)
        return b.reshape(-1, 1, q_len, kv_len) if per_batch else b

    if ctx.attr("is_causal", 0):
        base = bias if attn_mask is None else attn_mask
        if windowed:
            base = bias + base
        bias = base + frontier_bias(j_idx <= i_idx + offset)
    elif attn_mask is not None:
        bias = bias + attn_mask
    if windowed:
        diff = (i_idx + offset) - j_idx
        allowed = torch.ones_like(diff, dtype=torch.bool)
        if left >= 0:
            allowed = allowed & (diff <= left)
        if right >= 0:
            allowed = allowed & (-diff <= right)
        bias = torch.zeros((q_len, kv_len), dtype=dt) + bias + frontier_bias(allowed)
    if nonpad_kv_seqlen is not None:
        keep = torch.arange(kv_len).reshape(1, kv_len) < nonpad_kv_seqlen.to(torch.int64).reshape(-1, 1)
        bias = bias + _neg_inf_where(keep, dt).reshape(batch, 1, 1, kv_len)

    n_q = ctx.shape(0)[1] if rank == 4 else q_heads
    n_kv = ctx.shape(1)[1] if rank == 4 else kv_heads
    if n_q != n_kv and n_q % n_kv == 0:
        k = torch.repeat_interleave(k, n_q // n_kv, 1)
        v = torch.repeat_interleave(v, n_q // n_kv, 1)
    qk = torch.matmul(q * root, (k * root).transpose(-1, -2))
    softcap = ctx.attr("softcap", 0.0)
    if softcap and softcap > 0:
        qk = torch.tanh(qk / softcap) * softcap
    with_bias = qk + bias
    mode = ctx.attr("qk_matmul_output_mode", 0)
    qk_out = with_bias if mode == 2 else qk
    precision = ctx.attr("softmax_precision", None)
    if precision:
        with_bias = with_bias.to(tdtype(onnx_dtype(precision)))
    # a row with every key masked: zeros (decided on the bias, not the logits)
    all_masked = torch.isneginf(torch.amax(bias, -1, keepdim=True))
    if isinstance(all_masked, torch.Tensor) and not bool(all_masked.any()):
        probs = torch.softmax(with_bias, -1)
    else:
        top = torch.amax(with_bias, -1, keepdim=True)
        top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
        e = torch.exp(with_bias - top)
        s = torch.sum(e, -1, keepdim=True)
        probs = e / torch.where(s == 0, torch.ones_like(s), s)
        probs = torch.where(all_masked, torch.zeros_like(probs), probs)
    if mode == 3:
        qk_out = probs
    y = torch.matmul(probs.to(dt), v)
    if rank == 3:
        y = y.transpose(1, 2).reshape(batch, q_len, -1)
    outs: list[torch.Tensor | None] = [y]
    for j, val in ((1, present_k), (2, present_v), (3, qk_out)):
        if _output_wanted(ctx, j):
            outs += [None] * (j - len(outs)) + [val.to(dt) if j == 3 else val]
    return tuple(outs) if len(outs) > 1 else y


def onnx_dtype(code):
    """numpy dtype of an ONNX TensorProto data type code."""
    from onnx.helper import tensor_dtype_to_np_dtype

    return tensor_dtype_to_np_dtype(code)


@TABLE.op("RotaryEmbedding", since=23)
def rotary_embedding(ctx, x, cos_cache, sin_cache, position_ids=None):
    """RotaryEmbedding (23): 4-D (batch, heads, seq, size) or 3-D (batch, seq, hidden)
    input with ``num_heads``; caches gathered by ``position_ids`` when given; halves or
    interleaved pairs rotated; ``rotary_embedding_dim`` leaves the rest unrotated."""
    shape = list(ctx.shape(0))
    if len(shape) == 4:
        x4 = x.transpose(1, 2)  # (batch, seq, heads, size)
    else:
        heads = ctx.attr("num_heads", 0)
        if not heads:
            raise ctx.unsupported("3-D input without num_heads")
        x4 = x.reshape(shape[0], shape[1], heads, shape[2] // heads)
    size = shape[-1] if len(shape) == 4 else shape[2] // ctx.attr("num_heads")
    dim = ctx.attr("rotary_embedding_dim", 0) or size
    rot, rest = x4[..., :dim], x4[..., dim:]
    if position_ids is not None:
        pos = position_ids.to(torch.int64)
        cos, sin = cos_cache[pos], sin_cache[pos]
    else:
        cos, sin = cos_cache, sin_cache
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    if ctx.attr("interleaved", 0):
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., : dim // 2], rot[..., dim // 2:]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if ctx.attr("interleaved", 0):
        rot = torch.stack([real, imag], -1).reshape(_rot_shape(ctx, shape, dim))
    else:
        rot = torch.cat([real, imag], -1)
    y = torch.cat([rot, rest], -1) if dim < size else rot
    return y.reshape(shape) if len(shape) == 3 else y.transpose(1, 2)


def _rot_shape(ctx, shape, dim):
    """(batch, seq, heads, dim) of the rotated part of a RotaryEmbedding input."""
    if len(shape) == 4:
        return [shape[0], shape[2], shape[1], dim]
    return [shape[0], shape[1], ctx.attr("num_heads"), dim]


@TABLE.op("SwiGLU", since=28)
def swiglu(ctx, a, b):
    """SwiGLU: ``a * sigmoid(alpha * a) * b``."""
    alpha = ctx.attr("alpha", 1.0)
    return a * torch.sigmoid(a * alpha if alpha != 1.0 else a) * b


# ---------------------------------------------------------------------------------------
# quantized products


def _qlinear_out(ctx, acc, factor, y_zp):
    """Requantize an integer accumulator: ``saturate(rint(acc * factor) + y_zp)`` in float64
    (``factor``: ``x_scale * w_scale / y_scale`` in the scales' type, as the reference)."""
    y = acc.to(torch.float64) * factor.to(torch.float64)
    out = ctx.out_dtype(0)
    if y_zp is not None:
        y = y + y_zp.to(torch.float64)
    info = np.iinfo(out)
    return torch.clamp(torch.round(y), info.min, info.max).to(tdtype(out))


def _minus_zp(x, zp):
    x = x.to(torch.int32)
    return x if zp is None else x - zp.to(torch.int32)


@TABLE.op("QLinearMatMul", since=10)
def qlinear_matmul(ctx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp=None):
    """QLinearMatMul: integer matmul of the zero-point-shifted operands, rescaled by
    ``a_scale * b_scale / y_scale`` (float64) and requantized (round half to even)."""
    acc = torch.matmul(_minus_zp(a, a_zp).to(torch.int64), _minus_zp(b, b_zp).to(torch.int64))
    return _qlinear_out(ctx, acc, a_scale * b_scale / y_scale, y_zp)


@TABLE.op("QLinearConv", since=10)
def qlinear_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp=None, b=None):
    """QLinearConv: ConvInteger's geometry on the zero-point-shifted operands (float64,
    exact), plus the int32 bias, requantized like QLinearMatMul (per-channel ``w_scale``
    along the output channels)."""
    n = _spatial_rank(ctx, _CONV)
    in_sp = ctx.shape(0)[2:]
    kernel, strides, dilations = _spatial_attrs(ctx, n, ctx.attr("kernel_shape", None) or ctx.shape(3)[2:])
    begin, end = _conv_pads(ctx, in_sp, kernel, strides, dilations)
    xf = x.to(torch.float64) - x_zp.to(torch.float64)
    wzp = w_zp.to(torch.float64)
    if len(ctx.shape(5)) == 1 and ctx.shape(5)[0] > 1:
        wzp = wzp.reshape([-1] + [1] * (n + 1))
    wf = w.to(torch.float64) - wzp
    acc = _CONV[n](F.pad(xf, _torch_pad(begin, end)), wf, None, strides, 0, dilations, ctx.attr("group", 1))
    if b is not None:
        acc = acc + b.to(torch.float64).reshape([-1] + [1] * n)
    factor = x_scale * w_scale / y_scale
    if len(ctx.shape(4)) == 1 and ctx.shape(4)[0] > 1:
        factor = factor.reshape([-1] + [1] * n)
    return _qlinear_out(ctx, acc, factor, y_zp)


# ---------------------------------------------------------------------------------------
# recurrent layers (RNN, GRU, LSTM)

#: activation -> (fn(x, alpha, beta), uses alpha, uses beta, default alpha, default beta)
_RNN_ACT = {
    "relu": (lambda x, a, b: torch.relu(x), False, False, 0.0, 0.0),
    "tanh": (lambda x, a, b: torch.tanh(x), False, False, 0.0, 0.0),
    "sigmoid": (lambda x, a, b: torch.sigmoid(x), False, False, 0.0, 0.0),
    "affine": (lambda x, a, b: x * a + b, True, True, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: torch.where(x > 0, x, x * a), True, False, 0.01, 0.0),
    "thresholdedrelu": (lambda x, a, b: torch.where(x > a, x, torch.zeros_like(x)), True, False, 1.0, 0.0),
    "scaledtanh": (lambda x, a, b: torch.tanh(x * b) * a, True, True, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: torch.clamp(x * a + b, 0, 1), True, True, 0.2, 0.5),
    "elu": (lambda x, a, b: torch.where(x > 0, x, torch.expm1(x) * a), True, False, 1.0, 0.0),
    "softsign": (lambda x, a, b: x / (torch.abs(x) + 1), False, False, 0.0, 0.0),
    "softplus": (lambda x, a, b: F.softplus(x), False, False, 0.0, 0.0),
}


def _rnn_activations(ctx, defaults, n_dirs):
    """The per-direction activation callables: ``activations`` (default ``defaults`` per
    direction), with ``activation_alpha``/``beta`` consumed in order by the functions
    that take them."""
    names = ctx.attr("activations", None) or list(defaults) * n_dirs
    alphas = list(ctx.attr("activation_alpha", None) or [])
    betas = list(ctx.attr("activation_beta", None) or [])
    funcs = []
    for name in names:
        entry = _RNN_ACT.get(str(name).lower())
        if entry is None:
            raise ctx.unsupported(f"activation {name!r}")
        fn, uses_a, uses_b, da, db = entry
        a = alphas.pop(0) if uses_a and alphas else da
        b = betas.pop(0) if uses_b and betas else db
        funcs.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    per = len(defaults)
    if len(funcs) != per * n_dirs:
        raise ctx.unsupported(f"{len(funcs)} activations for {n_dirs} direction(s)")
    return [funcs[d * per:(d + 1) * per] for d in range(n_dirs)]


def _reverse_in_lengths(x, lens, shape):
    """Reverse each batch column's first ``lens[b]`` steps (time-major ``x`` of static
    ``shape`` (seq, batch, features)); the whole sequence without lengths."""
    if lens is None:
        return torch.flip(x, [0])
    seq = shape[0]
    t = torch.arange(seq, dtype=torch.int64).reshape(seq, 1)
    src = torch.where(t < lens.reshape(1, -1), lens.reshape(1, -1) - 1 - t, t)
    return torch.gather(x, 0, src.unsqueeze(-1).expand(shape))


def _recurrent(ctx, kind, x, w, r, b, lens, h0, c0=None, p=None):
    """Shared driver: project every input step at once, then unroll the (static) sequence."""
    layout = ctx.attr("layout", 0)
    direction = ctx.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.unsupported(f"direction={direction!r}")
    n_dirs = 2 if direction == "bidirectional" else 1
    hidden = ctx.attr("hidden_size", None) or ctx.shape(2)[-1]
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    xs = ctx.shape(0)
    seq, batch = (xs[1], xs[0]) if layout else (xs[0], xs[1])
    dt = tdtype(ctx.dtype(0))
    if layout:
        x = x.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    acts = _rnn_activations(ctx, {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                                  "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind], n_dirs)
    clip = ctx.attr("clip", None)
    lens = None if lens is None else lens.to(torch.int64)
    ys, hs, cs = [], [], []
    for d in range(n_dirs):
        reverse = direction == "reverse" or d == 1
        xd = _reverse_in_lengths(x, lens, (seq, batch, xs[2])) if reverse else x
        wd, rd = w[d], r[d]
        bias_w = b[d][: gates * hidden] if b is not None else None
        bias_r = b[d][gates * hidden:] if b is not None else None
        xw = torch.matmul(xd, wd.transpose(0, 1))
        if bias_w is not None:
            xw = xw + bias_w
        h = h0[d] if h0 is not None else torch.zeros((batch, hidden), dtype=dt)
        c = None
        if kind == "LSTM":
            c = c0[d] if c0 is not None else torch.zeros((batch, hidden), dtype=dt)
        step = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}[kind]
        outs = []
        for t in range(seq):
            h_new, c_new = step(ctx, xw[t], h, c, rd, bias_r, p[d] if p is not None else None, acts[d], clip, hidden)
            if lens is not None:
                valid = (lens > t).reshape(batch, 1)
                outs.append(torch.where(valid, h_new, torch.zeros_like(h_new)))
                h = torch.where(valid, h_new, h)
                c = torch.where(valid, c_new, c) if c is not None else None
            else:
                outs.append(h_new)
                h, c = h_new, c_new
        y = torch.stack(outs, 0)
        ys.append(_reverse_in_lengths(y, lens, (seq, batch, hidden)) if reverse else y)
        hs.append(h)
        cs.append(c)
    y = torch.stack(ys, 1)  # (seq, dirs, batch, hidden)
    y_h = torch.stack(hs, 0)
    y_c = torch.stack([c for c in cs if c is not None], 0) if kind == "LSTM" else None  # LSTM: no c is None
    if layout:
        y = y.permute(2, 0, 1, 3)
        y_h = y_h.transpose(0, 1)
        y_c = y_c.transpose(0, 1) if y_c is not None else None
    outs = [y, y_h] + ([y_c] if y_c is not None else [])  # y_c: LSTM only
    n = len(ctx.node.outputs)
    return tuple(outs[:n]) if n > 1 else outs[0]


def _clipped(x, clip):
    return x if clip is None else torch.clamp(x, -clip, clip)


def _rnn_step(ctx, xw, h, c, r, bias_r, p, acts, clip, hidden):
    pre = xw + torch.matmul(h, r.transpose(0, 1))
    if bias_r is not None:
        pre = pre + bias_r
    return acts[0](_clipped(pre, clip)), None


def _gru_step(ctx, xw, h, c, r, bias_r, p, acts, clip, hidden):
    f, g = acts
    rz, rr, rh = r[:hidden], r[hidden:2 * hidden], r[2 * hidden:]
    xz, xr, xh = xw[:, :hidden], xw[:, hidden:2 * hidden], xw[:, 2 * hidden:]
    bz = br = bh = None
    if bias_r is not None:
        bz, br, bh = bias_r[:hidden], bias_r[hidden:2 * hidden], bias_r[2 * hidden:]

    def lin(v, m, bias):
        out = torch.matmul(v, m.transpose(0, 1))
        return out if bias is None else out + bias

    z = f(_clipped(xz + lin(h, rz, bz), clip))
    rt = f(_clipped(xr + lin(h, rr, br), clip))
    if ctx.attr("linear_before_reset", 0):
        hh = g(_clipped(xh + rt * lin(h, rh, bh), clip))
    else:
        hh = g(_clipped(xh + lin(rt * h, rh, bh), clip))
    return (1 - z) * hh + z * h, None


def _lstm_step(ctx, xw, h, c, r, bias_r, p, acts, clip, hidden):
    f, g, hf = acts
    pre = xw + torch.matmul(h, r.transpose(0, 1))
    if bias_r is not None:
        pre = pre + bias_r
    i_pre, o_pre, f_pre, c_pre = (pre[:, k * hidden:(k + 1) * hidden] for k in range(4))
    if p is not None:
        pi, po, pf = p[:hidden], p[hidden:2 * hidden], p[2 * hidden:]
        i_pre = i_pre + pi * c
        f_pre = f_pre + pf * c
    i = f(_clipped(i_pre, clip))
    ft = 1 - i if ctx.attr("input_forget", 0) else f(_clipped(f_pre, clip))
    c_new = ft * c + i * g(_clipped(c_pre, clip))
    if p is not None:
        o_pre = o_pre + po * c_new
    o = f(_clipped(o_pre, clip))
    return o * hf(c_new), c_new


@TABLE.op("RNN", since=14)
def rnn(ctx, x, w, r, b=None, lens=None, h0=None):
    """RNN (forward/reverse/bidirectional, layout, sequence_lens, activations, clip),
    unrolled over the static sequence length."""
    return _recurrent(ctx, "RNN", x, w, r, b, lens, h0)


@TABLE.op("GRU", since=14)
def gru(ctx, x, w, r, b=None, lens=None, h0=None):
    """GRU (gates z, r, h; linear_before_reset; as RNN otherwise)."""
    return _recurrent(ctx, "GRU", x, w, r, b, lens, h0)


@TABLE.op("LSTM", since=14)
def lstm(ctx, x, w, r, b=None, lens=None, h0=None, c0=None, p=None):
    """LSTM (gates i, o, f, c; peepholes, input_forget; as RNN otherwise)."""
    return _recurrent(ctx, "LSTM", x, w, r, b, lens, h0, c0, p)


TABLE.op("RNN", since=7)(rnn)
TABLE.op("GRU", since=7)(gru)
TABLE.op("LSTM", since=7)(lstm)
