"""The graphs of ``benchmarks/judge_table.py``: each with a right answer computed by hand
from the spec's formula (never by the code under test), and what compare must say.

Groups (issue #24, part 4):

* ``oracle``: ``onnx.reference`` computes the op wrongly (its known defects) or the op is
  undefined on these inputs; every stack that follows the spec must agree (or be
  ``undefined``).
* ``imprecise``: cancellation or transcendental chains where float32 is as far from the
  exact answer as float32 arithmetic explains: agree (``ok`` or ``imprecise``), never ``wrong``.
* ``accuracy``: a stack's elementary function is less accurate than float32 rounding
  (measured in ulps), amplified by cancellation: ``bad`` on that stack.
* ``bug``: a real wrong result from today's XFAIL / known-findings files
  (``compstack/conformance/xfail``, ``compstack/fuzz/known``), rebuilt in code: ``bad`` on
  the named stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

__all__ = ["JudgeCase", "ORACLE", "IMPRECISE", "BUGS", "all_cases"]

_F = T.FLOAT


@dataclass
class JudgeCase:
    """One graph of the table.

    Attributes:
        name: the case's name.
        group: ``oracle``, ``imprecise`` or ``bug``.
        model: the ONNX model.
        feeds: its inputs.
        answer: the right output(s) by name, computed by hand from the spec (None: the
            op is undefined on these inputs).
        expect: what compare must say per target: ``agree`` (ok or imprecise), ``bad``
            (wrong, nan or shape) or ``undefined``; ``*`` is every other target.
        source: where the case comes from (the XFAIL line, the defect, the formula).
    """

    name: str
    group: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    answer: dict[str, np.ndarray] | None
    expect: dict[str, str] = field(default_factory=lambda: {"*": "agree"})
    source: str = ""

    def expected(self, target: str) -> str:
        """What compare must say for ``target``."""
        return self.expect.get(target, self.expect.get("*", "agree"))


def _model(nodes: list[onnx.NodeProto], ins: list[tuple[str, int, list[int]]], outs: list[tuple[str, int, list]],
           opset: int = 17, inits: tuple[onnx.TensorProto, ...] = ()) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in ins],
                     [h.make_tensor_value_info(n, t, s) for n, t, s in outs], initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _unary(name: str, op: str, x: np.ndarray, answer: np.ndarray | None, opset: int = 17, group: str = "oracle",
           expect: dict[str, str] | None = None, source: str = "", **attrs: object) -> JudgeCase:
    m = _model([h.make_node(op, ["x"], ["y"], **attrs)], [("x", h.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))],
               [("y", _F if answer is None else h.np_dtype_to_tensor_dtype(answer.dtype),
                 list(x.shape) if answer is None else list(answer.shape))], opset)
    return JudgeCase(name, group, m, {"x": x}, None if answer is None else {"y": answer},
                     expect or {"*": "agree"}, source)


# ---- oracle: onnx.reference's known defects, and undefined behaviour --------------------------


def _coerced_rows(x: np.ndarray) -> list[np.ndarray]:
    """Rows of the coerced 2-D view for axis=1: one row per batch item (by hand)."""
    return [x[i].ravel().astype(np.float64) for i in range(x.shape[0])]


def _softmax_case(op: str, opset: int, shape: list[int]) -> JudgeCase:
    x = _rng(1).standard_normal(shape).astype(np.float32)
    rows = []
    for r in _coerced_rows(x):
        if op == "Softmax":
            rows.append(np.exp(r) / np.sum(np.exp(r)))
        elif op == "LogSoftmax":
            rows.append(r - np.log(np.sum(np.exp(r))))
        else:
            rows.append((np.arange(r.size) == int(np.argmax(r))).astype(np.float64))
    ans = np.stack(rows).reshape(shape).astype(np.float32)
    case = _unary(f"{op.lower()}{opset}_axis1_{len(shape)}d", op, x, ans, opset,
                  source=f"onnx.reference {op}-{opset} uses the opset-13 rule; spec: coerced 2-D", axis=1)
    if op == "Hardmax" and opset == 11:  # IREE makes the reference's mistake: a real IREE bug (RMSE 0.5 of 0/1)
        case.expect = {"iree-llvm-cpu": "bad", "*": "agree"}
    return case


def _lp1() -> JudgeCase:
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -1.0]], np.float32)
    ans = np.array([[1 / 6, -2 / 6, 3 / 6], [-4 / 10, 5 / 10, -1 / 10]], np.float32)
    return _unary("lpnorm_p1", "LpNormalization", x, ans, 11, source="onnx.reference LpNormalization p=1 misses abs",
                  axis=1, p=1)


def _lrn() -> JudgeCase:
    x = np.arange(1, 6, dtype=np.float32).reshape(1, 5, 1, 1)  # channels 1..5
    sq = [1 + 4, 1 + 4 + 9, 4 + 9 + 16, 9 + 16 + 25, 16 + 25]  # size 3: channels c-1..c+1
    ans = np.array([c / (1.0 + 0.1 / 3 * s) ** 0.75 for c, s in zip(range(1, 6), sq)], np.float32).reshape(1, 5, 1, 1)
    return _unary("lrn_size3", "LRN", x, ans, 13, source="onnx.reference LRN channel loop", size=3, alpha=0.1,
                  beta=0.75, bias=1.0)


def _mean_broadcast() -> JudgeCase:
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    b = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]], np.float32)
    m = _model([h.make_node("Mean", ["a", "b"], ["y"])], [("a", _F, [1, 3]), ("b", _F, [2, 3])], [("y", _F, [2, 3])], 13)
    ans = np.array([[5.5, 11.0, 16.5], [20.5, 26.0, 31.5]], np.float32)
    return JudgeCase("mean_broadcast_first", "oracle", m, {"a": a, "b": b}, {"y": ans},
                     source="onnx.reference Mean accumulates in place into the smaller first input")


def _clip_nan() -> JudgeCase:
    lo = onnx.numpy_helper.from_array(np.array(np.nan, np.float32), "lo")
    m = _model([h.make_node("Clip", ["x", "lo"], ["y"])], [("x", _F, [6])], [("y", _F, [6])], 13, (lo,))
    return JudgeCase("clip_nan_bound", "oracle", m, {"x": np.linspace(-1, 1, 6, dtype=np.float32)}, None,
                     {"*": "undefined"}, "Clip with a NaN bound (Operators.md gives no rule)")


def _int_div_zero() -> JudgeCase:
    m = _model([h.make_node("Div", ["a", "b"], ["y"])], [("a", T.INT32, [4]), ("b", T.INT32, [4])],
               [("y", T.INT32, [4])], 13)
    return JudgeCase("int_div_by_zero", "oracle", m, {"a": np.array([7, 8, 9, 10], np.int32),
                                                      "b": np.array([2, 0, 3, 0], np.int32)}, None,
                     {"*": "undefined"}, "integer Div by zero")


def _cast_nan() -> JudgeCase:
    x = np.array([1.5, np.nan, 3e10, -2.0], np.float32)
    m = _model([h.make_node("Cast", ["x"], ["y"], to=T.INT32)], [("x", _F, [4])], [("y", T.INT32, [4])], 13)
    return JudgeCase("cast_nan_to_int", "oracle", m, {"x": x}, None, {"*": "undefined"},
                     "Cast of NaN / out-of-range float to int32")


def _random() -> JudgeCase:
    m = _model([h.make_node("RandomUniformLike", ["x"], ["r"]), h.make_node("Add", ["x", "r"], ["y"])],
               [("x", _F, [16])], [("y", _F, [16])], 13)
    return JudgeCase("random_uniform_like", "oracle", m, {"x": np.zeros(16, np.float32)}, None, {"*": "undefined"},
                     "RandomUniformLike: runs need not agree")


ORACLE: list[Callable[[], JudgeCase]] = [
    lambda: _softmax_case("Softmax", 11, [2, 3, 4]), lambda: _softmax_case("LogSoftmax", 11, [2, 3, 4]),
    lambda: _softmax_case("Hardmax", 11, [2, 3, 4]), lambda: _softmax_case("Softmax", 12, [2, 2, 2, 2]),
    lambda: _softmax_case("LogSoftmax", 12, [3, 2, 5]), _lp1, _lrn, _mean_broadcast, _clip_nan,
    _int_div_zero, _cast_nan, _random,
]


# ---- imprecise: float32 is as far from the exact answer as float32 arithmetic explains --------


def _chain(name: str, nodes: list[onnx.NodeProto], feeds: dict[str, np.ndarray], exact: np.ndarray,
           source: str, inits: tuple[onnx.TensorProto, ...] = ()) -> JudgeCase:
    m = _model(nodes, [(k, _F, list(v.shape)) for k, v in feeds.items()], [("y", _F, list(exact.shape))], 17, inits)
    return JudgeCase(name, "imprecise", m, feeds, {"y": exact.astype(np.float64)}, {"*": "agree"}, source)


def _const(name: str, value: float) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(np.array(value, np.float32), name)


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32)


def _cancel_products() -> JudgeCase:
    r = _rng(2)
    a, b = _f32(1000 + r.random(256)), _f32(1000 + r.random(256))
    c = _f32(a * (1 + 1e-6 * r.standard_normal(256)))
    d = b.copy()
    exact = a.astype(np.float64) * b - c.astype(np.float64) * d
    return _chain("a*b-c*d", [h.make_node("Mul", ["a", "b"], ["p"]), h.make_node("Mul", ["c", "d"], ["q"]),
                              h.make_node("Sub", ["p", "q"], ["y"])], {"a": a, "b": b, "c": c, "d": d}, exact,
                  "catastrophic cancellation of two products ~1e6")


def _log_exp() -> JudgeCase:
    x = _f32(np.linspace(60, 80, 256))
    exact = np.zeros(256)  # log(exp(x)) - x = 0 exactly
    nodes = [h.make_node("Exp", ["x"], ["e"]), h.make_node("Log", ["e"], ["l"]), h.make_node("Sub", ["l", "x"], ["y"])]
    return _chain("log(exp(x))-x", nodes, {"x": x}, exact, "transcendental round trip; exact answer 0")


def _sqrt_sq() -> JudgeCase:
    x = _f32(np.linspace(1000, 2000, 256))
    nodes = [h.make_node("Sqrt", ["x"], ["s"]), h.make_node("Mul", ["s", "s"], ["p"]),
             h.make_node("Sub", ["p", "x"], ["y"])]
    return _chain("sqrt(x)*sqrt(x)-x", nodes, {"x": x}, np.zeros(256), "round trip; exact answer 0")


def _one_plus() -> JudgeCase:
    x = _f32(np.linspace(1e-5, 2e-5, 256))
    k = _const("k", 1e4)
    one = _const("one", 1.0)
    nodes = [h.make_node("Add", ["x", "one"], ["s"]), h.make_node("Sub", ["s", "one"], ["d"]),
             h.make_node("Mul", ["d", "k"], ["y"])]
    exact = x.astype(np.float64) * 1e4
    return _chain("((1+x)-1)*1e4", nodes, {"x": x}, exact, "absorption of a small x into 1", (k, one))


def _expm1() -> JudgeCase:
    x = _f32(np.linspace(1e-5, 3e-5, 256))
    k, one = _const("k", 1e4), _const("one", 1.0)
    nodes = [h.make_node("Exp", ["x"], ["e"]), h.make_node("Sub", ["e", "one"], ["d"]),
             h.make_node("Mul", ["d", "k"], ["y"])]
    return _chain("(exp(x)-1)*1e4", nodes, {"x": x}, np.expm1(x.astype(np.float64)) * 1e4, "expm1 by cancellation",
                  (k, one))


def _cos1() -> JudgeCase:
    x = _f32(np.linspace(1e-3, 3e-3, 256))
    k, one = _const("k", 1e6), _const("one", 1.0)
    nodes = [h.make_node("Cos", ["x"], ["c"]), h.make_node("Sub", ["one", "c"], ["d"]),
             h.make_node("Mul", ["d", "k"], ["y"])]
    x64 = x.astype(np.float64)
    return _chain("(1-cos(x))*1e6", nodes, {"x": x}, 2 * np.sin(x64 / 2) ** 2 * 1e6, "1-cos by cancellation",
                  (k, one))


def _squares() -> JudgeCase:
    r = _rng(3)
    a = _f32(3000 + r.random(256))
    b = _f32(a + _f32(1e-3 * r.standard_normal(256)))
    nodes = [h.make_node("Mul", ["a", "a"], ["p"]), h.make_node("Mul", ["b", "b"], ["q"]),
             h.make_node("Sub", ["p", "q"], ["y"])]
    return _chain("a*a-b*b", nodes, {"a": a, "b": b}, a.astype(np.float64) ** 2 - b.astype(np.float64) ** 2,
                  "difference of close squares ~1e7")


def _sin_large() -> JudgeCase:
    x = _f32(np.linspace(0, 1, 256))
    big = _const("big", 1e4)
    nodes = [h.make_node("Add", ["x", "big"], ["s"]), h.make_node("Sin", ["s"], ["y"])]
    x64 = x.astype(np.float64)
    return _chain("sin(x+1e4)", nodes, {"x": x}, np.sin(x64 + 1e4), "argument rounded to float32 at 1e4", (big,))


def _reduce_cancel() -> JudgeCase:
    r = _rng(4)
    x = _f32(np.concatenate([1e4 + r.random((64, 8)), -1e4 - r.random((64, 8))], axis=1))
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")
    m = _model([h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], [("x", _F, [64, 16])],
               [("y", _F, [64])], 17, (axes,))
    return JudgeCase("reducesum(+-1e4)", "imprecise", m, {"x": x}, {"y": x.astype(np.float64).sum(axis=1)},
                     {"*": "agree"}, "sum of large values that cancel")


def _log1p() -> JudgeCase:
    x = _f32(np.linspace(1e-5, 2e-5, 256))
    one, k = _const("one", 1.0), _const("k", 1e4)
    nodes = [h.make_node("Add", ["x", "one"], ["s"]), h.make_node("Log", ["s"], ["l"]),
             h.make_node("Mul", ["l", "k"], ["y"])]
    return _chain("log(1+x)*1e4", nodes, {"x": x}, np.log1p(x.astype(np.float64)) * 1e4, "log1p by absorption",
                  (one, k))


def _tanh_x() -> JudgeCase:
    x = _f32(np.linspace(1e-3, 2e-3, 256))
    k = _const("k", 1e9)
    nodes = [h.make_node("Tanh", ["x"], ["t"]), h.make_node("Sub", ["x", "t"], ["d"]),
             h.make_node("Mul", ["d", "k"], ["y"])]
    x64 = x.astype(np.float64)
    case = _chain("(x-tanh(x))*1e9", nodes, {"x": x}, (x64 - np.tanh(x64)) * 1e9, "x - tanh(x) ~ x^3/3", (k,))
    # Measured: ORT's float32 Tanh (MLAS approximation) is 3.4 ulp off on these x, NumPy's
    # 0.84 ulp; amplified by the cancellation that is 4.1x the float32 floor: further from
    # the exact answer than float32 rounding explains, so the gate's "wrong" is right here.
    # IREE: 4.1x as ORT; TVM: 212x the floor.
    case.group, case.expect = "accuracy", {"*": "bad"}
    case.source += "; ORT's Tanh is 3.4 ulp off (NumPy float32: 0.84); IREE 4.1x, TVM 212x the floor"
    return case


def _matmul_cancel() -> JudgeCase:
    r = _rng(5)
    a = _f32(np.concatenate([1e3 + r.random((16, 32)), -1e3 - r.random((16, 32))], axis=1))
    b = _f32(np.ones((64, 8)) + 1e-3 * r.standard_normal((64, 8)))
    m = _model([h.make_node("MatMul", ["a", "b"], ["y"])], [("a", _F, [16, 64]), ("b", _F, [64, 8])],
               [("y", _F, [16, 8])])
    return JudgeCase("matmul(+-1e3)", "imprecise", m, {"a": a, "b": b}, {"y": a.astype(np.float64) @ b},
                     {"*": "agree"}, "dot products that cancel")


IMPRECISE: list[Callable[[], JudgeCase]] = [
    _cancel_products, _log_exp, _sqrt_sq, _one_plus, _expm1, _cos1, _squares, _sin_large, _reduce_cancel, _log1p,
    _tanh_x, _matmul_cancel,
]


# ---- bug: real wrong results from today's XFAIL / known-findings files ------------------------


def _resize_align_corners() -> JudgeCase:
    x = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], np.float32)
    scales = onnx.numpy_helper.from_array(np.array([1, 1, 0.6, 0.6], np.float32), "scales")
    m = _model([h.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="align_corners")],
               [("x", _F, [1, 1, 2, 4])], [("y", _F, [1, 1, 1, 2])], 13, (scales,))
    # Operators.md#Resize: x_original = x_resized * (len_in - 1) / (len_in * scale - 1); column 1 -> 3 / 1.4.
    ans = np.array([[[[1.0, 1.0 + 3.0 / 1.4]]]], np.float32)
    return JudgeCase("resize_linear_align_corners_down", "bug", m, {"x": x}, {"y": ans},
                     {"ort-cpu": "bad", "iree-llvm-cpu": "bad"},
                     "xfail ort-cpu/iree-llvm-cpu test_resize_downsample_scales_linear_align_corners")


def _isinf(name: str, pos: int, neg: int, ans: list[bool]) -> JudgeCase:
    x = np.array([-1.2, np.nan, np.inf, 2.8, -np.inf, np.inf], np.float32)
    m = _model([h.make_node("IsInf", ["x"], ["y"], detect_positive=pos, detect_negative=neg)], [("x", _F, [6])],
               [("y", T.BOOL, [6])], 13)
    return JudgeCase(name, "bug", m, {"x": x}, {"y": np.array(ans)}, {"tvm-llvm": "bad"}, f"xfail tvm-llvm test_{name}")


def _layernorm_mean() -> JudgeCase:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) ** 1.5
    inits = (onnx.numpy_helper.from_array(np.ones(4, np.float32), "s"),
             onnx.numpy_helper.from_array(np.zeros(4, np.float32), "b"))
    m = _model([h.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean"], axis=-1)], [("x", _F, [3, 4])],
               [("y", _F, [3, 4]), ("mean", _F, [3, 1])], 17, inits)
    x64 = x.astype(np.float64)
    mu = np.array([[sum(r) / 4] for r in x64.tolist()])
    var = np.array([[sum((v - mu[i, 0]) ** 2 for v in r) / 4] for i, r in enumerate(x64.tolist())])
    y = (x64 - mu) / np.sqrt(var + 1e-5)
    return JudgeCase("layernorm_mean_output", "bug", m, {"x": x}, {"y": y.astype(np.float32),
                                                                   "mean": mu.astype(np.float32)},
                     {"tvm-llvm": "bad"}, "xfail tvm-llvm test_layer_normalization_2d_axis1 (Mean shape [])")


def _cast_double() -> JudgeCase:
    x = np.array([0.5, 1e39, -1e300, np.inf, -np.inf, 0.25], np.float64)
    m = _model([h.make_node("Cast", ["x"], ["y"], to=_F)], [("x", T.DOUBLE, [6])], [("y", _F, [6])], 13)
    ans = np.array([0.5, np.inf, -np.inf, np.inf, -np.inf, 0.25], np.float32)  # IEEE round-to-nearest overflows to Inf
    return JudgeCase("cast_double_to_float_overflow", "bug", m, {"x": x}, {"y": ans}, {"iree-llvm-cpu": "bad"},
                     "xfail iree-llvm-cpu test_cast_DOUBLE_to_FLOAT (max abs err inf)")


def _depth_to_space() -> JudgeCase:
    x = np.arange(24, dtype=np.float32).reshape(1, 4, 2, 3)
    m = _model([h.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")], [("x", _F, [1, 4, 2, 3])],
               [("y", _F, [1, 1, 4, 6])], 13)
    ans = np.zeros((1, 1, 4, 6), np.float32)
    for i in range(2):  # Operators.md#DepthToSpace CRD: channel (c*bs + i)*bs + j lands at (h*bs + i, w*bs + j)
        for j in range(2):
            for hh in range(2):
                for ww in range(3):
                    ans[0, 0, hh * 2 + i, ww * 2 + j] = x[0, i * 2 + j, hh, ww]
    return JudgeCase("depthtospace_crd", "bug", m, {"x": x}, {"y": ans}, {"iree-llvm-cpu": "bad"},
                     "fuzz known iree-llvm-cpu DepthToSpace[blocksize=2,mode=CRD](float32[1, 4, 2, 3])")


def _maxpool_int8() -> JudgeCase:
    x = (np.arange(20, dtype=np.int8).reshape(1, 5, 2, 2) * 7 % 23 - 11).astype(np.int8)
    m = _model([h.make_node("MaxPool", ["x"], ["y"], dilations=[2, 2], kernel_shape=[2, 2], pads=[0, 1, 1, 0])],
               [("x", T.INT8, [1, 5, 2, 2])], [("y", T.INT8, [1, 5, 1, 1])], 13)
    # One window: rows {0, 2} (row 2 is padding), columns {-1, 1} (-1 is padding): only x[..., 0, 1].
    return JudgeCase("maxpool_int8_dilated_padded", "bug", m, {"x": x}, {"y": x[:, :, 0:1, 1:2].copy()},
                     {"iree-llvm-cpu": "bad"}, "fuzz known iree-llvm-cpu MaxPool[dilations=[2,2],...](int8[1,5,2,2])")


def _expand() -> JudgeCase:
    x = np.array([[1.0], [2.0], [3.0]], np.float32)
    m = _model([h.make_node("Expand", ["x", "shape"], ["y"])], [("x", _F, [3, 1]), ("shape", T.INT64, [3])],
               [("y", _F, [2, 3, 6])], 13)
    ans = np.array([[[v] * 6 for v in (1.0, 2.0, 3.0)]] * 2, np.float32)
    return JudgeCase("expand_dim_changed", "bug", m, {"x": x, "shape": np.array([2, 1, 6], np.int64)}, {"y": ans},
                     {"tvm-llvm": "bad"}, "xfail tvm-llvm test_expand_dim_changed (shape [2, 1, 6]); shape an input")


def _nms(name: str, boxes: list[list[float]], scores: list[float], ans: list[list[int]]) -> JudgeCase:
    n = len(boxes)
    m = _model([h.make_node("NonMaxSuppression", ["boxes", "scores", "mo", "iou", "st"], ["y"])],
               [("boxes", _F, [1, n, 4]), ("scores", _F, [1, 1, n]), ("mo", T.INT64, [1]), ("iou", _F, [1]),
                ("st", _F, [1])], [("y", T.INT64, [len(ans), 3])], 13)
    feeds = {"boxes": np.array([boxes], np.float32), "scores": np.array([[scores]], np.float32),
             "mo": np.array([3], np.int64), "iou": np.array([0.5], np.float32), "st": np.array([0.0], np.float32)}
    return JudgeCase(name, "bug", m, feeds, {"y": np.array(ans, np.int64)}, {"tvm-llvm": "bad"},
                     f"xfail tvm-llvm test_{name} (shape [0, 3])")


def _det() -> JudgeCase:
    x = np.array([[0.0, 1.0], [2.0, 3.0]], np.float32)  # the ONNX test's arange(4): a zero first pivot
    m = _model([h.make_node("Det", ["x"], ["y"])], [("x", _F, [2, 2])], [("y", _F, [])], 13)
    return JudgeCase("det_2d", "bug", m, {"x": x}, {"y": np.array(0.0 * 3.0 - 1.0 * 2.0, np.float32)},
                     {"iree-llvm-cpu": "bad"}, "xfail iree-llvm-cpu test_det_2d (NaN)")


def _dropout_mask() -> JudgeCase:
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    m = _model([h.make_node("Dropout", ["x"], ["y", "mask"])], [("x", _F, [3, 4])],
               [("y", _F, [3, 4]), ("mask", T.BOOL, [3, 4])], 13)
    # Inference mode (no training_mode input): y = x, mask all true (Operators.md#Dropout).
    return JudgeCase("dropout_default_mask", "bug", m, {"x": x}, {"y": x.copy(), "mask": np.ones((3, 4), bool)},
                     {"tvm-llvm": "bad"}, "xfail tvm-llvm test_dropout_default_mask (mask dtype float32)")


BUGS: list[Callable[[], JudgeCase]] = [
    _resize_align_corners,
    lambda: _isinf("isinf_negative", 0, 1, [False, False, False, False, True, False]),
    lambda: _isinf("isinf_positive", 1, 0, [False, False, True, False, False, True]),
    _layernorm_mean, _cast_double, _depth_to_space, _maxpool_int8, _expand,
    lambda: _nms("nonmaxsuppression_single_box", [[0, 0, 1, 1]], [0.9], [[0, 0, 0]]),
    lambda: _nms("nonmaxsuppression_suppress_by_IOU",
                 [[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                  [0, 100, 1, 101]], [0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [[0, 0, 3], [0, 0, 0], [0, 0, 5]]),
    _det, _dropout_mask,
]


def all_cases() -> list[JudgeCase]:
    """Every case, built (oracle, imprecise, bug)."""
    return [f() for f in (*ORACLE, *IMPRECISE, *BUGS)]
