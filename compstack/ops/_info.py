"""What ``compstack ops list`` shows: each op's signature, kernels, and the stacks that
can run it (and, for those that cannot, why).

The per-stack lines are the targets' own (``compstack.targets.custom_op_support``, a
layer above this one); the caller passes them in."""

from __future__ import annotations

from typing import Any, Mapping

from compstack.ops._spec import CustomOp

__all__ = ["describe"]


def describe(op: CustomOp, stacks: Mapping[str, str]) -> dict[str, Any]:
    """The op as plain data (``compstack ops list --json``).

    Args:
        op: the registered op.
        stacks: target -> how it runs the op or why not
            (:func:`compstack.targets.custom_op_support` of ``op.kernels``).
    """
    return {
        "name": op.qualname,
        "doc": op.doc,
        "version": op.version,
        "inputs": [{"name": p.name, "dtypes": list(p.dtypes), "type": p.type_var} for p in op.inputs],
        "outputs": [{"name": p.name, "dtypes": list(p.dtypes), "type": p.type_var} for p in op.outputs],
        "attrs": [{"name": n, "type": a.kind.__name__, "default": None if a.required else a.default, "doc": a.doc}
                  for n, a in op.attrs],
        "kernels": dict(op.kernels),
        "sources": list(op.sources),
        "test_cases": len(op.test_shapes),
        "origin": op.origin,
        "stacks": dict(stacks),
    }
