"""ONNX -> JAX converters, one family at a time, against onnx.reference.

Each case builds a one-node model (``translate_harness.check``), runs it through
``to_jax`` + ``jax.jit`` and through ``onnx.reference``, and compares: NaN positions,
exact integers, the sign of zero. Inputs are random (seeded) with NaN / +-0 / +-inf and
integer extremes mixed in where the op is defined on them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compstack.core import ir as cir
from compstack.core.errors import UnsupportedError
from translate_harness import assert_close, check, node_model, run_jax, run_reference

pytest.importorskip("jax")

J = "jax"
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
RNG = np.random.default_rng(1234)
F32 = np.float32


@pytest.fixture(autouse=True)
def _x64():
    """ONNX graphs hold int64/float64: every test here runs with ``jax.enable_x64(True)`` as a
    context, so the flag does not leak into other test files' JAX code."""
    import jax

    with jax.enable_x64(True):
        yield



def rnd(*shape: int, dtype: Any = F32, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """Random values (uniform in [lo, hi) for floats, integers in [lo, hi] for ints)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return RNG.uniform(lo, hi, shape).astype(dtype)
    if dtype.kind == "b":
        return RNG.integers(0, 2, shape).astype(bool)
    return RNG.integers(int(lo), int(hi) + 1, shape).astype(dtype)


def special(dtype: Any = F32, n: int = 12) -> np.ndarray:
    """Random values with NaN, +-0, +-inf mixed in, shape (2, n // 2 + 4): (2, 10) by default."""
    vals = np.concatenate([rnd(n), np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 0.5, -0.5, 1.0])])
    return vals.astype(dtype).reshape(2, -1)


def int_edges(dtype: Any) -> np.ndarray:
    """Random integers plus the dtype's min / max / 0 / +-1."""
    info = np.iinfo(dtype)
    extra = [info.min, info.max, 0, 1] + ([-1] if info.min < 0 else [2])
    return np.concatenate([rnd(8, dtype=dtype, lo=max(info.min, -50), hi=min(info.max, 50)),
                           np.array(extra, dtype)]).reshape(1, -1)


def check_opset(op: str, inputs: dict, attrs: dict | None = None, *, opset: int, const: dict | None = None,
                n_outputs: int = 1, rtol: float = 1e-5, atol: float = 1e-6,
                input_order: list[str] | None = None) -> list[np.ndarray]:
    """Like ``check``, but the model stays at ``opset`` (no upgrade), so the converter
    registered for that older version runs."""
    import jax

    from compstack.translate.jax import to_jax

    proto = node_model(op, inputs, attrs, const=const, n_outputs=n_outputs, opset=opset, input_order=input_order)
    want = run_reference(proto, inputs)
    model = cir.from_proto(proto, opset=opset)
    prog = to_jax(model)
    got = [np.asarray(o) for o in jax.jit(prog.fn)(prog.params, *[inputs[n] for n in prog.input_names])]
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol, atol, what=f"{op}@{opset} output {k}")
    return got


def check_expected(op: str, inputs: dict, want: list[np.ndarray], attrs: dict | None = None, *,
                   const: dict | None = None, opset: int = 20, input_order: list[str] | None = None) -> None:
    """Compare with hand-computed outputs (where onnx.reference does not implement the case)."""
    proto = node_model(op, inputs, attrs, const=const, n_outputs=len(want), opset=opset, input_order=input_order)
    got = run_jax(proto, inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, what=f"{op} output {k}")


def test_op_count() -> None:
    from compstack.translate.jax import TABLE

    assert len(TABLE.ops()) >= 140


# =========================================================================== elementwise

UNARY_ANY = ["Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Erf", "Exp",
             "Floor", "Log", "Neg", "Reciprocal", "Round", "Sign", "Sin", "Sinh", "Sqrt", "Tan", "Tanh",
             "Sigmoid", "Softplus", "Softsign", "Mish", "HardSwish", "IsNaN", "Relu"]


@pytest.mark.parametrize("op", UNARY_ANY)
def test_unary_float(op: str) -> None:
    check(op, {"x": special()}, framework=J, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Exp", "Sqrt", "Relu", "Sigmoid", "Tanh", "Round"])
def test_unary_float16_float64(op: str) -> None:
    check(op, {"x": special(np.float16)}, framework=J, rtol=2e-3, atol=1e-3)
    check(op, {"x": special(np.float64)}, framework=J, rtol=1e-12, atol=1e-12)


def test_round_half_to_even() -> None:
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, -0.0, 3.5, 1e7 + 0.5, np.nan]], F32)
    check("Round", {"x": x}, framework=J)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Relu"])
def test_unary_int(op: str, dtype: Any) -> None:
    check(op, {"x": int_edges(dtype)}, framework=J)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64])
def test_bitwise_not(dtype: Any) -> None:
    check("BitwiseNot", {"x": int_edges(dtype)}, framework=J)


def test_not() -> None:
    check("Not", {"x": rnd(3, 4, dtype=bool)}, framework=J)


@pytest.mark.parametrize("attrs", [{}, {"detect_positive": 0}, {"detect_negative": 0},
                                   {"detect_positive": 0, "detect_negative": 0}])
def test_isinf(attrs: dict) -> None:
    check("IsInf", {"x": special()}, attrs, framework=J)


@pytest.mark.parametrize("op,attrs", [
    ("Elu", {}), ("Elu", {"alpha": 0.5}), ("Selu", {}), ("Selu", {"alpha": 2.0, "gamma": 0.5}),
    ("Celu", {}), ("Celu", {"alpha": 2.0}), ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}),
    ("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("ThresholdedRelu", {}),
    ("ThresholdedRelu", {"alpha": 0.5}), ("Shrink", {}), ("Shrink", {"bias": 0.3, "lambd": 1.0}),
    ("Gelu", {}), ("Gelu", {"approximate": "tanh"}),
])
def test_activation(op: str, attrs: dict) -> None:
    check(op, {"x": special()}, attrs, framework=J, rtol=2e-5)


def test_shrink_int() -> None:
    check("Shrink", {"x": int_edges(np.int8)[:, :8]}, {"bias": 2.0, "lambd": 3.0}, framework=J)


def test_swish() -> None:
    check("Swish", {"x": special()}, {"alpha": 1.5}, framework=J, opset=24, rtol=2e-5)


def test_prelu() -> None:
    check("PRelu", {"x": rnd(2, 3, 4, 4), "slope": rnd(3, 1, 1)}, framework=J)
    check("PRelu", {"x": special()}, framework=J, const={"slope": np.array([0.25], F32)})


@pytest.mark.parametrize("case", ["both", "min", "max", "none", "int"])
def test_clip(case: str) -> None:
    x = special()
    lo, hi = np.array(-1.0, F32), np.array(0.5, F32)
    if case == "both":
        check("Clip", {"x": x, "lo": lo, "hi": hi}, framework=J)
    elif case == "min":
        check("Clip", {"x": x}, framework=J, const={"lo": lo}, input_order=["x", "lo", ""])
    elif case == "max":
        check("Clip", {"x": x}, framework=J, const={"hi": hi}, input_order=["x", "", "hi"])
    elif case == "none":
        check("Clip", {"x": x}, framework=J)
    else:
        check("Clip", {"x": int_edges(np.int32)}, framework=J,
              const={"lo": np.array(-5, np.int32), "hi": np.array(7, np.int32)})


def test_clip_opset6() -> None:
    check_opset("Clip", {"x": special()}, {"min": -1.0, "max": 2.0}, opset=6)


BINARY_FLOAT = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "LessOrEqual", "Greater",
                "GreaterOrEqual"]


@pytest.mark.parametrize("op", BINARY_FLOAT)
def test_binary_float_broadcast(op: str) -> None:
    a, b = rnd(2, 3, 4), rnd(3, 1, lo=0.5, hi=2.0)
    b[0, 0] = np.nan
    a[0, 0, :2] = [np.inf, -0.0]
    sz = op not in ("Max", "Min")  # the sign of max(+0, -0) is left open by the spec
    check(op, {"a": a, "b": b}, framework=J, rtol=2e-5, signed_zero=sz)


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint8])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater"])
def test_binary_int(op: str, dtype: Any) -> None:
    a = int_edges(dtype)
    b = rnd(*a.shape, dtype=dtype, lo=-7 if np.iinfo(dtype).min < 0 else 1, hi=7)
    if op == "Div":
        b[b == 0] = 3
        if np.iinfo(dtype).min < 0:
            a = np.where(a == np.iinfo(dtype).min, -100, a).astype(dtype)  # MIN / -1 overflows
    check(op, {"a": a, "b": b}, framework=J)


