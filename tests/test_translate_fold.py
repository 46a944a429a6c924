"""Conversion-time folding of known values on real-model shapes (issue #23: xla-cpu
``failed@lower: cannot reshape array of size 1 into shape (1,128)`` on BERT-base).

BERT's exporter writes ``position_ids`` as ``GatherElements`` over a ``[1, 512]`` int64
buffer: every input is an initializer, so the translators fold it at conversion time,
where onnx.reference's GatherElements breaks once the gathered axis has more than 64
entries. Both translated paths (JAX for xla-cpu, FX for inductor-cpu/torchscript-cpu)
must fold it to the spec's value.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from translate_harness import run_fx, run_jax


def _gather_then_add(data: np.ndarray, index: np.ndarray, axis: int) -> onnx.ModelProto:
    """``y = GatherElements(data, index, axis) + x``: data and index are initializers."""
    nodes = [helper.make_node("GatherElements", ["data", "index"], ["g"], axis=axis),
             helper.make_node("Add", ["g", "x"], ["y"])]
    graph = helper.make_graph(nodes, "fold", [helper.make_tensor_value_info("x", onnx.TensorProto.INT64, index.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.INT64, index.shape)],
                              [numpy_helper.from_array(data, "data"), numpy_helper.from_array(index, "index")])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))


def _spec_value(data: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The ONNX spec's definition for 2-D, axis 1: ``out[i][j] = data[i][index[i][j]]``
    (a negative index counts from the end)."""
    out = np.empty(index.shape, data.dtype)
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            k = int(index[i, j])
            out[i, j] = data[i, k + data.shape[1] if k < 0 else k]
    return out


@pytest.mark.parametrize("run", [run_jax, pytest.param(run_fx, marks=pytest.mark.slow)], ids=["jax", "fx"])
def test_gather_elements_over_a_long_axis_folds_to_the_spec_value(run) -> None:
    pytest.importorskip("jax" if run is run_jax else "torch")
    rng = np.random.default_rng(0)
    data = np.arange(512, dtype=np.int64)[None, :] * 3 + 7  # BERT's position buffer, [1, 512]
    index = rng.integers(-512, 512, size=(1, 128)).astype(np.int64)
    x = rng.integers(0, 100, size=(1, 128)).astype(np.int64)
    (got,) = run(_gather_then_add(data, index, axis=1), {"x": x})
    np.testing.assert_array_equal(got, _spec_value(data, index) + x)


def test_the_float64_reference_gathers_a_long_axis_too() -> None:
    """The reference target and explain run onnx.reference with compstack's spec fixes
    (``reference_ops``): BERT's reference no longer falls back to ORT."""
    from onnx.reference import ReferenceEvaluator

    from compstack.ops._onnx import reference_ops

    rng = np.random.default_rng(1)
    data = rng.integers(0, 1000, size=(2, 512)).astype(np.int64)
    index = rng.integers(-512, 512, size=(2, 128)).astype(np.int64)
    x = np.zeros((2, 128), np.int64)
    proto = _gather_then_add(data, index, axis=1)
    (got,) = ReferenceEvaluator(proto, new_ops=reference_ops(proto)).run(None, {"x": x})
    np.testing.assert_array_equal(got, _spec_value(data, index))
