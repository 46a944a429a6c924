"""Undefined behaviour in a model on its inputs: the rules every judging command applies.

:func:`undefined_behaviour` covers integer division by zero, Cast of NaN/Inf/out-of-range
floats to integers, NaN Clip bounds and random ops; :func:`undefined` adds integer overflow (ONNX leaves wrap-around of signed integer arithmetic unspecified:
Operators.md says nothing, C and the stacks' codegen treat it as undefined), found by
recomputing each integer arithmetic node in float64 on the reference's values, and a
zero norm in LpNormalization (``x / ||x||_p`` of an all-zero vector is 0/0; Operators.md#LpNormalization
gives no rule, the reference evaluator returns 0 and compilers return NaN).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import onnx
from onnx import helper

__all__ = ["undefined", "undefined_behaviour", "integer_overflow", "zero_norm"]

_ARITH = frozenset({"Add", "Sub", "Mul", "Neg", "Abs", "Sum", "ReduceSum", "ReduceProd", "ReduceSumSquare",
                    "ReduceL1", "CumSum", "MatMul", "Gemm", "Pow", "ScatterElements", "ScatterND", "Div"})


_RANDOM = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                     "Bernoulli"})


def undefined_behaviour(proto: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> list[str]:
    """Nodes whose inputs trigger behaviour the ONNX spec leaves undefined.

    Checked (ONNX Operators.md): integer ``Div``/``Mod`` by zero; ``Cast`` of NaN,
    Inf or out-of-range floats to an integer type; ``Clip`` with a NaN bound; and ops
    whose outputs are random by definition (``RandomNormal[Like]``,
    ``RandomUniform[Like]``, ``Multinomial``, ``Bernoulli``, ``Dropout`` in training
    mode), which no two runs need agree on.

    Returns:
        One line per offending node (empty: none).
    """
    out = []
    for node in proto.graph.node:
        ins = [values.get(i) for i in node.input]
        label = node.name or node.op_type
        training = node.op_type == "Dropout" and len(ins) > 2 and ins[2] is not None and bool(np.asarray(ins[2]))
        if node.op_type in _RANDOM or training:
            out.append(f"{label}: {node.op_type} is random{' (training mode)' if training else ''}; "
                       "runs need not agree")
        elif node.op_type in ("Div", "Mod") and len(ins) == 2 and ins[1] is not None \
                and np.asarray(ins[1]).dtype.kind in "iu" and np.any(np.asarray(ins[1]) == 0):
            out.append(f"{label}: integer {node.op_type} by zero")
        elif node.op_type == "Cast" and ins and ins[0] is not None and np.asarray(ins[0]).dtype.kind == "f":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            dt = onnx.helper.tensor_dtype_to_np_dtype(to) if to else None
            if dt is not None and np.dtype(dt).kind in "iu":
                x = np.asarray(ins[0], dtype=np.float64)
                info = np.iinfo(dt)
                if np.any(~np.isfinite(x)) or np.any(x < info.min) or np.any(x > info.max):
                    out.append(f"{label}: Cast of NaN/Inf or out-of-range values to {np.dtype(dt).name}")
        elif node.op_type == "Clip" and any(v is not None and np.asarray(v).dtype.kind == "f"
                                             and np.any(np.isnan(np.asarray(v))) for v in ins[1:]):
            out.append(f"{label}: Clip with a NaN bound")
    return out


def integer_overflow(proto: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> list[str]:
    """Integer arithmetic nodes whose exact (float64) result differs from the wrapped one."""
    from onnx.reference import ReferenceEvaluator

    out = []
    for node in proto.graph.node:
        if node.op_type not in _ARITH or not node.output or node.output[0] not in values:
            continue
        res = np.asarray(values[node.output[0]])
        if res.dtype.kind not in "iu":
            continue
        ins = [np.asarray(values[i]) if i else None for i in node.input]
        feeds: dict[str, np.ndarray] = {}
        names: list[str] = []
        for k, (_name, v) in enumerate(zip(node.input, ins)):
            if v is None:
                names.append("")
                continue
            keep = v.dtype == np.int64 and (node.op_type in ("CumSum", "ReduceSum", "ReduceProd", "ReduceSumSquare",
                                                             "ReduceL1") and k == 1 or node.op_type.startswith(
                "Scatter") and k == 1)
            feeds[f"i{k}"] = v if keep else v.astype(np.float64)
            names.append(f"i{k}")
        n = helper.make_node(node.op_type, names, ["y"], **{a.name: helper.get_attribute_value(a)
                                                             for a in node.attribute})
        graph = helper.make_graph([n], "ub", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(
            v.dtype), list(v.shape)) for k, v in feeds.items()], [helper.make_tensor_value_info("y", 0, None)])
        try:
            sess = ReferenceEvaluator(helper.make_model(graph, opset_imports=list(proto.opset_import)))
            exact = np.asarray(list(sess.run(None, feeds))[0])
        except Exception:  # noqa: BLE001 - cannot recompute: assume the worst
            out.append(f"{node.name}: integer {node.op_type} (overflow not checkable)")
            continue
        if node.op_type == "Div":
            exact = np.trunc(exact)
        if not np.array_equal(np.asarray(exact, np.float64), res.astype(np.float64)):
            out.append(f"{node.name}: integer overflow in {node.op_type} ({res.dtype})")
    return out


def zero_norm(proto: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> list[str]:
    """LpNormalization nodes whose input has an all-zero vector along ``axis`` (default -1)."""
    out = []
    for node in proto.graph.node:
        if node.op_type != "LpNormalization" or not node.input or node.input[0] not in values:
            continue
        x = np.asarray(values[node.input[0]])
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), -1)
        if x.ndim and np.any(np.all(x == 0, axis=int(axis))):
            out.append(f"{node.name}: LpNormalization of an all-zero vector (0/0)")
    return out


def undefined(proto: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> list[str]:
    """Every undefined-behaviour finding of ``proto`` on ``values`` (one line each)."""
    return undefined_behaviour(proto, values) + integer_overflow(proto, values) + zero_norm(proto, values)
