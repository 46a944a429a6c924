"""Builders, one per op family: pick inputs and attributes the op's spec section allows.

Each ``family(b, spec)`` adds the op (and any guard nodes, constants, inputs it needs)
to the :class:`~compstack.fuzz.builder.Builder` ``b``, or raises ``_Skip`` when the op
does not fit; shapes of what it made come from ONNX shape inference afterwards. The
constraint each builder honours is cited from ONNX ``docs/Operators.md`` (and
``Broadcasting.md``) by the ``source`` of its :class:`~compstack.fuzz.specs.OpSpec`.

Modules: :mod:`._common` (shared helpers), :mod:`.elementwise`, :mod:`.nn`, :mod:`.layout`;
every family is re-exported here, so ``getattr(families, spec.family)`` finds it.
"""

from __future__ import annotations

from compstack.fuzz.families.elementwise import (
    argreduce,
    binary,
    cast,
    clip,
    cumsum,
    dropout,
    reduce,
    topk,
    unary,
    variadic,
    where,
)
from compstack.fuzz.families.layout import (
    concat,
    depthtospace,
    expand,
    eyelike,
    flatten,
    gather,
    gatherelements,
    gathernd,
    pad,
    reshape,
    scatterelements,
    scatternd,
    shape,
    slice,
    spacetodepth,
    split,
    squeeze,
    tile,
    transpose,
    trilu,
    unsqueeze,
)
from compstack.fuzz.families.nn import (
    batchnorm,
    conv,
    convtranspose,
    gemm,
    globalpool,
    instancenorm,
    layernorm,
    lpnorm,
    lrn,
    matmul,
    pool,
    resize,
    softmax,
)

__all__ = [
    "argreduce", "batchnorm", "binary", "cast", "clip", "concat", "conv", "convtranspose", "cumsum",
    "depthtospace", "dropout", "expand", "eyelike", "flatten", "gather", "gatherelements", "gathernd",
    "gemm", "globalpool", "instancenorm", "layernorm", "lpnorm", "lrn", "matmul", "pad", "pool",
    "reduce", "reshape", "resize", "scatterelements", "scatternd", "shape", "slice", "softmax",
    "spacetodepth", "split", "squeeze", "tile", "topk", "transpose", "trilu", "unary", "unsqueeze",
    "variadic", "where",
]
