"""ONNX -> fx converters: nn ops (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import torch

from compstack.translate.fx import TABLE


@TABLE.op("MatMul", since=1)
def matmul(ctx, a, b):
    return torch.matmul(a, b)


@TABLE.op("Gemm", since=7)
def gemm(ctx, a, b, c=None):
    if ctx.attr("transA", 0):
        a = a.transpose(0, 1)
    if ctx.attr("transB", 0):
        b = b.transpose(0, 1)
    y = torch.matmul(a, b) * ctx.attr("alpha", 1.0)
    if c is not None:
        y = y + c * ctx.attr("beta", 1.0)
    return y
