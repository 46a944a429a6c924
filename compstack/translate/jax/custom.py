"""Converters for compstack custom ops (:mod:`compstack.ops`): each node becomes a
``jax.ffi.ffi_call`` of the op's XLA FFI handler around its C kernel.

One converter per registered op, added for ops registered later too (a registry
listener), under the op's own domain and version.
"""

from __future__ import annotations

from typing import Any

from compstack.ops._registry import add_listener
from compstack.ops._spec import CustomOp
from compstack.translate import NodeContext, op_key
from compstack.translate.jax import TABLE


def _converter(qualname: str) -> Any:
    def convert(ctx: NodeContext, *inputs: Any) -> Any:
        import jax

        from compstack.ops import jax_call
        from compstack.ops._registry import get

        op = get(qualname)
        if jax.default_backend() != "cpu":
            raise ctx.unsupported(f"{qualname}: its XLA FFI handler is registered for the CPU platform only")
        attrs = {name: ctx.attr(name) for name, _ in op.attrs if ctx.attr(name) is not None}
        result = jax_call(qualname)(*inputs, **attrs)
        return result if isinstance(result, tuple) else (result,)

    return convert


def _add(op: CustomOp) -> None:
    if op.version not in TABLE.versions(op_key(op.domain, op.name)):
        TABLE.op(op.name, since=op.version, domain=op.domain)(_converter(op.qualname))


add_listener(_add)
