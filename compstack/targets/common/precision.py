"""A model computing in float64: the float64 reference's rewrite of a float32 (or half)
model, shared by the ``reference`` target (``onnx.reference`` in float64) and the
``inductor-cpu`` ``precision=float64`` option (the eager float64 reference of a large model).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

__all__ = ["to_float64", "to_float64_model"]

_F32 = onnx.TensorProto.FLOAT
_F64 = onnx.TensorProto.DOUBLE
_F32_ONLY = frozenset({_F32})
_HALVES = frozenset({_F32, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})


def _retype(tp: onnx.TypeProto, widen: frozenset[int] = _F32_ONLY) -> None:
    if tp.HasField("tensor_type") and tp.tensor_type.elem_type in widen:
        tp.tensor_type.elem_type = _F64


def _retensor(t: onnx.TensorProto, widen: frozenset[int] = _F32_ONLY) -> None:
    if t.data_type in widen and t.data_location == onnx.TensorProto.EXTERNAL:
        t.data_type = _F64  # a weight left out of the proto (to_float64_model): its caller widens the data
    elif t.data_type in widen:
        arr = onnx.numpy_helper.to_array(t).astype(np.float64)
        t.CopyFrom(onnx.numpy_helper.from_array(arr, t.name))


def _retype_graph(g: onnx.GraphProto, widen: frozenset[int] = _F32_ONLY) -> None:
    for t in g.initializer:
        _retensor(t, widen)
    for v in list(g.input) + list(g.output) + list(g.value_info):
        _retype(v.type, widen)
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                _retensor(a.t, widen)
            elif a.type == onnx.AttributeProto.GRAPH:
                _retype_graph(a.g, widen)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _retype_graph(sub, widen)
            elif a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i in widen:
                # Cast(to=FLOAT), EyeLike/RandomNormal(dtype=FLOAT) compute in float64 too.
                a.i = _F64


def _narrowing_casts(proto: onnx.ModelProto) -> list[int]:
    """Main-graph nodes ``Cast(x: double, to=FLOAT)``: a narrowing the model asks for
    (rounding to float32, overflow to Inf), which the float64 copy must keep."""
    try:
        typed = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - no types: nothing is known to be double
        return []
    doubles = {v.name for v in [*typed.graph.input, *typed.graph.value_info]
               if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == _F64}
    doubles |= {t.name for t in proto.graph.initializer if t.data_type == _F64}
    return [k for k, n in enumerate(proto.graph.node) if n.op_type == "Cast" and n.input and n.input[0] in doubles
            and any(a.name == "to" and a.i == _F32 for a in n.attribute)]


def _keep_narrowing(g: onnx.GraphProto, nodes: list[int]) -> None:
    """``Cast(to=FLOAT)`` then ``Cast(to=DOUBLE)`` for each of ``nodes`` (indices, in order)."""
    for k in reversed(nodes):
        node = g.node[k]
        for a in node.attribute:
            if a.name == "to":
                a.i = _F32
        out = node.output[0]
        node.output[0] = f"{out}__narrowed_f32"
        g.node.insert(k + 1, onnx.helper.make_node("Cast", [node.output[0]], [out], to=_F64))


def to_float64(proto: onnx.ModelProto, halves: bool = False) -> onnx.ModelProto:
    """A copy of ``proto`` that computes every float32 tensor in float64.

    Rewrites initializers, ``Constant`` tensors, ``Cast``/``dtype`` attributes that
    name float32, and the declared types of inputs, outputs and value_info
    (subgraphs included); a ``Cast`` of a double tensor to float32 keeps its rounding and
    overflow (float32 ``Cast``, then back to double). Other dtypes (float16, integers) are left as they are,
    unless ``halves``: then float16 and bfloat16 are computed in float64 too (the
    float64 reference of a half-precision model, whose noise floor is the model run
    in its own precision).
    """
    widen = _HALVES if halves else _F32_ONLY
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    narrowing = _narrowing_casts(proto)
    _retype_graph(out.graph, widen)
    _keep_narrowing(out.graph, narrowing)
    for f in out.functions:
        for node in f.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    _retensor(a.t, widen)
    return out


def to_float64_model(model: Any, halves: bool = False) -> Any:
    """:func:`to_float64` of an ``onnx_ir.Model`` without a protobuf copy of its weights.

    The rules are :func:`to_float64`'s, applied to the model with every initializer left
    out (an external-data placeholder of its dtype and shape); then each float32 one is
    widened into a fresh, writable float64 array, one by one, and every other one is the
    model's own tensor again. ``model`` itself is unchanged (its tensors are put back).
    Through protobuf the copies had reached about 7 times the float32 weights (distilbert:
    1.8 GB for 265 MB), and sd-unet's eager float64 reference was killed at 18 GB.

    Args:
        model: an ``onnx_ir.Model``.
        halves: as :func:`to_float64`.

    Returns:
        A new ``onnx_ir.Model``.
    """
    import onnx_ir as ir

    dtypes = {ir.DataType(d) for d in (_HALVES if halves else _F32_ONLY)}  # onnx_ir's enum has TensorProto's values
    left = {name: v.const_value for name, v in model.graph.initializers.items() if v.const_value is not None}
    try:
        for name, t in left.items():
            model.graph.initializers[name].const_value = ir.ExternalTensor(
                "compstack-detached", 0, t.nbytes, t.dtype, shape=t.shape, name=name)
        skeleton = ir.serde.serialize_model(model)  # not cir.to_proto: it would read external data back in
    finally:
        for name, t in left.items():
            model.graph.initializers[name].const_value = t
    out = ir.from_proto(to_float64(skeleton, halves))
    del skeleton
    for name, t in left.items():
        value = out.graph.initializers[name]
        value.const_value = ir.Tensor(np.array(t.numpy(), dtype=np.float64), name=name) if t.dtype in dtypes else t
    return out
