"""Tiny ONNX models for target tests, built with :mod:`onnx.helper` (no framework needed).

Each builder returns a checked ``onnx.ModelProto`` at opset 20 (compstack's default,
so no version conversion runs) with fixed, seeded weights. :func:`inputs_for` makes
matching random inputs and :func:`reference` runs ``onnx.reference.ReferenceEvaluator``
as the oracle.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "OPSET",
    "mlp",
    "conv_bn_relu",
    "conv_bn_relu_linear",
    "embedding",
    "two_outputs",
    "with_ops",
    "with_function",
    "inputs_for",
    "reference",
]

OPSET = 20


def _model(name: str, nodes: list, inputs: list, outputs: list, inits: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests")
    onnx.checker.check_model(model, full_check=True)
    return model


def _f32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def mlp(batch: int = 4, d_in: int = 16, d_out: int = 32) -> onnx.ModelProto:
    """``relu(x @ W + b)``: x float32 [batch, d_in] -> y float32 [batch, d_out]."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(_f32(rng, d_in, d_out, scale=0.3), "W"),
             numpy_helper.from_array(_f32(rng, d_out), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
             helper.make_node("Add", ["xw", "b"], ["xwb"], name="add"),
             helper.make_node("Relu", ["xwb"], ["y"], name="relu")]
    return _model("mlp", nodes,
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d_in])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, d_out])], inits)


def conv_bn_relu(n: int = 1, c: int = 3, hw: int = 16, k: int = 8) -> onnx.ModelProto:
    """Conv 3x3 (pad 1, bias) -> BatchNormalization (inference) -> Relu.

    x float32 [n, c, hw, hw] -> y float32 [n, k, hw, hw].
    """
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(_f32(rng, k, c, 3, 3, scale=0.3), "w"),
             numpy_helper.from_array(_f32(rng, k, scale=0.1), "bias"),
             numpy_helper.from_array((1.0 + _f32(rng, k, scale=0.1)), "gamma"),
             numpy_helper.from_array(_f32(rng, k, scale=0.1), "beta"),
             numpy_helper.from_array(_f32(rng, k, scale=0.1), "mean"),
             numpy_helper.from_array((np.abs(_f32(rng, k)) + 0.5).astype(np.float32), "var")]
    nodes = [helper.make_node("Conv", ["x", "w", "bias"], ["c"], name="conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"],
                              name="bn", epsilon=1e-5),
             helper.make_node("Relu", ["bn"], ["y"], name="relu")]
    return _model("conv_bn_relu", nodes,
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, k, hw, hw])], inits)


def embedding(batch: int = 2, seq: int = 5, vocab: int = 50, dim: int = 8) -> onnx.ModelProto:
    """Token embedding: ``table[ids] * 2`` with int64 ids [batch, seq] -> float32 [batch, seq, dim]."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(_f32(rng, vocab, dim), "table"),
             numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"], name="gather", axis=0),
             helper.make_node("Mul", ["emb", "two"], ["y"], name="scale")]
    return _model("embedding", nodes,
                  [helper.make_tensor_value_info("ids", TensorProto.INT64, [batch, seq])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, dim])], inits)


def two_outputs(n: int = 3, d: int = 7) -> onnx.ModelProto:
    """Two inputs, two outputs: ``(relu(a + b), sigmoid(a) * b)``, all float32 [n, d]."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y0"], name="relu"),
             helper.make_node("Sigmoid", ["a"], ["sa"], name="sigmoid"),
             helper.make_node("Mul", ["sa", "b"], ["y1"], name="mul")]
    vi = helper.make_tensor_value_info
    return _model("two_outputs", nodes,
                  [vi("a", TensorProto.FLOAT, [n, d]), vi("b", TensorProto.FLOAT, [n, d])],
                  [vi("y0", TensorProto.FLOAT, [n, d]), vi("y1", TensorProto.FLOAT, [n, d])], [])


