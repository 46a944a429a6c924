"""ONNX -> jax converters: elementwise ops (see :mod:`compstack.translate` for the contract).

Unary math, activations, binary arithmetic/comparison/logic/bitwise ops and the variadic
``Max``/``Min``/``Mean``/``Sum``. Broadcasting is numpy's (ONNX "multidirectional
broadcasting"); outputs keep the ONNX dtype (integer ``Div`` truncates, ``Mod`` follows
``fmod``, comparisons give bool).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from compstack.translate.jax import TABLE

# --------------------------------------------------------------------------- unary math

_UNARY = {
    "Abs": jnp.abs,
    "Acos": jnp.arccos,
    "Acosh": jnp.arccosh,
    "Asin": jnp.arcsin,
    "Asinh": jnp.arcsinh,
    "Atan": jnp.arctan,
    "Atanh": jnp.arctanh,
    "Ceil": jnp.ceil,
    "Cos": jnp.cos,
    "Cosh": jnp.cosh,
    "Erf": lax.erf,
    "Exp": jnp.exp,
    "Floor": jnp.floor,
    "Log": jnp.log,
    "Neg": jnp.negative,
    "Round": jnp.round,  # half to even, as the spec asks
    "Sin": jnp.sin,
    "Sinh": jnp.sinh,
    "Sqrt": jnp.sqrt,
    "Tan": jnp.tan,
    "Tanh": jnp.tanh,
    "Not": jnp.logical_not,
    "BitwiseNot": jnp.bitwise_not,
    "IsNaN": jnp.isnan,
}


def _register_unary(op: str, fn) -> None:
    @TABLE.op(op, since=1)
    def convert(ctx, x):
        return fn(x)

    convert.__doc__ = f"ONNX {op}: elementwise ``{getattr(fn, '__name__', fn)}``."
    convert.__name__ = f"convert_{op.lower()}"


_fn: Any  # the loops of this module bind jnp functions whose stub types differ (ufunc, BinaryUfunc, plain)
for _op, _fn in _UNARY.items():
    _register_unary(_op, _fn)


@TABLE.op("Sign", since=9)
def sign(ctx, x):
    """ONNX Sign (-1, 0, 1; NaN stays NaN); a zero gives +0, as onnx.reference (numpy)."""
    if jnp.issubdtype(jnp.result_type(x), jnp.floating):
        return jnp.where(x == 0, jnp.zeros((), x.dtype), jnp.sign(x))
    return jnp.sign(x)


@TABLE.op("Reciprocal", since=1)
def reciprocal(ctx, x):
    """ONNX Reciprocal: ``1 / x``."""
    return jnp.reciprocal(x)


@TABLE.op("IsInf", since=10)
def isinf(ctx, x):
    """ONNX IsInf with ``detect_positive`` / ``detect_negative``."""
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if pos and neg:
        return jnp.isinf(x)
    if pos:
        return jnp.isposinf(x)
    if neg:
        return jnp.isneginf(x)
    return jnp.zeros(jnp.shape(x), bool)


# --------------------------------------------------------------------------- activations


@TABLE.op("Relu", since=6)
def relu(ctx, x):
    """ONNX Relu ``max(x, 0)``. The sign of ``relu(-0.0)`` follows onnx.reference
    (numpy's ``maximum``): ``+0`` for float32/64/bfloat16, ``-0`` for float16."""
    if jnp.result_type(x) == jnp.float16:
        return jnp.where(x < 0, jnp.zeros((), x.dtype), x)
    return jnp.maximum(x, jnp.zeros((), x.dtype))


@TABLE.op("Sigmoid", since=6)
def sigmoid(ctx, x):
    """ONNX Sigmoid ``1 / (1 + exp(-x))``."""
    return jax.nn.sigmoid(x)


@TABLE.op("HardSigmoid", since=6)
def hard_sigmoid(ctx, x):
    """ONNX HardSigmoid ``max(0, min(1, alpha * x + beta))``."""
    alpha, beta = ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5)
    return jnp.clip(x * alpha + beta, 0, 1).astype(x.dtype)


@TABLE.op("HardSwish", since=14)
def hard_swish(ctx, x):
    """ONNX HardSwish ``x * max(0, min(1, x / 6 + 0.5))``."""
    return x * jnp.clip(x * (1 / 6) + 0.5, 0, 1)


@TABLE.op("Softplus", since=1)
def softplus(ctx, x):
    """ONNX Softplus ``log(exp(x) + 1)`` (stable form)."""
    return jnp.logaddexp(x, jnp.zeros((), x.dtype))