def test_div_int_truncates() -> None:
    a = np.array([[7, -7, 7, -7, 0, 1, -1, 9]], np.int32)
    b = np.array([[2, 2, -2, -2, 3, -3, 3, 4]], np.int32)
    check("Div", {"a": a, "b": b}, framework=J)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(fmod: int, dtype: Any) -> None:
    if np.dtype(dtype).kind == "f":
        a = np.array([[5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 3.0, 7.25, np.inf, 1.0]], dtype)
        b = np.array([[2.0, 2.0, -2.0, -2.0, 3.0, 3.0, -3.0, 0.5, 2.0, np.inf]], dtype)
    else:
        a = np.array([[7, -7, 7, -7, 0, 13, -13, 5, 100, -100]], dtype)
        b = np.array([[3, 3, -3, -3, 5, 4, 4, 1, -7, 9]], dtype)
    check("Mod", {"a": a, "b": b}, {"fmod": fmod}, framework=J, signed_zero=bool(fmod))


@pytest.mark.parametrize("case", ["ff", "fi", "ii", "if", "sq", "f64"])
def test_pow(case: str) -> None:
    x = rnd(2, 5, lo=0.1, hi=3.0)
    if case == "ff":
        check("Pow", {"a": special(), "b": rnd(2, 10)}, framework=J, rtol=1e-5)
    elif case == "fi":
        check("Pow", {"a": rnd(2, 5), "b": rnd(2, 5, dtype=np.int64, lo=-3, hi=3)}, framework=J, rtol=1e-5)
    elif case == "ii":
        check("Pow", {"a": rnd(2, 5, dtype=np.int32, lo=-5, hi=5), "b": rnd(2, 5, dtype=np.int32, lo=0, hi=5)},
              framework=J)
    elif case == "if":
        check("Pow", {"a": rnd(2, 5, dtype=np.int64, lo=0, hi=9), "b": rnd(2, 5, lo=0.0, hi=2.0)}, framework=J)
    elif case == "sq":
        check("Pow", {"a": special()}, framework=J, const={"b": np.array(2.0, F32)})
    else:
        check("Pow", {"a": x.astype(np.float64), "b": np.array([0.5], np.float64)}, framework=J)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op: str) -> None:
    check(op, {"a": rnd(2, 3, 4, dtype=bool), "b": rnd(3, 1, dtype=bool)}, framework=J)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint64])
@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise(op: str, dtype: Any) -> None:
    a = int_edges(dtype)
    check(op, {"a": a, "b": int_edges(dtype)[:, ::-1].copy()}, framework=J)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction: str, dtype: Any) -> None:
    bits = np.iinfo(dtype).bits
    a = int_edges(dtype)
    b = rnd(*a.shape, dtype=dtype, lo=0, hi=bits - 1)
    b[0, -1] = bits  # shifting by the width gives 0
    check("BitShift", {"a": a, "b": b}, {"direction": direction}, framework=J)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_variadic(op: str, n: int) -> None:
    shapes = [(2, 3, 4), (3, 1), (4,)][:n]
    inputs = {f"x{k}": rnd(*s) for k, s in enumerate(shapes)}
    inputs["x0"][0, 0, 0] = np.nan
    check(op, inputs, framework=J, rtol=2e-6, signed_zero=False)


def test_variadic_int() -> None:
    inputs = {"a": int_edges(np.int32), "b": int_edges(np.int32)[:, ::-1].copy()}
    for op in ("Max", "Min", "Sum"):
        check(op, inputs, framework=J)
    check("Mean", {"a": rnd(2, 3, dtype=np.int64, lo=-9, hi=9), "b": rnd(2, 3, dtype=np.int64, lo=-9, hi=9)},
          framework=J)


def test_where() -> None:
    check("Where", {"c": rnd(2, 1, dtype=bool), "x": special(), "y": rnd(1, 10)}, framework=J)
    check("Where", {"c": rnd(2, 4, dtype=bool), "x": int_edges(np.int64)[:, :4], "y": rnd(2, 1, dtype=np.int64)},
          framework=J)


# =========================================================================== reduce

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("axes,keepdims,noop", [(None, 1, 0), ([-1, 0], 0, 0), ([], 0, 1)])
@pytest.mark.parametrize("op", REDUCE)
def test_reduce(op: str, axes: list[int] | None, keepdims: int, noop: int) -> None:
    lo = 0.1 if op == "ReduceLogSum" else -2.0
    x = rnd(2, 3, 4, lo=lo, hi=2.0)
    attrs = {"keepdims": keepdims, "noop_with_empty_axes": noop}
    const = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check(op, {"x": x}, attrs, framework=J, const=const, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean"])
def test_reduce_int(op: str) -> None:
    x = rnd(3, 5, dtype=np.int64, lo=-9, hi=9)
    check(op, {"x": x}, {"keepdims": 0}, framework=J, const={"axes": np.array([1], np.int64)})
    check(op, {"x": rnd(2, 3, dtype=np.int32, lo=-5, hi=5)}, framework=J)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceSum"])
def test_reduce_nan(op: str) -> None:
    check(op, {"x": special()}, {"keepdims": 0}, framework=J, const={"axes": np.array([1], np.int64)})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceL2", "ReduceLogSumExp"])
def test_reduce_axes_attribute(op: str) -> None:
    opset = 11 if op == "ReduceSum" else 13
    check_opset(op, {"x": rnd(2, 3, 4)}, {"axes": [0, -1], "keepdims": 0}, opset=opset, rtol=2e-5)
    check_opset(op, {"x": rnd(2, 3, 4)}, {}, opset=opset, rtol=2e-5)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": -1, "keepdims": 0}, {"axis": 1, "select_last_index": 1},
                                   {"axis": 0, "keepdims": 0, "select_last_index": 1}])
def test_arg(op: str, attrs: dict) -> None:
    x = rnd(3, 6, dtype=np.int32, lo=0, hi=3).astype(F32)  # many ties
    check(op, {"x": x}, attrs, framework=J)
    check(op, {"x": rnd(2, 5, dtype=np.int8, lo=-128, hi=127)}, attrs, framework=J)


def test_argmax_nan() -> None:
    check("ArgMax", {"x": special()}, {"axis": 1}, framework=J)
    check("ArgMin", {"x": special()}, {"axis": 1}, framework=J)


# =========================================================================== nn


@pytest.mark.parametrize("shape,wshape,attrs", [
    ((1, 2, 9), (3, 2, 3), {}),
    ((1, 2, 9), (4, 1, 3), {"group": 2, "strides": [2], "pads": [1, 2]}),
    ((2, 3, 7, 6), (4, 3, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 5, 6), (2, 2, 2, 3), {"auto_pad": "SAME_LOWER"}),
    ((1, 2, 5, 6), (2, 2, 2, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 2, 4, 5, 3), (3, 2, 2, 3, 1), {"pads": [1, 0, 0, 0, 1, 0], "strides": [1, 2, 1]}),
])
def test_conv(shape: tuple, wshape: tuple, attrs: dict) -> None:
    inputs = {"x": rnd(*shape), "w": rnd(*wshape)}
    if len(shape) != 4 or "pads" in attrs:  # with and without bias
        inputs["b"] = rnd(wshape[0])
    check("Conv", inputs, attrs, framework=J, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,wshape,attrs", [
    ((1, 2, 4), (2, 3, 3), {}),
    ((1, 2, 4), (2, 3, 3), {"strides": [2], "pads": [1, 0], "output_padding": [1]}),
    ((1, 4, 3, 3), (4, 1, 3, 2), {"strides": [2, 3], "dilations": [1, 2]}),
    ((2, 2, 3, 4), (2, 3, 2, 2), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 2), {"strides": [1, 2, 1]}),
])
def test_conv_transpose(shape: tuple, wshape: tuple, attrs: dict) -> None:
    inputs = {"x": rnd(*shape), "w": rnd(*wshape)}
    if "strides" in attrs:  # with and without bias
        inputs["b"] = rnd(wshape[1] * attrs.get("group", 1))
    check("ConvTranspose", inputs, attrs, framework=J, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs", [{"strides": [2, 3], "dilations": [1, 2]}, {"pads": [1, 0, 0, 1]}])
def test_conv_transpose_group(attrs: dict) -> None:
    # onnx.reference cannot run 1 < group < C: compare with its per-group results, concatenated.
    x, w, b = rnd(1, 4, 3, 3), rnd(4, 3, 3, 2), rnd(6)
    want = []
    for g in range(2):
        xs, ws = x[:, 2 * g:2 * g + 2], w[2 * g:2 * g + 2]
        proto = node_model("ConvTranspose", {"x": xs, "w": ws, "b": b[3 * g:3 * g + 3]}, attrs)
        want.append(run_reference(proto, {"x": xs, "w": ws, "b": b[3 * g:3 * g + 3]})[0])
    proto = node_model("ConvTranspose", {"x": x, "w": w, "b": b}, {**attrs, "group": 2})
    assert_close(run_jax(proto, {"x": x, "w": w, "b": b})[0], np.concatenate(want, axis=1), 1e-4, 1e-4)


POOL_CASES = [
    ((1, 2, 7), {"kernel_shape": [3]}),
    ((1, 2, 7), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((2, 1, 5, 5), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((2, 1, 5, 5), {"kernel_shape": [3, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 1, 5, 6), {"kernel_shape": [2, 2], "auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 2, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 1, 2], "pads": [0, 1, 0, 1, 0, 1]}),
]


@pytest.mark.parametrize("shape,attrs", POOL_CASES + [
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "dilations": [2, 2], "strides": [1, 2]}),
])
def test_max_pool(shape: tuple, attrs: dict) -> None:
    check("MaxPool", {"x": rnd(*shape)}, attrs, framework=J)


def test_max_pool_int8() -> None:
    # onnx.reference pads int8 with NaN (fails): compare with its float32 result.
    x = rnd(1, 2, 5, 5, dtype=np.int8, lo=-128, hi=127)
    attrs = {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}
    xf = x.astype(F32)
    want = run_reference(node_model("MaxPool", {"x": xf}, attrs), {"x": xf})[0].astype(np.int8)
    check_expected("MaxPool", {"x": x}, [want], attrs)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_same_lower_strided(op: str) -> None:
    # onnx.reference gets SAME_LOWER with strides wrong (2x2 where shape inference says 3x3):
    # compare with the explicit pads SAME_LOWER means (the odd pad at the start).
    x = rnd(2, 1, 5, 5)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2]}
    want = run_reference(node_model(op, {"x": x}, {**attrs, "pads": [1, 1, 1, 0]}), {"x": x})
    check_expected(op, {"x": x}, want, {**attrs, "auto_pad": "SAME_LOWER"})


def _np_max_pool_2d(x: np.ndarray, k: list, s: list, pads: list, storage_order: int = 0):
    """Brute-force 2-D max pool with ONNX Indices (first maximum wins)."""
    n, c, h, w = x.shape
    oh = (h + pads[0] + pads[2] - k[0]) // s[0] + 1
    ow = (w + pads[1] + pads[3] - k[1]) // s[1] + 1
    y, idx = np.zeros((n, c, oh, ow), x.dtype), np.zeros((n, c, oh, ow), np.int64)
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        best, where = None, -1
        for di, dj in np.ndindex(*k):
            hh, ww = i * s[0] + di - pads[0], j * s[1] + dj - pads[1]
            if 0 <= hh < h and 0 <= ww < w and (best is None or x[b, ch, hh, ww] > best):
                best = x[b, ch, hh, ww]
                where = (b * c + ch) * h * w + (hh * w + ww if not storage_order else hh + ww * h)
        y[b, ch, i, j], idx[b, ch, i, j] = best, where
    return y, idx


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 3], "strides": [2, 1], "pads": [1, 0, 0, 2]},
    {"kernel_shape": [2, 3], "strides": [2, 1], "storage_order": 1},
])
def test_max_pool_indices(attrs: dict) -> None:
    # onnx.reference's Indices are wrong (and its asymmetric pads): brute force instead.
    x = rnd(2, 3, 5, 6)
    want = _np_max_pool_2d(x, attrs["kernel_shape"], attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4),
                           attrs.get("storage_order", 0))
    check_expected("MaxPool", {"x": x}, list(want), attrs)
    check_expected("MaxPool", {"x": x}, [want[0]], attrs)