def with_ops(*ops: str) -> onnx.ModelProto:
    """A model applying each op of ``ops`` (``Det``, ``MelWeightMatrix``...) to its own input.

    Used to check how a target reports ops it does not implement. ``Det`` takes a
    float32 [3, 3] matrix; ``MelWeightMatrix`` takes its five scalar inputs as graph
    inputs; any other op is applied as a unary op to float32 [4].
    """
    vi = helper.make_tensor_value_info
    nodes, inputs, outputs = [], [], []
    for i, op in enumerate(ops):
        if op == "Det":
            inputs.append(vi(f"x{i}", TensorProto.FLOAT, [3, 3]))
            nodes.append(helper.make_node("Det", [f"x{i}"], [f"y{i}"], name=f"det_{i}"))
            outputs.append(vi(f"y{i}", TensorProto.FLOAT, []))
        elif op == "MelWeightMatrix":
            names = [f"x{i}_{j}" for j in range(5)]
            inputs += [vi(n, TensorProto.INT64, []) for n in names[:3]]
            inputs += [vi(n, TensorProto.FLOAT, []) for n in names[3:]]
            nodes.append(helper.make_node("MelWeightMatrix", names, [f"y{i}"], name=f"mel_{i}"))
            outputs.append(vi(f"y{i}", TensorProto.FLOAT, [None, None]))
        else:
            inputs.append(vi(f"x{i}", TensorProto.FLOAT, [4]))
            nodes.append(helper.make_node(op, [f"x{i}"], [f"y{i}"], name=f"{op.lower()}_{i}"))
            outputs.append(vi(f"y{i}", TensorProto.FLOAT, [4]))
    return _model("with_ops", nodes, inputs, outputs, [])


def with_function(inner: str = "Relu", shape: tuple[int, ...] = (6,), calls: int = 2) -> onnx.ModelProto:
    """A graph calling a model-local function ``local::Block(x) = inner(x + 1)`` ``calls`` times.

    x float32 ``shape`` -> y float32 ``shape`` (a scalar for ``Det``). ``inner`` is an ONNX op taking one input
    (``Relu``; ``Det`` with ``shape=(3, 3), calls=1``).
    """
    one = helper.make_node("Constant", [], ["one"], name="one", value=numpy_helper.from_array(np.float32(1.0)))
    body = [one, helper.make_node("Add", ["x", "one"], ["s"], name="add"),
            helper.make_node(inner, ["s"], ["y"], name="inner")]
    func = helper.make_function("local", "Block", ["x"], ["y"], body,
                                opset_imports=[helper.make_opsetid("", OPSET)])
    names = ["x"] + [f"h{i}" for i in range(calls - 1)] + ["y"]
    nodes = [helper.make_node("Block", [names[i]], [names[i + 1]], name=f"block_{i}", domain="local")
             for i in range(calls)]
    out_shape = [] if inner == "Det" else list(shape)
    graph = helper.make_graph(nodes, "with_function",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    model = helper.make_model(graph, functions=[func], producer_name="tests",
                              opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    onnx.checker.check_model(model, full_check=True)
    return model


def inputs_for(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for every graph input that is not an initializer.

    Float inputs are standard normal; integer inputs are in ``[0, 50)`` (valid ids for
    :func:`embedding`). Every dim must be static.
    """
    rng = np.random.default_rng(seed)
    init_names = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init_names:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, 50, size=shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs by name from ``onnx.reference.ReferenceEvaluator``."""
    from onnx.reference import ReferenceEvaluator

    outs = ReferenceEvaluator(model).run(None, feeds)
    return {o.name: np.asarray(v) for o, v in zip(model.graph.output, outs, strict=False)}


def conv_bn_relu_linear(n: int = 2, c: int = 3, hw: int = 8, k: int = 4, out: int = 10) -> onnx.ModelProto:
    """Conv 3x3 (bias) -> BatchNormalization -> Relu -> Flatten -> Gemm (a Linear layer).

    x float32 [n, c, hw, hw] -> y float32 [n, out]. Node names: conv, bn, relu, flatten, linear.
    """
    base = conv_bn_relu(n=n, c=c, hw=hw, k=k)
    rng = np.random.default_rng(5)
    nodes = list(base.graph.node)
    nodes[-1].output[0] = "r"
    nodes += [helper.make_node("Flatten", ["r"], ["f"], name="flatten", axis=1),
              helper.make_node("Gemm", ["f", "wl", "bl"], ["y"], name="linear", transB=1)]
    inits = list(base.graph.initializer) + [numpy_helper.from_array(_f32(rng, out, k * hw * hw, scale=0.1), "wl"),
                                            numpy_helper.from_array(_f32(rng, out, scale=0.1), "bl")]
    return _model("conv_bn_relu_linear", nodes, list(base.graph.input),
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, out])], inits)