@TABLE.op("Softsign", since=1)
def softsign(ctx, x):
    """ONNX Softsign ``x / (1 + |x|)``."""
    return x / (jnp.abs(x) + 1)


@TABLE.op("Mish", since=18)
def mish(ctx, x):
    """ONNX Mish ``x * tanh(softplus(x))``."""
    return x * jnp.tanh(jnp.logaddexp(x, jnp.zeros((), x.dtype)))


@TABLE.op("Elu", since=6)
def elu(ctx, x):
    """ONNX Elu: ``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""
    return jnp.where(x > 0, x, ctx.attr("alpha", 1.0) * jnp.expm1(x)).astype(x.dtype)


@TABLE.op("Selu", since=6)
def selu(ctx, x):
    """ONNX Selu: ``gamma * (x if x > 0 else alpha * (exp(x) - 1))``."""
    alpha = ctx.attr("alpha", 1.67326319217681884765625)
    gamma = ctx.attr("gamma", 1.05070102214813232421875)
    return (jnp.where(x > 0, x, alpha * jnp.expm1(x)) * gamma).astype(x.dtype)


@TABLE.op("Celu", since=12)
def celu(ctx, x):
    """ONNX Celu ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    alpha = ctx.attr("alpha", 1.0)
    return jnp.where(x > 0, x, alpha * jnp.expm1(x / alpha)).astype(x.dtype)


@TABLE.op("LeakyRelu", since=6)
def leaky_relu(ctx, x):
    """ONNX LeakyRelu: ``x`` if ``x > 0`` else ``alpha * x``."""
    return jnp.where(x > 0, x, x * ctx.attr("alpha", 0.01)).astype(x.dtype)


@TABLE.op("PRelu", since=7)
def prelu(ctx, x, slope):
    """ONNX PRelu: ``x`` if ``x > 0`` else ``slope * x`` (slope broadcast to ``x``)."""
    return jnp.where(x > 0, x, x * slope).astype(x.dtype)


@TABLE.op("ThresholdedRelu", since=10)
def thresholded_relu(ctx, x):
    """ONNX ThresholdedRelu: ``x`` if ``x > alpha`` else 0."""
    return jnp.where(x > ctx.attr("alpha", 1.0), x, jnp.zeros((), x.dtype))


@TABLE.op("Shrink", since=9)
def shrink(ctx, x):
    """ONNX Shrink: ``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0."""
    bias, lambd = ctx.attr("bias", 0.0), ctx.attr("lambd", 0.5)
    zero = jnp.zeros((), x.dtype)
    if jnp.issubdtype(x.dtype, jnp.integer):
        b = jnp.asarray(bias).astype(x.dtype)
        return jnp.where(x < -lambd, x + b, jnp.where(x > lambd, x - b, zero))
    return jnp.where(x < -lambd, x + bias, jnp.where(x > lambd, x - bias, zero)).astype(x.dtype)


@TABLE.op("Gelu", since=20)
def gelu(ctx, x):
    """ONNX Gelu, ``approximate`` ``none`` (erf) or ``tanh``."""
    approx = ctx.attr("approximate", "none")
    if approx == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return (0.5 * x * (1 + jnp.tanh(inner))).astype(x.dtype)
    if approx != "none":
        raise ctx.unsupported(f"approximate={approx!r}")
    return (0.5 * x * (1 + lax.erf(x * (1 / math.sqrt(2))))).astype(x.dtype)


@TABLE.op("Swish", since=24)
def swish(ctx, x):
    """ONNX Swish ``x * sigmoid(alpha * x)``."""
    return x * jax.nn.sigmoid(x * ctx.attr("alpha", 1.0))


def _clip(x, lo, hi):
    if lo is not None:
        x = jnp.maximum(x, jnp.asarray(lo, x.dtype))
    if hi is not None:
        x = jnp.minimum(x, jnp.asarray(hi, x.dtype))
    return x


@TABLE.op("Clip", since=6)
def clip_6(ctx, x):
    """ONNX Clip-6: bounds as ``min``/``max`` attributes."""
    return _clip(x, ctx.attr("min", None), ctx.attr("max", None))


@TABLE.op("Clip", since=11)
def clip(ctx, x, lo=None, hi=None):
    """ONNX Clip-11+: optional ``min``/``max`` inputs (``min(max(x, lo), hi)``)."""
    return _clip(x, lo, hi)


# --------------------------------------------------------------------------- binary


def _is_int(x) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jnp.integer)


@TABLE.op("Add", since=7)
def add(ctx, a, b):
    """ONNX Add (wraps around for integers)."""
    return jnp.add(a, b)


