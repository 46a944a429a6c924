"""A 0-d (scalar) graph input reaches every stack as a 0-d array (issue #13, item 20).

``np.ascontiguousarray`` returns an array of at least one dimension, so a scalar fed
through it becomes shape ``[1]``: TVM then rejects it ("expect Tensor with ndim 0"), IREE
reports a rank mismatch. The model below takes a 0-d ``scale`` and a ``[3, 4]`` ``x`` and
returns ``x * scale`` and ``scale + 1`` (a 0-d output), so a target that ran a ``[1]``
signature also returns a ``[1]`` output, which the shape check catches.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.inputs import contiguous
from compstack.targets.base import LowerRequest

CPU = ("reference", "ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu")


def _scalar_model() -> onnx.ModelProto:
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Mul", ["x", "scale"], ["y"], name="mul"),
             helper.make_node("Add", ["scale", "one"], ["s1"], name="add")]
    graph = helper.make_graph(nodes, "scalar",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                               helper.make_tensor_value_info("scale", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4]),
                               helper.make_tensor_value_info("s1", TensorProto.FLOAT, [])], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model, full_check=True)
    return model


def test_contiguous_keeps_rank() -> None:
    scalar = np.array(2.5, dtype=np.float32)
    assert contiguous(scalar).shape == () and contiguous(scalar).dtype == np.float32
    strided = np.arange(12, dtype=np.int64).reshape(3, 4).T
    out = contiguous(strided)
    assert out.flags["C_CONTIGUOUS"] and out.shape == (4, 3) and np.array_equal(out, strided)
    assert contiguous(out) is out  # already contiguous: no copy


@pytest.mark.parametrize("target", CPU)
def test_scalar_input_stays_0d(target: str) -> None:
    cls = registry.get(target)
    if not cls.availability().ok:
        pytest.skip(f"{target} unavailable here")
    model = cir.canonicalize(_scalar_model(), source="scalar")
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    scale = np.array(-1.75, dtype=np.float32)
    tgt = cls(None, LowerRequest(example_inputs={"x": x, "scale": scale}))
    compiled = tgt.lower(model).compile()
    out = compiled.run({"x": x, "scale": scale})
    assert out["y"].shape == (3, 4) and out["s1"].shape == (), (target, {k: v.shape for k, v in out.items()})
    np.testing.assert_allclose(out["y"], x * scale, rtol=1e-6)
    assert float(out["s1"]) == pytest.approx(-0.75)
    call = compiled.prepare({"x": x, "scale": -scale})  # the latency path places inputs itself
    call()


@pytest.mark.parametrize("target", ("tvm-llvm", "iree-llvm-cpu"))
def test_scalar_input_profiles(target: str) -> None:
    """The per-kernel profile feeds the same 0-d input (IREE writes it to a ``.npy`` file
    for ``iree-benchmark-module``, which checks the function's signature)."""
    from compstack.core.latency import LatencyConfig

    cls = registry.get(target)
    if not cls.availability().ok:
        pytest.skip(f"{target} unavailable here")
    model = cir.canonicalize(_scalar_model(), source="scalar")
    feeds = {"x": np.ones((3, 4), np.float32), "scale": np.array(3.0, np.float32)}
    compiled = cls().lower(model).compile_with_kernels()
    kmap = compiled.kernels()
    prof = compiled.profile([feeds], LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0, input_sets=1), kmap)
    assert prof is not None and prof.runs >= 3 and prof.kernel_sum["median"] > 0

