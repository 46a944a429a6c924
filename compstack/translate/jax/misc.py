"""ONNX -> jax converters: misc ops (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import jax.numpy as jnp

from compstack.translate.jax import TABLE
