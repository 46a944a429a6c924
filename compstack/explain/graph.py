"""Pieces of a model, cut at tensors, and the reference values that feed them.

Explain never marks every tensor of the model a graph output on the stack under test
(that changes what the stack fuses, and runs out of memory on large models, as
Polygraphy's ``debug reduce`` users report: TensorRT#4443, #2232). It compiles *pieces*
instead: a prefix of the topological order with its frontier as outputs (bisect), or
any set of nodes (reduce), where every tensor the piece consumes but does not produce
becomes a graph input fed with the reference's value of that tensor. The piece thus
receives exactly what it received inside the original model.

Only the reference evaluator (NumPy, in this process) sees all intermediate values, via
``ReferenceEvaluator.run(..., intermediate=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import onnx
from onnx import helper

__all__ = ["Piece", "ReferenceValues", "describe", "feeds_for", "node_inputs", "piece", "prefix_frontier",
           "reference_values", "topo_check"]


def _subgraph_refs(g: onnx.GraphProto) -> set[str]:
    """Names a subgraph reads from its enclosing scopes (implicit inputs)."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    used: set[str] = set()
    for n in g.node:
        for name in node_inputs(n):
            if name not in defined:
                used.add(name)
        defined.update(o for o in n.output if o)
    return used - defined


def node_inputs(node: onnx.NodeProto) -> list[str]:
    """The tensors a node reads: its inputs plus those its subgraphs (If/Loop/Scan
    bodies) take from the enclosing graph."""
    names = [i for i in node.input if i]
    for a in node.attribute:
        for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            names.extend(sorted(_subgraph_refs(g)))
    return list(dict.fromkeys(names))


@dataclass
class ReferenceValues:
    """Every tensor of a model computed by the reference evaluator.

    Attributes:
        f64: value of every tensor (inputs, initializers, intermediates, outputs) with
            float32, float16 and bfloat16 computed in float64
            (:func:`compstack.targets.reference.target.to_float64` with ``halves``), so a
            half-precision model has a real float64 reference and noise floor.
        f32: the same tensors computed in the model's own precision (the float32 run
            whose error against ``f64`` is the noise floor).
        dtypes: each tensor's declared numpy dtype in the original model.
    """

    f64: dict[str, np.ndarray]
    f32: dict[str, np.ndarray]
    dtypes: dict[str, np.dtype]
    #: Graph inputs whose declared type (with symbolic ``dim_param`` dims) pieces keep
    #: instead of the reference value's static shape (``explain(..., keep_symbolic=True)``:
    #: a stack that fails only on dynamic shapes keeps failing in every piece).
    symbolic_inputs: dict[str, onnx.ValueInfoProto] = field(default_factory=dict)

    def feed(self, name: str) -> np.ndarray:
        """The value to feed for tensor ``name``: the float64 reference in the tensor's
        own dtype (so a piece receives what the original model computed)."""
        return np.asarray(self.f64[name]).astype(self.dtypes.get(name, self.f64[name].dtype), copy=False)


def _run(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    from compstack.analysis.refdefects import corrected_ops
    from compstack.ops._onnx import reference_ops

    sess = ReferenceEvaluator(proto, new_ops=reference_ops(proto) + corrected_ops(proto) or None)
    in_types = {v.name: helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
                for v in proto.graph.input if v.type.HasField("tensor_type")}
    cast = {k: np.asarray(v).astype(in_types[k], copy=False) if k in in_types else v for k, v in feeds.items()}
    with np.errstate(all="ignore"):
        out = sess.run(None, cast, intermediate=True)
    return {k: np.asarray(v) for k, v in out.items()}  # type: ignore[union-attr]  # a dict with intermediate=True


def reference_values(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> ReferenceValues:
    """Run ``proto`` on the reference evaluator in float64 and in its own precision,
    keeping every intermediate tensor.

    Args:
        proto: the model (static shapes not required).
        feeds: graph input name -> array.

    Returns:
        :class:`ReferenceValues` for every tensor name of the main graph.

    Raises:
        Exception: whatever the reference evaluator raises on the model.
    """
    from compstack.targets.reference.target import to_float64

    f32 = _run(proto, feeds)
    f64 = _run(to_float64(proto, halves=True), feeds)
    for t in proto.graph.initializer:  # initializers are not always in the intermediate dict
        arr = onnx.numpy_helper.to_array(t)
        f32.setdefault(t.name, arr)
        f64.setdefault(t.name, arr.astype(np.float64) if arr.dtype.kind == "f" or "float" in arr.dtype.name else arr)
    dtypes = {k: np.asarray(v).dtype for k, v in f32.items()}
    return ReferenceValues(f64, f32, dtypes)


@dataclass
class Piece:
    """A runnable piece of a model.

    Attributes:
        model: a valid ONNX model holding ``nodes`` (in their original order).
        nodes: indices of the original model's nodes in the piece.
        inputs: graph inputs of the piece (original inputs or cut tensors).
        outputs: graph outputs of the piece.
    """

    model: onnx.ModelProto
    nodes: list[int]
    inputs: list[str]
    outputs: list[str]


def _value_info(name: str, arr: np.ndarray) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype),
                                         list(np.asarray(arr).shape))


