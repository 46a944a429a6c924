"""ONNX -> jax converters: elementwise ops (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import jax.numpy as jnp

from compstack.translate.jax import TABLE


@TABLE.op("Add", since=7)
def add(ctx, a, b):
    return jnp.add(a, b)


@TABLE.op("Relu", since=6)
def relu(ctx, x):
    return jnp.maximum(x, jnp.zeros((), x.dtype))