@TABLE.op("Sub", since=7)
def sub(ctx, a, b):
    """ONNX Sub."""
    return jnp.subtract(a, b)


@TABLE.op("Mul", since=7)
def mul(ctx, a, b):
    """ONNX Mul."""
    return jnp.multiply(a, b)


@TABLE.op("Div", since=7)
def div(ctx, a, b):
    """ONNX Div: true division for floats, truncation toward zero for integers."""
    if _is_int(a):
        a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
        return lax.div(a, b.astype(a.dtype))
    return jnp.divide(a, b)


@TABLE.op("Pow", since=7)
def power(ctx, a, b):
    """ONNX Pow ``a ** b``; the output has ``a``'s dtype (``T1`` may differ from ``T``)."""
    out = jnp.result_type(a)
    if isinstance(b, np.ndarray) and b.size == 1 and float(b.reshape(-1)[0]) == 2.0 and b.ndim <= jnp.ndim(a):
        return a * a
    if jnp.issubdtype(out, jnp.floating):
        return jnp.power(a, jnp.asarray(b).astype(out))
    if _is_int(b):
        return jnp.power(a, jnp.asarray(b).astype(out))
    return jnp.power(jnp.asarray(a).astype(jnp.float64), jnp.asarray(b).astype(jnp.float64)).astype(out)


@TABLE.op("Mod", since=10)
def mod(ctx, a, b):
    """ONNX Mod: ``fmod=1`` C ``fmod`` (sign of the dividend); ``fmod=0`` Python ``%``
    (sign of the divisor)."""
    if ctx.attr("fmod", 0):
        return jnp.fmod(a, b)
    return jnp.remainder(a, b)


def _variadic(fn):
    def convert(ctx, *xs):
        return functools.reduce(fn, [x for x in xs if x is not None])

    return convert


for _op, _fn, _doc in [("Max", jnp.maximum, "elementwise maximum (NaN propagates)"),
                       ("Min", jnp.minimum, "elementwise minimum (NaN propagates)"),
                       ("Sum", jnp.add, "sum of all inputs, left to right")]:
    _conv = _variadic(_fn)
    _conv.__doc__ = f"ONNX {_op} (variadic, broadcast): {_doc}."
    _conv.__name__ = f"convert_{_op.lower()}"
    TABLE.op(_op, since=8)(_conv)


@TABLE.op("Mean", since=8)
def mean(ctx, *xs):
    """ONNX Mean (variadic, broadcast): the sum divided by the number of inputs."""
    total = functools.reduce(jnp.add, xs)
    return (total / len(xs)).astype(jnp.result_type(xs[0]))


_COMPARE = {
    "Equal": jnp.equal,
    "Less": jnp.less,
    "LessOrEqual": jnp.less_equal,
    "Greater": jnp.greater,
    "GreaterOrEqual": jnp.greater_equal,
    "And": jnp.logical_and,
    "Or": jnp.logical_or,
    "Xor": jnp.logical_xor,
    "BitwiseAnd": jnp.bitwise_and,
    "BitwiseOr": jnp.bitwise_or,
    "BitwiseXor": jnp.bitwise_xor,
}


def _register_binary(op: str, fn) -> None:
    @TABLE.op(op, since=7)
    def convert(ctx, a, b):
        return fn(a, b)

    convert.__doc__ = f"ONNX {op}: elementwise ``{fn.__name__}`` (broadcast)."
    convert.__name__ = f"convert_{op.lower()}"


for _op, _fn in _COMPARE.items():
    _register_binary(_op, _fn)


@TABLE.op("BitShift", since=11)
def bit_shift(ctx, a, b):
    """ONNX BitShift (unsigned ints); shifts of at least the bit width give 0."""
    b = jnp.asarray(b).astype(jnp.result_type(a))
    if ctx.attr("direction") == "LEFT":
        return lax.shift_left(*jnp.broadcast_arrays(jnp.asarray(a), b))
    a, b = jnp.broadcast_arrays(jnp.asarray(a), b)
    return lax.shift_right_logical(a, b) if not jnp.issubdtype(a.dtype, jnp.signedinteger) \
        else lax.shift_right_arithmetic(a, b)


@TABLE.op("Where", since=9)
def where(ctx, cond, x, y):
    """ONNX Where: ``x`` where ``cond`` else ``y`` (broadcast)."""
    return jnp.where(cond, x, y)


@TABLE.op("SwiGLU", since=28)
def swiglu(ctx, a, b):
    """ONNX SwiGLU ``a * sigmoid(alpha * a) * b``."""
    return (a * jax.nn.sigmoid(a * ctx.attr("alpha", 1.0)) * b).astype(jnp.result_type(a))