@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("shape,attrs", POOL_CASES)
def test_average_pool(shape: tuple, attrs: dict, cip: int) -> None:
    if "auto_pad" in attrs and cip:
        pytest.skip("count_include_pad with auto_pad: onnx.reference counts the pads, ORT does not")
    check("AveragePool", {"x": rnd(*shape)}, {**attrs, "count_include_pad": cip}, framework=J, rtol=1e-5)


def test_average_pool_dilations() -> None:
    check("AveragePool", {"x": rnd(1, 2, 8, 8)}, {"kernel_shape": [2, 2], "dilations": [2, 1], "pads": [1, 1, 1, 1]},
          framework=J)


@pytest.mark.parametrize("shape", [(1, 2, 7), (2, 3, 4, 5), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
def test_global_pool(op: str, shape: tuple) -> None:
    x = rnd(*shape)
    if op == "GlobalAveragePool":
        check(op, {"x": x}, framework=J, rtol=1e-5)
        return
    # onnx.reference: no GlobalLpPool, GlobalMaxPool only right for 4-D inputs
    axes = tuple(range(2, len(shape)))
    want = np.max(x, axis=axes, keepdims=True) if op == "GlobalMaxPool" else \
        np.sqrt(np.sum(x * x, axis=axes, keepdims=True))
    check_expected(op, {"x": x}, [want.astype(F32)])


def test_lp_pool() -> None:
    check("LpPool", {"x": rnd(1, 2, 6, 5)}, {"kernel_shape": [2, 2], "strides": [2, 1], "p": 2}, framework=J,
          rtol=1e-5)
    check("LpPool", {"x": rnd(1, 2, 7)}, {"kernel_shape": [3], "p": 3}, framework=J, rtol=1e-5)
    x = rnd(1, 2, 3, 3)
    check_expected("GlobalLpPool", {"x": x}, [np.abs(x).sum(axis=(2, 3), keepdims=True)], {"p": 1})


def test_max_unpool() -> None:
    x = rnd(1, 1, 2, 2)
    idx = np.array([[[[5, 7], [13, 15]]]], np.int64)
    check("MaxUnpool", {"x": x, "i": idx}, {"kernel_shape": [2, 2], "strides": [2, 2]}, framework=J)
    check("MaxUnpool", {"x": x, "i": idx}, {"kernel_shape": [2, 2], "strides": [2, 2]}, framework=J,
          const={"s": np.array([1, 1, 5, 5], np.int64)})


def test_batch_norm() -> None:
    c = 3
    check("BatchNormalization", {"x": rnd(2, c, 4, 5)}, {"epsilon": 1e-3}, framework=J, rtol=1e-5, atol=1e-5,
          const={"s": rnd(c), "b": rnd(c), "m": rnd(c), "v": rnd(c, lo=0.5, hi=2.0)})
    check("BatchNormalization", {"x": rnd(2, c), "s": rnd(c), "b": rnd(c), "m": rnd(c),
                                 "v": rnd(c, lo=0.5, hi=2.0)}, framework=J, rtol=1e-5, atol=1e-5)


def test_instance_norm() -> None:
    check("InstanceNormalization", {"x": rnd(2, 3, 4, 5), "s": rnd(3), "b": rnd(3)}, {"epsilon": 1e-3}, framework=J,
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm(opset: int) -> None:
    groups, c = 2, 4
    n = groups if opset == 18 else c
    check("GroupNormalization", {"x": rnd(2, c, 3, 3), "s": rnd(n), "b": rnd(n)}, {"num_groups": groups},
          framework=J, opset=opset, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis,bias,outs", [(-1, True, 1), (1, False, 3), (0, True, 3), (-2, True, 2)])
def test_layer_norm(axis: int, bias: bool, outs: int) -> None:
    x = rnd(2, 3, 4)
    tail = x.shape[axis % 3:]
    inputs = {"x": x, "s": rnd(*tail)}
    if bias:
        inputs["b"] = rnd(*tail)
    check("LayerNormalization", inputs, {"axis": axis}, framework=J, n_outputs=outs, rtol=1e-4, atol=1e-5)


def test_rms_norm() -> None:
    check("RMSNormalization", {"x": rnd(2, 3, 4), "s": rnd(4)}, {"epsilon": 1e-3}, framework=J, opset=23, rtol=1e-5)
    check("RMSNormalization", {"x": rnd(2, 3, 4), "s": rnd(3, 4)}, {"axis": 1}, framework=J, opset=23, rtol=1e-5)


@pytest.mark.parametrize("p,axis", [(2, -1), (2, 0), (1, 1)])
def test_lp_normalization(p: int, axis: int) -> None:
    x = rnd(3, 4, lo=0.0 if p == 1 else -2.0, hi=2.0)  # onnx.reference uses sum(x) (not |x|) for p=1
    x[1] = 0.0
    check("LpNormalization", {"x": x}, {"p": p, "axis": axis}, framework=J, rtol=1e-5)


def test_mean_variance_normalization() -> None:
    check("MeanVarianceNormalization", {"x": rnd(2, 3, 4, 5)}, framework=J, rtol=1e-4, atol=1e-5)
    check("MeanVarianceNormalization", {"x": rnd(2, 3, 4)}, {"axes": [1, 2]}, framework=J, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [3, 4])
def test_lrn(size: int) -> None:
    # onnx.reference's loop runs over the batch axis for channels: only N == C is right there.
    check("LRN", {"x": rnd(5, 5, 3, 2)}, {"size": size, "alpha": 1e-2, "beta": 0.6, "bias": 2.0}, framework=J,
          rtol=1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(op: str, axis: int) -> None:
    x = rnd(2, 3, 4)
    x[0, 0, :2] = 1.0  # a tie for Hardmax
    x[0, 0, 2:] = 0.0
    check(op, {"x": x}, {"axis": axis}, framework=J, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 2, 0])
def test_softmax_opset11(op: str, axis: int | None) -> None:
    # Before 13 the input is coerced to 2-D at ``axis`` (default 1); onnx.reference ignores that.
    import jax

    from compstack.translate.jax import to_jax

    x = rnd(2, 3, 4)
    attrs = {} if axis is None else {"axis": axis}
    flat = x.reshape(int(np.prod(x.shape[:1 if axis is None else axis])), -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    if op == "Softmax":
        want = e / e.sum(axis=1, keepdims=True)
    elif op == "LogSoftmax":
        want = np.log(e / e.sum(axis=1, keepdims=True))
    else:
        want = np.eye(flat.shape[1], dtype=F32)[np.argmax(flat, axis=1)]
    prog = to_jax(cir.from_proto(node_model(op, {"x": x}, attrs, opset=11), opset=11))
    got = np.asarray(jax.jit(prog.fn)(prog.params, x)[0])
    assert_close(got, want.reshape(x.shape).astype(F32), 1e-5, 1e-6)


def test_dropout() -> None:
    check("Dropout", {"x": rnd(3, 4)}, framework=J)
    check("Dropout", {"x": rnd(3, 4)}, framework=J, n_outputs=2, const={"r": np.array(0.3, F32)})
    check("Dropout", {"x": rnd(3, 4)}, framework=J, n_outputs=2,
          const={"r": np.array(0.3, F32), "t": np.array(False)})
    with pytest.raises(UnsupportedError):
        check("Dropout", {"x": rnd(3, 4)}, framework=J, const={"r": np.array(0.3, F32), "t": np.array(True)})


# =========================================================================== math


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (3, 4, 2)),
                                   ((5,), (5,))])
def test_matmul(sa: tuple, sb: tuple) -> None:
    check("MatMul", {"a": rnd(*sa), "b": rnd(*sb)}, framework=J, rtol=1e-5, atol=1e-5)


def test_matmul_int() -> None:
    check("MatMul", {"a": rnd(3, 4, dtype=np.int32, lo=-9, hi=9), "b": rnd(4, 2, dtype=np.int32, lo=-9, hi=9)},
          framework=J)


@pytest.mark.parametrize("attrs,cshape", [({}, (5,)), ({"transA": 1}, (3, 5)), ({"transB": 1, "alpha": 0.5}, (1, 5)),
                                          ({"transA": 1, "transB": 1, "beta": 2.0}, ()), ({"alpha": 2.0}, None)])
def test_gemm(attrs: dict, cshape: tuple | None) -> None:
    a = rnd(4, 3) if attrs.get("transA") else rnd(3, 4)
    b = rnd(5, 4) if attrs.get("transB") else rnd(4, 5)
    inputs = {"a": a, "b": b}
    if cshape is not None:
        inputs["c"] = rnd(*cshape)
    check("Gemm", inputs, attrs, framework=J, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]), ("ii->i", [(3, 3)]),
    ("ij->ji", [(2, 3)]), ("...ij,...jk", [(2, 2, 3), (3, 2)]), ("i,i", [(4,), (4,)]), ("ij", [(2, 3)]),
    ("i, j -> ij", [(2,), (3,)]),
])
def test_einsum(eq: str, shapes: list) -> None:
    inputs = {f"x{k}": rnd(*s) for k, s in enumerate(shapes)}
    check("Einsum", inputs, {"equation": eq}, framework=J, rtol=1e-5, atol=1e-5)


