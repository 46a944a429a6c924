"""A custom op in ONNX terms: its ``OpSchema`` (checker and shape inference accept the
op) and its ``onnx.reference`` implementation (the ``reference`` target runs it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.defs
from onnx import helper

from compstack.ops._spec import DTYPES, CustomOp, OpDefinitionError, TensorType

__all__ = ["ONNX_DTYPE_NAMES", "make_schema", "reference_class", "reference_ops", "register_schema", "tensor_type"]

#: ONNX type strings of the dtypes a custom op may declare.
_TYPE_STR = {"float32": "tensor(float)", "float16": "tensor(float16)", "float64": "tensor(double)",
             "int8": "tensor(int8)", "uint8": "tensor(uint8)", "int32": "tensor(int32)",
             "int64": "tensor(int64)", "bool": "tensor(bool)"}
#: ``TensorProto`` code -> numpy dtype name.
ONNX_DTYPE_NAMES = {code: name for name, code in DTYPES.items()}
_ATTR_TYPE = {int: onnx.defs.OpSchema.AttrType.INT, bool: onnx.defs.OpSchema.AttrType.INT,
              float: onnx.defs.OpSchema.AttrType.FLOAT}


def make_schema(op: CustomOp) -> onnx.defs.OpSchema:
    """The ``OpSchema`` of ``op``, with a type-and-shape inference function that runs
    the op's shape rule."""
    S = onnx.defs.OpSchema
    constraints: list[tuple[str, list[str], str]] = []
    for var, dts in op.type_vars.items():
        constraints.append((var, [_TYPE_STR[d] for d in dts], f"dtypes of {var}"))

    def formal(p: Any, role: str) -> Any:
        if p.type_var:
            return S.FormalParameter(p.name, p.type_var)
        if len(p.dtypes) == 1:
            return S.FormalParameter(p.name, _TYPE_STR[p.dtypes[0]])
        var = f"T_{role}_{p.name}"
        constraints.append((var, [_TYPE_STR[d] for d in p.dtypes], f"dtypes of {p.name}"))
        return S.FormalParameter(p.name, var)

    inputs = [formal(p, "in") for p in op.inputs]
    outputs = [formal(p, "out") for p in op.outputs]
    attributes = []
    for name, attr in op.attrs:
        if attr.required:
            attributes.append(S.Attribute(name, _ATTR_TYPE[attr.kind], attr.doc, required=True))
        else:
            value = int(attr.default) if attr.kind is bool else attr.default
            attributes.append(S.Attribute(name, helper.make_attribute(name, value), attr.doc))
    schema = S(op.name, op.domain, op.version, op.doc, inputs=inputs, outputs=outputs,
               type_constraints=constraints, attributes=attributes)
    schema.set_type_and_shape_inference_function(_inference(op))
    return schema


def tensor_type(tp: onnx.TypeProto) -> TensorType | None:
    """A :class:`TensorType` of an ONNX tensor type; None when the element type is unknown."""
    if not tp.HasField("tensor_type") or tp.tensor_type.elem_type not in ONNX_DTYPE_NAMES:
        return None
    tt = tp.tensor_type
    shape: tuple[int | None, ...] = ()
    if tt.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return TensorType(shape, ONNX_DTYPE_NAMES[tt.elem_type])


def _attr_value(proto: onnx.AttributeProto | None) -> Any:
    return None if proto is None else helper.get_attribute_value(proto)


def _inference(op: CustomOp) -> Any:
    def infer(ctx: Any) -> None:
        types = []
        for i in range(ctx.get_num_inputs()):
            t = tensor_type(ctx.get_input_type(i)) if ctx.has_input(i) else None
            if t is None:
                return  # not enough known: leave outputs as they are
            types.append(t)
        attrs = {name: _attr_value(ctx.get_attribute(name)) for name, _ in op.attrs}
        try:
            outs = op.infer(types, {k: v for k, v in attrs.items() if v is not None})
        except OpDefinitionError as exc:
            raise onnx.shape_inference.InferenceError(f"[ShapeInferenceError] {exc}") from None
        for j, out in enumerate(outs):
            if j >= ctx.get_num_outputs():
                break
            ctx.set_output_type(j, helper.make_tensor_type_proto(DTYPES[out.dtype], list(out.shape)))

    return infer


def register_schema(op: CustomOp) -> None:
    """Register ``op``'s schema with ONNX (replacing an earlier one of the same name)."""
    if onnx.defs.has(op.name, op.version, op.domain):
        onnx.defs.deregister_schema(op.name, op.version, op.domain)
    onnx.defs.register_schema(make_schema(op))


def reference_class(op: CustomOp) -> type:
    """An ``onnx.reference.op_run.OpRun`` subclass running ``op``'s NumPy reference,
    for ``ReferenceEvaluator(..., new_ops=[...])``.

    Outputs keep the dtype the reference computes in (the float64 reference target
    feeds float64), or, when it runs at the declared precision, the inputs' dtype.
    """
    from onnx.reference.op_run import OpRun

    def _run(self: Any, *inputs: np.ndarray, **attrs: Any) -> tuple[np.ndarray, ...]:
        attrs = {k: v for k, v in attrs.items() if v is not None}
        return tuple(op.run_reference(*inputs, **attrs))

    return type(op.name, (OpRun,), {"op_domain": op.domain, "_run": _run,
                                    "__doc__": f"onnx.reference implementation of {op.qualname}"})


def reference_ops(proto: onnx.ModelProto) -> list[type]:
    """``new_ops`` for ``onnx.reference.ReferenceEvaluator``: the reference class of
    every registered custom op that ``proto``'s graph or functions use, and the
    spec fixes of :mod:`compstack.core.reference_fixes` for the stock ops they use."""
    from compstack.core.reference_fixes import spec_fixes
    from compstack.ops._registry import lookup

    seen: dict[str, type] = {}
    nodes = [*proto.graph.node, *(n for f in proto.functions for n in f.node)]
    for node in nodes:
        key = f"{node.domain}::{node.op_type}"
        if key not in seen and node.domain not in ("", "ai.onnx"):
            op = lookup(node.domain, node.op_type)
            if op is not None:
                seen[key] = reference_class(op)
    used = {n.op_type for n in nodes if n.domain in ("", "ai.onnx")}
    return [*seen.values(), *(fix for fix in spec_fixes() if fix.__name__ in used)]
