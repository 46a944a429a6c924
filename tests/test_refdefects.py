"""The table of known onnx.reference defects: each entry against a hand-computed value.

The expected numbers are written from the spec's formula by hand (small inputs, the
arithmetic spelled out), never by the code under test. Each test also runs the
uncorrected ``onnx.reference`` to show the defect is real in the installed onnx; when a
release fixes it, that assertion fails and the entry can go.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

from compstack.analysis.refdefects import DEFECTS, _max_pool, corrected_ops, defects_for


def _model(op: str, opset: int, shapes: list[list[int]], outputs: int = 1, **attrs: object):
    names = [f"x{i}" for i in range(len(shapes))]
    outs = [h.make_tensor_value_info("y", T.DOUBLE, None), h.make_tensor_value_info("i", T.INT64, None)][:outputs]
    g = h.make_graph([h.make_node(op, names, [o.name for o in outs], **attrs)], "g",
                     [h.make_tensor_value_info(n, T.DOUBLE, s) for n, s in zip(names, shapes)], outs)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _both(model, *xs: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    fixed = ReferenceEvaluator(model, new_ops=corrected_ops(model)).run(None, feeds)[0]
    try:
        raw = ReferenceEvaluator(model).run(None, feeds)[0]
    except ValueError:  # the defect may be a crash (Mean broadcasting in place: numpy refuses)
        raw = None
    return np.asarray(fixed), raw


# x = [[[0, 1], [2, 3]]] (shape [1, 2, 2]) at axis=1: one coerced row [0, 1, 2, 3].
_X = np.array([[[0.0, 1.0], [2.0, 3.0]]])
_E = [math.exp(v) for v in (0.0, 1.0, 2.0, 3.0)]
_S = sum(_E)


@pytest.mark.parametrize("opset", [11, 12])
def test_softmax_opset_11_12_is_coerced_2d(opset: int) -> None:
    fixed, raw = _both(_model("Softmax", opset, [[1, 2, 2]], axis=1), _X)
    want = np.array([[[_E[0] / _S, _E[1] / _S], [_E[2] / _S, _E[3] / _S]]])
    assert np.allclose(fixed, want, rtol=1e-12)
    assert raw is not None and not np.allclose(raw, want)  # onnx.reference normalises along axis 1 only


def test_logsoftmax_opset_11_is_coerced_2d() -> None:
    fixed, raw = _both(_model("LogSoftmax", 11, [[1, 2, 2]], axis=1), _X)
    want = np.array([[[v - math.log(_S) for v in (0.0, 1.0)], [v - math.log(_S) for v in (2.0, 3.0)]]])
    assert np.allclose(fixed, want, rtol=1e-12)
    assert raw is not None and not np.allclose(raw, want)


def test_hardmax_opset_11_one_per_coerced_row() -> None:
    fixed, raw = _both(_model("Hardmax", 11, [[1, 2, 2]], axis=1), _X)
    want = np.array([[[0.0, 0.0], [0.0, 1.0]]])  # the maximum of the row [0, 1, 2, 3] is the last
    assert np.array_equal(fixed, want)
    assert raw is not None and not np.array_equal(raw, want)


def test_softmax_default_axis_is_the_old_opsets() -> None:
    fixed, _ = _both(_model("Softmax", 11, [[1, 2, 2]]), _X)  # no axis: 1 before opset 13
    assert np.allclose(fixed.sum(), 1.0) and np.isclose(fixed[0, 1, 1], _E[3] / _S)


def test_softmax_opset_13_is_left_to_onnx_reference() -> None:
    assert not defects_for(_model("Softmax", 13, [[1, 2, 2]], axis=1))


def test_lpnormalization_p1_divides_by_the_l1_norm() -> None:
    x = np.array([[3.0, -1.0], [-2.0, -2.0]])
    fixed, raw = _both(_model("LpNormalization", 11, [[2, 2]], axis=1, p=1), x)
    want = np.array([[3.0 / 4.0, -1.0 / 4.0], [-2.0 / 4.0, -2.0 / 4.0]])  # |3| + |-1| = 4, |-2| + |-2| = 4
    assert np.allclose(fixed, want, rtol=1e-12)
    assert raw is not None and not np.allclose(raw, want)


def test_lpnormalization_p2_default() -> None:
    fixed, _ = _both(_model("LpNormalization", 11, [[1, 2]]), np.array([[3.0, 4.0]]))
    assert np.allclose(fixed, [[0.6, 0.8]], rtol=1e-12)  # 3-4-5


def test_lrn_window_is_the_specs() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 4, 1, 1)
    fixed, raw = _both(_model("LRN", 13, [[1, 4, 1, 1]], size=3, alpha=0.25, beta=0.5, bias=2.0), x)
    # size 3: channel c sums squares of c-1..c+1 (clipped): 1+4, 1+4+9, 4+9+16, 9+16
    sums = [5.0, 14.0, 29.0, 25.0]
    want = np.array([v / (2.0 + 0.25 / 3 * s) ** 0.5 for v, s in zip([1.0, 2.0, 3.0, 4.0], sums)]).reshape(1, 4, 1, 1)
    assert np.allclose(fixed, want, rtol=1e-12)
    assert raw is not None and not np.allclose(raw, want)


def test_lrn_even_size_window() -> None:
    x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1)
    fixed, _ = _both(_model("LRN", 13, [[1, 3, 1, 1]], size=2, alpha=1.0, beta=1.0, bias=1.0), x)
    # size 2: floor(1/2) = 0 below, ceil(1/2) = 1 above: c..c+1 -> 1+4, 4+9, 9
    want = np.array([1.0 / (1 + 5 / 2), 2.0 / (1 + 13 / 2), 3.0 / (1 + 9 / 2)]).reshape(1, 3, 1, 1)
    assert np.allclose(fixed, want, rtol=1e-12)


def test_mean_broadcasts_out_of_place() -> None:
    a, b = np.array([[1.0, 2.0]]), np.array([[3.0, 4.0], [5.0, 8.0]])
    fixed, raw = _both(_model("Mean", 13, [[1, 2], [2, 2]]), a, b)
    want = np.array([[(1 + 3) / 2, (2 + 4) / 2], [(1 + 5) / 2, (2 + 8) / 2]])
    assert np.allclose(fixed, want, rtol=1e-12)
    assert raw is None or not np.allclose(raw, want)  # onnx 1.23 raises: in-place += cannot broadcast


def test_averagepool_ceil_mode_window_divides_by_the_input_and_pads_it_covers() -> None:
    # x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], kernel 2, stride 2, ceil_mode: windows [0, 1] and
    # [2, (3)] on each axis, count_include_pad=1 and no pads: the overhang (3) is no pad.
    # (0,0): (1+2+4+5)/4 = 3; (0,1): (3+6)/2 = 4.5; (1,0): (7+8)/2 = 7.5; (1,1): 9/1 = 9.
    m = _model("AveragePool", 20, [[1, 1, 3, 3]], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
               count_include_pad=1)
    np.testing.assert_allclose(_both(m, np.arange(1.0, 10.0).reshape(1, 1, 3, 3))[0].ravel(), [3.0, 4.5, 7.5, 9.0])
    # x = 1..7, kernel 3, stride 3, ceil_mode: windows [1, 2, 3], [4, 5, 6], [7, (8), (9)]: 2, 5, 7 with
    # either count_include_pad (onnx 1.23's reference: [1.5, 4, 6] and [1, 4, 6]).
    for cip in (0, 1):
        m = _model("AveragePool", 20, [[1, 1, 7]], kernel_shape=[3], strides=[3], ceil_mode=1, count_include_pad=cip)
        fixed, raw = _both(m, np.arange(1.0, 8.0).reshape(1, 1, 7))
        np.testing.assert_allclose(fixed.ravel(), [2.0, 5.0, 7.0])
        assert raw is not None and not np.allclose(raw.ravel(), [2.0, 5.0, 7.0])  # the defect, in this onnx
    # HF EfficientNet's pooler, AvgPool2d(1280, ceil_mode=True) on a 7x7 map: the mean, 1 for ones.
    m = _model("AveragePool", 20, [[1, 1, 7, 7]], kernel_shape=[1280, 1280], strides=[1280, 1280], ceil_mode=1,
               count_include_pad=1)
    fixed, raw = _both(m, np.ones((1, 1, 7, 7)))
    assert fixed.ravel().tolist() == [1.0] and raw is not None and abs(float(raw.ravel()[0]) - 1.0) > 0.1
    # count_include_pad=1 with a real pad still counts the pad: [1, 2, 3] padded [0, 1, 2, 3], kernel 2,
    # stride 2: (0+1)/2 = 0.5, (2+3)/2 = 2.5.
    m = _model("AveragePool", 20, [[1, 1, 3]], kernel_shape=[2], strides=[2], pads=[1, 0], count_include_pad=1)
    np.testing.assert_allclose(_both(m, np.array([[[1.0, 2.0, 3.0]]]))[0].ravel(), [0.5, 2.5])


def test_maxpool_stride_1_with_pads_is_the_max_over_each_window() -> None:
    # x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], kernel 3, stride 1, pads 1, ceil_mode (GoogLeNet's
    # MaxPool2d(3, 1, 1, ceil_mode=True)): each output is the max of the 3x3 neighbourhood inside x,
    # 3x3 out; onnx 1.23's reference returns 5x5.
    m = _model("MaxPool", 20, [[1, 1, 3, 3]], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], ceil_mode=1)
    fixed, raw = _both(m, np.arange(1.0, 10.0).reshape(1, 1, 3, 3))
    assert fixed.shape == (1, 1, 3, 3) and fixed.ravel().tolist() == [5, 6, 6, 8, 9, 9, 8, 9, 9]
    assert raw is not None and raw.shape == (1, 1, 5, 5)  # the defect, in this onnx
    # 1-D, x = [1, 5, 2, 4, 3], kernel 3, stride 1, pads 1, floor mode: windows [-, 1, 5], [1, 5, 2],
    # [5, 2, 4], [2, 4, 3], [4, 3, -] -> [5, 5, 5, 4, 4]; onnx 1.23's reference raises IndexError.
    m = _model("MaxPool", 20, [[1, 1, 5]], kernel_shape=[3], strides=[1], pads=[1, 1])
    x = np.array([[[1.0, 5.0, 2.0, 4.0, 3.0]]])
    assert ReferenceEvaluator(m, new_ops=corrected_ops(m)).run(None, {"x0": x})[0].ravel().tolist() == [5, 5, 5, 4, 4]
    with pytest.raises(IndexError):
        ReferenceEvaluator(m).run(None, {"x0": x})
    # ceil mode drops a window that would start in the end pad: [3, 1, 4, 1, 5] padded [-, 3, 1, 4, 1, 5, -],
    # kernel 2, stride 2: ceil((7 - 2) / 2) + 1 = 4 windows, the 4th would start at 6 (the end pad): [3, 4, 5].
    m = _model("MaxPool", 20, [[1, 1, 5]], kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1)
    assert _both(m, np.array([[[3.0, 1.0, 4.0, 1.0, 5.0]]]))[0].ravel().tolist() == [3, 4, 5]
    # auto_pad=SAME_LOWER, 1..7, kernel 3, stride 2: ceil(7 / 2) = 4 outputs, (4 - 1) * 2 + 3 - 7 = 2 pads,
    # one a side: [-, 1, 2], [2, 3, 4], [4, 5, 6], [6, 7, -] -> [2, 4, 6, 7]; onnx 1.23's reference: [3, 5, 7].
    m = _model("MaxPool", 20, [[1, 1, 7]], kernel_shape=[3], strides=[2], auto_pad="SAME_LOWER")
    fixed, raw = _both(m, np.arange(1.0, 8.0).reshape(1, 1, 7))
    assert fixed.ravel().tolist() == [2, 4, 6, 7] and raw is not None and raw.ravel().tolist() != [2, 4, 6, 7]


def test_maxpool_indices_are_where_each_maximum_is() -> None:
    """The Indices output (Operators.md#MaxPool: an index into x flattened, batch and channel
    included, pads not counted) equals PyTorch's ``return_indices`` plus the (n, c) plane's
    offset on 1-D/2-D/3-D pools with pads, dilation and ceil mode; it was the evaluator's,
    which is wrong on its stride-1 path."""
    torch = pytest.importorskip("torch")
    import itertools

    rng = np.random.default_rng(0)
    for nd, (k, s, p, d, ceil) in itertools.product((1, 2, 3), itertools.product((2, 3), (1, 2), (0, 1), (1, 2), (0, 1))):
        shape = [2, 3, *[7, 6, 5][:nd]]
        x = rng.standard_normal(shape)
        attrs = {"kernel_shape": [k] * nd, "strides": [s] * nd, "pads": [p] * 2 * nd, "dilations": [d] * nd,
                 "ceil_mode": ceil}
        m = _model("MaxPool", 20, [shape], outputs=2, **attrs)
        y, idx = ReferenceEvaluator(m, new_ops=corrected_ops(m)).run(None, {"x0": x})
        ty, ti = getattr(torch.nn.functional, f"max_pool{nd}d")(torch.tensor(x), k, s, p, d, ceil_mode=bool(ceil),
                                                                 return_indices=True)
        plane = int(np.prod(shape[2:]))
        assert np.array_equal(y, ty.numpy()), attrs
        assert idx.dtype == np.int64 and np.array_equal(idx, ti.numpy() + np.arange(6).reshape(2, 3, *[1] * nd) * plane), attrs
    # x = 0..31 as [1, 2, 4, 4], kernel 3: each window's maximum is its bottom-right element, (2, 2), (2, 3),
    # (3, 2), (3, 3) of each plane: 10, 11, 14, 15, and 16 more in the second channel
    x = np.arange(32, dtype=np.float64).reshape(1, 2, 4, 4)
    m = _model("MaxPool", 20, [[1, 2, 4, 4]], outputs=2, kernel_shape=[3, 3])
    idx = ReferenceEvaluator(m, new_ops=corrected_ops(m)).run(None, {"x0": x})[1]
    assert idx.ravel().tolist() == [10, 11, 14, 15, 26, 27, 30, 31]
    raw = ReferenceEvaluator(m).run(None, {"x0": x})[1]
    assert raw.ravel().tolist() != [10, 11, 14, 15, 26, 27, 30, 31]  # the defect, in this onnx
    # storage_order=1 numbers the spatial axes column-major (ONNX Runtime): (h, w) -> w * H + h
    m = _model("MaxPool", 20, [[1, 2, 4, 4]], outputs=2, kernel_shape=[3, 3], storage_order=1)
    idx = ReferenceEvaluator(m, new_ops=corrected_ops(m)).run(None, {"x0": x})[1]
    assert idx.ravel().tolist() == [2 * 4 + 2, 3 * 4 + 2, 2 * 4 + 3, 3 * 4 + 3, 26, 30, 27, 31]


def _pool(x: np.ndarray, **attrs: object) -> tuple[list, list]:
    t = h.np_dtype_to_tensor_dtype(x.dtype)
    g = h.make_graph([h.make_node("MaxPool", ["x"], ["y", "i"], **attrs)], "g", [h.make_tensor_value_info("x", t, x.shape)],
                     [h.make_tensor_value_info("y", t, None), h.make_tensor_value_info("i", T.INT64, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 22)])
    y, i = ReferenceEvaluator(m, new_ops=corrected_ops(m)).run(None, {"x": x})
    return y.ravel().tolist(), i.ravel().tolist()


def test_maxpool_indices_never_point_at_a_pad_and_follow_pytorch_on_nan() -> None:
    """Found by a review: a real element equal to the pad value (uint8 0, int8 -128, -inf)
    lost to the pad before it (index -1, or an index into the previous plane); a window with
    two NaNs took the first (PyTorch's kernel replaces the maximum at every NaN: the last);
    an empty batch raised. Expected values are PyTorch's (and ONNX Runtime's, but for NaN)."""
    assert _pool(np.array([[[0, 5, 0, 3]]], np.uint8), kernel_shape=[2], pads=[1, 1]) == ([0, 5, 5, 3, 3], [0, 1, 1, 3, 3])
    assert _pool(np.array([[[-128, -128, 7, -128]]], np.int8), kernel_shape=[3], pads=[1, 1])[1] == [0, 2, 2, 2]
    ninf = np.array([[[1.0, 1.0, 1.0]], [[-np.inf, -np.inf, -np.inf]]], np.float32)  # batch 2: the second plane
    assert _pool(ninf, kernel_shape=[3], pads=[1, 1])[1] == [0, 0, 1, 3, 3, 4]
    assert _pool(np.zeros((1, 1, 2, 3), np.uint8), kernel_shape=[2, 2], pads=[1, 1, 1, 1], storage_order=1)[1] == \
        [0, 0, 2, 4, 0, 0, 2, 4, 1, 1, 3, 5]
    y, i = _pool(np.array([[[3.0, np.nan, 1.0, np.nan]]], np.float32), kernel_shape=[4])
    assert np.isnan(y[0]) and i == [3]
    y, i = _pool(np.array([[[3.0, np.nan, 1.0, np.nan]]]), kernel_shape=[2])
    assert all(np.isnan(y)) and i == [1, 1, 3]
    assert _pool(np.zeros((0, 1, 5), np.float32), kernel_shape=[3]) == ([], [])
    # an axis shorter than the window has no output (ONNX Runtime: [1, 1, 0, 3]; this raised ValueError)
    y, i = _max_pool(np.ones((1, 1, 2, 5), np.float32), 2, kernel_shape=[3, 3])
    assert y.shape == i.shape == (1, 1, 0, 3) and i.dtype == np.int64


def test_maxpool_of_bfloat16_is_left_to_the_evaluator() -> None:
    """bfloat16 (onnx's own NumPy dtype, kind 'V') has no lowest value for the pads: the
    evaluator's MaxPool runs it (the corrected one raised ValueError)."""
    g = h.make_graph([h.make_node("Cast", ["a"], ["x"], to=T.BFLOAT16),
                      h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
                      h.make_node("Cast", ["y"], ["b"], to=T.FLOAT)], "g",
                     [h.make_tensor_value_info("a", T.FLOAT, [1, 1, 4, 4])], [h.make_tensor_value_info("b", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 22)])
    out = ReferenceEvaluator(m, new_ops=corrected_ops(m)).run(None, {"a": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)})
    assert out[0].ravel().tolist() == [5, 7, 13, 15]