def symbolic_inputs_of(proto: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """The graph inputs of ``proto`` that declare a symbolic dim (``dim_param``), by name."""
    return {vi.name: vi for vi in proto.graph.input
            if any(d.HasField("dim_param") for d in vi.type.tensor_type.shape.dim)}


def symbolic_like(vi: onnx.ValueInfoProto, shape: Sequence[int]) -> onnx.ValueInfoProto:
    """``vi`` for an input now of ``shape``: its symbolic dims (``dim_param``) kept, its
    static dims set to ``shape``'s sizes, so a reduction that shrank the input keeps the
    declaration it checked; a rank that no longer matches gives ``shape`` all static."""
    out = onnx.ValueInfoProto()
    out.CopyFrom(vi)
    dims = out.type.tensor_type.shape.dim
    params = [d.dim_param if d.HasField("dim_param") else "" for d in dims]
    params = params if len(params) == len(shape) else [""] * len(shape)
    del dims[:]
    for size, param in zip(shape, params):
        d = dims.add()
        if param:
            d.dim_param = param
        else:
            d.dim_value = int(size)
    return out


def piece(proto: onnx.ModelProto, keep: Iterable[int], ref: ReferenceValues,
          outputs: Sequence[str] | None = None, name: str = "") -> Piece:
    """The model made of the nodes ``keep`` of ``proto``.

    Tensors the nodes read but do not produce become graph inputs (initializers stay
    initializers when the piece uses them); the outputs are ``outputs`` when given,
    else every produced tensor no kept node consumes plus original graph outputs.
    Shapes and dtypes come from the reference values, so the piece is fully static, except
    for graph inputs in ``ref.symbolic_inputs``, which keep their declared symbolic dims.

    Raises:
        KeyError: a tensor has no reference value (it was never computed).
    """
    nodes = list(proto.graph.node)
    kept = sorted(set(keep))
    inits = {t.name: t for t in proto.graph.initializer}
    produced: list[str] = [o for i in kept for o in nodes[i].output if o]
    produced_set = set(produced)
    consumed = [n for i in kept for n in node_inputs(nodes[i])]
    graph_inputs = [n for n in dict.fromkeys(consumed) if n not in produced_set and n not in inits]
    if outputs is None:
        consumed_set = set(consumed)
        declared = {o.name for o in proto.graph.output}
        outputs = [o for o in produced if o not in consumed_set or o in declared]
    graph = helper.make_graph(
        [nodes[i] for i in kept], name or f"{proto.graph.name or 'model'}_piece",
        [symbolic_like(ref.symbolic_inputs[n], ref.feed(n).shape) if n in ref.symbolic_inputs
         else _value_info(n, ref.feed(n)) for n in graph_inputs],
        [_value_info(o, np.asarray(ref.f32[o])) for o in outputs],
        [inits[n] for n in dict.fromkeys(consumed) if n in inits],
    )
    model = helper.make_model(graph, opset_imports=list(proto.opset_import), ir_version=proto.ir_version)
    model.functions.extend(proto.functions)
    return Piece(model, kept, graph_inputs, list(outputs))


def prefix_frontier(proto: onnx.ModelProto, k: int) -> list[str]:
    """Tensors produced by nodes ``0..k`` that a later node reads or that are graph
    outputs: what a prefix must return so that nothing it computed is invisible."""
    nodes = list(proto.graph.node)
    later = {n for node in nodes[k + 1:] for n in node_inputs(node)}
    declared = {o.name for o in proto.graph.output}
    return [o for node in nodes[:k + 1] for o in node.output if o and (o in later or o in declared)]


def feeds_for(p: Piece, ref: ReferenceValues) -> dict[str, np.ndarray]:
    """The arrays to feed a piece: the reference's values of its inputs."""
    return {n: ref.feed(n) for n in p.inputs}


def topo_check(proto: onnx.ModelProto) -> None:
    """Raise ValueError unless the main graph's nodes are in topological order (the
    ONNX spec requires it, IR.md "Graphs")."""
    seen = {i.name for i in proto.graph.input} | {t.name for t in proto.graph.initializer}
    for i, node in enumerate(proto.graph.node):
        for n in node_inputs(node):
            if n not in seen:
                raise ValueError(f"node {i} ({node.name or node.op_type}) reads {n!r} before it is produced")
        seen.update(o for o in node.output if o)


def describe(proto: onnx.ModelProto, i: int) -> dict[str, Any]:
    """``{"index", "name", "op_type", "domain", "inputs", "outputs"}`` of node ``i``."""
    n = proto.graph.node[i]
    return {"index": i, "name": n.name, "op_type": n.op_type, "domain": n.domain, "inputs": list(n.input),
            "outputs": list(n.output)}
