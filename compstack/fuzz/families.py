"""Builders, one per op family: pick inputs and attributes the op's spec section allows.

Each ``family(b, spec)`` adds the op (and any guard nodes, constants, inputs it needs)
to the :class:`~compstack.fuzz.generate.Builder` ``b``, or raises ``_Skip`` when the op
does not fit; shapes of what it made come from ONNX shape inference afterwards. The
constraint each builder honours is cited from ONNX ``docs/Operators.md`` (and
``Broadcasting.md``) by the ``source`` of its :class:`~compstack.fuzz.specs.OpSpec`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compstack.fuzz.generate import Builder, Tensor, _Skip, np_dtype, values
from compstack.fuzz.specs import OpSpec

_I64 = np.int64


def _attrs(b: Builder, spec: OpSpec) -> dict[str, Any]:
    return {k: b.choice(v) for k, v in spec.attrs.items() if b.coin(0.7)}


def _first(b: Builder, spec: OpSpec, pred: Any = None, rank: int | None = None) -> Tensor:
    x = b.operand(spec.dtypes, leaf=spec.discrete, pred=pred, rank=rank,
                  domain=spec.domain if spec.domain != "nonzero" else "any")
    if spec.domain in ("positive", "unit", "ge1") and not x.leaf:
        x = b.guard(x, spec.domain)
    return x


def unary(b: Builder, spec: OpSpec) -> None:
    """Elementwise unary ops; the result has the input's shape (Operators.md, each op)."""
    x = _first(b, spec)
    b.node(spec.op, [x.name], **_attrs(b, spec))


def dropout(b: Builder, spec: OpSpec) -> None:
    """Dropout in inference mode: ratio given, training_mode absent (output = input)."""
    x = _first(b, spec)
    b.node("Dropout", [x.name, b.const(np.asarray(b.choice([0.0, 0.3, 0.5]), np.float32))])


