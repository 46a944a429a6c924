"""TVM Relax adapter: each custom op as a destination-passing packed function.

The op's CPU kernel is wrapped in a ``tvm_ffi`` global function
``compstack.<domain>.<name>`` taking ``(*inputs, *attributes, *outputs)``; the Relax
program calls it with ``R.call_dps_packed`` (outputs allocated by the VM from the
shape rule, attributes passed as ``R.prim_value``). TVM 0.27's
``relax.frontend.onnx.from_onnx`` takes no custom converter map and dispatches on op
type alone, so :func:`importing` renames each custom node to a unique op type and
extends the frontend's converter map (``onnx_frontend._get_convert_map``) for the
duration of the import. The packed function is looked up by name when the VM runs, so
:func:`register_packed` must run in any process that loads a compiled artifact.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx

from compstack.core.errors import UnsupportedError
from compstack.ops._spec import CustomOp, TensorType

__all__ = ["handles", "importing", "packed_name", "register_packed"]

_REGISTERED: set[str] = set()
_LOCK = threading.Lock()
_PREFIX = "__cs__"


def packed_name(op: CustomOp) -> str:
    """The global function name of ``op`` (``compstack.compstack.rms_norm``)."""
    return f"compstack.{op.domain}.{op.name}"


def handles(domain: str, op_type: str) -> bool:
    """Whether ``domain::op_type`` is a registered custom op with a CPU kernel."""
    from compstack.ops._registry import lookup

    op = lookup(domain, op_type) if domain not in ("", "ai.onnx") else None
    return op is not None and "cpu" in op.kernels


def _tensor_args(values: Any) -> tuple[int, tuple[int, ...], str]:
    arr = np.from_dlpack(values)
    return arr.ctypes.data, tuple(arr.shape), arr.dtype.name


def _packed(qualname: str) -> Any:
    def call(*args: Any) -> None:
        from compstack.ops._kernel import call_kernel
        from compstack.ops._registry import get

        op = get(qualname)
        n_in, n_attr = len(op.inputs), len(op.attrs)
        attrs = {name: value for (name, _), value in zip(op.attrs, args[n_in:n_in + n_attr])}
        call_kernel(op, [_tensor_args(t) for t in args[:n_in]], [_tensor_args(t) for t in args[n_in + n_attr:]],
                    attrs)

    return call


def register_packed(ops: list[CustomOp]) -> None:
    """Register the packed functions of ``ops`` (once per process).

    Raises:
        UnsupportedError: an op without a CPU kernel.
    """
    import tvm_ffi

    for op in ops:
        if "cpu" not in op.kernels:
            raise UnsupportedError(f"tvm: {op.qualname} has no CPU kernel", [op.qualname])
        name = packed_name(op)
        with _LOCK:
            if name not in _REGISTERED:
                from compstack.ops._kernel import kernel_function

                kernel_function(op)  # build/load the library now, not inside the VM
                tvm_ffi.register_global_func(name, _packed(op.qualname), override=True)
                _REGISTERED.add(name)


def _converter(op: CustomOp) -> Any:
    """An object with the frontend's ``get_converter(opset)`` interface."""

    def convert(bb: Any, inputs: Any, attr: dict[str, Any], params: Any) -> Any:
        from tvm import relax

        types = []
        for value in list(inputs)[: len(op.inputs)]:
            ty = value.ty
            shape = tuple(int(d) for d in ty.shape)
            types.append(TensorType(shape, str(ty.dtype)))
        given = {name: attr[name] for name, _ in op.attrs if name in attr}
        values = op.attr_values(given)
        outs = op.infer(types, values)
        out_ty = [relax.TensorType(tuple(t.shape), t.dtype) for t in outs]
        scalars = [relax.prim_value(float(values[n]), "float64") if a.kind is float
                   else relax.prim_value(int(values[n]), "int64") for n, a in op.attrs]
        return relax.call_dps_packed(packed_name(op), [*list(inputs)[: len(op.inputs)], *scalars],
                                     out_ty=out_ty if len(out_ty) > 1 else out_ty[0])

    class Converter:
        @staticmethod
        def get_converter(opset: int) -> Any:
            return convert

    return Converter


@contextlib.contextmanager
def importing(proto: onnx.ModelProto, device: str = "cpu", target: str = "tvm") -> Iterator[onnx.ModelProto]:
    """While inside, TVM's ONNX frontend converts the registered custom ops of
    ``proto``; yields the proto to hand to ``from_onnx`` (custom nodes renamed to
    unique op types). A model without custom ops is yielded unchanged.

    Args:
        device: the target's ``tvm.device`` kind; only ``cpu`` can call the CPU kernels.

    Raises:
        UnsupportedError: a custom op without a CPU kernel, or a device other than the CPU.
    """
    from compstack.ops._registry import lookup

    custom = {}
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            op = lookup(node.domain, node.op_type)
            if op is not None:
                custom[f"{_PREFIX}{op.domain}__{op.name}"] = op
    if not custom:
        yield proto
        return
    if device != "cpu":
        ops = sorted(op.qualname for op in custom.values())
        raise UnsupportedError(f"{target}: custom ops ({', '.join(ops)}) run as host packed functions on CPU "
                               "tensors; only tvm-llvm takes them", ops)
    register_packed(list(custom.values()))
    renamed = onnx.ModelProto()
    renamed.CopyFrom(proto)
    for node in renamed.graph.node:
        if lookup(node.domain, node.op_type) is not None and node.domain not in ("", "ai.onnx"):
            node.op_type = f"{_PREFIX}{node.domain}__{node.op_type}"
    from unittest import mock

    from tvm.relax.frontend.onnx import onnx_frontend

    original = onnx_frontend._get_convert_map

    def extended() -> dict[str, Any]:
        table = dict(original())
        table.update({name: _converter(op) for name, op in custom.items()})
        return table

    with mock.patch.object(onnx_frontend, "_get_convert_map", extended):
        yield renamed