def test_matmul_integer() -> None:
    a, b = rnd(3, 4, dtype=np.uint8, lo=0, hi=255), rnd(4, 2, dtype=np.uint8, lo=0, hi=255)
    check("MatMulInteger", {"a": a, "b": b}, framework=J)
    check("MatMulInteger", {"a": a, "b": b}, framework=J, const={"az": np.array(12, np.uint8),
                                                                 "bz": np.array([3, 200], np.uint8)})
    check("MatMulInteger", {"a": rnd(2, 3, 4, dtype=np.int8, lo=-128, hi=127), "b": rnd(4, 2, dtype=np.int8, lo=-9,
                                                                                          hi=9)}, framework=J)


def test_conv_integer() -> None:
    x, w = rnd(1, 2, 5, 5, dtype=np.uint8, lo=0, hi=255), rnd(3, 2, 2, 2, dtype=np.uint8, lo=0, hi=255)
    check("ConvInteger", {"x": x, "w": w}, {"pads": [1, 0, 0, 1]}, framework=J,
          const={"xz": np.array(7, np.uint8), "wz": np.array(100, np.uint8)})


def test_det() -> None:
    check("Det", {"x": rnd(3, 3)}, framework=J, rtol=1e-4, atol=1e-5)
    check("Det", {"x": rnd(2, 4, 4)}, framework=J, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(axis: int, exclusive: int, reverse: int) -> None:
    attrs = {"exclusive": exclusive, "reverse": reverse}
    check("CumSum", {"x": rnd(3, 4)}, attrs, framework=J, const={"a": np.array(axis, np.int64)}, rtol=1e-5, atol=1e-6)
    check("CumSum", {"x": rnd(3, 4, dtype=np.int32, lo=-9, hi=9)}, attrs, framework=J,
          const={"a": np.array(axis, np.int32)})


def test_cumprod() -> None:
    check("CumProd", {"x": rnd(3, 4, lo=0.5, hi=1.5)}, {"exclusive": 1, "reverse": 1}, framework=J, opset=26,
          const={"a": np.array(1, np.int64)}, rtol=1e-5)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_window_folded(op: str) -> None:
    check(op, {}, {"periodic": 0}, framework=J, const={"n": np.array(8, np.int64)}, rtol=1e-5, atol=1e-6)


# =========================================================================== shape

I64 = np.int64


def i64(*v: int) -> np.ndarray:
    return np.array(v, I64)


@pytest.mark.parametrize("shape,target,allowzero", [
    ((2, 3, 4), (4, -1), 0), ((2, 3, 4), (0, 12), 0), ((2, 3, 4), (-1,), 0), ((2, 3, 4), (2, 0, 2, -1), 0),
    ((0, 3), (3, 0), 1),
])
def test_reshape(shape: tuple, target: tuple, allowzero: int) -> None:
    check("Reshape", {"x": rnd(*shape)}, {"allowzero": allowzero}, framework=J, const={"s": i64(*target)})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_flatten(axis: int) -> None:
    check("Flatten", {"x": rnd(2, 3, 4)}, {"axis": axis}, framework=J)


@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 2]])
def test_squeeze(axes: list | None) -> None:
    const = {} if axes is None else {"a": i64(*axes)}
    check("Squeeze", {"x": rnd(1, 3, 1)}, framework=J, const=const)


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, -1]])
def test_unsqueeze(axes: list) -> None:
    check("Unsqueeze", {"x": rnd(2, 3)}, framework=J, const={"a": i64(*axes)})


def test_squeeze_unsqueeze_opset11() -> None:
    check_opset("Squeeze", {"x": rnd(1, 3, 1)}, {"axes": [-1]}, opset=11)
    check_opset("Squeeze", {"x": rnd(1, 3, 1)}, {}, opset=11)
    check_opset("Unsqueeze", {"x": rnd(2, 3)}, {"axes": [0, -1]}, opset=11)


@pytest.mark.parametrize("perm", [None, [1, 0, 2], [2, 0, 1]])
def test_transpose(perm: list | None) -> None:
    check("Transpose", {"x": rnd(2, 3, 4)}, {} if perm is None else {"perm": perm}, framework=J)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis: int) -> None:
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for k, s in enumerate(shapes):
        s[axis] = k + 1
    check("Concat", {f"x{k}": rnd(*s) for k, s in enumerate(shapes)}, {"axis": axis}, framework=J)
    check("Concat", {"x": rnd(2, 3, dtype=I64)}, {"axis": 0}, framework=J, const={"c": rnd(1, 3, dtype=I64)})


@pytest.mark.parametrize("case", ["split", "equal", "num_outputs", "axis"])
def test_split(case: str) -> None:
    x = rnd(7, 4)
    if case == "split":
        check("Split", {"x": x}, framework=J, const={"s": i64(2, 4, 1)}, n_outputs=3)
    elif case == "equal":
        check("Split", {"x": rnd(6, 4)}, framework=J, n_outputs=3)
    elif case == "num_outputs":
        check("Split", {"x": x}, {"num_outputs": 3}, framework=J, n_outputs=3)
    else:
        check("Split", {"x": x}, {"axis": -1}, framework=J, const={"s": i64(1, 3)}, n_outputs=2)


def test_split_opset11() -> None:
    check_opset("Split", {"x": rnd(6, 4)}, {"split": [1, 5]}, opset=11, n_outputs=2)
    check_opset("Split", {"x": rnd(6, 4)}, {"axis": 1}, opset=11, n_outputs=2)