def test_erf_hardswish_and_gelu_are_float64_in_a_float64_evaluation() -> None:
    # erf(0.5) = 0.5204998778130465 (tables; Python's math.erf agrees to the last digit); onnx 1.23's
    # reference rounds it to float32: 0.52049989...
    m = _model("Erf", 20, [[1]])
    fixed, raw = _both(m, np.array([0.5]))
    assert fixed[0] == 0.5204998778130465 and raw is not None and raw[0] != fixed[0] and abs(raw[0] - fixed[0]) < 1e-7
    # HardSwish(1) = 1 * (1/6 + 1/2) = 2/3 exactly in float64; alpha as a float32 attribute gives 0.66666667163.
    m = _model("HardSwish", 20, [[2]])
    fixed, raw = _both(m, np.array([1.0, -1.0]))
    np.testing.assert_allclose(fixed, [2 / 3, -1 / 3], rtol=1e-15)
    assert raw is not None and abs(raw[0] - 2 / 3) > 1e-9
    # Gelu(-2.5) = 0.5 * -2.5 * (1 + erf(-2.5 / sqrt 2)) = -1.25 * erfc(1.7677669529663687) = -0.015524...:
    # 1 + erf cancels, so the float32-rounded erf costs about 1e-6 relative.
    m = _model("Gelu", 20, [[1]])
    fixed, raw = _both(m, np.array([-2.5]))
    want = -1.25 * math.erfc(2.5 / math.sqrt(2.0))
    assert abs(fixed[0] - want) <= 1e-13 * abs(want) and raw is not None  # 1 + erf cancels: ~80x eps and abs(raw[0] - want) > 1e-7 * abs(want)
    # the tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at x = 1.7
    m = _model("Gelu", 20, [[1]], approximate="tanh")
    want = 0.5 * 1.7 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1.7 + 0.044715 * 1.7**3)))
    assert abs(_both(m, np.array([1.7]))[0][0] - want) <= 1e-15 * want


