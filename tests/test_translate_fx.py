"""FX converters (compstack.translate.fx) against onnx.reference, one family at a time.

Each case builds a one-node model (tests/translate_harness.py), runs the translated
GraphModule eagerly and the reference evaluator on the same random inputs (NaN, -0.0,
inf and integer extremes where the op defines them), and compares values, dtypes, NaN
positions and the sign of zero.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import helper

from compstack.core import ir as cir
from compstack.core.errors import UnsupportedError
from compstack.translate.fx import ONNX_NODE_KEY, TABLE, to_fx
from translate_harness import assert_close, check, node_model, run_fx, run_reference

#: onnx.reference warns on the NaN/inf/zero inputs the cases feed it on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RNG = np.random.default_rng(20240611)
NAN, INF = np.nan, np.inf
TP = onnx.TensorProto


def f32(*shape, lo=-3.0, hi=3.0):
    """Uniform float32 in [lo, hi)."""
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def rnd(*shape):
    """Standard normal float32."""
    return RNG.standard_normal(shape).astype(np.float32)


def ints(dtype, *shape, lo=-20, hi=20):
    return RNG.integers(lo, hi, shape).astype(dtype)


def special(x):
    """``x`` (float, >= 8 elements) with NaN, +-inf, -0.0 and 0.0 in its first slots."""
    x = x.copy()
    flat = x.reshape(-1)
    flat[:5] = [NAN, INF, -INF, -0.0, 0.0]
    return x


def extremes(dtype):
    info = np.iinfo(dtype)
    return np.array([info.min, info.max, 0, -1 if info.min < 0 else 1, 7, info.min + 1, info.max - 1, 3], dtype=dtype)


def case(op, inputs, attrs=None, id=None, **kw):
    return pytest.param(op, inputs, attrs or {}, kw, id=id or op)


def run(op, inputs, attrs, kw):
    check(op, inputs, attrs, framework="fx", **kw)


# ---------------------------------------------------------------------------------------
# elementwise: binary arithmetic, comparison, logic, bitwise, variadic, Clip

X8 = special(rnd(2, 4))
Y8 = rnd(2, 4)
I32A = np.array([-7, 7, -7, 7, 0, 5, -1, 2**31 - 1], dtype=np.int32)
I32B = np.array([2, -2, -2, 2, 3, -5, 3, 1], dtype=np.int32)

ELEMENTWISE = [
    case("Add", {"a": X8, "b": Y8}, id="add_special"),
    case("Add", {"a": rnd(2, 3, 4), "b": rnd(4)}, id="add_broadcast"),
    case("Add", {"a": extremes(np.int8), "b": np.ones(8, np.int8)}, id="add_int8_wrap"),
    case("Add", {"a": ints(np.uint16, 8, lo=0, hi=65535), "b": ints(np.uint16, 8, lo=0, hi=65535)},
         id="add_uint16_wrap"),
    case("Add", {"a": np.array([2**64 - 1, 5, 2**63], np.uint64), "b": np.array([1, 2**63, 7], np.uint64)},
         id="add_uint64"),
    case("Sub", {"a": X8, "b": Y8}, id="sub_special"),
    case("Sub", {"a": ints(np.uint32, 6, lo=0, hi=10), "b": ints(np.uint32, 6, lo=0, hi=10)}, id="sub_uint32_wrap"),
    case("Mul", {"a": X8, "b": Y8}, id="mul_special"),
    case("Mul", {"a": extremes(np.int32), "b": np.full(8, 3, np.int32)}, id="mul_int32_wrap"),
    case("Div", {"a": X8, "b": special(rnd(2, 4))}, id="div_special"),
    case("Div", {"a": I32A, "b": I32B}, id="div_int32_trunc"),
    case("Div", {"a": extremes(np.int64), "b": np.array([3, -7, 5, 2, -2, 9, -1, 4], np.int64)}, id="div_int64"),
    case("Div", {"a": extremes(np.uint8), "b": np.full(8, 3, np.uint8)}, id="div_uint8"),
    case("Pow", {"a": f32(2, 4, lo=0.1, hi=3), "b": f32(2, 4)}, id="pow_float"),
    case("Pow", {"a": rnd(2, 4), "b": np.array(2, np.int64)}, id="pow_int_exponent"),
    case("Pow", {"a": ints(np.int32, 6, lo=-5, hi=5), "b": ints(np.int32, 6, lo=0, hi=4)}, id="pow_int"),
    case("Pow", {"a": f32(5, lo=0.5, hi=2).astype(np.float16), "b": f32(5)}, id="pow_fp16_fp32", rtol=1e-3),
    case("Pow", {"a": f32(3, lo=0.5, hi=2), "b": np.array([1, 2, 3], np.uint64)}, id="pow_uint64_exponent"),
    case("Mod", {"a": I32A, "b": I32B}, id="mod_int32_sign_of_divisor"),
    case("Mod", {"a": I32A, "b": I32B}, {"fmod": 1}, id="mod_int32_fmod"),
    case("Mod", {"a": extremes(np.int8), "b": np.array([3, -3, 5, -5, 2, 7, -7, 4], np.int8)}, id="mod_int8"),
    case("Mod", {"a": extremes(np.int64), "b": np.array([3, -3, 5, -5, 2, 7, -7, 4], np.int64)}, {"fmod": 1},
         id="mod_int64_fmod"),
    case("Mod", {"a": f32(8, lo=-9, hi=9), "b": np.array([2, -2, 3.5, -3.5, 1, 4, -4, 0.5], np.float32)},
         {"fmod": 1}, id="mod_float_fmod"),
    case("Mod", {"a": f32(8, lo=-9, hi=9), "b": np.array([2, -2, 3.5, -3.5, 1, 4, -4, 0.5], np.float32)},
         id="mod_float_python", signed_zero=False),
    case("Max", {"a": X8, "b": Y8, "c": rnd(4)}, id="max_variadic_nan"),
    case("Max", {"a": X8}, id="max_single"),
    case("Max", {"a": extremes(np.int8), "b": extremes(np.int8)[::-1].copy()}, id="max_int8"),
    case("Max", {"a": np.array([1, 2**63, 2**64 - 1], np.uint64), "b": np.array([2**63 + 1, 3, 4], np.uint64)},
         id="max_uint64"),
    case("Min", {"a": X8, "b": Y8, "c": rnd(2, 1)}, id="min_variadic_nan"),
    case("Min", {"a": ints(np.uint32, 5, lo=0, hi=100), "b": ints(np.uint32, 5, lo=0, hi=100)}, id="min_uint32"),
    case("Sum", {"a": X8, "b": Y8, "c": rnd(4)}, id="sum_variadic"),
    case("Sum", {"a": extremes(np.int32), "b": extremes(np.int32)}, id="sum_int32"),
    case("Mean", {"a": rnd(2, 4), "b": Y8, "c": rnd(4)}, id="mean_variadic"),
    case("Equal", {"a": np.array([1.0, NAN, -0.0, INF], np.float32), "b": np.array([1.0, NAN, 0.0, INF], np.float32)},
         id="equal_float"),
    case("Equal", {"a": extremes(np.int64), "b": extremes(np.int64)[::-1].copy()}, id="equal_int64"),
    case("Equal", {"a": np.array([True, False, True]), "b": np.array([True, True, False])}, id="equal_bool"),
    case("Equal", {"a": np.array([1, 2**63], np.uint64), "b": np.array([1, 2**63], np.uint64)}, id="equal_uint64"),
    case("Less", {"a": X8, "b": Y8}, id="less_float"),
    case("Less", {"a": np.array([1, 2**63, 5], np.uint64), "b": np.array([2**63, 2, 5], np.uint64)}, id="less_uint64"),
    case("Greater", {"a": extremes(np.int8), "b": np.zeros(8, np.int8)}, id="greater_int8"),
    case("LessOrEqual", {"a": X8, "b": Y8}, id="less_equal"),
    case("GreaterOrEqual", {"a": ints(np.uint16, 5, lo=0, hi=4), "b": ints(np.uint16, 5, lo=0, hi=4)},
         id="greater_equal_uint16"),
    case("And", {"a": RNG.random((3, 4)) > 0.5, "b": RNG.random(4) > 0.5}, id="and"),
    case("Or", {"a": RNG.random((3, 4)) > 0.5, "b": RNG.random((3, 4)) > 0.5}, id="or"),
    case("Xor", {"a": RNG.random((3, 4)) > 0.5, "b": RNG.random((3, 4)) > 0.5}, id="xor"),
    case("Not", {"x": RNG.random((3, 4)) > 0.5}, id="not"),
    case("BitwiseAnd", {"a": extremes(np.int32), "b": ints(np.int32, 8)}, id="bitwise_and"),
    case("BitwiseOr", {"a": extremes(np.uint8), "b": ints(np.uint8, 8, lo=0, hi=255)}, id="bitwise_or"),
    case("BitwiseXor", {"a": extremes(np.int16), "b": ints(np.int16, 8)}, id="bitwise_xor"),
    case("BitwiseNot", {"x": extremes(np.int8)}, id="bitwise_not_int8"),
    case("BitwiseNot", {"x": ints(np.uint16, 6, lo=0, hi=65535)}, id="bitwise_not_uint16"),
    case("BitShift", {"a": np.array([1, 255, 16, 128], np.uint8), "b": np.array([1, 2, 4, 7], np.uint8)},
         {"direction": "LEFT"}, id="shift_left_uint8"),
    case("BitShift", {"a": np.array([1, 255, 16, 128], np.uint8), "b": np.array([1, 2, 4, 7], np.uint8)},
         {"direction": "RIGHT"}, id="shift_right_uint8"),
    case("BitShift", {"a": np.array([1, 2**32 - 1, 16], np.uint32), "b": np.array([31, 4, 1], np.uint32)},
         {"direction": "LEFT"}, id="shift_left_uint32"),
    case("BitShift", {"a": np.array([1, 2**64 - 1, 2**63], np.uint64), "b": np.array([0, 4, 63], np.uint64)},
         {"direction": "RIGHT"}, id="shift_right_uint64"),
    case("IsNaN", {"x": X8}, id="isnan"),
    case("IsInf", {"x": X8}, id="isinf"),
    case("IsInf", {"x": X8}, {"detect_negative": 0}, id="isinf_positive"),
    case("IsInf", {"x": X8}, {"detect_positive": 0}, id="isinf_negative"),
    case("Clip", {"x": X8}, const={"lo": np.float32(-0.5), "hi": np.float32(0.7)}, id="clip_const"),
    case("Clip", {"x": X8, "hi": np.float32(0.3)}, input_order=["x", "", "hi"], id="clip_runtime_max_only"),
    case("Clip", {"x": X8, "lo": np.float32(-0.3), "hi": np.float32(0.3)}, id="clip_runtime"),
    case("Clip", {"x": X8}, id="clip_none"),
    case("Clip", {"x": extremes(np.int8)}, const={"lo": np.int8(-5), "hi": np.int8(100)}, id="clip_int8"),
    case("Clip", {"x": rnd(6)}, const={"lo": np.float32(1.0), "hi": np.float32(-1.0)}, id="clip_min_above_max"),
    case("Relu", {"x": X8}, id="relu", signed_zero=False),  # max(0, -0.0): either zero
    case("Relu", {"x": extremes(np.int32)}, id="relu_int32"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "kw"), ELEMENTWISE)
def test_elementwise(op, inputs, attrs, kw):
    run(op, inputs, attrs, kw)


# ---------------------------------------------------------------------------------------
# math: unary functions

UNIT = special(f32(3, 4, lo=-0.99, hi=0.99))
POS = special(f32(3, 4, lo=0.0, hi=5.0))
HALVES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, -0.0, 3.7, -3.2, NAN, INF], np.float32)

MATH = [
    case("Abs", {"x": X8}, id="abs"),
    case("Abs", {"x": extremes(np.int8)}, id="abs_int8_min"),
    case("Abs", {"x": ints(np.uint32, 4, lo=0, hi=9)}, id="abs_uint32"),
    case("Neg", {"x": X8}, id="neg"),
    case("Neg", {"x": extremes(np.int32)}, id="neg_int32_min"),
    case("Reciprocal", {"x": X8}, id="reciprocal"),
    case("Sqrt", {"x": special(f32(3, 4, lo=-1, hi=4))}, id="sqrt"),
    case("Exp", {"x": X8}, id="exp"),
    case("Log", {"x": POS}, id="log"),
    case("Log", {"x": special(f32(3, 4, lo=-1, hi=4))}, id="log_negative"),
    case("Ceil", {"x": HALVES}, id="ceil"),
    case("Floor", {"x": HALVES}, id="floor"),
    case("Round", {"x": HALVES}, id="round_half_even"),
    case("Sign", {"x": X8}, id="sign", signed_zero=False),
    case("Sign", {"x": extremes(np.int16)}, id="sign_int16"),
    case("Erf", {"x": X8}, id="erf"),
    case("Sin", {"x": X8}, id="sin"),
    case("Cos", {"x": X8}, id="cos"),
    case("Tan", {"x": rnd(3, 4)}, id="tan"),
    case("Asin", {"x": UNIT}, id="asin"),
    case("Acos", {"x": UNIT}, id="acos"),
    case("Atan", {"x": X8}, id="atan"),
    case("Sinh", {"x": rnd(3, 4)}, id="sinh"),
    case("Cosh", {"x": rnd(3, 4)}, id="cosh"),
    case("Asinh", {"x": X8}, id="asinh"),
    case("Acosh", {"x": f32(3, 4, lo=1.0, hi=5.0)}, id="acosh"),
    case("Atanh", {"x": UNIT}, id="atanh"),
    case("Sigmoid", {"x": X8}, id="sigmoid"),
    case("Tanh", {"x": X8}, id="tanh"),
    case("Det", {"x": rnd(2, 3, 3)}, id="det", rtol=1e-4, atol=1e-5),
    case("Exp", {"x": rnd(3, 4).astype(np.float16)}, id="exp_fp16", rtol=1e-3),
    case("Sqrt", {"x": f32(5, lo=0, hi=9).astype(np.float64)}, id="sqrt_fp64"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "kw"), MATH)
def test_math(op, inputs, attrs, kw):
    run(op, inputs, attrs, kw)


# ---------------------------------------------------------------------------------------
# nn: activations, softmax family, products, convolution, pooling, normalization, losses

A = special(rnd(3, 5))

ACTIVATIONS = [
    case("LeakyRelu", {"x": A}, {"alpha": 0.1}, id="leaky_relu"),
    case("PRelu", {"x": rnd(2, 3, 4), "slope": rnd(3, 1)}, id="prelu_broadcast"),
    case("PRelu", {"x": A, "slope": rnd(5)}, id="prelu_special"),
    case("Elu", {"x": A}, {"alpha": 0.7}, id="elu"),
    case("Selu", {"x": A}, id="selu"),
    case("Celu", {"x": A}, {"alpha": 1.3}, id="celu"),
    case("ThresholdedRelu", {"x": A}, {"alpha": 0.4}, id="thresholded_relu"),
    case("Shrink", {"x": A}, {"bias": 0.2, "lambd": 0.6}, id="shrink"),
    case("Shrink", {"x": extremes(np.int8)}, {"bias": 1.5, "lambd": 2.0}, id="shrink_int8"),
    case("Softplus", {"x": special(rnd(3, 5) * 20)}, id="softplus"),
    case("Softsign", {"x": A}, id="softsign"),
    case("Mish", {"x": A}, id="mish", rtol=1e-5, atol=1e-6),
    case("HardSigmoid", {"x": A}, {"alpha": 0.3, "beta": 0.4}, id="hard_sigmoid"),
    case("HardSwish", {"x": f32(3, 5, lo=-5, hi=5)}, id="hard_swish"),
    case("Gelu", {"x": A}, id="gelu"),
    case("Gelu", {"x": A}, {"approximate": "tanh"}, id="gelu_tanh"),
    case("Swish", {"x": rnd(3, 5)}, {"alpha": 1.5}, id="swish", opset=24),
    case("Softmax", {"x": rnd(2, 3, 4)}, id="softmax"),
    case("Softmax", {"x": rnd(2, 3, 4)}, {"axis": 1}, id="softmax_axis1"),
    case("Softmax", {"x": np.array([[-INF, 1.0, 2.0], [0.0, INF, 1.0]], np.float32)}, id="softmax_inf"),
    case("LogSoftmax", {"x": rnd(2, 3, 4)}, {"axis": -2}, id="log_softmax"),
    case("Hardmax", {"x": np.array([[1, 3, 3, 2], [5, 5, 0, 5]], np.float32)}, id="hardmax_ties"),
    case("Hardmax", {"x": rnd(2, 3, 4)}, {"axis": 1}, id="hardmax_axis1"),
]


def _conv_w(m, c, *k):
    return rnd(m, c, *k)


CONV = [
    case("Conv", {"x": rnd(1, 2, 9), "w": _conv_w(3, 2, 3)}, id="conv1d"),
    case("Conv", {"x": rnd(2, 3, 7, 6), "w": _conv_w(4, 3, 3, 3), "b": rnd(4)}, {"pads": [1, 1, 1, 1]},
         id="conv2d_pads_bias"),
    case("Conv", {"x": rnd(1, 2, 7, 6), "w": _conv_w(3, 2, 3, 2)}, {"pads": [0, 1, 2, 0], "strides": [2, 1]},
         id="conv2d_asymmetric_pads"),
    case("Conv", {"x": rnd(1, 4, 8, 8), "w": _conv_w(6, 2, 3, 3)}, {"group": 2, "dilations": [2, 1]},
         id="conv2d_group_dilation"),
    case("Conv", {"x": rnd(1, 2, 7, 8), "w": _conv_w(2, 2, 3, 3)}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
         id="conv2d_same_upper"),
    case("Conv", {"x": rnd(1, 2, 7, 8), "w": _conv_w(2, 2, 4, 4)}, {"auto_pad": "SAME_LOWER"},
         id="conv2d_same_lower"),
    case("Conv", {"x": rnd(1, 2, 7, 8), "w": _conv_w(2, 2, 3, 3)}, {"auto_pad": "VALID", "strides": [2, 3]},
         id="conv2d_valid"),
    case("Conv", {"x": rnd(1, 2, 5, 5, 4), "w": _conv_w(2, 2, 3, 3, 2), "b": rnd(2)}, {"pads": [1, 0, 1, 1, 2, 0]},
         id="conv3d"),
    case("ConvTranspose", {"x": rnd(1, 2, 4, 4), "w": rnd(2, 3, 3, 3), "b": rnd(3)}, id="conv_transpose"),
    case("ConvTranspose", {"x": rnd(1, 2, 3, 4), "w": rnd(2, 3, 3, 3)},
         {"strides": [2, 2], "output_padding": [1, 0], "pads": [1, 1, 1, 1]}, id="conv_transpose_output_padding"),
    case("ConvTranspose", {"x": rnd(1, 2, 3, 4), "w": rnd(2, 3, 3, 2)}, {"strides": [2, 1], "pads": [0, 1, 2, 0]},
         id="conv_transpose_asymmetric_pads"),
    case("ConvTranspose", {"x": rnd(1, 1, 3, 3), "w": rnd(1, 2, 3, 3)}, {"strides": [3, 2], "output_shape": [10, 8]},
         id="conv_transpose_output_shape"),
    case("ConvTranspose", {"x": rnd(1, 2, 3, 3), "w": rnd(2, 2, 3, 3)}, {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
         id="conv_transpose_same_upper"),
    case("ConvTranspose", {"x": rnd(1, 2, 5), "w": rnd(2, 2, 3)}, {"strides": [3], "output_padding": [2]},
         id="conv_transpose1d"),
    case("ConvTranspose", {"x": rnd(1, 1, 2, 3, 2), "w": rnd(1, 2, 2, 2, 2)}, {"strides": [2, 1, 2]},
         id="conv_transpose3d"),
    case("ConvInteger", {"x": ints(np.uint8, 1, 2, 5, 5, lo=0, hi=255), "w": ints(np.uint8, 3, 2, 3, 3, lo=0, hi=255),
                         "xz": np.uint8(12)}, {"pads": [1, 0, 1, 0]}, id="conv_integer"),
]

P = special(rnd(1, 2, 7, 8))

POOL = [
    case("MaxPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3]}, id="maxpool"),
    case("MaxPool", {"x": P}, {"kernel_shape": [2, 2], "strides": [2, 2]}, id="maxpool_special"),
    case("MaxPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
         id="maxpool_ceil"),
    case("MaxPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "pads": [1, 0, 2, 1], "strides": [1, 2]},
         id="maxpool_asym_pads"),
    case("MaxPool", {"x": rnd(1, 2, 9, 8)}, {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]},
         id="maxpool_dilations"),
    case("MaxPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
         id="maxpool_same_upper"),
    case("MaxPool", {"x": rnd(1, 2, 7, 9)}, {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"},
         id="maxpool_same_lower"),
    case("MaxPool", {"x": rnd(2, 3, 10)}, {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, id="maxpool1d"),
    case("MaxPool", {"x": rnd(1, 1, 4, 5, 6)}, {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2]}, id="maxpool3d"),
    case("MaxPool", {"x": ints(np.int8, 1, 2, 6, 6, lo=-128, hi=127)}, {"kernel_shape": [2, 2], "strides": [2, 2]},
         id="maxpool_int8"),
    case("MaxPool", {"x": rnd(2, 2, 7, 8)}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
         id="maxpool_indices", n_outputs=2),
    case("MaxPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [2, 3], "strides": [2, 2], "storage_order": 1},
         id="maxpool_indices_col_major", n_outputs=2),
    case("MaxPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]},
         id="maxpool_indices_asym_pads", n_outputs=2),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3]}, id="avgpool"),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
         id="avgpool_pads_exclude"),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
         id="avgpool_pads_include"),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 2], "pads": [2, 0, 0, 1], "strides": [2, 2]},
         id="avgpool_asym_pads"),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
         id="avgpool_ceil"),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)},
         {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1], "count_include_pad": 1},
         id="avgpool_ceil_include_pad"),
    case("AveragePool", {"x": rnd(1, 2, 9, 8)}, {"kernel_shape": [2, 2], "dilations": [2, 2]}, id="avgpool_dilations"),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
         id="avgpool_same_upper"),
    case("AveragePool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER",
                                                 "count_include_pad": 1}, id="avgpool_same_lower_include"),
    case("AveragePool", {"x": rnd(2, 3, 10)}, {"kernel_shape": [4], "strides": [3]}, id="avgpool1d"),
    case("AveragePool", {"x": rnd(1, 1, 4, 5, 6)}, {"kernel_shape": [2, 2, 2], "pads": [1, 0, 1, 0, 1, 1]},
         id="avgpool3d"),
    case("LpPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [3, 3], "strides": [2, 2]}, id="lppool"),
    case("LpPool", {"x": rnd(1, 2, 7, 8)}, {"kernel_shape": [2, 3], "p": 3}, id="lppool_p3", rtol=1e-4),
    case("GlobalAveragePool", {"x": rnd(2, 3, 4, 5)}, id="global_avgpool"),
    case("GlobalMaxPool", {"x": P}, id="global_maxpool"),
    case("MaxUnpool", {"x": rnd(1, 1, 2, 2), "i": np.array([[[[5, 7], [13, 15]]]], np.int64)},
         {"kernel_shape": [2, 2], "strides": [2, 2]}, id="maxunpool"),
]

NORM = [
    case("BatchNormalization", {"x": rnd(2, 3, 4, 5), "s": rnd(3), "b": rnd(3), "m": rnd(3),
                                "v": f32(3, lo=0.5, hi=2)}, {"epsilon": 1e-3}, id="batchnorm"),
    case("InstanceNormalization", {"x": rnd(2, 3, 4, 5), "s": rnd(3), "b": rnd(3)}, id="instancenorm", atol=1e-5),
    case("LayerNormalization", {"x": rnd(2, 3, 4), "s": rnd(4), "b": rnd(4)}, id="layernorm"),
    case("LayerNormalization", {"x": rnd(2, 3, 4), "s": rnd(3, 4)}, {"axis": 1, "epsilon": 1e-3},
         id="layernorm_axis1_stats", n_outputs=3, atol=1e-5),
    case("GroupNormalization", {"x": rnd(2, 4, 3, 3), "s": rnd(4), "b": rnd(4)}, {"num_groups": 2},
         id="groupnorm_21", opset=21, atol=1e-5),
    case("GroupNormalization", {"x": rnd(2, 4, 3, 3), "s": rnd(2), "b": rnd(2)}, {"num_groups": 2},
         id="groupnorm_18", opset=18, atol=1e-5),
    case("RMSNormalization", {"x": rnd(2, 3, 4), "s": rnd(4)}, id="rmsnorm", opset=23),
    case("LpNormalization", {"x": rnd(3, 4)}, {"axis": 0}, id="lpnorm_p2"),
    case("LpNormalization", {"x": f32(3, 4, lo=0, hi=2)}, {"p": 1}, id="lpnorm_p1"),
    # onnx.reference's LRN loops over the batch dim for channels: N == C keeps it right
    case("LRN", {"x": rnd(5, 5, 3, 3)}, {"size": 3, "alpha": 0.01, "beta": 0.7, "bias": 2.0}, id="lrn"),
    case("LRN", {"x": rnd(6, 6, 2, 3)}, {"size": 4}, id="lrn_even_size"),
    case("MeanVarianceNormalization", {"x": rnd(2, 3, 4, 5)}, id="mvn", atol=1e-5),
    case("Dropout", {"x": rnd(3, 4)}, id="dropout"),
    case("Dropout", {"x": rnd(3, 4)}, const={"r": np.float32(0.3), "t": np.bool_(False)}, id="dropout_mask",
         n_outputs=2),
]

PRODUCTS = [
    case("MatMul", {"a": rnd(2, 3, 4), "b": rnd(4, 5)}, id="matmul_batched", atol=1e-5),
    case("MatMul", {"a": rnd(4), "b": rnd(2, 4, 3)}, id="matmul_1d", atol=1e-5),
    case("MatMul", {"a": ints(np.int32, 3, 4), "b": ints(np.int32, 4, 2)}, id="matmul_int32"),
    case("Gemm", {"a": rnd(4, 3), "b": rnd(5, 4), "c": rnd(5)}, {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0},
         id="gemm_trans", atol=1e-5),
    case("Gemm", {"a": rnd(3, 4), "b": rnd(4, 5)}, id="gemm_no_c", atol=1e-5),
    case("Gemm", {"a": ints(np.int64, 3, 4), "b": ints(np.int64, 4, 2), "c": ints(np.int64, 1, 2)}, id="gemm_int64"),
    case("MatMulInteger", {"a": ints(np.uint8, 3, 4, lo=0, hi=255), "b": ints(np.uint8, 4, 2, lo=0, hi=255),
                           "az": np.uint8(7), "bz": np.uint8(200)}, id="matmul_integer"),
    case("MatMulInteger", {"a": ints(np.int8, 2, 3, 4, lo=-128, hi=127), "b": ints(np.int8, 4, 2, lo=-128, hi=127)},
         id="matmul_integer_int8"),
    case("Einsum", {"a": rnd(2, 3, 4), "b": rnd(2, 4, 5)}, {"equation": "bij,bjk->bik"}, id="einsum_bmm", atol=1e-5),
    case("Einsum", {"a": rnd(3, 3)}, {"equation": "ii->i"}, id="einsum_diag"),
    case("Einsum", {"a": rnd(2, 3), "b": rnd(4)}, {"equation": "ij,k->ijk"}, id="einsum_outer"),
    case("Einsum", {"a": rnd(2, 3, 4)}, {"equation": "...ij->...ji"}, id="einsum_ellipsis"),
]

LOSSES = [
    case("NegativeLogLikelihoodLoss", {"x": rnd(3, 5), "t": np.array([0, 4, 2], np.int64)}, id="nll_mean"),
    case("NegativeLogLikelihoodLoss", {"x": rnd(3, 5, 2), "t": np.array([[0, 1], [4, 2], [2, 2]], np.int64),
                                       "w": f32(5, lo=0.1, hi=2)},
         {"reduction": "mean", "ignore_index": 2}, id="nll_weight_ignore"),
    case("NegativeLogLikelihoodLoss", {"x": rnd(3, 5), "t": np.array([0, 4, 2], np.int64)}, {"reduction": "none"},
         id="nll_none"),
    case("SoftmaxCrossEntropyLoss", {"x": rnd(3, 5), "t": np.array([0, 4, 2], np.int64)}, {"reduction": "sum"},
         id="sce_sum_logprob", n_outputs=2),
    case("SoftmaxCrossEntropyLoss", {"x": rnd(3, 5), "t": np.array([0, 4, 2], np.int32), "w": f32(5, lo=0.5, hi=1)},
         id="sce_weight"),
]


QKV3 = {"q": rnd(2, 3, 8), "k": rnd(2, 5, 8), "v": rnd(2, 5, 6)}
QKV4 = {"q": rnd(2, 4, 3, 4), "k": rnd(2, 2, 5, 4), "v": rnd(2, 2, 5, 3)}
ATTENTION = [
    case("Attention", dict(QKV3), {"q_num_heads": 2, "kv_num_heads": 2}, id="attention_3d", opset=23),
    case("Attention", dict(QKV4), {"is_causal": 1, "scale": 0.3}, id="attention_gqa_causal", opset=23),
    case("Attention", {**QKV4, "m": RNG.random((3, 5)) > 0.3}, {"qk_matmul_output_mode": 2},
         id="attention_bool_mask_mode2", opset=23, n_outputs=4),
    case("Attention", {**QKV4, "m": rnd(2, 1, 3, 4)}, {"softcap": 2.0, "qk_matmul_output_mode": 3},
         id="attention_float_mask_padded_softcap", opset=23, n_outputs=4),
    case("Attention", {**QKV4, "m": np.zeros((3, 7), np.float32), "pk": rnd(2, 2, 2, 4), "pv": rnd(2, 2, 2, 3)},
         {"is_causal": 1}, id="attention_past_kv_causal", opset=23, n_outputs=3),
    case("Attention", {**QKV4, "m": np.array([[True] * 5, [False] * 5, [True, False] * 2 + [True]])},
         id="attention_fully_masked_row", opset=23),
    case("Attention", {"q": rnd(1, 2, 3, 4).astype(np.float16), "k": rnd(1, 2, 4, 4).astype(np.float16),
                       "v": rnd(1, 2, 4, 4).astype(np.float16)}, {"softmax_precision": TP.FLOAT},
         id="attention_fp16_softmax_precision", opset=23, rtol=2e-3, atol=2e-3),
    case("RotaryEmbedding", {"x": rnd(2, 3, 4, 8), "cos": rnd(2, 4, 4), "sin": rnd(2, 4, 4)}, id="rotary_4d",
         opset=23),
    case("RotaryEmbedding", {"x": rnd(2, 4, 12), "cos": rnd(6, 2), "sin": rnd(6, 2),
                             "pos": np.array([[0, 2, 4, 5], [1, 1, 3, 0]], np.int64)},
         {"num_heads": 2, "rotary_embedding_dim": 4, "interleaved": 1}, id="rotary_3d_interleaved_partial",
         opset=23),
    case("SwiGLU", {"a": rnd(3, 4), "b": rnd(3, 4)}, {"alpha": 1.7}, id="swiglu", opset=28),
    case("QLinearMatMul", {"a": ints(np.uint8, 3, 4, lo=0, hi=255), "as": np.float32(0.05), "az": np.uint8(120),
                           "b": ints(np.uint8, 4, 2, lo=0, hi=255), "bs": np.float32(0.02), "bz": np.uint8(130),
                           "ys": np.float32(0.1), "yz": np.uint8(128)}, id="qlinear_matmul"),
    case("QLinearConv", {"x": ints(np.uint8, 1, 2, 5, 5, lo=0, hi=255), "xs": np.float32(0.05), "xz": np.uint8(120),
                         "w": ints(np.int8, 3, 2, 3, 3, lo=-128, hi=127), "ws": np.float32(0.01), "wz": np.int8(0),
                         "ys": np.float32(0.2), "yz": np.uint8(100), "b": ints(np.int32, 3, lo=-500, hi=500)},
         {"pads": [1, 1, 1, 1]}, id="qlinear_conv"),
]

RX = rnd(4, 2, 3)
RECURRENT = [
    case("RNN", {"x": RX, "w": rnd(1, 5, 3), "r": rnd(1, 5, 5), "b": rnd(1, 10)}, {"hidden_size": 5},
         id="rnn", n_outputs=2),
    case("RNN", {"x": rnd(2, 4, 3), "w": rnd(2, 5, 3), "r": rnd(2, 5, 5)},
         {"hidden_size": 5, "direction": "bidirectional", "layout": 1}, id="rnn_bidirectional_batch_major",
         n_outputs=2),
    case("GRU", {"x": RX, "w": rnd(1, 12, 3), "r": rnd(1, 12, 4), "b": rnd(1, 24)}, {"hidden_size": 4},
         id="gru", n_outputs=2),
    case("GRU", {"x": RX, "w": rnd(1, 12, 3), "r": rnd(1, 12, 4), "b": rnd(1, 24)},
         {"hidden_size": 4, "linear_before_reset": 1, "direction": "reverse"}, id="gru_linear_before_reset_reverse",
         n_outputs=2),
    case("LSTM", {"x": RX, "w": rnd(1, 16, 3), "r": rnd(1, 16, 4), "b": rnd(1, 32)}, {"hidden_size": 4},
         id="lstm", n_outputs=3),
    case("LSTM", {"x": RX, "w": rnd(2, 16, 3), "r": rnd(2, 16, 4), "b": rnd(2, 32), "l": np.array([4, 4], np.int32),
                  "h": rnd(2, 2, 4), "c": rnd(2, 2, 4), "p": rnd(2, 12)},
         {"hidden_size": 4, "direction": "bidirectional"}, id="lstm_bidirectional_peepholes", n_outputs=3),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "kw"),
                         ACTIVATIONS + CONV + POOL + NORM + PRODUCTS + LOSSES + ATTENTION + RECURRENT)
def test_nn(op, inputs, attrs, kw):
    kw.setdefault("atol", 1e-5)
    kw.setdefault("rtol", 1e-4)
    run(op, inputs, attrs, kw)


# ---------------------------------------------------------------------------------------
# reduce: Reduce*, ArgMax/ArgMin, CumSum/CumProd

R = rnd(2, 3, 4)
RP = f32(2, 3, 4, lo=0.1, hi=2)
REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
REDUCE_AXES = [
    ({}, [1], "axis1"),
    ({"keepdims": 0}, [0, -1], "axes_no_keepdims"),
    ({}, None, "all"),
    ({"noop_with_empty_axes": 1}, None, "noop"),
]


@pytest.mark.parametrize(("attrs", "axes", "label"), REDUCE_AXES, ids=[a[2] for a in REDUCE_AXES])
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce(op, attrs, axes, label):
    x = RP if op in ("ReduceLogSum", "ReduceProd") else R
    const = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check(op, {"x": x}, attrs, framework="fx", const=const, rtol=1e-5, atol=1e-5)


REDUCE_MORE = [
    case("ReduceSum", {"x": extremes(np.int32).reshape(2, 4)}, const={"axes": np.array([1], np.int64)},
         id="sum_int32"),
    case("ReduceMean", {"x": ints(np.int64, 3, 4)}, const={"axes": np.array([1], np.int64)}, id="mean_int64_trunc"),
    case("ReduceMax", {"x": special(rnd(2, 4))}, const={"axes": np.array([1], np.int64)}, id="max_nan"),
    case("ReduceMax", {"x": RNG.random((3, 4)) > 0.7}, const={"axes": np.array([1], np.int64)}, id="max_bool"),
    case("ReduceMin", {"x": RNG.random((3, 4)) > 0.3}, const={"axes": np.array([0], np.int64)}, id="min_bool"),
    case("ReduceMin", {"x": extremes(np.int8).reshape(2, 4)}, id="min_int8_all"),
    case("ReduceProd", {"x": ints(np.int32, 2, 3, lo=-4, hi=4)}, const={"axes": np.array([1], np.int64)},
         id="prod_int32"),
    case("ReduceL2", {"x": ints(np.int32, 2, 3)}, const={"axes": np.array([1], np.int64)}, id="l2_int32"),
    case("ReduceLogSumExp", {"x": np.array([[1e3, 1e3], [-INF, 0.0]], np.float32)},
         const={"axes": np.array([1], np.int64)}, id="logsumexp_stable"),
    case("ReduceMax", {"x": np.zeros((2, 0), np.float32)}, const={"axes": np.array([1], np.int64)}, id="max_empty"),
    case("ArgMax", {"x": np.array([[1, 3, 3, 2], [5, 5, 0, NAN]], np.float32)}, {"axis": 1}, id="argmax_ties_nan"),
    case("ArgMax", {"x": np.array([[1, 3, 3, 2], [5, 5, 0, 5]], np.float32)}, {"axis": 1, "select_last_index": 1},
         id="argmax_last"),
    case("ArgMax", {"x": R}, {"axis": -1, "keepdims": 0}, id="argmax_negative_axis"),
    case("ArgMin", {"x": np.array([[1, 0, 0, 2], [5, -1, 0, -1]], np.float32)}, {"axis": 1, "select_last_index": 1},
         id="argmin_last"),
    case("ArgMin", {"x": extremes(np.int8).reshape(2, 4)}, id="argmin_int8"),
    case("ArgMax", {"x": RNG.random((3, 4)) > 0.5}, {"axis": 1}, id="argmax_bool"),
    case("CumSum", {"x": R}, const={"axis": np.array(1, np.int64)}, id="cumsum"),
    case("CumSum", {"x": R}, {"exclusive": 1, "reverse": 1}, const={"axis": np.array(-1, np.int32)},
         id="cumsum_exclusive_reverse"),
    case("CumSum", {"x": extremes(np.int32).reshape(2, 4)}, {"exclusive": 1}, const={"axis": np.array(1, np.int64)},
         id="cumsum_int32_exclusive"),
    case("ReduceSum", {"x": ints(np.uint32, 2, 3, lo=0, hi=2**31)}, const={"axes": np.array([1], np.int64)},
         id="sum_uint32_wrap"),
    case("ReduceMax", {"x": ints(np.uint16, 2, 3, lo=0, hi=65535)}, {"keepdims": 0}, id="max_uint16"),
    case("ArgMax", {"x": np.array([[1, 2**63 + 1, 2**64 - 1, 5]], np.uint64)}, {"axis": 1}, id="argmax_uint64"),
    case("CumSum", {"x": ints(np.uint32, 2, 4, lo=0, hi=2**31)}, {"reverse": 1},
         const={"axis": np.array(1, np.int64)}, id="cumsum_uint32_wrap"),
    case("CumSum", {"x": np.array([2**63, 2**63, 7], np.uint64)}, const={"axis": np.array(0, np.int64)},
         id="cumsum_uint64"),
    case("CumProd", {"x": f32(2, 5, lo=0.5, hi=1.5)}, {"reverse": 1}, const={"axis": np.array(1, np.int64)},
         id="cumprod_reverse", opset=26),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "kw"), REDUCE_MORE)
def test_reduce_more(op, inputs, attrs, kw):
    kw.setdefault("atol", 1e-5)
    run(op, inputs, attrs, kw)


# ---------------------------------------------------------------------------------------
# shape

S = rnd(2, 3, 4)

SHAPE = [
    case("Reshape", {"x": S}, const={"s": np.array([0, -1, 2], np.int64)}, id="reshape_zero_copy"),
    case("Reshape", {"x": np.zeros((0, 3), np.float32)}, {"allowzero": 1}, const={"s": np.array([3, 0], np.int64)},
         id="reshape_allowzero"),
    case("Flatten", {"x": S}, id="flatten"),
    case("Flatten", {"x": S}, {"axis": 0}, id="flatten_axis0"),
    case("Flatten", {"x": S}, {"axis": -1}, id="flatten_negative_axis"),
    case("Squeeze", {"x": rnd(1, 3, 1, 2)}, id="squeeze_all"),
    case("Squeeze", {"x": rnd(1, 3, 1, 2)}, const={"a": np.array([-2], np.int64)}, id="squeeze_negative_axis"),
    case("Unsqueeze", {"x": rnd(3, 2)}, const={"a": np.array([-1, 0], np.int64)}, id="unsqueeze"),
    case("Unsqueeze", {"x": rnd(3, 2)}, const={"a": np.array([1, 3], np.int64)}, id="unsqueeze_interleaved"),
    case("Transpose", {"x": S}, id="transpose_default"),
    case("Transpose", {"x": S}, {"perm": [1, 0, 2]}, id="transpose_perm"),
    case("Concat", {"a": S, "b": rnd(2, 3, 1), "c": rnd(2, 3, 2)}, {"axis": -1}, id="concat"),
    case("Split", {"x": rnd(2, 7)}, {"axis": 1}, const={"s": np.array([2, 4, 1], np.int64)}, id="split_sizes",
         n_outputs=3),
    case("Split", {"x": rnd(2, 7)}, {"axis": -1, "num_outputs": 3}, id="split_num_outputs_uneven", n_outputs=3,
         opset=18),
    case("Split", {"x": rnd(6, 2)}, id="split_equal", n_outputs=3),
    case("Tile", {"x": S}, const={"r": np.array([1, 2, 3], np.int64)}, id="tile"),
    case("Expand", {"x": rnd(3, 1)}, const={"s": np.array([2, 1, 4], np.int64)}, id="expand_bidirectional"),
    case("Pad", {"x": S}, const={"p": np.array([0, 1, 2, 1, 0, 0], np.int64), "v": np.float32(1.5)},
         id="pad_constant"),
    case("Pad", {"x": S}, {"mode": "reflect"}, const={"p": np.array([0, 2, 3, 0, 1, 3], np.int64)},
         id="pad_reflect"),
    case("Pad", {"x": rnd(2, 5)}, {"mode": "reflect"}, const={"p": np.array([0, 6, 0, 7], np.int64)},
         id="pad_reflect_wide"),
    case("Pad", {"x": S}, {"mode": "edge"}, const={"p": np.array([1, 0, 2, 0, 3, 1], np.int64)}, id="pad_edge"),
    case("Pad", {"x": S}, {"mode": "wrap"}, const={"p": np.array([0, 2, 5, 0, 1, 2], np.int64)}, id="pad_wrap"),
    case("Pad", {"x": ints(np.uint32, 2, 3, lo=0, hi=2**31)}, {"mode": "reflect"},
         const={"p": np.array([0, 2, 0, 1], np.int64)}, id="pad_reflect_uint32"),
    case("Pad", {"x": S}, const={"p": np.array([1, 2], np.int64), "v": np.float32(-1), "a": np.array([-1], np.int64)},
         id="pad_axes"),
    case("Pad", {"x": ints(np.int32, 2, 3)}, const={"p": np.array([1, 1, 0, 2], np.int64), "v": np.int32(-7)},
         id="pad_int32"),
    case("Pad", {"x": RNG.random((2, 3)) > 0.5}, const={"p": np.array([1, 0, 0, 1], np.int64), "v": np.bool_(True)},
         id="pad_bool"),
    case("Pad", {"x": S, "v": np.float32(4.0)}, const={"p": np.array([1, 0, 0, 0, 2, 1], np.int64)},
         input_order=["x", "p", "v"], id="pad_runtime_value"),
    case("Slice", {"x": S}, const={"s": np.array([0, 1], np.int64), "e": np.array([2, 3], np.int64)}, id="slice"),
    case("Slice", {"x": S}, const={"s": np.array([-1, 3], np.int64), "e": np.array([-2**63, 0], np.int64),
                                   "a": np.array([-1, 1], np.int64), "t": np.array([-2, -1], np.int64)},
         id="slice_negative_steps"),
    case("Slice", {"x": S}, const={"s": np.array([-10, 1], np.int64), "e": np.array([100, 2**63 - 1], np.int64),
                                   "a": np.array([2, 0], np.int64), "t": np.array([3, 1], np.int64)},
         id="slice_clamped_steps"),
    case("Slice", {"x": ints(np.uint16, 5, lo=0, hi=60000)}, const={"s": np.array([-1], np.int64),
                                                                   "e": np.array([0], np.int64),
                                                                   "t": np.array([-2], np.int64)},
         input_order=["x", "s", "e", "", "t"], id="slice_uint16_negative_step"),
    case("Slice", {"x": S}, const={"s": np.array([3], np.int64), "e": np.array([1], np.int64),
                                   "a": np.array([1], np.int64)}, id="slice_empty"),
    case("Shape", {"x": S}, id="shape"),
    case("Shape", {"x": S}, {"start": -2, "end": -1}, id="shape_start_end"),
    case("Size", {"x": S}, id="size"),
    case("DepthToSpace", {"x": rnd(1, 8, 2, 3)}, {"blocksize": 2}, id="depth_to_space_dcr"),
    case("DepthToSpace", {"x": rnd(1, 8, 2, 3)}, {"blocksize": 2, "mode": "CRD"}, id="depth_to_space_crd"),
    case("SpaceToDepth", {"x": rnd(1, 2, 4, 6)}, {"blocksize": 2}, id="space_to_depth"),
    case("Identity", {"x": S}, id="identity"),
    case("Trilu", {"x": rnd(2, 4, 5)}, id="triu"),
    case("Trilu", {"x": rnd(4, 5)}, {"upper": 0}, const={"k": np.array(-1, np.int64)}, id="tril_k"),
    case("Trilu", {"x": rnd(4, 5), "k": np.array(2, np.int64)}, id="triu_runtime_k"),
    case("EyeLike", {"x": rnd(3, 4)}, {"k": 1}, id="eyelike"),
    case("EyeLike", {"x": rnd(4, 3)}, {"k": -1, "dtype": onnx.TensorProto.INT32}, id="eyelike_dtype"),
    case("CenterCropPad", {"x": rnd(5, 4, 3)}, const={"s": np.array([3, 7, 3], np.int64)}, id="center_crop_pad"),
    case("CenterCropPad", {"x": rnd(5, 4, 3)}, {"axes": [-2, 0]}, const={"s": np.array([2, 8], np.int64)},
         id="center_crop_pad_axes"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "kw"), SHAPE)
def test_shape(op, inputs, attrs, kw):
    run(op, inputs, attrs, kw)


# ---------------------------------------------------------------------------------------
# index

G = rnd(4, 5, 3)
NEG = np.array([[0, -1], [3, -4]], np.int64)

INDEX = [
    case("Gather", {"x": G, "i": NEG}, id="gather_runtime_negative"),
    case("Gather", {"x": G, "i": np.array([-1, 2, 0], np.int32)}, {"axis": 1}, id="gather_axis1_int32"),
    case("Gather", {"x": G}, {"axis": -1}, const={"i": np.array(-2, np.int64)}, id="gather_static_scalar"),
    case("Gather", {"x": G}, {"axis": 1}, const={"i": np.array([[4, -5], [0, 1]], np.int64)}, id="gather_static"),
    case("Gather", {"x": ints(np.uint16, 4, 3, lo=0, hi=60000), "i": np.array([3, -1], np.int64)}, id="gather_uint16"),
    case("GatherElements", {"x": np.array([[1, 2**64 - 1], [2**63, 3]], np.uint64), "i": np.array([[1, 0]], np.int64)},
         id="gather_elements_uint64"),
    case("GatherElements", {"x": rnd(3, 4), "i": np.array([[0, -1], [2, 1], [-4, 3]], np.int64)}, {"axis": 1},
         id="gather_elements"),
    case("GatherElements", {"x": rnd(3, 4), "i": np.array([[2, -1, 0, 1]], np.int64)}, id="gather_elements_axis0"),
    case("GatherND", {"x": rnd(2, 3, 4), "i": np.array([[0, 1], [1, -1]], np.int64)}, id="gather_nd"),
    case("GatherND", {"x": rnd(2, 3, 4), "i": np.array([[[1]], [[-1]]], np.int64)}, {"batch_dims": 1},
         id="gather_nd_batch"),
    case("GatherND", {"x": rnd(2, 3, 4), "i": np.array([[[0, 1], [2, 3]], [[1, 0], [-1, -1]]], np.int64)},
         {"batch_dims": 1}, id="gather_nd_batch_full"),
    case("ScatterElements", {"x": rnd(3, 4), "i": np.array([[0, -1], [2, 1]], np.int64), "u": rnd(2, 2)},
         {"axis": 1}, id="scatter_elements"),
    *[case("ScatterElements", {"x": rnd(3, 4), "i": np.array([[0, 0, -1, 1]], np.int64), "u": rnd(1, 4)},
           {"axis": 1, "reduction": r}, id=f"scatter_elements_{r}") for r in ("add", "mul", "max", "min")],
    case("ScatterND", {"x": rnd(4, 3), "i": np.array([[1], [-1]], np.int64), "u": rnd(2, 3)}, id="scatter_nd"),
    case("ScatterND", {"x": rnd(2, 3, 4), "i": np.array([[0, 1], [1, 2]], np.int64), "u": rnd(2, 4)},
         id="scatter_nd_2"),
    *[case("ScatterND", {"x": rnd(4, 3), "i": np.array([[1], [1], [3]], np.int64), "u": rnd(3, 3)},
           {"reduction": r}, id=f"scatter_nd_{r}") for r in ("add", "mul", "max", "min")],
    case("Where", {"c": RNG.random((3, 1)) > 0.5, "x": X8[:1], "y": rnd(3, 4)}, id="where_broadcast"),
    case("Where", {"c": RNG.random(4) > 0.5, "x": extremes(np.int64)[:4], "y": extremes(np.int64)[4:]},
         id="where_int64"),
    case("Compress", {"x": rnd(3, 4)}, {"axis": 1}, const={"c": np.array([True, False, True, True])},
         id="compress_axis"),
    case("Compress", {"x": rnd(3, 4)}, const={"c": np.array([False, True, True])}, id="compress_flat"),
    case("TopK", {"x": np.array([[3, 1, 3, 2, 3], [0, 5, 5, -1, 2]], np.float32)}, const={"k": np.array([3])},
         id="topk_ties", n_outputs=2),
    case("TopK", {"x": rnd(3, 5)}, {"largest": 0, "axis": 0}, const={"k": np.array([2])}, id="topk_smallest",
         n_outputs=2),
    case("TopK", {"x": ints(np.int32, 2, 6)}, const={"k": np.array([4])}, id="topk_int32", n_outputs=2),
    case("OneHot", {"i": np.array([[0, -1], [4, 7]], np.int64)},
         const={"d": np.array(5, np.int64), "v": np.array([-2.0, 3.0], np.float32)}, id="onehot"),
    case("OneHot", {"i": np.array([1, -3, 2], np.int32)}, {"axis": 0},
         const={"d": np.array(3.0, np.float32), "v": np.array([0, 1], np.int64)}, id="onehot_axis0"),
    case("OneHot", {"i": np.array([1.0, -1.0, 2.0], np.float32), "v": np.array([5, 9], np.int32)},
         const={"d": np.array(3, np.int64)}, input_order=["i", "d", "v"], id="onehot_runtime_values"),
    case("ReverseSequence", {"x": rnd(4, 3, 2), "l": np.array([4, 1, 3], np.int64)}, id="reverse_sequence"),
    case("ReverseSequence", {"x": rnd(3, 4), "l": np.array([2, 4, 1], np.int64)}, {"batch_axis": 0, "time_axis": 1},
         id="reverse_sequence_batch0"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "kw"), INDEX)
def test_index(op, inputs, attrs, kw):
    kw.setdefault("atol", 1e-5)
    run(op, inputs, attrs, kw)


# ---------------------------------------------------------------------------------------
# misc: Cast, Resize, quantization, grids

FLOATS = np.array([-2.7, -1.5, -0.5, -0.0, 0.0, 0.4, 1.5, 2.9, 100.7, -100.2, NAN], np.float32)

CASTS = [
    case("Cast", {"x": FLOATS[:-1]}, {"to": TP.INT32}, id="cast_float_int32_trunc"),
    case("Cast", {"x": FLOATS[:-1]}, {"to": TP.INT8}, id="cast_float_int8_trunc"),
    case("Cast", {"x": FLOATS}, {"to": TP.BOOL}, id="cast_float_bool_nan"),
    case("Cast", {"x": FLOATS}, {"to": TP.DOUBLE}, id="cast_float_double"),
    case("Cast", {"x": FLOATS.astype(np.float64)}, {"to": TP.FLOAT16}, id="cast_double_half"),
    case("Cast", {"x": extremes(np.int64)}, {"to": TP.INT8}, id="cast_int64_int8_wrap"),
    case("Cast", {"x": extremes(np.int32)}, {"to": TP.FLOAT}, id="cast_int32_float"),
    case("Cast", {"x": extremes(np.int16)}, {"to": TP.BOOL}, id="cast_int_bool"),
    case("Cast", {"x": RNG.random(5) > 0.5}, {"to": TP.FLOAT}, id="cast_bool_float"),
    case("Cast", {"x": ints(np.uint8, 6, lo=0, hi=255)}, {"to": TP.UINT32}, id="cast_uint8_uint32"),
    case("CastLike", {"x": FLOATS[:-1], "like": np.zeros(1, np.int64)}, id="cast_like"),
]

IMG = rnd(1, 2, 4, 5)
RESIZE = []
for _mode in ("nearest", "linear", "cubic"):
    for _ctm in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"):
        for _label, _scales in (("up", [1, 1, 1.5, 2.4]), ("down", [1, 1, 0.6, 0.5])):
            RESIZE.append(case("Resize", {"x": IMG}, {"mode": _mode, "coordinate_transformation_mode": _ctm},
                               const={"scales": np.array(_scales, np.float32)}, input_order=["x", "", "scales"],
                               id=f"resize_{_mode}_{_ctm}_{_label}", atol=1e-5))
for _nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
    RESIZE.append(case("Resize", {"x": IMG}, {"mode": "nearest", "nearest_mode": _nm},
                       const={"sizes": np.array([1, 2, 7, 3], np.int64)}, input_order=["x", "", "", "sizes"],
                       id=f"resize_nearest_{_nm}_sizes"))
RESIZE += [
    case("Resize", {"x": IMG}, {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1},
         const={"scales": np.array([1, 1, 1.7, 0.8], np.float32)}, input_order=["x", "", "scales"],
         id="resize_cubic_exclude_outside", atol=1e-5),
    case("Resize", {"x": rnd(1, 1, 8, 9)}, {"mode": "linear", "antialias": 1},
         const={"scales": np.array([1, 1, 0.5, 0.4], np.float32)}, input_order=["x", "", "scales"],
         id="resize_linear_antialias", atol=1e-5),
    case("Resize", {"x": rnd(1, 1, 8, 9)}, {"mode": "cubic", "antialias": 1},
         const={"sizes": np.array([1, 1, 3, 4], np.int64)}, input_order=["x", "", "", "sizes"],
         id="resize_cubic_antialias",
         atol=1e-5, opset=18),
    case("Resize", {"x": IMG}, {"mode": "linear", "axes": [3, 2]},
         const={"sizes": np.array([7, 3], np.int64)}, input_order=["x", "", "", "sizes"], id="resize_axes", atol=1e-5),
    case("Resize", {"x": IMG}, {"mode": "nearest", "keep_aspect_ratio_policy": "not_larger", "axes": [2, 3]},
         const={"sizes": np.array([7, 7], np.int64)}, input_order=["x", "", "", "sizes"], id="resize_not_larger"),
    case("Resize", {"x": IMG}, {"mode": "linear", "keep_aspect_ratio_policy": "not_smaller", "axes": [2, 3]},
         const={"sizes": np.array([7, 7], np.int64)}, input_order=["x", "", "", "sizes"], id="resize_not_smaller",
         atol=1e-5),
    case("Resize", {"x": IMG}, {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                                "extrapolation_value": 9.0},
         const={"roi": np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32),
                "sizes": np.array([1, 2, 5, 6], np.int64)}, input_order=["x", "roi", "", "sizes"],
         id="resize_tf_crop_and_resize", atol=1e-5),
    case("Resize", {"x": ints(np.uint8, 1, 1, 4, 4, lo=0, hi=255)}, {"mode": "linear"},
         const={"scales": np.array([1, 1, 1.5, 1.5], np.float32)}, input_order=["x", "", "scales"],
         id="resize_linear_uint8"),
    case("Resize", {"x": ints(np.uint16, 1, 1, 3, 3, lo=0, hi=65535)}, {"mode": "nearest"},
         const={"scales": np.array([1, 1, 2, 1.5], np.float32)}, input_order=["x", "", "scales"],
         id="resize_nearest_uint16"),
    case("Resize", {"x": ints(np.int32, 1, 1, 3, 3)}, {"mode": "nearest"},
         const={"scales": np.array([1, 1, 2, 2], np.float32)}, input_order=["x", "", "scales"],
         id="resize_nearest_int32"),
    case("Resize", {"x": rnd(1, 1, 4, 4).astype(np.float16)}, {"mode": "cubic"},
         const={"scales": np.array([1, 1, 2, 2], np.float32)}, input_order=["x", "", "scales"],
         id="resize_cubic_fp16", rtol=2e-3, atol=2e-3),
    case("Resize", {"x": IMG}, {"mode": "linear"}, const={"sizes": np.array([1, 2, 1, 1], np.int64)},
         input_order=["x", "", "", "sizes"], id="resize_to_one_pixel", atol=1e-5),
]

QUANT = [
    case("QuantizeLinear", {"x": f32(2, 5, lo=-40, hi=40)}, const={"s": np.float32(0.3), "z": np.uint8(128)},
         id="quantize_uint8"),
    case("QuantizeLinear", {"x": np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000, -1000], np.float32)},
         const={"s": np.float32(1.0), "z": np.int8(0)}, id="quantize_round_even_saturate"),
    case("QuantizeLinear", {"x": f32(2, 3, 4, lo=-5, hi=5)},
         const={"s": np.array([0.1, 0.2, 0.05], np.float32), "z": np.array([0, -3, 4], np.int8)},
         id="quantize_per_axis"),
    case("QuantizeLinear", {"x": f32(2, 4, lo=-5, hi=5)}, const={"s": np.float32(0.02)}, id="quantize_no_zp"),
    case("QuantizeLinear", {"x": f32(2, 4, lo=-5, hi=5)}, {"block_size": 2, "axis": 1},
         const={"s": np.array([[0.1, 0.2], [0.3, 0.05]], np.float32), "z": np.zeros((2, 2), np.int8)},
         id="quantize_blocked", opset=21),
    case("QuantizeLinear", {"x": f32(6, lo=-500, hi=500)}, const={"s": np.float32(0.01), "z": np.int16(10)},
         id="quantize_int16", opset=21),
    case("DequantizeLinear", {"x": ints(np.uint8, 2, 5, lo=0, hi=255)}, const={"s": np.float32(0.3),
                                                                             "z": np.uint8(100)}, id="dequantize"),
    case("DequantizeLinear", {"x": ints(np.int8, 2, 3, 2, lo=-128, hi=127)},
         const={"s": np.array([0.1, 0.2, 0.3], np.float32), "z": np.array([1, -2, 0], np.int8)},
         id="dequantize_per_axis"),
    case("DequantizeLinear", {"x": ints(np.int32, 5, lo=-1000, hi=1000)}, const={"s": np.float32(0.5)},
         id="dequantize_int32"),
    case("DynamicQuantizeLinear", {"x": f32(3, 4, lo=-2, hi=5)}, id="dynamic_quantize", n_outputs=3),
    case("DynamicQuantizeLinear", {"x": f32(3, 4, lo=0.5, hi=5)}, id="dynamic_quantize_positive", n_outputs=3),
]

GRIDS = [
    case("AffineGrid", {"t": rnd(2, 2, 3)}, const={"s": np.array([2, 3, 4, 5], np.int64)}, id="affine_grid_2d"),
    case("AffineGrid", {"t": rnd(1, 3, 4)}, {"align_corners": 1}, const={"s": np.array([1, 1, 2, 3, 4], np.int64)},
         id="affine_grid_3d_align"),
    *[case("GridSample", {"x": rnd(1, 2, 4, 5), "g": f32(1, 3, 3, 2, lo=-2.5, hi=2.5)},
           {"mode": m, "padding_mode": p, "align_corners": a}, id=f"grid_sample_{m}_{p}_{a}", atol=1e-5)
      for m in ("linear", "nearest", "cubic") for p in ("zeros", "border", "reflection") for a in (0, 1)],
]


MISC_MORE = [
    case("BitCast", {"x": X8}, {"to": TP.INT32}, id="bitcast_float_int32", opset=26),
    case("BitCast", {"x": extremes(np.int16)}, {"to": TP.UINT16}, id="bitcast_int16_uint16", opset=26),
    case("Col2Im", {"x": rnd(1, 8, 12)}, {"pads": [0, 1, 1, 0]},
         const={"i": np.array([3, 4], np.int64), "b": np.array([2, 2], np.int64)}, id="col2im", opset=18),
    case("Col2Im", {"x": rnd(2, 4, 8)}, {"strides": [2, 1], "dilations": [1, 2]},
         const={"i": np.array([4, 4], np.int64), "b": np.array([2, 1], np.int64)}, id="col2im_strided", opset=18),
    case("TensorScatter", {"c": rnd(2, 3, 6, 4), "u": rnd(2, 3, 2, 4), "w": np.array([1, 4], np.int64)},
         id="tensor_scatter", opset=24),
    case("TensorScatter", {"c": rnd(2, 6, 4), "u": rnd(2, 3, 4), "w": np.array([5, 0], np.int64)},
         {"mode": "circular", "axis": 1}, id="tensor_scatter_circular", opset=24),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "kw"), CASTS + RESIZE + QUANT + GRIDS + MISC_MORE)
def test_misc(op, inputs, attrs, kw):
    run(op, inputs, attrs, kw)


# ---------------------------------------------------------------------------------------
# operands computed at run time whose values the (declared) output shapes determine


def check_declared_outputs(op, inputs, attrs=None, const=None, n_outputs=1, opset=20, **tol):
    """Like ``check``, with the output shapes declared in the model (as exporters and the
    ONNX node tests do), so converters may read runtime operands off them."""
    proto = node_model(op, inputs, attrs, const=const, n_outputs=n_outputs, opset=opset)
    want = run_reference(proto, inputs)
    for out, w in zip(proto.graph.output, want):
        out.CopyFrom(helper.make_tensor_value_info(out.name, helper.np_dtype_to_tensor_dtype(w.dtype), w.shape))
    got = run_fx(proto, inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, what=f"{op} output {k}", **tol)


RUNTIME = [
    pytest.param("ReduceSum", {"x": R, "axes": np.array([1, 2], np.int64)}, {}, id="reduce_sum_axes"),
    pytest.param("ReduceL2", {"x": rnd(2, 1, 4), "axes": np.array([0, 1], np.int64)}, {"keepdims": 0},
                 id="reduce_l2_axes_nokeep"),
    pytest.param("ReduceMax", {"x": rnd(1, 3), "axes": np.array([0], np.int64)}, {}, id="reduce_max_size1_axis"),
    pytest.param("TopK", {"x": rnd(2, 5), "k": np.array([2], np.int64)}, {}, id="topk_k"),
    pytest.param("Range", {"s": np.array(2, np.int64), "l": np.array(11, np.int64), "d": np.array(3, np.int64)}, {},
                 id="range"),
    pytest.param("Range", {"s": np.array(0.5, np.float32), "l": np.array(-2, np.float32),
                           "d": np.array(-0.75, np.float32)}, {}, id="range_float"),
    pytest.param("Reshape", {"x": S, "s": np.array([4, -1], np.int64)}, {}, id="reshape_shape"),
    pytest.param("Expand", {"x": rnd(3, 1), "s": np.array([2, 3, 4], np.int64)}, {}, id="expand_shape"),
    pytest.param("Tile", {"x": S, "r": np.array([2, 1, 2], np.int64)}, {}, id="tile_repeats"),
    pytest.param("Unsqueeze", {"x": rnd(3, 2), "a": np.array([0, -1], np.int64)}, {}, id="unsqueeze_axes"),
    pytest.param("Squeeze", {"x": rnd(1, 3, 1), "a": np.array([2], np.int64)}, {}, id="squeeze_axes"),
    pytest.param("Split", {"x": rnd(2, 6), "s": np.array([4, 2], np.int64)}, {"axis": 1}, id="split_sizes"),
    pytest.param("OneHot", {"i": np.array([0, 2, -1], np.int64), "d": np.array(4, np.int64),
                            "v": np.array([0, 1], np.float32)}, {}, id="onehot_depth"),
    pytest.param("CenterCropPad", {"x": rnd(5, 4), "s": np.array([3, 6], np.int64)}, {}, id="center_crop_pad_shape"),
    pytest.param("HannWindow", {"n": np.array(6, np.int64)}, {}, id="hann"),
    pytest.param("HammingWindow", {"n": np.array(5, np.int64)}, {"periodic": 0}, id="hamming"),
    pytest.param("BlackmanWindow", {"n": np.array(7, np.int64)}, {"output_datatype": TP.DOUBLE}, id="blackman"),
    pytest.param("Resize", {"x": IMG, "roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                            "sizes": np.array([1, 2, 7, 3], np.int64)}, {"mode": "linear"}, id="resize_sizes"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs"), RUNTIME)
def test_runtime_operands_from_output_shapes(op, inputs, attrs):
    check_declared_outputs(op, inputs, attrs, n_outputs=2 if op in ("TopK", "Split") else 1, atol=1e-5)


def test_runtime_reduce_axes_ambiguous_is_unsupported():
    with pytest.raises(UnsupportedError, match="ambiguous"):
        check_declared_outputs("ReduceSum", {"x": rnd(3, 3), "a": np.array([0], np.int64)}, {"keepdims": 0})


@pytest.mark.parametrize(("op", "what"), [("Reshape", "shape"), ("CumSum", "axis"), ("TopK", "k")])
def test_omitted_required_operand_is_unsupported_naming_the_node(op, what):
    """A required operand left out (input name ''), with no inferred output shape to stand
    in for it: an UnsupportedError naming the node and the input (was a TypeError on None)."""
    outs = [helper.make_tensor_value_info("y", TP.FLOAT, None)]
    if op == "TopK":
        outs.append(helper.make_tensor_value_info("i", TP.INT64, None))
    graph = helper.make_graph([helper.make_node(op, ["x", ""], [o.name for o in outs])], "g",
                              [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])], outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(UnsupportedError, match=f"{op} node '{op}_0': input 1 \\({what}\\) is required but omitted"):
        run_fx(model, {"x": np.ones((2, 3), np.float32)})


# ---------------------------------------------------------------------------------------
# the spec where onnx.reference departs from it (or has no kernel): numpy oracles


def fx_outputs(op, inputs, attrs=None, const=None, opset=20, n_outputs=1):
    return run_fx(node_model(op, inputs, attrs, const=const, opset=opset, n_outputs=n_outputs), inputs)


def test_pad_negative_pads_crop():
    x = S
    (got,) = fx_outputs("Pad", {"x": x}, const={"p": np.array([0, -1, 2, 0, 1, -2], np.int64)})
    want = np.pad(x[:, 1:, :2], [(0, 0), (0, 1), (2, 0)])
    np.testing.assert_array_equal(got, want)
    (got,) = fx_outputs("Pad", {"x": x}, {"mode": "reflect"}, const={"p": np.array([0, -1, 2, 0, 0, -1], np.int64)})
    np.testing.assert_array_equal(got, np.pad(x[:, 1:, :3], [(0, 0), (0, 0), (2, 0)], mode="reflect"))


def test_slice_negative_step_clamps_start_to_zero():
    # spec: with a negative step, starts clamp to [0, dim-1] and ends to [-1, dim-1], so
    # start -100 (-> 0) and end -200 (-> -1) select element 0 (the reference gives none)
    (got,) = fx_outputs("Slice", {"x": S}, const={"s": np.array([-100], np.int64), "e": np.array([-200], np.int64),
                                                  "a": np.array([2], np.int64), "t": np.array([-1], np.int64)})
    np.testing.assert_array_equal(got, S[:, :, :1])


def test_global_lp_pool():
    x = rnd(2, 3, 4, 5)
    (got,) = fx_outputs("GlobalLpPool", {"x": x}, {"p": 3})
    want = (np.abs(x.astype(np.float64)) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_conv_transpose_group():
    # onnx.reference's grouped ConvTranspose fails to run: compare with one ungrouped call
    # per group
    x, w, b = rnd(1, 4, 3, 3), rnd(4, 3, 2, 2), rnd(6)
    attrs = {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 1]}
    (got,) = fx_outputs("ConvTranspose", {"x": x, "w": w, "b": b}, {**attrs, "group": 2})
    parts = []
    for g in range(2):
        inputs = {"x": x[:, 2 * g:2 * g + 2], "w": w[2 * g:2 * g + 2], "b": b[3 * g:3 * g + 3]}
        parts += run_reference(node_model("ConvTranspose", inputs, attrs), inputs)
    np.testing.assert_allclose(got, np.concatenate(parts, axis=1), rtol=1e-5, atol=1e-5)


def _softmax_2d(x, axis, fn):
    rows = int(np.prod(x.shape[:axis]))
    return fn(x.reshape(rows, -1)).reshape(x.shape)


def _np_softmax(m):
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(("op", "axis", "fn"), [
    ("Softmax", 1, _np_softmax),
    ("LogSoftmax", 2, lambda m: np.log(_np_softmax(m))),
    ("Hardmax", 1, lambda m: (np.arange(m.shape[1]) == m.argmax(axis=1)[:, None]).astype(m.dtype)),
])
def test_softmax_family_before_13_coerces_to_2d(op, axis, fn):
    # onnx.reference applies the opset-13 semantics at every opset
    x = rnd(2, 3, 4)
    proto = node_model(op, {"x": x}, {"axis": axis}, opset=11)
    with torch.no_grad():
        (got,) = to_fx(cir.from_proto(proto, opset=11))(torch.from_numpy(x))
    np.testing.assert_allclose(got.numpy(), _softmax_2d(x, axis, fn), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# converters registered for older opsets (run at the model's own opset, no upgrade)


def check_at_opset(op, inputs, attrs, opset, const=None, n_outputs=1):
    proto = node_model(op, inputs, attrs, const=const, opset=opset, n_outputs=n_outputs)
    want = run_reference(proto, inputs)
    model = cir.from_proto(proto, opset=opset)
    gm = to_fx(model)
    with torch.no_grad():
        got = gm(*[torch.from_numpy(np.array(inputs[n])) for n in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)
        assert g.numpy().dtype == w.dtype


OLD = [
    pytest.param("ReduceSum", {"x": R}, {"axes": [0, 2], "keepdims": 0}, 11, None, 1, id="reduce_sum_11"),
    pytest.param("ReduceMax", {"x": R}, {"axes": [-1]}, 13, None, 1, id="reduce_max_13"),
    pytest.param("Split", {"x": rnd(2, 6)}, {"axis": 1, "split": [1, 5]}, 11, None, 2, id="split_11"),
    pytest.param("Squeeze", {"x": rnd(1, 3, 1)}, {"axes": [0]}, 11, None, 1, id="squeeze_11"),
    pytest.param("Unsqueeze", {"x": rnd(3)}, {"axes": [0, 2]}, 11, None, 1, id="unsqueeze_11"),
    pytest.param("Slice", {"x": S}, {"starts": [1, -3], "ends": [100, -1], "axes": [1, 2]}, 9, None, 1,
                 id="slice_9"),
    pytest.param("Pad", {"x": rnd(2, 3)}, {"pads": [0, 1, 1, 0], "mode": "edge"}, 10, None, 1, id="pad_10"),
    pytest.param("Pad", {"x": rnd(2, 3)}, {"paddings": [1, 0, 0, 2], "value": 2.5}, 1, None, 1, id="pad_1"),
    pytest.param("Clip", {"x": X8}, {"min": -0.5, "max": 0.5}, 10, None, 1, id="clip_10"),
    pytest.param("Upsample", {"x": rnd(1, 1, 2, 3)}, {"mode": "nearest"}, 9,
                 {"s": np.array([1, 1, 2, 3], np.float32)}, 1, id="upsample_9"),
    pytest.param("TopK", {"x": rnd(2, 5)}, {}, 10, {"k": np.array([2], np.int64)}, 2, id="topk_10"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "opset", "const", "n_outputs"), OLD)
def test_older_opsets(op, inputs, attrs, opset, const, n_outputs):
    check_at_opset(op, inputs, attrs, opset, const=const, n_outputs=n_outputs)


# ---------------------------------------------------------------------------------------
# conversion-time constants, random ops, unsupported cases, table and naming


class _Ctx:
    """A minimal stand-in for NodeContext, for converters of input-less or folded ops."""

    def __init__(self, attrs, out_shape=None):
        self._attrs, self._out = attrs, out_shape

    def attr(self, name, default=None):
        return self._attrs.get(name, default)

    def out_shape(self, j=0):
        return self._out

    def unsupported(self, why):
        return UnsupportedError(why, ["test"])


def test_constant_converters():
    # Constant and ConstantOfShape with known inputs are folded before conversion; their
    # converters are called directly here
    const = TABLE.lookup("Constant", 20)
    assert const(_Ctx({"value_floats": [1.5, 2.0]})).dtype == np.float32
    assert const(_Ctx({"value_int": 3})).tolist() == 3
    np.testing.assert_array_equal(const(_Ctx({"value": np.arange(3, dtype=np.int8)})), np.arange(3, dtype=np.int8))
    cos = TABLE.lookup("ConstantOfShape", 20)
    got = cos(_Ctx({"value": np.array([7], np.int32)}, out_shape=(2, 3)), None)
    assert got.dtype == np.int32 and got.shape == (2, 3) and (got == 7).all()
    assert cos(_Ctx({}, out_shape=(2,)), None).dtype == np.float32


def test_random_like_ops():
    x = f32(200, lo=0, hi=1)
    for op, attrs in (("RandomUniformLike", {"low": 2.0, "high": 3.0}), ("RandomNormalLike", {"mean": 5.0}),
                      ("Bernoulli", {})):
        (y,) = run_fx(node_model(op, {"x": x}, attrs, opset=20), {"x": x})
        assert y.shape == x.shape and y.dtype == np.float32
        if op == "RandomUniformLike":
            assert ((y >= 2) & (y < 3)).all() and y.std() > 0
        elif op == "RandomNormalLike":
            assert abs(y.mean() - 5) < 0.5
        else:
            assert set(np.unique(y)) <= {0.0, 1.0}
    ones = np.array([0.0, 1.0, 1.0, 0.0], np.float32)
    (y,) = run_fx(node_model("Bernoulli", {"x": ones}, opset=20), {"x": ones})
    np.testing.assert_array_equal(y, ones)


@pytest.mark.parametrize(("op", "inputs", "attrs", "const", "needle"), [
    ("NonZero", {"x": rnd(3, 4)}, {}, None, "dynamic shape"),
    ("Compress", {"x": rnd(3, 4), "c": np.array([True, False, True])}, {"axis": 0}, None, "condition"),
    ("Cast", {"x": rnd(3)}, {"to": TP.FLOAT8E4M3FN}, None, "float8"),
    ("Div", {"a": np.array([4], np.uint64), "b": np.array([2], np.uint64)}, {}, None, "uint64"),
    ("BatchNormalization", {"x": rnd(2, 3), "s": rnd(3), "b": rnd(3), "m": rnd(3), "v": rnd(3) ** 2},
     {"training_mode": 1}, None, "training"),
    ("Slice", {"x": rnd(3, 4), "s": np.array([1], np.int64), "e": np.array([3], np.int64)}, {}, None, "starts"),
])
def test_unsupported_modes_raise(op, inputs, attrs, const, needle):
    proto = node_model(op, inputs, attrs, const=const, opset=20,
                       n_outputs=3 if op == "BatchNormalization" else 1)
    with pytest.raises(UnsupportedError, match=needle):
        to_fx(cir.from_proto(proto, opset=20))


def test_table_covers_at_least_140_ops():
    ops = TABLE.ops()
    assert len(ops) >= 140, len(ops)
    zoo = ["Add", "And", "BatchNormalization", "Cast", "Clip", "Concat", "Conv", "Div", "Expand", "Gather",
           "GatherND", "Gelu", "Gemm", "IsNaN", "LayerNormalization", "MatMul", "Mul", "Neg", "Pow", "Reciprocal",
           "ReduceL2", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "Split", "Sqrt",
           "Tanh", "Transpose", "Unsqueeze", "Where"]
    assert not [op for op in zoo if TABLE.lookup(op, 20) is None]


def test_every_op_is_exercised():
    params = ELEMENTWISE + MATH + ACTIVATIONS + CONV + POOL + NORM + PRODUCTS + LOSSES + ATTENTION + RECURRENT
    params += REDUCE_MORE + SHAPE + INDEX
    params += CASTS + RESIZE + QUANT + GRIDS + MISC_MORE + OLD + RUNTIME
    tested = {p.values[0] for p in params} | set(REDUCE_OPS)
    tested |= {"Constant", "ConstantOfShape", "RandomUniformLike", "RandomNormalLike", "Bernoulli", "NonZero",
               "GlobalLpPool", "Scatter"}  # Scatter shares ScatterElements' converter
    onnx_ops = {op for op in TABLE.ops() if "::" not in op}  # custom-domain ops have their own tests
    assert sorted(onnx_ops - tested) == []


def test_fx_nodes_carry_onnx_node_name():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])
    nodes = [helper.make_node("Softmax", ["x"], ["s"], name="attn/softmax"),
             helper.make_node("Clip", ["s", "lo"], ["y"], name="clip.0")]
    graph = helper.make_graph(nodes, "g", [x], [y], [onnx.numpy_helper.from_array(np.float32(0.4), "lo")])
    model = cir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    gm = to_fx(model)
    named = {n.meta["custom"][ONNX_NODE_KEY] for n in gm.graph.nodes if n.op in ("call_function", "call_method")}
    assert named == {"attn/softmax", "clip.0"}
    assert any(n.name.startswith("attn_softmax") for n in gm.graph.nodes)
