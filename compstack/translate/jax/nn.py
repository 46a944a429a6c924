"""ONNX -> jax converters: nn ops (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import jax.numpy as jnp

from compstack.translate.jax import TABLE


@TABLE.op("MatMul", since=1)
def matmul(ctx, a, b):
    return jnp.matmul(a, b)


@TABLE.op("Gemm", since=7)
def gemm(ctx, a, b, c=None):
    if ctx.attr("transA", 0):
        a = a.T
    if ctx.attr("transB", 0):
        b = b.T
    y = ctx.attr("alpha", 1.0) * jnp.matmul(a, b)
    if c is not None:
        y = y + ctx.attr("beta", 1.0) * c
    return y.astype(ctx.out_dtype())