def test_every_entry_is_tested_here() -> None:
    assert {d.op for d in DEFECTS} == {"Softmax", "LogSoftmax", "Hardmax", "LpNormalization", "LRN", "Mean",
                                       "AveragePool", "MaxPool", "Erf", "HardSwish", "Gelu"}
    assert all(d.why and d.fix and d.opsets[0] <= d.opsets[1] for d in DEFECTS)


# ---- the second float32 evaluation of the noise floor: sums in sequence --------------------


def _seq_op(op: str, inputs: list[np.ndarray], **attrs: object) -> np.ndarray:
    from compstack.analysis.refdefects import sequential_reductions

    names = [f"x{i}" for i in range(len(inputs))]
    m = h.make_model(h.make_graph([h.make_node(op, names, ["y"], **attrs)], "g",
                                  [h.make_tensor_value_info(n, T.FLOAT, list(x.shape))
                                   for n, x in zip(names, inputs)],
                                  [h.make_tensor_value_info("y", T.FLOAT, None)]),
                     opset_imports=[h.make_opsetid("", 17)])
    sess = ReferenceEvaluator(m, new_ops=sequential_reductions(m))
    return np.asarray(sess.run(None, dict(zip(names, inputs)))[0])


def test_sequential_matmul_is_a_plain_float32_loop_over_k() -> None:
    r = np.random.default_rng(0)
    a, b = r.standard_normal((2, 3, 5, 7)).astype(np.float32), r.standard_normal((3, 7, 4)).astype(np.float32)
    got = _seq_op("MatMul", [a, b])
    want = np.zeros((2, 3, 5, 4), np.float32)
    for i in np.ndindex(2, 3, 5, 4):  # the dot product, one term after the other, rounded each step
        s = np.float32(0)
        for k in range(7):
            s = np.float32(s + np.float32(a[i[0], i[1], i[2], k] * b[i[1], k, i[3]]))
        want[i] = s
    assert got.dtype == np.float32 and np.array_equal(got, want)
    v = r.standard_normal(7).astype(np.float32)  # 1-D operands, as the spec's MatMul (numpy.matmul)
    assert _seq_op("MatMul", [a[0, 0], v]).shape == (5,) and _seq_op("MatMul", [v, b[0]]).shape == (4,)