def test_tile_expand() -> None:
    check("Tile", {"x": rnd(2, 3)}, framework=J, const={"r": i64(2, 3)})
    check("Expand", {"x": rnd(3, 1)}, framework=J, const={"s": i64(2, 1, 4)})
    check("Expand", {"x": rnd(2, 3, 1)}, framework=J, const={"s": i64(3, 5)})
    check("Expand", {"x": rnd(1, 3, dtype=np.int8)}, framework=J, const={"s": i64(1)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads,axes", [([1, 2, 2, 0], None), ([0, 1, 1, 3], None), ([2, 1], [-1])])
def test_pad(mode: str, pads: list, axes: list | None) -> None:
    const = {"p": i64(*pads)}
    order = ["x", "p"]
    if mode == "constant":
        const["v"] = np.array(2.5, F32)
        order.append("v")
    if axes is not None:
        const["a"] = i64(*axes)
        order += ["", "a"] if mode != "constant" else ["a"]
    check("Pad", {"x": rnd(3, 4)}, {"mode": mode}, framework=J, const=const, input_order=order)


def test_pad_int_default_value() -> None:
    check("Pad", {"x": rnd(2, 3, dtype=np.int32, lo=-9, hi=9)}, framework=J, const={"p": i64(1, 0, 0, 2)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_negative(mode: str) -> None:
    # onnx.reference (np.pad) refuses negative pads; the spec removes elements.
    x = rnd(4, 5)
    cropped = x[1:, :3]  # pads [-1, 0, 0, -2]
    widths = [(0, 0), (2, 0)]  # ... then [0, 2, 0, 0] on the second axis
    want = np.pad(cropped, widths, mode=mode) if mode != "constant" else np.pad(cropped, widths)
    check_expected("Pad", {"x": x}, [want], {"mode": mode}, const={"p": i64(-1, 2, 0, -2)})


def test_pad_opset2() -> None:
    check_opset("Pad", {"x": rnd(3, 4)}, {"pads": [1, 0, 0, 2], "mode": "reflect"}, opset=2)
    check_opset("Pad", {"x": rnd(3, 4)}, {"pads": [1, 0, 0, 2], "value": 1.5}, opset=2)


BIG = np.iinfo(I64).max


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0, 1], [2, 3], None, None), ([1], [-1], [1], None), ([-2], [BIG], [0], None), ([-100], [100], [-1], [2]),
    ([4], [0], [1], [-1]), ([BIG], [-BIG], [1], [-2]), ([-1, 3], [-100, 0], [0, -1], [-1, -3]),
    ([2], [1], [0], [1]),
])
def test_slice(starts: list, ends: list, axes: list | None, steps: list | None) -> None:
    const = {"s": i64(*starts), "e": i64(*ends)}
    if axes is not None:
        const["a"] = i64(*axes)
    if steps is not None:
        const["t"] = i64(*steps)
    check("Slice", {"x": rnd(3, 6)}, framework=J, const=const)


def test_slice_opset9() -> None:
    check_opset("Slice", {"x": rnd(3, 6)}, {"starts": [1, -3], "ends": [BIG, -1], "axes": [0, 1]}, opset=9)
    check_opset("Slice", {"x": rnd(3, 6)}, {"starts": [1], "ends": [2]}, opset=9)


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10}])
def test_shape(attrs: dict) -> None:
    check("Shape", {"x": rnd(2, 3, 4)}, attrs, framework=J)


def test_shape_feeds_reshape() -> None:
    """Shape returns a known value, so ops computed from it fold (a dynamic-looking Reshape)."""
    from onnx import helper

    x = rnd(2, 3, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=1), helper.make_node("Concat", ["s", "m"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [helper.make_tensor("m", 7, [1], [-1])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    assert_close(run_jax(proto, {"x": x})[0], x.reshape(2, 12))


def test_size_identity() -> None:
    check("Size", {"x": rnd(2, 3, 4)}, framework=J)
    check("Identity", {"x": special()}, framework=J)
    check("Identity", {"x": int_edges(np.int64)}, framework=J)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode: str) -> None:
    check("DepthToSpace", {"x": rnd(2, 8, 2, 3)}, {"blocksize": 2, "mode": mode}, framework=J)


def test_space_to_depth() -> None:
    check("SpaceToDepth", {"x": rnd(2, 2, 4, 6)}, {"blocksize": 2}, framework=J)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 1, -1, 5])
def test_trilu(upper: int, k: int | None) -> None:
    const = {} if k is None else {"k": np.array(k, I64)}
    check("Trilu", {"x": rnd(2, 3, 4)}, {"upper": upper}, framework=J, const=const)
    if k is not None:  # k computed at run time
        check("Trilu", {"x": rnd(2, 3, 4), "k": np.array(k, I64)}, {"upper": upper}, framework=J)


def test_range_folded() -> None:
    check("Range", {}, framework=J, const={"a": np.array(1, I64), "b": np.array(10, I64), "c": np.array(3, I64)})
    check("Range", {}, framework=J, const={"a": np.array(1.5, F32), "b": np.array(-2, F32),
                                           "c": np.array(-0.5, F32)})


def test_constant_of_shape() -> None:
    from onnx import numpy_helper

    check("ConstantOfShape", {}, framework=J, const={"s": i64(2, 3)})
    check("ConstantOfShape", {}, {"value": numpy_helper.from_array(np.array([7], np.int32))}, framework=J,
          const={"s": i64(2, 3)})


@pytest.mark.parametrize("attrs", [{}, {"k": 1}, {"k": -2, "dtype": 6}])
def test_eye_like(attrs: dict) -> None:
    check("EyeLike", {"x": rnd(3, 4)}, attrs, framework=J)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis: int) -> None:
    idx = np.array([[0, 2, -1], [5, -4, 1]], I64)  # 5 and -4 are out of range for depth 4
    check("OneHot", {"i": idx}, {"axis": axis}, framework=J,
          const={"d": np.array(4, I64), "v": np.array([-1.0, 3.5], F32)})
    check("OneHot", {"i": idx.astype(np.int32)}, {"axis": axis}, framework=J,
          const={"d": np.array(3.0, F32), "v": np.array([0, 1], I64)})


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(batch_axis: int, time_axis: int) -> None:
    x = rnd(4, 4, 2)
    lens = np.array([4, 1, 3, 2], I64)
    check("ReverseSequence", {"x": x, "l": lens}, {"batch_axis": batch_axis, "time_axis": time_axis}, framework=J)


@pytest.mark.parametrize("shape,axes", [((3, 2), None), ((5, 7), [0, 1]), ((2,), [-1])])
def test_center_crop_pad(shape: tuple, axes: list | None) -> None:
    x = rnd(4, 4, 3)
    if axes is None:
        shape, axes = (6, 2, 3), None
    attrs = {} if axes is None else {"axes": axes}
    check("CenterCropPad", {"x": x}, attrs, framework=J, const={"s": i64(*shape)})


