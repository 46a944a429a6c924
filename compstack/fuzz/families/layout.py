"""Families of the indexing and layout ops: Gather/Scatter, Slice, Pad, Concat, Split,
Reshape, Transpose, Expand, Squeeze/Unsqueeze, Flatten, Tile, Depth/SpaceToDepth,
Trilu, Shape, EyeLike.
"""

from __future__ import annotations

import numpy as np

from compstack.fuzz.builder import Builder, _Skip, np_dtype
from compstack.fuzz.families._common import _I64, _axes, _indices
from compstack.fuzz.specs import OpSpec

__all__ = [
    "gather", "gatherelements", "gathernd", "scatterelements", "scatternd", "slice", "pad", "concat",
    "split", "reshape", "transpose", "expand", "squeeze", "unsqueeze", "flatten", "tile",
    "depthtospace", "spacetodepth", "trilu", "shape", "eyelike",
]


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
