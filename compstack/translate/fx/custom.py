"""Converters for compstack custom ops (:mod:`compstack.ops`): each node becomes a call
of the op's ``torch.library`` custom op (``torch.ops.<domain>.<name>.default``), which
Inductor keeps as an opaque extern kernel calling the op's C kernel.

One converter per registered op, added for ops registered later too (a registry
listener), under the op's own domain and version.
"""

from __future__ import annotations

from typing import Any

from compstack.ops._registry import add_listener
from compstack.ops._spec import CustomOp
from compstack.translate import NodeContext, op_key
from compstack.translate.fx import TABLE


def _converter(qualname: str) -> Any:
    def convert(ctx: NodeContext, *inputs: Any) -> Any:
        from compstack.ops import torch_op
        from compstack.ops._registry import get

        op = get(qualname)
        attrs = {name: ctx.attr(name) for name, _ in op.attrs if ctx.attr(name) is not None}
        result = torch_op(qualname).default(*inputs, **op.attr_values(attrs))
        return tuple(result[i] for i in range(len(op.outputs))) if len(op.outputs) > 1 else (result,)

    return convert


def _add(op: CustomOp) -> None:
    if op.version not in TABLE.versions(op_key(op.domain, op.name)):
        TABLE.op(op.name, since=op.version, domain=op.domain)(_converter(op.qualname))


add_listener(_add)