# =========================================================================== index


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis: int) -> None:
    x = rnd(3, 4, 5)
    idx = np.array([[0, -1], [2, 1]], I64)
    check("Gather", {"x": x, "i": idx}, {"axis": axis}, framework=J)
    check("Gather", {"x": x}, {"axis": axis}, framework=J, const={"i": np.array(-2, I64)})
    check("Gather", {"x": rnd(6, 2, dtype=np.int32)}, {"axis": axis}, framework=J,
          const={"i": np.array([1, -1, 0], np.int32)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis: int) -> None:
    x = rnd(3, 4)
    shape = list(x.shape)
    shape[axis] = 5 if axis >= 0 else shape[axis]  # onnx.reference does not normalise a negative axis
    idx = RNG.integers(-x.shape[axis], x.shape[axis], shape).astype(I64)
    check("GatherElements", {"x": x, "i": idx}, {"axis": axis}, framework=J)


@pytest.mark.parametrize("xshape,idx,batch_dims", [
    ((2, 2), [[0, 0], [1, 1]], 0), ((2, 2), [[1], [0]], 0), ((2, 2, 2), [[0, 1], [1, 0]], 0),
    ((2, 2, 2), [[[0, 1]], [[1, 0]]], 0), ((2, 2, 2), [[1], [0]], 1), ((2, 3, 4), [[[1, -1]], [[0, 2]]], 1),
    ((2, 2, 3, 2), [[[1], [0]], [[2], [-1]]], 2), ((3, 4), [[-1, -2]], 0),
])
def test_gather_nd(xshape: tuple, idx: list, batch_dims: int) -> None:
    check("GatherND", {"x": rnd(*xshape), "i": np.array(idx, I64)}, {"batch_dims": batch_dims}, framework=J)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(reduction: str, axis: int) -> None:
    x = rnd(3, 4)
    n = x.shape[axis]
    # unique indices along the axis for "none" (duplicates are unspecified there)
    idx = np.stack([RNG.permutation(n)[:2] for _ in range(2)], axis=1 - (axis % 2)).astype(I64)
    if axis % 2 == 1:
        idx = np.stack([RNG.permutation(n)[:3] - n * (k % 2) for k in range(2)], axis=0).astype(I64)
    if reduction != "none":
        idx = RNG.integers(-n, n, idx.shape).astype(I64)
    upd = rnd(*idx.shape)
    check("ScatterElements", {"x": x, "i": idx, "u": upd}, {"axis": axis, "reduction": reduction}, framework=J,
          rtol=1e-5)


def test_scatter_opset10() -> None:
    import jax

    from compstack.translate.jax import to_jax

    # onnx.reference has no Scatter: compare with its ScatterElements.
    inputs = {"x": rnd(3, 4), "i": np.array([[1, 0, 2, -1]], I64), "u": rnd(1, 4)}
    want = run_reference(node_model("ScatterElements", inputs, {"axis": 0}, opset=11), inputs)[0]
    prog = to_jax(cir.from_proto(node_model("Scatter", inputs, {"axis": 0}, opset=10), opset=10))
    assert_close(np.asarray(jax.jit(prog.fn)(prog.params, *[inputs[n] for n in prog.input_names])[0]), want)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("case", ["elements", "slices", "neg"])
def test_scatter_nd(reduction: str, case: str) -> None:
    x = rnd(4, 3, 2)
    if case == "elements":
        idx = np.array([[0, 1, 1], [3, 2, 0]], I64)
        upd = rnd(2)
    elif case == "slices":
        idx = np.array([[[1]], [[2]]], I64) if reduction == "none" else np.array([[[1]], [[1]]], I64)
        upd = rnd(2, 1, 3, 2)
    else:
        idx = np.array([[-1, 0], [0, -3]], I64)
        upd = rnd(2, 2)
    check("ScatterND", {"x": x, "i": idx, "u": upd}, {"reduction": reduction}, framework=J, rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(axis: int | None) -> None:
    cond = np.array([True, False, True], bool)
    check("Compress", {"x": rnd(3, 4)}, {} if axis is None else {"axis": axis}, framework=J, const={"c": cond})


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [-1, 0])
def test_topk(largest: int, axis: int) -> None:
    x = rnd(4, 6, dtype=np.int32, lo=0, hi=3).astype(F32)  # ties: the lower index first
    check("TopK", {"x": x}, {"largest": largest, "axis": axis}, framework=J, const={"k": i64(3)}, n_outputs=2)
    check("TopK", {"x": rnd(4, 6, dtype=np.int64, lo=-9, hi=9)}, {"largest": largest, "axis": axis}, framework=J,
          const={"k": i64(2)}, n_outputs=2)
    xs = special()
    xs[1, 2] = np.nan
    check("TopK", {"x": xs}, {"largest": largest, "axis": axis}, framework=J, const={"k": i64(2)}, n_outputs=2,
          signed_zero=False)


def test_topk_uint8() -> None:
    check("TopK", {"x": rnd(2, 9, dtype=np.uint8, lo=0, hi=255)}, {"largest": 0}, framework=J, const={"k": i64(4)},
          n_outputs=2)


def test_nonzero() -> None:
    x = np.array([[1, 0, 3], [0, 0, 2]], np.int32)
    check("NonZero", {}, framework=J, const={"x": x})  # folded at conversion time
    with pytest.raises(UnsupportedError):
        check("NonZero", {"x": x}, framework=J)


# =========================================================================== misc


@pytest.mark.parametrize("src,dst", [
    (F32, np.int32), (F32, np.int8), (F32, np.uint8), (F32, np.int64), (np.float64, F32), (F32, np.float16),
    (F32, np.float64), (np.int64, F32), (np.int32, np.int8), (np.int64, np.int32), (np.uint8, np.int8),
    (np.int8, np.uint64), (bool, F32), (bool, np.int32),
])
def test_cast(src: Any, dst: Any) -> None:
    from onnx import helper

    if np.dtype(src).kind == "f":
        x = np.array([[1.7, -1.7, 2.5, -2.5, 0.0, -0.0, 100.9, -99.99, 3.0, 0.49]], src)
        if np.dtype(dst).kind == "u":
            x = np.abs(x)
        if np.dtype(dst).kind == "f":
            x = special(src)
    elif np.dtype(src).kind == "b":
        x = rnd(2, 3, dtype=bool)
    else:
        x = int_edges(src)
    check("Cast", {"x": x}, {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dst))}, framework=J)


@pytest.mark.parametrize("src", [F32, np.float64, np.int32, np.uint8])
def test_cast_to_bool(src: Any) -> None:
    x = special(src) if np.dtype(src).kind == "f" else int_edges(src)
    check("Cast", {"x": x}, {"to": 9}, framework=J)


def test_cast_float8() -> None:
    x = np.array([[0.1, -3.3, 500.0, -1000.0, np.inf, 1e-3, 448.0, 0.0]], F32)
    check("Cast", {"x": x}, {"to": 17}, framework=J)  # FLOAT8E4M3FN, saturate
    check("Cast", {"x": x}, {"to": 19}, framework=J)  # FLOAT8E5M2


def test_cast_like() -> None:
    check("CastLike", {"x": special(), "y": np.zeros(1, np.float16)}, framework=J, rtol=1e-3)
    check("CastLike", {"x": np.array([1.9, -1.9], F32), "y": np.zeros(1, np.int64)}, framework=J)


@pytest.mark.parametrize("attrs", [{"value_float": 2.5}, {"value_floats": [1.0, -2.0]}, {"value_int": 7},
                                   {"value_ints": [1, 2, 3]}])
def test_constant_folded(attrs: dict) -> None:
    check("Constant", {}, attrs, framework=J)


@pytest.mark.parametrize("case", ["tensor_u8", "tensor_i8", "axis", "block", "float8", "int16"])
def test_quantize_linear(case: str) -> None:
    x = rnd(2, 4, 6, lo=-20, hi=20)
    x[0, 0, :4] = [0.5, 1.5, 2.5, -2.5]  # ties round to even
    if case == "tensor_u8":
        check("QuantizeLinear", {"x": x}, framework=J,
              const={"s": np.array(0.5, F32), "z": np.array(128, np.uint8)})
        check("QuantizeLinear", {"x": x}, framework=J, const={"s": np.array(0.25, F32)})
    elif case == "tensor_i8":
        check("QuantizeLinear", {"x": x, "s": np.array(0.5, F32)}, framework=J, const={"z": np.array(-3, np.int8)})
    elif case == "axis":
        check("QuantizeLinear", {"x": x}, {"axis": 1}, framework=J,
              const={"s": np.array([0.1, 0.2, 0.5, 1.0], F32), "z": np.array([0, 1, -1, 5], np.int8)})
    elif case == "block":
        check("QuantizeLinear", {"x": x}, {"axis": -1, "block_size": 4}, framework=J, opset=21,
              const={"s": rnd(2, 4, 2, lo=0.1, hi=1.0), "z": rnd(2, 4, 2, dtype=np.uint8, lo=0, hi=255)})
    elif case == "float8":
        check("QuantizeLinear", {"x": x}, framework=J,
              const={"s": np.array(0.05, F32), "z": np.zeros((), dtype="float8_e4m3fn")})
    else:
        check("QuantizeLinear", {"x": x}, framework=J, opset=21,
              const={"s": np.array(0.001, F32), "z": np.array(-7, np.int16)})


@pytest.mark.parametrize("case", ["tensor", "axis", "nozp", "int32", "block"])
def test_dequantize_linear(case: str) -> None:
    if case == "tensor":
        check("DequantizeLinear", {"x": int_edges(np.uint8)}, framework=J,
              const={"s": np.array(0.5, F32), "z": np.array(128, np.uint8)})
    elif case == "axis":
        check("DequantizeLinear", {"x": rnd(2, 3, 4, dtype=np.int8, lo=-128, hi=127)}, {"axis": -2}, framework=J,
              const={"s": np.array([0.1, 0.2, 0.3], F32), "z": np.array([0, -1, 4], np.int8)})
    elif case == "nozp":
        check("DequantizeLinear", {"x": int_edges(np.int8), "s": np.array(0.25, F32)}, framework=J)
    elif case == "int32":
        check("DequantizeLinear", {"x": rnd(2, 3, dtype=np.int32, lo=-1000, hi=1000)}, framework=J,
              const={"s": np.array(0.01, F32)})
    else:
        check("DequantizeLinear", {"x": rnd(2, 6, dtype=np.int8, lo=-128, hi=127)}, {"axis": 1, "block_size": 3},
              framework=J, opset=21, const={"s": rnd(2, 2, lo=0.1, hi=1.0), "z": rnd(2, 2, dtype=np.int8)})


def test_dynamic_quantize_linear() -> None:
    check("DynamicQuantizeLinear", {"x": rnd(3, 4, lo=-5, hi=10)}, framework=J, n_outputs=3)
    check("DynamicQuantizeLinear", {"x": rnd(3, 4, lo=1, hi=10)}, framework=J, n_outputs=3)


RESIZE_MODES = [
    ("nearest", "half_pixel", "round_prefer_floor"), ("nearest", "asymmetric", "floor"),
    ("nearest", "align_corners", "round_prefer_ceil"), ("nearest", "pytorch_half_pixel", "ceil"),
    ("nearest", "half_pixel", "round_prefer_ceil"), ("nearest", "half_pixel_symmetric", "round_prefer_floor"),
    ("linear", "half_pixel", None), ("linear", "pytorch_half_pixel", None), ("linear", "align_corners", None),
    ("linear", "asymmetric", None), ("linear", "half_pixel_symmetric", None), ("cubic", "half_pixel", None),
    ("cubic", "align_corners", None), ("cubic", "asymmetric", None), ("cubic", "pytorch_half_pixel", None),
]


