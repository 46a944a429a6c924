"""PyTorch adapter: each custom op as a ``torch.library`` custom op.

The CPU kernel is the op's C entry point, called through ctypes on the tensors'
``data_ptr()`` (inputs made contiguous, outputs allocated from the shape rule); a
CUDA kernel, when the op has one, is registered for ``cuda`` and called on the current
stream. The fake kernel (``register_fake``) allocates outputs from the shape rule, so
``torch.export`` traces the op and Inductor calls it as an opaque extern kernel
(``torch.ops.<domain>.<name>.default`` in its output code).

For ONNX export, :func:`translation_table` gives the dynamo exporter
(``custom_translation_table=``) one function per op that emits the op as a node of its
ONNX domain, attributes included.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from compstack.ops._kernel import call_kernel
from compstack.ops._spec import CustomOp, TensorType

__all__ = ["ensure", "schema_of", "translation_table"]

_DEFINED: dict[str, Any] = {}
#: ``torch.ops.<domain>.<name>`` of every op defined so far, by qualname.
PACKETS: dict[str, Any] = {}
_LOCK = threading.Lock()
_SCALAR = {int: "int", float: "float", bool: "bool"}


def schema_of(op: CustomOp) -> str:
    """The ``torch.library`` schema: ``(Tensor x, Tensor weight, float epsilon=1e-06) -> Tensor``."""
    params = [f"Tensor {p.name}" for p in op.inputs]
    for name, attr in op.attrs:
        default = "" if attr.required else f"={attr.default!r}"
        params.append(f"{_SCALAR[attr.kind]} {name}{default}")
    ret = "Tensor" if len(op.outputs) == 1 else "(" + ", ".join("Tensor" for _ in op.outputs) + ")"
    return f"({', '.join(params)}) -> {ret}"


def _split(op: CustomOp, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    n = len(op.inputs)
    tensors = list(args[:n])
    attrs = dict(zip([name for name, _ in op.attrs], args[n:]))
    attrs.update(kwargs)
    return tensors, op.attr_values(attrs)


def _np_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _out_types(op: CustomOp, tensors: Sequence[Any], attrs: dict[str, Any]) -> list[TensorType]:
    return op.infer([TensorType(tuple(int(d) for d in t.shape), _np_name(t.dtype)) for t in tensors], attrs)


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _alloc(op: CustomOp, tensors: Sequence[Any], attrs: dict[str, Any]) -> list[Any]:
    import torch

    device = tensors[0].device
    return [torch.empty(tuple(int(d) for d in t.shape), dtype=_torch_dtype(t.dtype), device=device)  # type: ignore[arg-type]
            for t in _out_types(op, tensors, attrs)]


def _result(outs: list[Any]) -> Any:
    return outs[0] if len(outs) == 1 else tuple(outs)


def _kernel_impl(qualname: str, device: str) -> Any:
    def impl(*args: Any, **kwargs: Any) -> Any:
        from compstack.ops._registry import get

        op = get(qualname)
        tensors, attrs = _split(op, args, kwargs)
        tensors = [t.contiguous() for t in tensors]
        outs = _alloc(op, tensors, attrs)
        stream = 0
        if device == "cuda":
            import torch

            stream = torch.cuda.current_stream(tensors[0].device).cuda_stream
        call_kernel(op, [(t.data_ptr(), tuple(t.shape), _np_name(t.dtype)) for t in tensors],
                    [(o.data_ptr(), tuple(o.shape), _np_name(o.dtype)) for o in outs], attrs, device, stream)
        return _result(outs)

    return impl


def _fake_impl(qualname: str) -> Any:
    def fake(*args: Any, **kwargs: Any) -> Any:
        from compstack.ops._registry import get

        op = get(qualname)
        tensors, attrs = _split(op, args, kwargs)
        return _result(_alloc(op, tensors, attrs))

    return fake


def ensure(op: CustomOp) -> Any:
    """Define ``op`` in ``torch.library`` once per process; returns
    ``torch.ops.<domain>.<name>`` (later registrations of the same name reuse it and
    see the registry's current definition)."""
    import torch

    with _LOCK:
        if op.qualname not in _DEFINED:
            devices = ["cpu"] + (["cuda"] if "cuda" in op.kernels else [])
            lib_op = torch.library.custom_op(op.qualname, _kernel_impl(op.qualname, "cpu"), mutates_args=(),
                                             device_types="cpu", schema=schema_of(op))
            if "cuda" in devices:
                lib_op.register_kernel("cuda", _kernel_impl(op.qualname, "cuda"))
            lib_op.register_fake(_fake_impl(op.qualname))
            _DEFINED[op.qualname] = lib_op
            PACKETS[op.qualname] = getattr(getattr(torch.ops, op.domain), op.name)
    return PACKETS[op.qualname]


def _translation(op: CustomOp) -> Any:
    """The exporter's translation of ``op``: one node of the op's ONNX domain."""
    from onnxscript import values

    opset = values.Opset(op.domain, op.version)

    def translate(*args: Any, **kwargs: Any) -> Any:
        tensors, attrs = _split(op, args, kwargs)
        attrs = {k: int(v) if isinstance(v, bool) else v for k, v in attrs.items()}
        return getattr(opset, op.name)(*tensors, **attrs)

    translate.__name__ = op.name
    return translate


def translation_table() -> dict[Any, Any]:
    """``custom_translation_table`` entries for every op defined in ``torch.library``
    so far (an op a model calls is defined before the model is exported)."""
    import torch

    from compstack.ops._registry import get

    table = {}
    for qualname in list(_DEFINED):
        op = get(qualname)
        overload = getattr(getattr(torch.ops, op.domain), op.name).default
        table[overload] = _translation(op)
    return table
