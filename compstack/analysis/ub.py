"""Undefined behaviour in a model on its inputs: the rules every judging command applies.

:func:`undefined_behaviour` covers integer division by zero, Cast of NaN/Inf/out-of-range
floats to integers, NaN Clip bounds and random ops; :func:`undefined` adds integer overflow (ONNX leaves wrap-around of signed integer arithmetic unspecified:
Operators.md says nothing, C and the stacks' codegen treat it as undefined), found by
recomputing each integer arithmetic node in float64 on the reference's values, and a
zero norm in LpNormalization (``x / ||x||_p`` of an all-zero vector is 0/0; Operators.md#LpNormalization
gives no rule, the reference evaluator returns 0 and compilers return NaN).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import onnx
from onnx import helper

__all__ = ["undefined", "undefined_behaviour", "integer_overflow", "observable", "zero_norm"]

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
    return [line for _node, line in _findings(proto, values)]


def _cast_out_of_range(node: onnx.NodeProto, x: np.ndarray | None) -> np.dtype | None:
    """The integer dtype a ``Cast`` node's float input ``x`` holds NaN/Inf or out-of-range
    values for (None: no such values, or not a float-to-integer Cast)."""
    if node.op_type != "Cast" or x is None or np.asarray(x).dtype.kind != "f":
        return None
    to = next((a.i for a in node.attribute if a.name == "to"), 0)
    dt = onnx.helper.tensor_dtype_to_np_dtype(to) if to else None
    if dt is None or np.dtype(dt).kind not in "iu":
        return None
    v, info = np.asarray(x, dtype=np.float64), np.iinfo(dt)
    return np.dtype(dt) if np.any(~np.isfinite(v)) or np.any(v < info.min) or np.any(v > info.max) else None


def _findings(proto: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> list[tuple[onnx.NodeProto, str]]:
    out = []
    for node in proto.graph.node:
        ins = [values.get(i) for i in node.input]
        label = node.name or node.op_type
        training = node.op_type == "Dropout" and len(ins) > 2 and ins[2] is not None and bool(np.asarray(ins[2]))
        if node.op_type in _RANDOM or training:
            mode = " (training mode)" if training else ""
            out.append((node, f"{label}: {node.op_type} is random{mode}; runs need not agree"))
        elif node.op_type in ("Div", "Mod") and len(ins) == 2 and ins[1] is not None \
                and np.asarray(ins[1]).dtype.kind in "iu" and np.any(np.asarray(ins[1]) == 0):
            out.append((node, f"{label}: integer {node.op_type} by zero"))
        elif (dt := _cast_out_of_range(node, ins[0] if ins else None)) is not None:
            out.append((node, f"{label}: Cast of NaN/Inf or out-of-range values to {dt.name}"))
        elif node.op_type == "Clip" and any(v is not None and np.asarray(v).dtype.kind == "f"
                                             and np.any(np.isnan(np.asarray(v))) for v in ins[1:]):
            out.append((node, f"{label}: Clip with a NaN bound"))
    return out


#: The domain of :class:`_CastFill`, the stand-in for a Cast whose out-of-range results are set.
_FILL_DOMAIN = "compstack.ub"


def _cast_fill() -> type:
    from onnx.reference.op_run import OpRun

    class CastFill(OpRun):  # type: ignore[misc]  # onnx.reference has no type stubs
        """``Cast`` to an integer type with every NaN/Inf/out-of-range element set to ``fill``."""

        op_domain = _FILL_DOMAIN

        def _run(self, x, to=None, fill=None):  # type: ignore[no-untyped-def]  # OpRun's protocol
            dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to))
            v, info = np.asarray(x, np.float64), np.iinfo(dt)
            bad = ~np.isfinite(v) | (v < info.min) | (v > info.max)
            y = np.where(bad, 0, v).astype(dt)
            y[bad] = fill
            return (y,)

    return CastFill


def _filled(proto: onnx.ModelProto, names: set[str], fill: str) -> onnx.ModelProto:
    """``proto`` with the Cast nodes producing ``names`` replaced by :class:`CastFill`
    (``fill``: ``min``, ``zero`` or ``max`` of each one's target type)."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    for node in out.graph.node:
        if node.op_type == "Cast" and node.output and node.output[0] in names:
            info = np.iinfo(onnx.helper.tensor_dtype_to_np_dtype(next(a.i for a in node.attribute if a.name == "to")))
            node.op_type, node.domain = "CastFill", _FILL_DOMAIN
            node.attribute.append(helper.make_attribute("fill", {"min": int(info.min), "zero": 0,
                                                                 "max": int(info.max)}[fill]))
    out.opset_import.append(helper.make_opsetid(_FILL_DOMAIN, 1))
    return out


Evaluate = Callable[[onnx.ModelProto, list[type]], Mapping[str, np.ndarray]]


def observable(proto: onnx.ModelProto, values: Mapping[str, np.ndarray],
               evaluate: Evaluate) -> tuple[list[str], list[str]]:
    """The findings of :func:`undefined` split into those whose values can reach a graph
    output and those no output sees.

    A ``Cast`` of NaN/Inf/out-of-range floats to an integer type is undefined only in the
    elements it casts (Operators.md#Cast); a model may discard exactly those elements later
    (T5's relative position buckets cast ``log(0) = -inf`` to int64 and a ``Where`` drops
    them). Such a Cast is *masked* when the model evaluated with those elements set to the
    target type's minimum, 0 and maximum gives bit-identical graph outputs (NaN equal to
    NaN) in all three: whatever a stack puts there, the outputs cannot depend on it on these
    inputs. Every other rule is kept as it fires (conservative).

    Args:
        proto: the model (its own precision).
        values: every tensor of ``proto`` on the compared input set, by name (as for :func:`undefined`).
        evaluate: runs a model on the compared inputs with extra ``onnx.reference`` op
            classes and returns its tensors by name (at least the graph outputs).

    Returns:
        ``(findings, masked)``: one line each; a masked Cast's line says why it was set aside.
        A stand-in evaluation that raises keeps the Cast's finding (never masks on doubt).
    """
    found = _findings(proto, values)
    casts = {n.output[0]: line for n, line in found if n.op_type == "Cast" and n.output}  # its one rule: out of range
    rest = integer_overflow(proto, values) + zero_norm(proto, values)
    if not casts:
        return [line for _n, line in found] + rest, []
    outs = [o.name for o in proto.graph.output]
    fill_op = _cast_fill()

    def same(names: set[str]) -> bool:
        try:
            runs = [evaluate(_filled(proto, names, f), [fill_op]) for f in ("min", "zero", "max")]
            return all(np.array_equal(np.asarray(r[o]), np.asarray(runs[0][o]),
                                      equal_nan=np.asarray(r[o]).dtype.kind in "fc") for r in runs[1:] for o in outs)
        except Exception:  # noqa: BLE001 - cannot tell: the finding stays
            return False

    masked = set(casts) if same(set(casts)) else {c for c in casts if len(casts) > 1 and same({c})}
    kept = [line for n, line in found if not (n.op_type == "Cast" and n.output and n.output[0] in masked)]
    return kept + rest, [f"{casts[c]}, but no output depends on those elements (the outputs are identical with "
                         "them set to the type's min, 0 and max)" for c in sorted(masked)]


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
