"""Semantically equal rewrites of a graph (the equivalence oracle).

A stack must give the same answer (within the float32 noise floor) on a graph and on
each rewrite of it, so a rewrite that turns a right answer wrong is a bug found without
trusting any reference (EMI-style metamorphic testing: Le et al., PLDI 2014; for DL
compilers, e.g. NNSmith, ASPLOS 2023). Each rewrite is exact in real arithmetic; the
first four are exact in IEEE arithmetic too:

* ``commute``: swap the operands of a commutative binary op (Add, Mul, Max, Min, And,
  Or, Xor, Equal; Operators.md: these are symmetric). Not Sum/Mean: onnx 1.23's
  reference evaluator accumulates them in place into the first operand and fails when a
  later one broadcasts it larger (``op_mean.py``, ``res += m``);
* ``identity``: route a tensor through ``Identity``;
* ``transpose_pair``: ``Transpose(perm)`` then ``Transpose(perm⁻¹)`` on a tensor;
* ``neutral``: ``x * 1`` or ``x + 0`` on a tensor (``-0 + 0`` is ``+0``: equal values);
* ``reassociate``: ``x + c`` as ``(x + c/2) + c/2`` and ``x * c`` as ``(x * 2) * (c/2)``
  (halving is exact; the sum is re-associated, so only equal up to rounding).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compstack.explain.graph import ReferenceValues

__all__ = ["REWRITES", "rewrite"]

_COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "And", "Or", "Xor", "Equal"})


def _copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    return out


def _tensors(proto: onnx.ModelProto, ref: ReferenceValues) -> list[str]:
    return [o for n in proto.graph.node for o in n.output if o and o in ref.f32]


def _reroute(m: onnx.ModelProto, name: str, new: str, after: int, nodes: list[onnx.NodeProto]) -> None:
    """Insert ``nodes`` (producing ``new`` from ``name``) after node ``after``; every
    later reader and the graph output read ``new`` instead."""
    for n in m.graph.node[after + 1:]:
        for i, x in enumerate(n.input):
            if x == name:
                n.input[i] = new
    for o in m.graph.output:
        if o.name == name:
            o.name = new
    for k, n in enumerate(nodes):
        m.graph.node.insert(after + 1 + k, n)


def _producer(m: onnx.ModelProto, name: str) -> int:
    return next(i for i, n in enumerate(m.graph.node) if name in n.output)


def commute(proto: onnx.ModelProto, ref: ReferenceValues, rng: np.random.Generator) -> onnx.ModelProto | None:
    idx = [i for i, n in enumerate(proto.graph.node) if n.op_type in _COMMUTATIVE and len(n.input) == 2]
    if not idx:
        return None
    m = _copy(proto)
    n = m.graph.node[int(rng.choice(idx))]
    ins = list(n.input)[::-1]
    del n.input[:]
    n.input.extend(ins)
    return m


def identity(proto: onnx.ModelProto, ref: ReferenceValues, rng: np.random.Generator) -> onnx.ModelProto | None:
    names = _tensors(proto, ref)
    if not names:
        return None
    m = _copy(proto)
    name = str(rng.choice(names))
    _reroute(m, name, name + "_id", _producer(m, name), [helper.make_node("Identity", [name], [name + "_id"],
                                                                          name="eq_identity")])
    return m


def transpose_pair(proto: onnx.ModelProto, ref: ReferenceValues, rng: np.random.Generator) -> onnx.ModelProto | None:
    names = [t for t in _tensors(proto, ref) if np.asarray(ref.f32[t]).ndim >= 2]
    if not names:
        return None
    m = _copy(proto)
    name = str(rng.choice(names))
    r = np.asarray(ref.f32[name]).ndim
    perm = [int(p) for p in rng.permutation(r)]
    inv = [int(p) for p in np.argsort(perm)]
    _reroute(m, name, name + "_tt", _producer(m, name), [
        helper.make_node("Transpose", [name], [name + "_t"], perm=perm, name="eq_transpose"),
        helper.make_node("Transpose", [name + "_t"], [name + "_tt"], perm=inv, name="eq_transpose_back")])
    return m


def neutral(proto: onnx.ModelProto, ref: ReferenceValues, rng: np.random.Generator) -> onnx.ModelProto | None:
    names = [t for t in _tensors(proto, ref) if np.asarray(ref.f32[t]).dtype.kind in "fi"]
    if not names:
        return None
    m = _copy(proto)
    name = str(rng.choice(names))
    dt = np.asarray(ref.f32[name]).dtype
    op, val = ("Mul", 1) if rng.random() < 0.5 else ("Add", 0)
    c = name + "_neutral_c"
    m.graph.initializer.append(numpy_helper.from_array(np.asarray(val, dt), c))
    _reroute(m, name, name + "_n", _producer(m, name), [helper.make_node(op, [name, c], [name + "_n"],
                                                                         name=f"eq_{op.lower()}_neutral")])
    return m


def reassociate(proto: onnx.ModelProto, ref: ReferenceValues, rng: np.random.Generator) -> onnx.ModelProto | None:
    inits = {t.name: t for t in proto.graph.initializer}

    def const_at(n: onnx.NodeProto) -> int:
        return next((k for k in (1, 0) if n.input[k] in inits
                     and onnx.numpy_helper.to_array(inits[n.input[k]]).dtype.kind == "f"), -1)

    idx = [i for i, n in enumerate(proto.graph.node) if n.op_type in ("Add", "Mul") and len(n.input) == 2
           and const_at(n) >= 0]
    if not idx:
        return None
    m = _copy(proto)
    i = int(rng.choice(idx))
    n = m.graph.node[i]
    k = const_at(n)
    cname, x = n.input[k], n.input[1 - k]
    c = onnx.numpy_helper.to_array(inits[cname])
    half = (c / 2).astype(c.dtype)
    first = np.asarray(2, c.dtype) if n.op_type == "Mul" else half
    m.graph.initializer.extend([numpy_helper.from_array(np.asarray(first), cname + "_ra"),
                                numpy_helper.from_array(half, cname + "_rb")])
    mid = n.output[0] + "_ra"
    m.graph.node.insert(i, helper.make_node(n.op_type, [x, cname + "_ra"], [mid], name="eq_reassoc"))
    n.input[0], n.input[1] = mid, cname + "_rb"
    return m


#: Rewrite name -> function(proto, reference values, rng) -> rewritten model or None.
REWRITES: dict[str, Callable[[onnx.ModelProto, ReferenceValues, np.random.Generator], onnx.ModelProto | None]] = {
    "commute": commute, "identity": identity, "transpose_pair": transpose_pair, "neutral": neutral,
    "reassociate": reassociate}


def rewrite(proto: onnx.ModelProto, ref: ReferenceValues, rng: np.random.Generator,
            names: list[str] | None = None) -> tuple[str, onnx.ModelProto] | None:
    """One applicable rewrite, chosen at random (None when none applies)."""
    order = list(names or REWRITES)
    rng.shuffle(order)
    for name in order:
        out = REWRITES[name](proto, ref, rng)
        if out is not None:
            return name, out
    return None
