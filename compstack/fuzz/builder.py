"""The graph under construction (:class:`Builder`), its tensors, input values and dtypes:
what the family builders (:mod:`compstack.fuzz.families`) and the generator share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compstack.fuzz.specs import ALL_DTYPES

__all__ = ["Builder", "Tensor", "np_dtype", "values"]


def np_dtype(name: str) -> np.dtype:
    """numpy dtype of a dtype name (bfloat16 via ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _onnx_type(name: str) -> int:
    return {"float32": onnx.TensorProto.FLOAT, "float16": onnx.TensorProto.FLOAT16,
            "bfloat16": onnx.TensorProto.BFLOAT16, "int8": onnx.TensorProto.INT8, "int32": onnx.TensorProto.INT32,
            "int64": onnx.TensorProto.INT64, "bool": onnx.TensorProto.BOOL}[name]


_FROM_ONNX = {v: k for k, v in {n: _onnx_type(n) for n in ALL_DTYPES}.items()}


@dataclass
class Tensor:
    """A tensor the graph has so far.

    Attributes:
        name: tensor name.
        dtype: dtype name (``float32``...).
        shape: static shape.
        leaf: a graph input or constant (values on the 1/4 grid): discrete ops may read it.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    leaf: bool = False


class Builder:
    """The graph under construction, with the helpers families use."""

    def __init__(self, rng: np.random.Generator, dtypes: Sequence[str]) -> None:
        self.rng = rng
        self.dtypes = list(dtypes)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[tuple[Tensor, str]] = []  # (tensor, domain)
        self.pool: list[Tensor] = []
        self.consumed: set[str] = set()
        self.types: dict[str, onnx.TypeProto] = {}
        self._n = 0

    # -- naming and choice
    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def dtype(self, names: Sequence[str]) -> str:
        """A dtype of ``names``; float32 half of the time when it is one (most models are)."""
        return "float32" if "float32" in names and self.coin(0.5) else self.choice(list(names))

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def shape(self, rank: int | None = None, lo: int = 1, hi: int = 5) -> tuple[int, ...]:
        r = int(self.rng.integers(1, 5)) if rank is None else rank
        return tuple(int(d) for d in self.rng.integers(lo, hi + 1, size=r))

    # -- tensors
    def new_input(self, dtype: str, shape: tuple[int, ...], domain: str = "any") -> Tensor:
        t = Tensor(self.fresh("in"), dtype, tuple(shape), leaf=True)
        self.inputs.append((t, domain))
        self.types[t.name] = helper.make_tensor_type_proto(_onnx_type(dtype), list(shape))
        return t

    def const(self, arr: np.ndarray, stem: str = "c") -> str:
        name = self.fresh(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def const_tensor(self, dtype: str, shape: tuple[int, ...], domain: str = "any") -> Tensor:
        name = self.const(values(self.rng, dtype, shape, domain), "w")
        return Tensor(name, dtype, tuple(shape), leaf=True)

    def pick(self, dtypes: Sequence[str], *, leaf: bool = False, pred: Any = None) -> Tensor | None:
        """A tensor of the pool with one of ``dtypes`` (and ``pred``), preferring unconsumed ones."""
        ok = [t for t in self.pool if t.dtype in dtypes and (t.leaf or not leaf) and (pred is None or pred(t))]
        if not ok:
            return None
        fresh = [t for t in ok if t.name not in self.consumed]
        seq = fresh if fresh and self.coin(0.8) else ok
        return seq[-1] if self.coin(0.5) else self.choice(seq)  # favour the newest: deeper graphs

    def operand(self, dtypes: Sequence[str], *, leaf: bool = False, pred: Any = None, rank: int | None = None,
                domain: str = "any", shape: tuple[int, ...] | None = None) -> Tensor:
        """A pool tensor that fits, or a new graph input of a dtype in ``dtypes``."""
        usable = [d for d in dtypes if d in self.dtypes] or list(dtypes)
        if domain == "any" and shape is None:
            t = self.pick(usable, leaf=leaf, pred=pred if rank is None else
                          (lambda x: len(x.shape) == rank and (pred is None or pred(x))))
            if t is not None and self.coin(0.9):
                return t
            if t is None and self.coin(0.7):  # connect: Cast a tensor of another dtype
                c = self._cast_from_pool(usable, leaf, pred if rank is None else
                                         (lambda x: len(x.shape) == rank and (pred is None or pred(x))))
                if c is not None:
                    return c
        dtype = self.dtype(usable)
        return self.new_input(dtype, shape if shape is not None else self.shape(rank), domain)

    def _cast_from_pool(self, dtypes: Sequence[str], leaf: bool, pred: Any) -> Tensor | None:
        """A pool tensor Cast to one of ``dtypes`` (never float to integer/bool: a computed
        float may be out of range or sit on a rounding boundary; Operators.md#Cast)."""
        if leaf:
            return None
        to = self.dtype(dtypes)
        src = self.pick([d for d in ALL_DTYPES if d != to and (np_dtype(d).kind != "f" or np_dtype(to).kind == "f")],
                        pred=pred)
        if src is None:
            return None
        (y,) = self.node("Cast", [src.name], to=_onnx_type(to))
        return Tensor(y, to, src.shape)

    def node(self, op: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [self.fresh("t") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=f"n{len(self.nodes)}_{op}", **attrs))
        self.consumed.update(i for i in inputs if i)
        return outs

    def guard(self, t: Tensor, domain: str) -> Tensor:
        """``t`` moved into ``domain`` by nodes (Abs/Add, Tanh/Mul) so a domain op may read it."""
        if domain == "any":
            return t
        return self._guard_nodes(t, domain)

    def _guard_nodes(self, t: Tensor, domain: str) -> Tensor:
        one = np.ones((), np_dtype(t.dtype))
        if domain == "unit":
            (a,) = self.node("Tanh", [t.name])
            (b,) = self.node("Mul", [a, self.const(one * np_dtype(t.dtype).type(0.75))])
            return Tensor(b, t.dtype, t.shape)
        (a,) = self.node("Abs", [t.name])
        shift = {"positive": 0.5, "ge1": 1.0, "nonzero": 1}[domain]
        (b,) = self.node("Add", [a, self.const((one * shift).astype(np_dtype(t.dtype)))])
        return Tensor(b, t.dtype, t.shape)


def values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], domain: str = "any") -> np.ndarray:
    """Input values: floats on a 1/4 grid (exact in float16/bfloat16), small integers, in ``domain``."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo, hi = {"any": (-4, 4), "positive": (1, 4), "ge1": (1, 4), "unit": (0, 0), "nonzero": (1, 4)}[domain]
        v = rng.integers(lo, hi + 1, size=shape)
        if domain == "nonzero":
            v = v * rng.choice([-1, 1], size=shape)
        return v.astype(dt)
    lo, hi = {"any": (-8, 8), "positive": (1, 8), "ge1": (4, 12), "unit": (-3, 3), "nonzero": (1, 8)}[domain]
    return (rng.integers(lo, hi + 1, size=shape) / 4.0).astype(dt)


class _Skip(Exception):
    """A family cannot place its op on this graph (raised by families)."""
