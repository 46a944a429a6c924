"""The common IR as a JAX function: one ``jax.numpy``/``jax.lax`` converter per ONNX op.

:func:`to_jax` builds ``fn(params, *inputs) -> tuple(outputs)``; every node's converter
runs under ``jax.named_scope(<IR node name>)``, so XLA's op metadata
(``metadata={op_name="jit(f)/<node name>/dot_general"}``) names the source node
through StableHLO, HLO and the optimized HLO's fusions.

Converters live in one module per op family (``elementwise``, ``nn``, ...) and register
into :data:`TABLE` (see :mod:`compstack.translate` for the converter contract). The
program needs ``jax_enable_x64`` for int64/float64 graphs (ONNX token ids are int64);
:func:`enable_x64` sets it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir

from compstack.translate import OpTable, interpret, static_initializer

__all__ = ["FAMILIES", "TABLE", "JaxProgram", "enable_x64", "to_jax"]

#: Converter modules, one per op family.
FAMILIES = ("elementwise", "math", "nn", "reduce", "shape", "index", "misc", "custom")

TABLE = OpTable("jax", [f"compstack.translate.jax.{f}" for f in FAMILIES])


def enable_x64() -> None:
    """Let JAX hold int64/float64 as such (``jax_enable_x64``), as ONNX graphs need.

    Process-wide: call it in a worker that runs only translated programs, never around a
    user's JAX function (it changes JAX's default dtypes).
    """
    import jax

    jax.config.update("jax_enable_x64", True)


@dataclass
class JaxProgram:
    """A translated model.

    Attributes:
        fn: ``fn(params, *inputs) -> tuple`` of output arrays, in graph order.
        params: large float initializers by name (numpy), passed as ``params`` so they
            are arguments of the XLA program rather than constants folded into it.
        input_names: graph inputs in ``fn``'s positional order.
        output_names: graph outputs in order.
    """

    fn: Callable[..., tuple[Any, ...]]
    params: dict[str, np.ndarray]
    input_names: list[str]
    output_names: list[str]


def to_jax(model: ir.Model) -> JaxProgram:
    """Translate ``model`` into a JAX function (nothing is traced yet).

    Args:
        model: the common IR with static shapes.

    Returns:
        A :class:`JaxProgram`. Tracing it (``jax.jit(p.fn).lower(p.params, *xs)``)
        converts each node.

    Raises:
        UnsupportedError: every op without a JAX converter, listed at once (raised
            here, before tracing), or a node a converter cannot take (at trace time).
    """
    import jax
    import jax.numpy as jnp

    missing = TABLE.missing(model)
    if missing:
        from compstack.core.errors import UnsupportedError

        raise UnsupportedError(f"jax: no converter for: {', '.join(missing)}", missing)
    statics: dict[str, np.ndarray] = {}
    params: dict[str, np.ndarray] = {}
    for name, value in model.graph.initializers.items():
        assert value.const_value is not None  # an initializer read from ONNX holds its tensor
        arr = value.const_value.numpy()
        (statics if static_initializer(value) else params)[name] = arr
    input_names = [v.name or "" for v in model.graph.inputs if not v.is_initializer()]
    output_names = [v.name or "" for v in model.graph.outputs]

    def fn(p: dict[str, Any], *inputs: Any) -> tuple[Any, ...]:
        env: dict[str, Any] = {**statics, **p, **dict(zip(input_names, inputs))}
        outs = interpret(TABLE, model, env, scope=lambda node: jax.named_scope(node.name or node.op_type))
        return tuple(jnp.asarray(o) for o in outs)

    fn.__name__ = _py_name(model.graph.name or "model")
    return JaxProgram(fn, params, input_names, output_names)


def _py_name(name: str) -> str:
    import re

    out = re.sub(r"\W", "_", name)
    return out if out and not out[0].isdigit() else f"m_{out}"
