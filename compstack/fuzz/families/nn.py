"""Families of the neural-network ops: MatMul/Gemm, Conv/ConvTranspose, pooling,
normalisations, Softmax, Resize.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compstack.fuzz.builder import Builder, _Skip
from compstack.fuzz.families._common import _I64, _first, _spatial, _window
from compstack.fuzz.specs import OpSpec

__all__ = [
    "matmul", "gemm", "conv", "convtranspose", "pool", "globalpool", "batchnorm", "instancenorm",
    "layernorm", "lpnorm", "lrn", "softmax", "resize",
]


def matmul(b: Builder, spec: OpSpec) -> None:
    """MatMul (numpy.matmul): x [..., M, K] times a constant [K, N] or [..., K, N]."""
    x = b.operand(spec.dtypes, pred=lambda t: len(t.shape) >= 1)
    k = x.shape[-1]
    n = int(b.rng.integers(1, 6))
    wshape = (k, n) if len(x.shape) < 3 or b.coin() else (*x.shape[:-2], k, n)
    if len(x.shape) == 1 and b.coin(0.3):
        wshape = (k,)
    w = b.const_tensor(x.dtype, wshape) if b.coin(0.7) else b.new_input(x.dtype, wshape)
    b.node("MatMul", [x.name, w.name] if b.coin(0.8) or len(wshape) != 2 else [x.name, w.name])


def gemm(b: Builder, spec: OpSpec) -> None:
    """Gemm: A [M, K] (transA), B [K, N] (transB), C unidirectionally broadcast to [M, N]."""
    a = b.operand(spec.dtypes, rank=2)
    ta, tb = int(b.coin(0.3)), int(b.coin(0.3))
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = int(b.rng.integers(1, 6))
    bb = b.const_tensor(a.dtype, (n, k) if tb else (k, n))
    ins = [a.name, bb.name]
    if b.coin(0.7):
        ins.append(b.const_tensor(a.dtype, b.choice([(m, n), (n,), (1, n), (m, 1), ()])).name)
    b.node("Gemm", ins, transA=ta, transB=tb, alpha=b.choice([1.0, 0.5, 2.0]), beta=b.choice([1.0, 0.5]))


def conv(b: Builder, spec: OpSpec) -> None:
    """Conv: W [M, C/group, k...]; group divides C and M; optional bias B [M]."""
    x = _spatial(b, spec)
    c = x.shape[1]
    group = b.choice([g for g in (1, 1, 2, 3, c) if c % g == 0])
    m = group * int(b.rng.integers(1, 3))
    w = _window(b, x.shape[2:])
    if b.coin(0.2):
        w.pop("pads", None)
        w["auto_pad"] = b.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])
    wt = b.const_tensor(x.dtype, (m, c // group, *w["kernel_shape"]))
    ins = [x.name, wt.name] + ([b.const_tensor(x.dtype, (m,)).name] if b.coin() else [])
    b.node("Conv", ins, group=group, **w)


def convtranspose(b: Builder, spec: OpSpec) -> None:
    """ConvTranspose: W [C, M/group, k...]; output_padding < max(stride, dilation)."""
    x = _spatial(b, spec)
    c = x.shape[1]
    group = b.choice([g for g in (1, 1, c) if c % g == 0])
    w = _window(b, x.shape[2:])
    attrs: dict[str, Any] = {"group": group, **w}
    if b.coin(0.3):
        attrs["output_padding"] = [int(b.rng.integers(0, max(s, d))) for s, d in
                                   zip(w["strides"], w.get("dilations", [1] * len(w["strides"])))]
    wt = b.const_tensor(x.dtype, (c, int(b.rng.integers(1, 3)), *w["kernel_shape"]))
    b.node("ConvTranspose", [x.name, wt.name], **attrs)


def pool(b: Builder, spec: OpSpec) -> None:
    """MaxPool/AveragePool/LpPool: pads < kernel per axis, ceil_mode, count_include_pad."""
    x = _spatial(b, spec)
    w = _window(b, x.shape[2:], dil_ok=spec.op == "MaxPool")
    if "pads" in w:
        nd = len(w["kernel_shape"])
        w["pads"] = [min(p, w["kernel_shape"][i % nd] - 1) for i, p in enumerate(w["pads"])]
        if not any(w["pads"]):
            w.pop("pads")
    if spec.op in ("MaxPool", "AveragePool") and b.coin(0.3):
        w["ceil_mode"] = 1
    if spec.op == "AveragePool" and b.coin(0.4):
        w["count_include_pad"] = 1
    if spec.op == "LpPool":
        w["p"] = b.choice([1, 2, 3])
    b.node(spec.op, [x.name], **w)


def globalpool(b: Builder, spec: OpSpec) -> None:
    """GlobalAveragePool/GlobalMaxPool: rank >= 3."""
    x = _spatial(b, spec)
    b.node(spec.op, [x.name])


def batchnorm(b: Builder, spec: OpSpec) -> None:
    """BatchNormalization (inference): scale, B, mean, var [C]; var > 0."""
    x = b.operand(spec.dtypes, pred=lambda t: len(t.shape) >= 2)
    c = (x.shape[1],)
    ins = [x.name] + [b.const_tensor(x.dtype, c, dom).name for dom in ("any", "any", "any", "positive")]
    b.node("BatchNormalization", ins, epsilon=b.choice([1e-5, 1e-3]))


def instancenorm(b: Builder, spec: OpSpec) -> None:
    """InstanceNormalization: rank >= 3; scale, B [C]."""
    x = _spatial(b, spec)
    b.node("InstanceNormalization", [x.name, b.const_tensor(x.dtype, (x.shape[1],)).name,
                                     b.const_tensor(x.dtype, (x.shape[1],)).name])


def layernorm(b: Builder, spec: OpSpec) -> None:
    """LayerNormalization: axis; Scale and B shaped like x.shape[axis:]."""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    axis = int(b.rng.integers(-r, r))
    tail = x.shape[axis:]
    ins = [x.name, b.const_tensor(x.dtype, tail).name] + ([b.const_tensor(x.dtype, tail).name] if b.coin() else [])
    b.node("LayerNormalization", ins, axis=axis, epsilon=b.choice([1e-5, 1e-3]))


def lpnorm(b: Builder, spec: OpSpec) -> None:
    """LpNormalization: axis, p = 2. (The spec allows p = 1 too, but onnx 1.23's reference
    evaluator computes sum(x) instead of sum(|x|) for it, ``op_lp_normalization.py``: every
    stack would look wrong on negative inputs.)"""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    b.node("LpNormalization", [x.name], axis=int(b.rng.integers(-r, r)), p=2)


def lrn(b: Builder, spec: OpSpec) -> None:
    """LRN: rank 4, size odd (the spec's formula is symmetric for odd sizes) and <= C;
    N == C, because onnx 1.23's reference evaluator loops its channel index over the
    batch dimension (``op_lrn.py``: ``for c in range(x.shape[0])``), which is right
    only then."""
    c = int(b.rng.integers(1, 5))
    x = b.operand(spec.dtypes, rank=4, pred=lambda t: t.shape[0] == t.shape[1],
                  shape=None if b.coin(0.3) else (c, c, int(b.rng.integers(1, 5)), int(b.rng.integers(1, 5))))
    if x.shape[0] != x.shape[1]:
        raise _Skip
    b.node("LRN", [x.name], size=b.choice([n for n in (1, 3, 5) if n <= x.shape[1]]), alpha=b.choice([1e-4, 0.01]),
           beta=b.choice([0.75, 0.5]), bias=b.choice([1.0, 2.0]))


def softmax(b: Builder, spec: OpSpec) -> None:
    """Softmax/LogSoftmax/Hardmax: axis in [-r, r-1] (opset 13 semantics)."""
    x = _first(b, spec)
    r = len(x.shape)
    b.node(spec.op, [x.name], axis=int(b.rng.integers(-r, r)))


def resize(b: Builder, spec: OpSpec) -> None:
    """Resize (opset 19): mode nearest/linear/cubic, every coordinate_transformation_mode
    but tf_crop_and_resize, nearest_mode, cubic_coeff_a, exclude_outside; scales on the
    spatial axes (1 on N and C) or sizes; antialias only when downsampling linear/cubic."""
    x = _spatial(b, spec, b.choice([3, 4, 4]))
    mode = b.choice(["nearest", "linear", "cubic"])
    sp = len(x.shape) - 2
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": b.choice(
        ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"])}
    if mode == "nearest":
        attrs["nearest_mode"] = b.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if mode == "cubic":
        attrs["cubic_coeff_a"] = b.choice([-0.75, -0.5])
        attrs["exclude_outside"] = int(b.coin(0.3))
    if b.coin(0.6):
        scales = [1.0, 1.0] + [b.choice([0.5, 1.5, 2.0, 3.0]) for _ in range(sp)]
        if mode != "nearest" and all(s <= 1 for s in scales) and b.coin(0.5):
            attrs["antialias"] = 1
        b.node("Resize", [x.name, "", b.const(np.asarray(scales, np.float32))], **attrs)
    else:
        sizes = list(x.shape[:2]) + [int(b.rng.integers(1, 2 * d + 2)) for d in x.shape[2:]]
        b.node("Resize", [x.name, "", "", b.const(np.asarray(sizes, _I64))], **attrs)