@pytest.mark.parametrize("mode,ctm,nearest_mode", RESIZE_MODES)
@pytest.mark.parametrize("scales", [[1, 1, 2.0, 1.5], [1, 1, 0.6, 1.7]])
def test_resize_scales(mode: str, ctm: str, nearest_mode: str | None, scales: list) -> None:
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if nearest_mode:
        attrs["nearest_mode"] = nearest_mode
    check("Resize", {"x": rnd(1, 2, 4, 5)}, attrs, framework=J, const={"s": np.array(scales, F32)},
          input_order=["x", "", "s"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("sizes,extra", [
    ([1, 2, 7, 3], {}), ([1, 2, 1, 9], {}), ([1, 2, 8, 2], {"exclude_outside": 1}),
    ([6, 6], {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}),
    ([6, 6], {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"}),
    ([9], {"axes": [3]}),
])
def test_resize_sizes(mode: str, sizes: list, extra: dict) -> None:
    attrs = {"mode": mode, **extra}
    if "axes" in extra:  # negative axes: onnx.reference fails on them, the result is the same
        x = rnd(1, 2, 4, 5)
        want = run_reference(node_model("Resize", {"x": x}, attrs, const={"z": i64(*sizes)},
                                        input_order=["x", "", "", "z"]), {"x": x})
        neg = {**attrs, "axes": [a - 4 for a in extra["axes"]]}
        check_expected("Resize", {"x": x}, want, neg, const={"z": i64(*sizes)}, input_order=["x", "", "", "z"])
    check("Resize", {"x": rnd(1, 2, 4, 5)}, attrs, framework=J, const={"z": i64(*sizes)},
          input_order=["x", "", "", "z"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias(mode: str) -> None:
    check("Resize", {"x": rnd(1, 1, 8, 9)}, {"mode": mode, "antialias": 1}, framework=J,
          const={"s": np.array([1, 1, 0.5, 0.4], F32)}, input_order=["x", "", "s"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_tf_crop_and_resize(mode: str) -> None:
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 10.0}
    check("Resize", {"x": rnd(1, 1, 4, 4)}, attrs, framework=J,
          const={"r": np.array([0, 0, 0.4, -0.3, 1, 1, 0.6, 1.2], F32), "z": i64(1, 1, 3, 5)},
          input_order=["x", "r", "", "z"], rtol=1e-4, atol=1e-5)


def test_resize_uint8() -> None:
    # Integer outputs are rounded (half to even) and saturated; a sum that lands within an
    # ulp of .5 may round either way (XLA contracts multiply-adds), so allow 1.
    inputs = {"x": rnd(1, 3, 4, 4, dtype=np.uint8, lo=0, hi=255)}
    proto = node_model("Resize", inputs, {"mode": "linear"}, const={"s": np.array([1, 1, 1.5, 2], F32)},
                       input_order=["x", "", "s"])
    got, want = run_jax(proto, inputs)[0], run_reference(proto, inputs)[0]
    assert got.dtype == want.dtype == np.uint8 and got.shape == want.shape
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_resize_unsupported_mode() -> None:
    proto = node_model("Resize", {"x": rnd(1, 1, 2, 2)}, {"mode": "nearest", "nearest_mode": "round_half_down"},
                       const={"s": np.array([1, 1, 2, 2], F32)}, input_order=["x", "", "s"])
    with pytest.raises(UnsupportedError):
        run_jax(proto, {"x": rnd(1, 1, 2, 2)})


def test_upsample_opset9() -> None:
    check_opset("Upsample", {"x": rnd(1, 2, 3, 3)}, {"mode": "nearest"}, opset=9,
                const={"s": np.array([1, 1, 2, 3], F32)})


# =========================================================================== newer / composite ops


def test_space_to_depth_crd() -> None:
    check("SpaceToDepth", {"x": rnd(1, 2, 4, 6)}, {"blocksize": 2, "mode": "CRD"}, framework=J, opset=28)


def test_qlinear_matmul() -> None:
    a, b = rnd(3, 4, dtype=np.uint8, lo=0, hi=255), rnd(4, 5, dtype=np.uint8, lo=0, hi=255)
    check("QLinearMatMul", {"a": a, "b": b}, framework=J, input_order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
          const={"as": np.array(0.02, F32), "az": np.array(100, np.uint8), "bs": np.array(0.01, F32),
                 "bz": np.array(120, np.uint8), "ys": np.array(0.5, F32), "yz": np.array(128, np.uint8)})
    a8, b8 = rnd(2, 3, 4, dtype=np.int8, lo=-128, hi=127), rnd(4, 2, dtype=np.int8, lo=-128, hi=127)
    check("QLinearMatMul", {"a": a8, "b": b8}, framework=J, input_order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
          const={"as": np.array(0.05, F32), "az": np.array(-3, np.int8), "bs": np.array([0.01, 0.02], F32),
                 "bz": np.array([0, 5], np.int8), "ys": np.array(0.7, F32), "yz": np.array(-10, np.int8)})


def test_qlinear_conv() -> None:
    x, w = rnd(1, 2, 5, 5, dtype=np.uint8, lo=0, hi=255), rnd(3, 2, 3, 3, dtype=np.uint8, lo=0, hi=255)
    order = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]
    check("QLinearConv", {"x": x, "w": w}, {"pads": [1, 1, 1, 1], "strides": [2, 1]}, framework=J,
          input_order=order,
          const={"xs": np.array(0.02, F32), "xz": np.array(100, np.uint8), "ws": np.array([0.01, 0.03, 0.02], F32),
                 "wz": np.array(128, np.uint8), "ys": np.array(0.9, F32), "yz": np.array(120, np.uint8),
                 "b": np.array([10, -200, 3000], np.int32)})


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction,weight,ignore", [("mean", False, None), ("sum", True, None),
                                                     ("none", False, 1), ("mean", True, 2), ("mean", False, -1)])
def test_losses(op: str, reduction: str, weight: bool, ignore: int | None) -> None:
    x = rnd(3, 4, 2)
    t = np.array([[0, 1], [2, 3], [1, 1]], I64)
    if ignore == -1:
        t[0, 0] = -1
    inputs = {"x": x, "t": t}
    if weight:
        inputs["w"] = rnd(4, lo=0.1, hi=1.0)
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    n_out = 2 if op == "SoftmaxCrossEntropyLoss" and reduction == "none" else 1
    if op == "NegativeLogLikelihoodLoss" and ignore == -1:
        # onnx.reference takes ignore_index=-1 for "unset" (divides by all 6 entries); the
        # spec's mean divides by the weight of the entries not ignored.
        picked = -np.take_along_axis(x, np.clip(t, 0, 3)[:, None], axis=1)[:, 0]
        keep = t != -1
        want = np.array(np.where(keep, picked, 0).sum() / keep.sum(), F32)
        check_expected(op, inputs, [want], attrs)
        return
    check(op, inputs, attrs, framework=J, n_outputs=n_out, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("interleaved,rank,pos", [(0, 4, True), (1, 4, True), (0, 3, False), (1, 3, True)])
def test_rotary_embedding(interleaved: int, rank: int, pos: bool) -> None:
    b, h, s, d = 2, 2, 3, 8
    x = rnd(b, h, s, d) if rank == 4 else rnd(b, s, h * d)
    attrs = {"interleaved": interleaved}
    if rank == 3:
        attrs["num_heads"] = h
    if pos:
        inputs = {"x": x, "c": rnd(6, d // 2), "s": rnd(6, d // 2), "p": np.array([[0, 1, 2], [5, 3, 0]], I64)}
    else:
        inputs = {"x": x, "c": rnd(b, s, d // 2), "s": rnd(b, s, d // 2)}
    check("RotaryEmbedding", inputs, attrs, framework=J, opset=23, rtol=1e-5, atol=1e-6)
    if rank == 4 and pos:  # rotate only the first 4 of the 8 head dims
        part = {**inputs, "c": rnd(6, 2), "s": rnd(6, 2)}
        check("RotaryEmbedding", part, {**attrs, "rotary_embedding_dim": 4}, framework=J, opset=23, rtol=1e-5,
              atol=1e-6)


@pytest.mark.parametrize("case", ["4d", "3d_gqa", "causal_past", "bool_mask", "softcap_mode", "float_mask_causal"])
def test_attention(case: str) -> None:
    b, hq, hk, s, kv, d = 2, 4, 2, 3, 5, 8
    if case == "3d_gqa":
        inputs = {"q": rnd(b, s, hq * d), "k": rnd(b, kv, hk * d), "v": rnd(b, kv, hk * d)}
        attrs, n = {"q_num_heads": hq, "kv_num_heads": hk}, 1
    else:
        inputs = {"q": rnd(b, hq, s, d), "k": rnd(b, hq, kv, d), "v": rnd(b, hq, kv, d)}
        attrs, n = {}, 1
    order = None
    if case == "causal_past":
        inputs.update({"pk": rnd(b, hq, 2, d), "pv": rnd(b, hq, 2, d)})
        attrs, n, order = {"is_causal": 1}, 3, ["q", "k", "v", "", "pk", "pv"]
    elif case == "bool_mask":
        mask = rnd(s, kv, dtype=bool)
        mask[1] = False  # a fully masked row gives 0
        inputs["m"] = mask
        attrs = {"scale": 0.2}
    elif case == "softcap_mode":
        attrs, n = {"softcap": 2.0, "qk_matmul_output_mode": 1}, 4
        order = ["q", "k", "v"]
    elif case == "float_mask_causal":
        inputs["m"] = rnd(b, 1, s, kv)
        attrs = {"is_causal": 1, "softmax_precision": 1}
    check("Attention", inputs, attrs, framework=J, opset=23, n_outputs=n, input_order=order, rtol=1e-5, atol=1e-5)


def test_bitcast() -> None:
    check("BitCast", {"x": special()}, {"to": 6}, framework=J, opset=26)  # float32 -> int32
    check("BitCast", {"x": int_edges(np.int16)}, {"to": 10}, framework=J, opset=26)  # int16 -> float16


def test_swiglu() -> None:
    check("SwiGLU", {"a": rnd(2, 6), "b": rnd(2, 6)}, {"alpha": 1.2}, framework=J, opset=28, rtol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(mode: str) -> None:
    past, upd = rnd(2, 3, 6, 4), rnd(2, 3, 2, 4)
    widx = np.array([1, 5 if mode == "circular" else 3], I64)
    check("TensorScatter", {"p": past, "u": upd, "w": widx}, {"mode": mode}, framework=J, opset=24)
    check("TensorScatter", {"p": past, "u": upd}, {"axis": 2}, framework=J, opset=24)


def test_col2im() -> None:
    check("Col2Im", {"x": rnd(1, 5 * 4, 9)}, framework=J, const={"i": i64(4, 4), "b": i64(2, 2)})
    check("Col2Im", {"x": rnd(2, 2 * 6, 3)}, {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]},
          framework=J, const={"i": i64(5, 4), "b": i64(2, 3)})


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(align: int) -> None:
    check("AffineGrid", {"t": rnd(2, 2, 3)}, {"align_corners": align}, framework=J, const={"s": i64(2, 3, 4, 5)},
          rtol=1e-5, atol=1e-6)
    check("AffineGrid", {"t": rnd(1, 3, 4)}, {"align_corners": align}, framework=J,
          const={"s": i64(1, 1, 2, 3, 4)}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample(mode: str, padding: str) -> None:
    x, grid = rnd(2, 2, 4, 5), rnd(2, 3, 2, 2, lo=-1.4, hi=1.4)
    for align in (0, 1):
        check("GridSample", {"x": x, "g": grid}, {"mode": mode, "padding_mode": padding, "align_corners": align},
              framework=J, rtol=1e-4, atol=1e-5)


def test_grid_sample_3d() -> None:
    check("GridSample", {"x": rnd(1, 2, 3, 4, 5), "g": rnd(1, 2, 2, 3, 3, lo=-1.2, hi=1.2)}, {"mode": "linear"},
          framework=J, rtol=1e-4, atol=1e-5)


def _rnn_inputs(kind: str, n_dir: int, t: int = 4, b: int = 3, i: int = 2, h: int = 3) -> dict:
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    inputs = {"x": rnd(t, b, i, lo=-1, hi=1), "w": rnd(n_dir, g * h, i, lo=-1, hi=1),
              "r": rnd(n_dir, g * h, h, lo=-1, hi=1), "b": rnd(n_dir, 2 * g * h, lo=-1, hi=1)}
    return inputs


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent(kind: str, direction: str) -> None:
    n_dir = 2 if direction == "bidirectional" else 1
    inputs = _rnn_inputs(kind, n_dir)
    inputs["h0"] = rnd(n_dir, 3, 3, lo=-1, hi=1)
    order = ["x", "w", "r", "b", "", "h0"]
    attrs = {"hidden_size": 3, "direction": direction}
    if kind == "GRU":
        attrs["linear_before_reset"] = int(direction == "reverse")
    n = 3 if kind == "LSTM" else 2
    if kind == "LSTM":
        inputs.update({"c0": rnd(n_dir, 3, 3), "p": rnd(n_dir, 9, lo=-1, hi=1)})
        order += ["c0", "p"]
    check(kind, inputs, attrs, framework=J, n_outputs=n, input_order=order, rtol=1e-5, atol=1e-5)


def test_lstm_layout_and_activations() -> None:
    inputs = _rnn_inputs("LSTM", 1)
    inputs["x"] = np.swapaxes(inputs["x"], 0, 1).copy()  # layout=1: batch-major
    expected = run_reference(node_model("LSTM", {**inputs, "x": np.swapaxes(inputs["x"], 0, 1).copy()},
                                        {"hidden_size": 3}, n_outputs=3), {**inputs, "x": np.swapaxes(inputs["x"], 0,
                                                                                                      1).copy()})
    want = [np.transpose(expected[0], (2, 0, 1, 3)), np.swapaxes(expected[1], 0, 1), np.swapaxes(expected[2], 0, 1)]
    check_expected("LSTM", inputs, want, {"hidden_size": 3, "layout": 1})


def test_rnn_sequence_lens() -> None:
    # Entries shorter than the sequence: outputs past their length are 0, Y_h is the state at
    # their last step (each entry run alone on its own length, with onnx.reference).
    inputs = _rnn_inputs("LSTM", 2)
    lens = np.array([4, 1, 2], np.int32)
    ys, yhs = [], []
    for bi, n in enumerate(lens):
        one = {**inputs, "x": inputs["x"][:n, bi:bi + 1]}
        y, yh, _ = run_reference(node_model("LSTM", one, {"hidden_size": 3, "direction": "bidirectional"},
                                            n_outputs=3), one)
        ys.append(np.pad(y, [(0, 4 - n), (0, 0), (0, 0), (0, 0)]))
        yhs.append(yh)
    want = [np.concatenate(ys, axis=2), np.concatenate(yhs, axis=1)]
    check_expected("LSTM", {**inputs, "l": lens}, want, {"hidden_size": 3, "direction": "bidirectional"},
                   input_order=["x", "w", "r", "b", "l"])


@pytest.mark.parametrize("attrs,axis,n", [({}, None, None), ({"onesided": 1}, -2, None), ({"inverse": 1}, 1, 6),
                                          ({"inverse": 1, "onesided": 1}, -2, None)])
@pytest.mark.parametrize("complex_in", [False, True])
def test_dft(attrs: dict, axis: int | None, n: int | None, complex_in: bool) -> None:
    if attrs.get("onesided") and complex_in and not attrs.get("inverse"):
        pytest.skip("onesided needs a real input")
    if attrs.get("inverse") and attrs.get("onesided") and not complex_in:
        pytest.skip("inverse onesided takes a complex half spectrum")
    x = rnd(2, 5, 3, 2 if complex_in else 1)
    const, order = {}, ["x"]
    if n is not None:
        const["n"], order = np.array(n, I64), order + ["n"]
    if axis is not None:
        const["a"] = np.array(axis, I64)
        order += ["a"] if n is not None else ["", "a"]
    check("DFT", {"x": x}, attrs, framework=J, const=const, input_order=order, rtol=1e-4, atol=1e-5)


def test_stft() -> None:
    x = rnd(2, 16, 1)
    check("STFT", {"x": x}, framework=J, const={"s": np.array(4, I64), "w": np.hanning(6).astype(F32)},
          rtol=1e-4, atol=1e-5)
    check("STFT", {"x": x}, {"onesided": 0}, framework=J,
          const={"s": np.array(3, I64), "w": np.ones(5, F32), "n": np.array(5, I64)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm,ratio", [("half_pixel", 2), ("output_half_pixel", 2), ("half_pixel", 0)])
def test_roi_align(mode: str, ctm: str, ratio: int) -> None:
    x = rnd(2, 3, 8, 7)
    rois = np.array([[0.5, 1.0, 5.5, 6.0], [-2.0, 0.0, 3.0, 9.5], [2.0, 2.0, 2.5, 3.0]], F32)
    bidx = np.array([1, 0, 1], I64)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "sampling_ratio": ratio, "output_height": 3,
             "output_width": 2, "spatial_scale": 0.9}
    sz = mode == "avg"  # max of zero-weighted samples: the sign of 0 is open
    if ratio:
        check("RoiAlign", {"x": x, "r": rois, "b": bidx}, attrs, framework=J, rtol=1e-5, atol=1e-5, signed_zero=sz)
    else:  # the adaptive grid needs known rois
        check("RoiAlign", {"x": x, "b": bidx}, attrs, framework=J, const={"r": rois},
              input_order=["x", "r", "b"], rtol=1e-5, atol=1e-5, signed_zero=sz)


def test_batch_norm_training() -> None:
    c = 3
    check("BatchNormalization", {"x": rnd(2, c, 4), "s": rnd(c), "b": rnd(c), "m": rnd(c),
                                 "v": rnd(c, lo=0.5, hi=2.0)}, {"training_mode": 1, "momentum": 0.8}, framework=J,
          n_outputs=3, rtol=1e-5, atol=1e-5)


def test_mel_weight_matrix_folded() -> None:
    check("MelWeightMatrix", {}, framework=J, opset=17, rtol=1e-5, atol=1e-6,
          const={"n": np.array(8, I64), "d": np.array(16, I64), "r": np.array(8000, I64),
                 "lo": np.array(0.0, F32), "hi": np.array(4000.0, F32)})