def test_sequential_matmul_on_cancelling_sums_errs_within_highams_bound() -> None:
    r = np.random.default_rng(5)
    a = np.concatenate([1e3 + r.random((16, 32)), -1e3 - r.random((16, 32))], axis=1).astype(np.float32)
    b = (np.ones((64, 8)) + 1e-3 * r.standard_normal((64, 8))).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    seq = _seq_op("MatMul", [a, b]).astype(np.float64)
    rmse = float(np.sqrt(np.mean((seq - exact) ** 2)))
    # Higham (3.1): |error| <= gamma_n * sum |a_k b_k|, gamma_n ~ n u; a sequential sum of 64 terms is
    # well inside it, and is not exact (partial sums reach 3.2e4, whose float32 ulp is 2**-9).
    bound = 64 * 2.0 ** -24 * float(np.max(np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)))
    assert 0 < rmse <= bound


def test_sequential_gemm_follows_the_spec() -> None:
    r = np.random.default_rng(1)
    a, b, c = (r.standard_normal(s).astype(np.float32) for s in ((6, 3), (4, 6), (3, 4)))
    got = _seq_op("Gemm", [a, b, c], alpha=0.5, beta=2.0, transA=1, transB=1)
    want = 0.5 * (a.T.astype(np.float64) @ b.T.astype(np.float64)) + 2.0 * c
    assert got.shape == (3, 4) and np.allclose(got, want, rtol=1e-5, atol=1e-6)