def _broadcast_shape(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape`` (Broadcasting.md, multidirectional):
    drop leading dims, set some dims to 1; sometimes grow a 1 of ``shape`` to size k."""
    s = list(shape)[int(b.rng.integers(0, len(shape) + 1)) if b.coin(0.3) else 0:]
    s = [1 if b.coin(0.25) else d for d in s]
    return tuple(s)


def _second(b: Builder, x: Tensor, spec: OpSpec, domain: str = "any") -> Tensor:
    """A second operand broadcast-compatible with ``x``: a pool tensor of the same shape
    (or suffix shape), else a constant or new input of a compatible shape."""
    if domain == "any":
        same = b.pick([x.dtype], leaf=spec.discrete, pred=lambda t: t.name != x.name and (
            t.shape == x.shape or t.shape == x.shape[len(x.shape) - len(t.shape):]))
        if same is not None and b.coin(0.6):
            return same
    shape = _broadcast_shape(b, x.shape)
    if b.coin(0.5):
        return b.const_tensor(x.dtype, shape, domain)
    return b.new_input(x.dtype, shape, domain)


def binary(b: Builder, spec: OpSpec) -> None:
    """Elementwise binary ops with multidirectional broadcasting; Div/Mod divisors
    nonzero for integers, positive for float Div and Pow's base (module ``specs``)."""
    if spec.op == "PRelu":  # slope unidirectionally broadcastable to X
        x = _first(b, spec)
        y = b.const_tensor(x.dtype, _broadcast_shape(b, x.shape))
        b.node("PRelu", [x.name, y.name])
        return
    if spec.op == "Pow":
        x = _first(b, spec)
        e = b.const(np.full(_broadcast_shape(b, x.shape), b.choice([0.5, 2.0, 3.0, -1.0, 1.5]), np_dtype(x.dtype)))
        b.node("Pow", [x.name, e])
        return
    x = b.operand(spec.dtypes, leaf=spec.discrete)
    if spec.op in ("Div", "Mod"):
        dom = "nonzero" if x.dtype.startswith("int") else "positive"
        y = _second(b, x, spec, dom)
        attrs = {"fmod": 1} if spec.op == "Mod" and b.coin(0.5) else {}
        b.node(spec.op, [x.name, y.name], **attrs)
        return
    y = _second(b, x, spec)
    ins = [x.name, y.name] if b.coin() else [y.name, x.name]
    b.node(spec.op, ins)


def variadic(b: Builder, spec: OpSpec) -> None:
    """Sum/Mean: 1..3 inputs, multidirectional broadcasting (Operators.md#Sum)."""
    x = b.operand(spec.dtypes)
    ins = [x.name] + [_second(b, x, spec).name for _ in range(int(b.rng.integers(0, 3)))]
    b.node(spec.op, ins)


def where(b: Builder, spec: OpSpec) -> None:
    """Where(cond, X, Y), all three broadcast together (Operators.md#Where)."""
    x = b.operand(spec.dtypes)
    cond = b.pick(["bool"], pred=lambda t: t.shape == x.shape[len(x.shape) - len(t.shape):]) \
        or b.new_input("bool", _broadcast_shape(b, x.shape))
    y = _second(b, x, spec)
    b.node("Where", [cond.name, x.name, y.name])


def clip(b: Builder, spec: OpSpec) -> None:
    """Clip with scalar min <= max (Operators.md#Clip; equal bounds allowed)."""
    x = b.operand(spec.dtypes)
    dt = np_dtype(x.dtype)
    lo = b.choice([-2.0, -1.0, -0.5, 0.0]) if dt.kind == "f" else b.choice([-2, -1, 0])
    hi = b.choice([0.5, 1.0, 2.0]) if dt.kind == "f" else b.choice([1, 2, 3])
    ins = [x.name, b.const(np.asarray(lo, dt)) if b.coin(0.8) else "", b.const(np.asarray(hi, dt))]
    b.node("Clip", ins)


def _axes(b: Builder, rank: int, k: int | None = None) -> list[int]:
    k = int(b.rng.integers(1, rank + 1)) if k is None else k
    axes = sorted(int(a) for a in b.rng.choice(rank, size=k, replace=False))
    return [a - rank if b.coin(0.3) else a for a in axes]


def reduce(b: Builder, spec: OpSpec) -> None:
    """Reduce* (opset 18+): axes as an input (or absent: all axes), keepdims."""
    x = _first(b, spec)
    attrs: dict[str, Any] = {"keepdims": int(b.coin())}
    if b.coin(0.8):
        b.node(spec.op, [x.name, b.const(np.asarray(_axes(b, len(x.shape)), _I64))], **attrs)
    else:
        b.node(spec.op, [x.name], **attrs)


def argreduce(b: Builder, spec: OpSpec) -> None:
    """ArgMax/ArgMin: axis, keepdims, select_last_index (ties are specified)."""
    x = _first(b, spec)
    r = len(x.shape)
    b.node(spec.op, [x.name], axis=int(b.rng.integers(-r, r)), keepdims=int(b.coin()),
           select_last_index=int(b.coin(0.3)))


def cumsum(b: Builder, spec: OpSpec) -> None:
    """CumSum: axis a 0-d int input, exclusive, reverse."""
    x = _first(b, spec)
    r = len(x.shape)
    b.node("CumSum", [x.name, b.const(np.asarray(int(b.rng.integers(-r, r)), _I64))], exclusive=int(b.coin(0.3)),
           reverse=int(b.coin(0.3)))


def topk(b: Builder, spec: OpSpec) -> None:
    """TopK: 1 <= k <= dim along axis; largest; sorted (equal values: lower index first)."""
    x = _first(b, spec)
    r = len(x.shape)
    axis = int(b.rng.integers(-r, r))
    k = int(b.rng.integers(1, x.shape[axis] + 1))
    b.node("TopK", [x.name, b.const(np.asarray([k], _I64))], 2, axis=axis, largest=int(b.coin(0.7)), sorted=1)


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


def _spatial(b: Builder, spec: OpSpec, rank: int | None = None) -> Tensor:
    r = rank or b.choice([3, 4, 4])
    return b.operand(spec.dtypes, rank=r, pred=lambda t: all(d >= 2 for d in t.shape[2:]))


def _window(b: Builder, sizes: tuple[int, ...], dil_ok: bool = True, pads_ok: bool = True) -> dict[str, Any]:
    """kernel_shape, strides, dilations, pads such that every output dim is >= 1
    (Conv/pool output size: floor((in + pad_begin + pad_end - dil*(k-1) - 1) / stride) + 1)."""
    ks, st, dl, pb, pe = [], [], [], [], []
    for d in sizes:
        dil = b.choice([1, 1, 2]) if dil_ok else 1
        k = int(b.rng.integers(1, 4))
        p0 = int(b.rng.integers(0, k)) if pads_ok and b.coin(0.5) else 0
        p1 = int(b.rng.integers(0, k)) if pads_ok and b.coin(0.5) else 0
        while d + p0 + p1 - dil * (k - 1) - 1 < 0 and (k > 1 or dil > 1):
            k, dil = (k - 1, dil) if k > 1 else (k, 1)
        ks.append(k)
        st.append(b.choice([1, 1, 2, 3]))
        dl.append(dil)
        pb.append(p0)
        pe.append(p1)
    out: dict[str, Any] = {"kernel_shape": ks, "strides": st}
    if any(x != 1 for x in dl):
        out["dilations"] = dl
    if any(pb + pe):
        out["pads"] = pb + pe
    return out


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


def _indices(b: Builder, dim: int, shape: tuple[int, ...], unique: bool = False) -> np.ndarray:
    if unique:
        n = int(np.prod(shape))
        if n > dim:
            raise _Skip
        v = b.rng.permutation(dim)[:n].reshape(shape)
    else:
        v = b.rng.integers(0, dim, size=shape)
    neg = b.rng.random(shape) < 0.3
    return np.where(neg, v - dim, v).astype(_I64)


def gather(b: Builder, spec: OpSpec) -> None:
    """Gather: indices in [-s, s-1] along axis (negative indices count from the end)."""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    axis = int(b.rng.integers(-r, r))
    ishape = b.choice([(), (int(b.rng.integers(1, 4)),), (2, int(b.rng.integers(1, 3)))])
    b.node("Gather", [x.name, b.const(_indices(b, x.shape[axis], ishape))], axis=axis)


def gatherelements(b: Builder, spec: OpSpec) -> None:
    """GatherElements: indices of the data's rank, equal to it off the axis (what the
    reference evaluator and the stacks accept; the spec allows smaller)."""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    axis = int(b.rng.integers(-r, r))
    ishape = tuple(d if i != axis % r else int(b.rng.integers(1, 5)) for i, d in enumerate(x.shape))
    b.node("GatherElements", [x.name, b.const(_indices(b, x.shape[axis], ishape))], axis=axis)


def gathernd(b: Builder, spec: OpSpec) -> None:
    """GatherND (batch_dims 0): indices [..., k], k <= rank, each in range of its dim."""
    x = b.operand(spec.dtypes)
    k = int(b.rng.integers(1, len(x.shape) + 1))
    lead = b.choice([(1,), (2,), (3,), (2, 2)])
    idx = np.stack([_indices(b, x.shape[j], lead) for j in range(k)], axis=-1)
    b.node("GatherND", [x.name, b.const(idx)])


def scatterelements(b: Builder, spec: OpSpec) -> None:
    """ScatterElements: indices/updates of the data's rank; with reduction none the
    indices along the axis are distinct per line (duplicates make the result undefined)."""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    axis = int(b.rng.integers(-r, r)) % r
    red = b.choice(["none", "none", "add", "mul", "max", "min"])
    ishape = list(x.shape)
    ishape[axis] = int(b.rng.integers(1, x.shape[axis] + 1))
    lines = [(b.rng.permutation(x.shape[axis])[:ishape[axis]] if red == "none" else
              b.rng.integers(0, x.shape[axis], ishape[axis])) for _ in range(int(np.prod(ishape)) // ishape[axis])]
    idx = np.moveaxis(np.asarray(lines).reshape([d for i, d in enumerate(ishape) if i != axis] + [ishape[axis]]),
                      -1, axis).astype(_I64)
    upd = b.const_tensor(x.dtype, tuple(ishape))
    b.node("ScatterElements", [x.name, b.const(idx), upd.name], axis=axis, reduction=red)


def scatternd(b: Builder, spec: OpSpec) -> None:
    """ScatterND: indices [n, k] distinct tuples (reduction none), updates [n, *shape[k:]]."""
    x = b.operand(spec.dtypes)
    k = int(b.rng.integers(1, len(x.shape) + 1))
    space = int(np.prod(x.shape[:k]))
    n = int(b.rng.integers(1, min(space, 4) + 1))
    flat = b.rng.permutation(space)[:n]
    idx = np.stack(np.unravel_index(flat, x.shape[:k]), axis=-1).astype(_I64)
    red = b.choice(["none", "none", "add", "mul"])
    upd = b.const_tensor(x.dtype, (n, *x.shape[k:]))
    b.node("ScatterND", [x.name, b.const(idx), upd.name], reduction=red)


def slice(b: Builder, spec: OpSpec) -> None:  # noqa: A001 - the op's name
    """Slice: starts/ends (clamped; negative from the end), axes, steps (negative
    allowed, never 0); the result is kept non-empty."""
    x = b.operand(spec.dtypes)
    axes = _axes(b, len(x.shape))
    starts, ends, steps = [], [], []
    for a in axes:
        d = x.shape[a]
        step = b.choice([1, 1, 2, -1, -2])
        if step > 0:
            s = int(b.rng.integers(0, d))
            e = int(b.rng.integers(s + 1, d + 1)) if b.coin(0.8) else 2 ** 31
        else:
            s = int(b.rng.integers(0, d)) if b.coin(0.8) else 2 ** 31
            e = int(b.rng.integers(-1, min(s, d - 1))) if b.coin(0.8) else -(2 ** 31)
            e = -d - 1 if e == -1 else e
        starts.append(s - d if b.coin(0.2) and 0 <= s < d else s)
        ends.append(e)
        steps.append(step)
    ins = [x.name, b.const(np.asarray(starts, _I64)), b.const(np.asarray(ends, _I64)),
           b.const(np.asarray(axes, _I64)), b.const(np.asarray(steps, _I64))]
    b.node("Slice", ins)


def pad(b: Builder, spec: OpSpec) -> None:
    """Pad (opset 19): constant (negative pads allowed), reflect (pads < dim), edge, wrap."""
    x = b.operand(spec.dtypes)
    mode = b.choice(["constant", "constant", "reflect", "edge", "wrap"])
    r = len(x.shape)
    pads = []
    for _half in range(2):
        for d in x.shape:
            hi = d - 1 if mode == "reflect" else (d if mode == "wrap" else 2)
            pads.append(int(b.rng.integers(0, hi + 1)))
    if mode == "constant" and b.coin(0.2):
        i = int(b.rng.integers(0, 2 * r))
        if x.shape[i % r] - pads[(i + r) % (2 * r)] > 1:
            pads[i] = -1
    ins = [x.name, b.const(np.asarray(pads, _I64))]
    if mode == "constant" and b.coin():
        ins.append(b.const(np.asarray(b.choice([0, 1, -2]), np_dtype(x.dtype))))
    b.node("Pad", ins, mode=mode)


def concat(b: Builder, spec: OpSpec) -> None:
    """Concat: 2..3 inputs equal in shape off the axis."""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    axis = int(b.rng.integers(-r, r))
    others = []
    for _ in range(int(b.rng.integers(1, 3))):
        shape = list(x.shape)
        shape[axis] = int(b.rng.integers(1, 4))
        same = b.pick([x.dtype], pred=lambda t: len(t.shape) == r and all(
            t.shape[i] == x.shape[i] for i in range(r) if i != axis % r))
        others.append(same if same is not None and b.coin() else b.const_tensor(x.dtype, tuple(shape)))
    ins = [x.name] + [o.name for o in others]
    b.rng.shuffle(ins)
    b.node("Concat", ins, axis=axis)


def split(b: Builder, spec: OpSpec) -> None:
    """Split (opset 18): sizes summing to the dim, or num_outputs (last part smaller)."""
    x = b.operand(spec.dtypes, pred=lambda t: max(t.shape) >= 2)
    r = len(x.shape)
    axes = [a for a in range(r) if x.shape[a] >= 2]
    if not axes:
        raise _Skip
    axis = b.choice(axes)
    d = x.shape[axis]
    if b.coin():
        n = int(b.rng.integers(2, min(d, 3) + 1))
        b.node("Split", [x.name], n, axis=axis, num_outputs=n)
    else:
        cut = sorted(int(c) for c in b.rng.choice(np.arange(1, d), size=min(d - 1, b.choice([1, 2])), replace=False))
        sizes = np.diff([0, *cut, d]).astype(_I64)
        b.node("Split", [x.name, b.const(sizes)], len(sizes), axis=axis)


def reshape(b: Builder, spec: OpSpec) -> None:
    """Reshape: a factorisation of the size, with a 0 (copy) or one -1 (inferred)."""
    x = b.operand(spec.dtypes)
    n = int(np.prod(x.shape))
    dims: list[int] = []
    rest = n
    for _ in range(int(b.rng.integers(0, 3))):
        divs = [k for k in range(1, rest + 1) if rest % k == 0]
        k = b.choice(divs)
        dims.append(k)
        rest //= k
    dims.append(rest)
    b.rng.shuffle(dims)
    if b.coin(0.4):
        dims[int(b.rng.integers(len(dims)))] = -1
    elif b.coin(0.3) and dims[0] == x.shape[0]:
        dims[0] = 0
    b.node("Reshape", [x.name, b.const(np.asarray(dims, _I64))])


def transpose(b: Builder, spec: OpSpec) -> None:
    """Transpose: perm a permutation of the axes (or absent: reversed)."""
    x = b.operand(spec.dtypes)
    if b.coin(0.8):
        b.node("Transpose", [x.name], perm=[int(p) for p in b.rng.permutation(len(x.shape))])
    else:
        b.node("Transpose", [x.name])


def expand(b: Builder, spec: OpSpec) -> None:
    """Expand: a shape that broadcasts with the input (dims 1 grow, leading dims added)."""
    x = b.operand(spec.dtypes)
    shape = [int(b.rng.integers(2, 4)) if d == 1 and b.coin(0.7) else (1 if b.coin(0.2) else d) for d in x.shape]
    if b.coin(0.3) and len(shape) < 4:
        shape = [int(b.rng.integers(1, 3))] + shape
    b.node("Expand", [x.name, b.const(np.asarray(shape, _I64))])


def squeeze(b: Builder, spec: OpSpec) -> None:
    """Squeeze: axes of size 1 (or all of them when axes is absent)."""
    x = b.operand(spec.dtypes, pred=lambda t: 1 in t.shape)
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones:
        raise _Skip
    if b.coin(0.7):
        b.node("Squeeze", [x.name, b.const(np.asarray(sorted(b.rng.choice(ones, size=int(b.rng.integers(
            1, len(ones) + 1)), replace=False)), _I64))])
    else:
        b.node("Squeeze", [x.name])


def unsqueeze(b: Builder, spec: OpSpec) -> None:
    """Unsqueeze: distinct axes in [-r', r'-1] of the output rank r'."""
    x = b.operand(spec.dtypes, pred=lambda t: len(t.shape) <= 4)
    k = int(b.rng.integers(1, 3))
    out_r = len(x.shape) + k
    axes = sorted(int(a) for a in b.rng.choice(out_r, size=k, replace=False))
    b.node("Unsqueeze", [x.name, b.const(np.asarray(axes, _I64))])


def flatten(b: Builder, spec: OpSpec) -> None:
    """Flatten: axis in [-r, r]."""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    b.node("Flatten", [x.name], axis=int(b.rng.integers(-r, r + 1)))


def tile(b: Builder, spec: OpSpec) -> None:
    """Tile: repeats >= 0 per axis (kept >= 1: non-empty)."""
    x = b.operand(spec.dtypes)
    b.node("Tile", [x.name, b.const(np.asarray([b.choice([1, 1, 2, 3]) for _ in x.shape], _I64))])


def depthtospace(b: Builder, spec: OpSpec) -> None:
    """DepthToSpace: rank 4, C divisible by blocksize^2; mode DCR or CRD."""
    bs = b.choice([2, 2, 3])
    x = b.operand(spec.dtypes, rank=4, pred=lambda t: t.shape[1] % (bs * bs) == 0,
                  shape=None if b.coin() else (1, bs * bs * int(b.rng.integers(1, 3)), 2, 3))
    if x.shape[1] % (bs * bs):
        raise _Skip
    b.node("DepthToSpace", [x.name], blocksize=bs, mode=b.choice(["DCR", "CRD"]))


def spacetodepth(b: Builder, spec: OpSpec) -> None:
    """SpaceToDepth: rank 4, H and W divisible by blocksize."""
    bs = 2
    x = b.operand(spec.dtypes, rank=4, pred=lambda t: t.shape[2] % bs == 0 and t.shape[3] % bs == 0,
                  shape=None if b.coin() else (1, 2, 4, 2))
    if x.shape[2] % bs or x.shape[3] % bs:
        raise _Skip
    b.node("SpaceToDepth", [x.name], blocksize=bs)


def trilu(b: Builder, spec: OpSpec) -> None:
    """Trilu: rank >= 2, upper, optional k (0-d int64)."""
    x = b.operand(spec.dtypes, pred=lambda t: len(t.shape) >= 2)
    if len(x.shape) < 2:
        raise _Skip
    ins = [x.name] + ([b.const(np.asarray(int(b.rng.integers(-2, 3)), _I64))] if b.coin() else [])
    b.node("Trilu", ins, upper=int(b.coin()))


def shape(b: Builder, spec: OpSpec) -> None:
    """Shape: optional start/end (clamped)."""
    x = b.operand(spec.dtypes)
    r = len(x.shape)
    attrs = {"start": int(b.rng.integers(-r, r))} if b.coin(0.3) else {}
    b.node("Shape", [x.name], **attrs)


def eyelike(b: Builder, spec: OpSpec) -> None:
    """EyeLike: rank 2, k off-diagonal, dtype of the input."""
    x = b.operand(spec.dtypes, rank=2)
    b.node("EyeLike", [x.name], k=int(b.rng.integers(-1, 2)))


def cast(b: Builder, spec: OpSpec) -> None:
    """Cast/CastLike: float to integer or bool only from leaf tensors (exact grid
    values, in range: out-of-range float to int is undefined, Operators.md#Cast)."""
    x = b.operand(spec.dtypes)
    to = b.choice(b.dtypes)
    if np_dtype(x.dtype).kind == "f" and np_dtype(to).kind != "f" and not x.leaf:
        raise _Skip
    if spec.op == "Cast":
        from compstack.fuzz.generate import _onnx_type

        b.node("Cast", [x.name], to=_onnx_type(to))
    else:
        b.node("CastLike", [x.name, b.const(values(b.rng, to, (1,)))])
