"""Op specs: what each ONNX operator accepts, written once as data.

An :class:`OpSpec` names the op, its *family* (the function in
:mod:`compstack.fuzz.families` that picks shapes and attributes the op's section of
the ONNX spec allows), the dtypes the fuzzer feeds it, the value domain its inputs must
lie in to stay clear of undefined or ill-posed results, and whether its result is
discontinuous in its input (``discrete``: comparisons, rounding, arg-max...). A
discrete op only reads *leaf* tensors (graph inputs and constants, whose values lie on
a 1/4 grid exactly representable in float16/bfloat16), so float32-vs-float64 rounding
never flips its answer and a disagreement is a real one.

Type constraints: the dtypes listed here are intersected with the op schema's own
type constraint (``onnx.defs.get_schema(op, OPSET).type_constraints``, i.e. the
"Type Constraints" paragraph of each op in ONNX ``docs/Operators.md``), so a spec can
only narrow what the standard allows, never widen it.

Domains (ONNX Operators.md, each op's section; IEEE 754 for the float cases):

* ``positive``: Log, Sqrt, ReduceLogSum (log of x <= 0 is -inf/NaN), Pow's base
  (``Pow`` of a negative base to a fractional exponent is NaN), float Div's divisor;
* ``unit`` (|x| < 1): Asin, Acos, Atanh;
* ``ge1`` (x >= 1): Acosh;
* ``nonzero``: integer Div and Mod divisors (division by zero is undefined, Div/Mod
  sections).

Left out: MeanVarianceNormalization (its function body's float32 epsilon makes the
reference evaluator fail in float64, so it cannot be judged), random ops, sequence and
control-flow ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OPSET", "OpSpec", "SPECS", "FLOATS", "INTS", "ALL_DTYPES", "by_name"]

#: The opset the generated models import (Gelu needs 20; Pad "wrap" and Resize
#: "half_pixel_symmetric" need 19).
OPSET = 20

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int8", "int32", "int64")
ALL_DTYPES = (*FLOATS, *INTS, "bool")
_NUM = (*FLOATS, *INTS)
_SIGNED = (*FLOATS, *INTS)


@dataclass(frozen=True)
class OpSpec:
    """One operator as the fuzzer uses it.

    Attributes:
        op: ONNX op type (default domain).
        family: the builder in :mod:`compstack.fuzz.families`.
        dtypes: dtypes of the (first) input the fuzzer feeds it (narrowed by the schema).
        domain: value domain of the first input (see the module docstring), or ``any``.
        discrete: the result is discontinuous in the input: read leaf tensors only.
        attrs: fixed attribute choices: name -> list of values to pick from.
        source: the ONNX spec section the constraints come from.
    """

    op: str
    family: str
    dtypes: tuple[str, ...] = FLOATS
    domain: str = "any"
    discrete: bool = False
    attrs: dict[str, list[Any]] = field(default_factory=dict)
    source: str = ""


def _u(op: str, **kw: Any) -> OpSpec:
    return OpSpec(op, "unary", source=f"Operators.md#{op}", **kw)


def _b(op: str, **kw: Any) -> OpSpec:
    return OpSpec(op, "binary", source=f"Operators.md#{op} (broadcasting: Broadcasting.md)", **kw)


def _r(op: str, **kw: Any) -> OpSpec:
    return OpSpec(op, "reduce", source=f"Operators.md#{op} (axes input, keepdims, noop_with_empty_axes)", **kw)


SPECS: tuple[OpSpec, ...] = (
    # elementwise unary, float
    *(_u(op) for op in ("Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Sin", "Cos", "Atan", "Erf", "Softsign",
                        "Identity", "Asinh")),
    _u("Exp"), _u("Sinh"), _u("Cosh"), _u("Softplus"), _u("Mish"), _u("Tan", domain="unit"),
    _u("Abs", dtypes=INTS), _u("Neg", dtypes=INTS), _u("Relu", dtypes=INTS), _u("Sign", dtypes=_NUM, discrete=True),
    _u("Elu", attrs={"alpha": [1.0, 0.5]}), _u("Selu"), _u("Celu", dtypes=("float32",), attrs={"alpha": [1.0, 2.0]}),
    _u("LeakyRelu", attrs={"alpha": [0.01, 0.2]}), _u("HardSigmoid", attrs={"alpha": [0.2, 0.5], "beta": [0.5, 0.3]}),
    _u("HardSwish"), _u("ThresholdedRelu", attrs={"alpha": [1.0, 0.5]}, discrete=True),
    _u("Gelu", attrs={"approximate": ["none", "tanh"]}),
    _u("Reciprocal", domain="positive"), _u("Log", domain="positive"), _u("Sqrt", domain="positive"),
    _u("Asin", domain="unit"), _u("Acos", domain="unit"), _u("Atanh", domain="unit"), _u("Acosh", domain="ge1"),
    _u("Floor", discrete=True), _u("Ceil", discrete=True), _u("Round", discrete=True),
    _u("IsNaN"), _u("IsInf"), _u("Not", dtypes=("bool",)),
    OpSpec("Dropout", "dropout", source="Operators.md#Dropout (inference: training_mode false, output = input)"),
    # elementwise binary with broadcasting
    _b("Add", dtypes=_NUM), _b("Sub", dtypes=_NUM), _b("Mul", dtypes=_NUM),
    _b("Div"), _b("Div", dtypes=INTS, domain="nonzero"), _b("Mod", dtypes=INTS, domain="nonzero"),
    _b("Pow", dtypes=("float32", "float16"), domain="positive"),
    _b("Max", dtypes=_NUM), _b("Min", dtypes=_NUM), _b("PRelu", dtypes=("float32", "float16")),
    _b("And", dtypes=("bool",)), _b("Or", dtypes=("bool",)), _b("Xor", dtypes=("bool",)),
    *(_b(op, dtypes=_NUM, discrete=True) for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")),
    OpSpec("Sum", "variadic", _NUM, source="Operators.md#Sum"),
    OpSpec("Mean", "variadic", FLOATS, source="Operators.md#Mean"),
    OpSpec("Where", "where", ALL_DTYPES, source="Operators.md#Where (condition bool, broadcasting)"),
    OpSpec("Clip", "clip", _NUM, source="Operators.md#Clip (min, max scalars; min <= max)"),
    # reductions
    *(_r(op, dtypes=_NUM) for op in ("ReduceSum", "ReduceMax", "ReduceMin")),
    *(_r(op) for op in ("ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare")),
    _r("ReduceLogSum", domain="positive"),
    OpSpec("ArgMax", "argreduce", _NUM, discrete=True, source="Operators.md#ArgMax (axis, keepdims, select_last_index)"),
    OpSpec("ArgMin", "argreduce", _NUM, discrete=True, source="Operators.md#ArgMin"),
    OpSpec("CumSum", "cumsum", ("float32", "int32", "int64"), source="Operators.md#CumSum (axis input, exclusive, reverse)"),
    OpSpec("TopK", "topk", ("float32", "int64"), discrete=True,
           source="Operators.md#TopK (k <= dim along axis; equal values: lower index first)"),
    # linear algebra
    OpSpec("MatMul", "matmul", ("float32", "float16", "int32", "int64"),
           source="Operators.md#MatMul (numpy.matmul semantics)"),
    OpSpec("Gemm", "gemm", ("float32", "float16"), source="Operators.md#Gemm (transA, transB, alpha, beta, C unidirectional)"),
    OpSpec("Conv", "conv", ("float32", "float16"),
           source="Operators.md#Conv (kernel_shape, pads, strides, dilations, group divides C and M)"),
    OpSpec("ConvTranspose", "convtranspose", ("float32",),
           source="Operators.md#ConvTranspose (output_padding < stride or dilation)"),
    # pooling
    OpSpec("MaxPool", "pool", ("float32", "float16", "int8"), source="Operators.md#MaxPool (pads < kernel, ceil_mode, dilations)"),
    OpSpec("AveragePool", "pool", ("float32", "float16"), source="Operators.md#AveragePool (count_include_pad, ceil_mode)"),
    OpSpec("LpPool", "pool", ("float32",), source="Operators.md#LpPool (p)"),
    OpSpec("GlobalAveragePool", "globalpool", ("float32", "float16"), source="Operators.md#GlobalAveragePool"),
    OpSpec("GlobalMaxPool", "globalpool", ("float32", "float16"), source="Operators.md#GlobalMaxPool"),
    # normalisations and the Softmax family
    OpSpec("BatchNormalization", "batchnorm", ("float32", "float16"),
           source="Operators.md#BatchNormalization (inference; var >= 0, epsilon)"),
    OpSpec("InstanceNormalization", "instancenorm", ("float32",), source="Operators.md#InstanceNormalization"),
    OpSpec("LayerNormalization", "layernorm", ("float32", "float16"),
           source="Operators.md#LayerNormalization (axis; Scale/B shaped like x.shape[axis:])"),
    OpSpec("LpNormalization", "lpnorm", ("float32",), source="Operators.md#LpNormalization (p in {1, 2})"),
    OpSpec("LRN", "lrn", ("float32",), source="Operators.md#LRN (size odd, rank 4)"),
    OpSpec("Softmax", "softmax", FLOATS, source="Operators.md#Softmax (axis, opset 13+)"),
    OpSpec("LogSoftmax", "softmax", FLOATS, source="Operators.md#LogSoftmax"),
    OpSpec("Hardmax", "softmax", ("float32",), discrete=True, source="Operators.md#Hardmax (ties: first index)"),
    # resampling
    OpSpec("Resize", "resize", ("float32", "float16"),
           source="Operators.md#Resize (mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, "
                  "exclude_outside, antialias; scales xor sizes)"),
    # gather / scatter
    OpSpec("Gather", "gather", ALL_DTYPES, source="Operators.md#Gather (indices in [-s, s-1])"),
    OpSpec("GatherElements", "gatherelements", _NUM, source="Operators.md#GatherElements"),
    OpSpec("GatherND", "gathernd", _NUM, source="Operators.md#GatherND (batch_dims 0)"),
    OpSpec("ScatterElements", "scatterelements", ("float32", "int64"),
           source="Operators.md#ScatterElements (reduction; duplicate indices only with a reduction)"),
    OpSpec("ScatterND", "scatternd", ("float32", "int64"),
           source="Operators.md#ScatterND (no duplicate index tuples with reduction none)"),
    # data movement
    OpSpec("Slice", "slice", ALL_DTYPES, source="Operators.md#Slice (starts/ends clamped, negative steps)"),
    OpSpec("Pad", "pad", _NUM, source="Operators.md#Pad (constant/reflect/edge/wrap; reflect pads < dim)"),
    OpSpec("Concat", "concat", ALL_DTYPES, source="Operators.md#Concat (same shape except axis)"),
    OpSpec("Split", "split", ALL_DTYPES, source="Operators.md#Split (split input or num_outputs, opset 18)"),
    OpSpec("Reshape", "reshape", ALL_DTYPES, source="Operators.md#Reshape (0 copies, one -1 inferred, allowzero 0)"),
    OpSpec("Transpose", "transpose", ALL_DTYPES, source="Operators.md#Transpose (perm a permutation)"),
    OpSpec("Expand", "expand", ALL_DTYPES, source="Operators.md#Expand (bidirectional broadcast)"),
    OpSpec("Squeeze", "squeeze", ALL_DTYPES, source="Operators.md#Squeeze (axes of size 1)"),
    OpSpec("Unsqueeze", "unsqueeze", ALL_DTYPES, source="Operators.md#Unsqueeze"),
    OpSpec("Flatten", "flatten", ALL_DTYPES, source="Operators.md#Flatten (axis in [-r, r])"),
    OpSpec("Tile", "tile", ALL_DTYPES, source="Operators.md#Tile"),
    OpSpec("DepthToSpace", "depthtospace", ("float32",), source="Operators.md#DepthToSpace (C divisible by b*b; DCR/CRD)"),
    OpSpec("SpaceToDepth", "spacetodepth", ("float32",), source="Operators.md#SpaceToDepth (H, W divisible by b)"),
    OpSpec("Trilu", "trilu", ("float32", "int64"), source="Operators.md#Trilu (rank >= 2, k input, upper)"),
    OpSpec("Shape", "shape", ALL_DTYPES, source="Operators.md#Shape (start, end)"),
    OpSpec("Size", "unary", ALL_DTYPES, source="Operators.md#Size"),
    OpSpec("EyeLike", "eyelike", ("float32", "int64"), source="Operators.md#EyeLike (rank 2, k)"),
    OpSpec("Cast", "cast", ALL_DTYPES, source="Operators.md#Cast (float to int of out-of-range values is undefined)"),
    OpSpec("CastLike", "cast", ALL_DTYPES, source="Operators.md#CastLike"),
)


def by_name() -> dict[str, list[OpSpec]]:
    """Op type -> its specs (an op may have one spec per dtype group)."""
    out: dict[str, list[OpSpec]] = {}
    for s in SPECS:
        out.setdefault(s.op, []).append(s)
    return out
