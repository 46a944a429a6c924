"""Families of elementwise, broadcasting, reduction and cast ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compstack.fuzz.builder import Builder, _Skip, np_dtype, values
from compstack.fuzz.families._common import (
    _I64,
    _attrs,
    _axes,
    _broadcast_shape,
    _first,
    _second,
)
from compstack.fuzz.specs import OpSpec

__all__ = [
    "unary", "dropout", "binary", "variadic", "where", "clip", "reduce", "argreduce", "cumsum", "topk",
    "cast",
]


def unary(b: Builder, spec: OpSpec) -> None:
    """Elementwise unary ops; the result has the input's shape (Operators.md, each op)."""
    x = _first(b, spec)
    b.node(spec.op, [x.name], **_attrs(b, spec))


def dropout(b: Builder, spec: OpSpec) -> None:
    """Dropout in inference mode: ratio given, training_mode absent (output = input)."""
    x = _first(b, spec)
    b.node("Dropout", [x.name, b.const(np.asarray(b.choice([0.0, 0.3, 0.5]), np.float32))])


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


def cast(b: Builder, spec: OpSpec) -> None:
    """Cast/CastLike: float to integer or bool only from leaf tensors (exact grid
    values, in range: out-of-range float to int is undefined, Operators.md#Cast)."""
    x = b.operand(spec.dtypes)
    to = b.choice(b.dtypes)
    if np_dtype(x.dtype).kind == "f" and np_dtype(to).kind != "f" and not x.leaf:
        raise _Skip
    if spec.op == "Cast":
        from compstack.fuzz.builder import _onnx_type

        b.node("Cast", [x.name], to=_onnx_type(to))
    else:
        b.node("CastLike", [x.name, b.const(values(b.rng, to, (1,)))])
