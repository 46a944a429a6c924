"""Both translated paths (XLA, Inductor) specialise symbolic input dims to the arrays the
job fixes (``--inputs`` / ``--input-shape``) by one shared rule (issue #13, item 22).

The model has a symbolic batch dim ``N`` flowing through MatMul, Add, Relu and a Reshape
whose target shape is computed from ``Shape(x)``; the FX converters need static shapes
from the IR, so without the rule ``inductor-cpu`` was ``unsupported`` while ``xla-cpu``
ran the same model.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.targets.base import LowerRequest
from compstack.targets.common.twopath import specialize_inputs
from models import reference

TRANSLATED = ("xla-cpu", "inductor-cpu")


def _symbolic_model() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((6, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    minus1 = numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")
    zero = numpy_helper.from_array(np.array([0], dtype=np.int64), "zero")
    one = numpy_helper.from_array(np.array([1], dtype=np.int64), "one")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("Shape", ["x"], ["sx"], name="shape"),
             helper.make_node("Slice", ["sx", "zero", "one"], ["n"], name="batch"),
             helper.make_node("Concat", ["n", "minus1"], ["target"], axis=0, name="target"),
             helper.make_node("Reshape", ["r", "target"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "sym", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", None])],
                              [w, b, minus1, zero, one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model, full_check=True)
    return model


def test_specialize_inputs_fixes_dims_and_reinfers() -> None:
    model = cir.canonicalize(_symbolic_model(), source="sym")
    assert not all(isinstance(d, int) for d in model.graph.inputs[0].shape)
    x = np.zeros((3, 5, 6), np.float32)
    fixed = specialize_inputs(model, {"x": x})
    assert tuple(fixed.graph.inputs[0].shape) == (3, 5, 6)
    assert tuple(fixed.graph.outputs[0].shape) == (3, 20)  # inferred through Shape/Slice/Concat/Reshape
    assert tuple(model.graph.inputs[0].shape)[0] != 3  # the caller's model is left as it was
    assert specialize_inputs(model, None) is model
    with pytest.raises(Exception, match="x"):
        specialize_inputs(model, {"x": np.zeros((3, 4, 6), np.float32)})  # contradicts a static dim


@pytest.mark.parametrize("target", TRANSLATED)
def test_translated_paths_take_the_fixed_shapes(target: str) -> None:
    cls = registry.get(target)
    if not cls.availability().ok:
        pytest.skip(f"{target} unavailable here")
    proto = _symbolic_model()
    model = cir.canonicalize(proto, source="sym")
    x = np.random.default_rng(0).standard_normal((3, 5, 6)).astype(np.float32)
    tgt = cls(cls.Options.from_strings({"path": "translated"}), LowerRequest(example_inputs={"x": x}))
    lowered = tgt.lower(model)
    assert lowered.path == "translated"
    out = lowered.compile().run({"x": x})
    want = reference(proto, {"x": x})["y"]
    assert out["y"].shape == (3, 20)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6)
