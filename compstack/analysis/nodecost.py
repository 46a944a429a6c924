"""Per-node cost and tensor traffic of the common IR (a read-only analysis).

Used to place each generated kernel against this machine's peak (roofline): a kernel's
FLOPs are the FLOPs of the IR nodes it covers, its bytes the compulsory traffic of those
nodes taken together.

FLOPs (a multiply-accumulate counts 2, as in :mod:`compstack.analysis.opstats`):

* ``MatMul``, ``Gemm``, ``Conv``: :func:`compstack.analysis.opstats.node_flops`.
* elementwise arithmetic (``Add``, ``Mul``, ``Relu``, ``Gelu``, ``Where``, ...): one FLOP
  per output element (a model: transcendental ops cost more on real hardware).
* ``BatchNormalization`` (inference: ``x * a + b``): 2 per element; ``LayerNormalization``
  5 per element (mean, variance, normalise, scale, shift); ``Softmax`` 4 per element
  (max, subtract-exp, sum, divide); ``Reduce*``: 1 per *input* element.
* data movement (``Transpose``, ``Gather``, ``Concat``, ``Cast``, ``Reshape``...): 0.

Bytes moved by a set of nodes (:func:`group_bytes`): every tensor the set reads from
outside (graph inputs, weights, other nodes' outputs) plus every tensor it writes that is
read outside or is a graph output, each counted once, at its static size. This is the
minimum traffic of the fused kernel (intermediates stay in registers/cache), so an
achieved bandwidth computed from it is a lower bound.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import onnx_ir as ir

from compstack.analysis.opstats import node_flops

__all__ = ["NO_KERNEL_OPS", "VIEW_OPS", "is_compute", "node_cost_flops", "value_bytes", "group_bytes",
           "constant_nodes"]

#: Ops that change only metadata: most stacks make no kernel for them (a view, a
#: bitcast), so they do not count as compute nodes for coverage.
VIEW_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout"})
#: Ops that never need a kernel at run time.
NO_KERNEL_OPS = frozenset({"Constant", "Shape", "Size"}) | VIEW_OPS

_ELEMENTWISE = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu",
    "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Gelu",
    "Softplus", "Softsign", "Mish", "Sin", "Cos", "Max", "Min", "Mean", "Sum", "Clip", "Where", "Equal",
    "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf",
    "Floor", "Ceil", "Round", "Sign", "Mod", "BitShift", "ThresholdedRelu"})
_PER_ELEMENT = {"BatchNormalization": 2, "LayerNormalization": 5, "Softmax": 4, "LogSoftmax": 4,
                "InstanceNormalization": 5, "GroupNormalization": 5}
_REDUCE = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                     "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "GlobalAveragePool",
                     "GlobalMaxPool", "ArgMax", "ArgMin"})


def _numel(v: ir.Value | None) -> int | None:
    if v is None or v.shape is None or not v.shape.is_static():
        return None
    return int(np.prod([int(d) for d in v.shape], dtype=np.int64))  # type: ignore[arg-type]  # static


def value_bytes(v: ir.Value | None) -> int | None:
    """Bytes of a tensor with a static shape and known dtype; None otherwise."""
    n = _numel(v)
    if n is None or v is None or v.dtype is None:
        return None
    try:
        return int(n * v.dtype.itemsize)
    except (AttributeError, TypeError, ValueError):  # sub-byte / string types
        return None


def node_cost_flops(node: ir.Node) -> int | None:
    """FLOPs of one node by the rules of the module docstring; None when a shape is
    unknown."""
    op = node.op_type if node.domain in ("", "ai.onnx") else ""
    if op in ("MatMul", "Gemm", "Conv"):
        return node_flops(node)
    if op in _ELEMENTWISE:
        return _numel(node.outputs[0]) if node.outputs else 0
    if op in _PER_ELEMENT:
        n = _numel(node.inputs[0]) if node.inputs else None
        return None if n is None else n * _PER_ELEMENT[op]
    if op in _REDUCE:
        return _numel(node.inputs[0]) if node.inputs else None
    return 0


def constant_nodes(graph: ir.Graph) -> set[str]:
    """Names of nodes whose inputs are all constants (initializers, ``Constant`` outputs
    or other such nodes): every stack folds them at compile time."""
    const_values: set[str] = {v.name for v in graph.initializers.values() if v.name}
    out: set[str] = set()
    for node in graph:
        ins = [v for v in node.inputs if v is not None]
        if node.op_type == "Constant" or (ins and all(v.name in const_values for v in ins)):
            out.add(node.name or "")
            const_values.update(v.name for v in node.outputs if v is not None and v.name)
    return out


def is_compute(node: ir.Node, constants: set[str]) -> bool:
    """Whether ``node`` must become (part of) a kernel: not a view/metadata op and not
    folded at compile time (``constants`` from :func:`constant_nodes`)."""
    if node.domain in ("", "ai.onnx") and node.op_type in NO_KERNEL_OPS:
        return False
    return (node.name or "") not in constants


def group_bytes(nodes: Sequence[ir.Node], consumers: dict[str, list[ir.Node]],
                graph_outputs: Iterable[str]) -> int | None:
    """Compulsory bytes of a set of nodes taken as one kernel (see the module docstring).

    Args:
        nodes: the nodes.
        consumers: value name -> nodes reading it, for the whole graph.
        graph_outputs: names of the graph outputs.

    Returns:
        Bytes, or None when a tensor involved has no static size.
    """
    inside = {id(n) for n in nodes}
    produced = {v.name: v for n in nodes for v in n.outputs if v is not None and v.name}
    outs = set(graph_outputs)
    total = 0
    seen: set[str] = set()
    for n in nodes:
        for v in n.inputs:
            if v is None or not v.name or v.name in produced or v.name in seen:
                continue
            seen.add(v.name)
            b = value_bytes(v)
            if b is None:
                return None
            total += b
    for name, v in produced.items():
        external = name in outs or any(id(c) not in inside for c in consumers.get(name, []))
        if external:
            b = value_bytes(v)
            if b is None:
                return None
            total += b
    return total
