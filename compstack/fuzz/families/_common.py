"""Helpers the family builders share: attributes, operands, broadcast shapes, axes,
windows and indices (each cites the ONNX spec section it follows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compstack.fuzz.builder import Builder, Tensor, _Skip
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


def _axes(b: Builder, rank: int, k: int | None = None) -> list[int]:
    k = int(b.rng.integers(1, rank + 1)) if k is None else k
    axes = sorted(int(a) for a in b.rng.choice(rank, size=k, replace=False))
    return [a - rank if b.coin(0.3) else a for a in axes]


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
