"""Calling a custom op's C entry point from Python (ctypes), as the PyTorch, ONNX
Runtime and TVM adapters do.

The ABI is ``csrc/include/compstack/kernel.h``: arrays of ``cs_tensor`` (data pointer,
shape, rank, ONNX dtype code) for inputs and outputs, then the int and float attributes.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compstack.core.errors import UnsupportedError
from compstack.ops._spec import DTYPES, CustomOp, TensorType
from compstack.ops.build import KernelLibrary, ensure_built

__all__ = ["STATUS", "KernelError", "call_kernel", "kernel_function", "library", "run_kernel"]

_MAX_RANK = 8

#: Meaning of the kernel ABI's return codes.
STATUS = {1: "wrong number of inputs, outputs or attributes", 2: "a dtype the kernel does not implement",
          3: "shapes that do not fit the op", 4: "an attribute value out of range", 5: "a device runtime error"}


class KernelError(RuntimeError):
    """A kernel returned a non-zero status."""


class CsTensor(ctypes.Structure):
    """``cs_tensor`` of the kernel ABI."""

    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * _MAX_RANK), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_int32)]


def _sources() -> tuple[tuple[str, ...], tuple[str, ...]]:
    from compstack.ops._registry import all_ops

    ops = all_ops()
    cpu = tuple(dict.fromkeys(s for op in ops for s in op.sources))
    cuda = tuple(dict.fromkeys(s for op in ops for s in op.cuda_sources))
    return cpu, cuda


def library(cuda: bool = False) -> KernelLibrary:
    """The kernel library holding every registered op's kernels, built when needed
    (see :func:`compstack.ops.build.ensure_built`); looked up once per process for a
    given set of sources (the source hash reads every kernel file)."""
    cpu, cuda_src = _sources()
    return _library(cpu, cuda_src, cuda)


@functools.cache
def _library(cpu: tuple[str, ...], cuda_src: tuple[str, ...], cuda: bool) -> KernelLibrary:
    return ensure_built(cpu, cuda_src, cuda=cuda)


@functools.cache
def _cdll(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def kernel_function(op: CustomOp, device: str = "cpu") -> Any:
    """The ctypes function of ``op``'s kernel for ``device``.

    Raises:
        UnsupportedError: the op declares no kernel for ``device``, or the library lacks
            the symbol.
    """
    symbol = op.kernels.get(device)
    if symbol is None:
        raise UnsupportedError(f"{op.qualname} has no {device} kernel", [op.qualname])
    lib = library(cuda=device == "cuda")
    return _function(str(lib.cpu if device == "cpu" else lib.cuda), symbol, op.qualname)


@functools.cache
def _function(path: str, symbol: str, qualname: str) -> Any:
    try:
        fn = getattr(_cdll(path), symbol)
    except AttributeError:
        raise UnsupportedError(f"{qualname}: symbol {symbol} is not in {path}", [qualname]) from None
    fn.restype = ctypes.c_int32
    return fn


def _tensor(ptr: int, shape: Sequence[int], dtype: str) -> CsTensor:
    if len(shape) > _MAX_RANK:
        raise KernelError(f"rank {len(shape)} > {_MAX_RANK}")
    t = CsTensor()
    t.data = ptr
    for i, d in enumerate(shape):
        t.shape[i] = int(d)
    t.ndim = len(shape)
    t.dtype = DTYPES[dtype]
    return t


def call_kernel(op: CustomOp, inputs: Sequence[tuple[int, Sequence[int], str]],
                outputs: Sequence[tuple[int, Sequence[int], str]], attrs: Mapping[str, Any],
                device: str = "cpu", stream: int = 0) -> None:
    """Call the kernel on raw buffers: each tensor is ``(data pointer, shape, dtype)``,
    dense and row-major.

    Raises:
        KernelError: the kernel returned an error status (names op and status).
    """
    fn = kernel_function(op, device)
    ins = (CsTensor * len(inputs))(*[_tensor(*t) for t in inputs])
    outs = (CsTensor * len(outputs))(*[_tensor(*t) for t in outputs])
    iattrs, fattrs = op.kernel_attrs(op.attr_values(attrs))
    ia = (ctypes.c_int64 * max(len(iattrs), 1))(*iattrs)
    fa = (ctypes.c_double * max(len(fattrs), 1))(*fattrs)
    args: list[Any] = [ins, len(inputs), outs, len(outputs), ia, len(iattrs), fa, len(fattrs)]
    if device == "cuda":
        args.append(ctypes.c_void_p(stream))
    status = fn(*args)
    if status != 0:
        raise KernelError(f"{op.qualname} kernel {op.kernels[device]} failed with status {status}: "
                          f"{STATUS.get(status, 'unknown')}")


def run_kernel(op: CustomOp, *arrays: np.ndarray, **attrs: Any) -> list[np.ndarray]:
    """Run the CPU kernel on NumPy arrays (made contiguous); returns new output arrays.

    Raises:
        OpDefinitionError: inputs the declaration or the shape rule rejects.
        KernelError: the kernel returned an error status.
    """
    from compstack.core.inputs import contiguous

    arrays = tuple(contiguous(a) for a in arrays)
    types = [TensorType(tuple(a.shape), a.dtype.name) for a in arrays]
    out_types = op.infer(types, attrs)
    outs = [np.empty(tuple(int(d) for d in t.shape), dtype=t.dtype) for t in out_types]  # type: ignore[arg-type]
    call_kernel(op, [(a.ctypes.data, a.shape, a.dtype.name) for a in arrays],
                [(o.ctypes.data, o.shape, o.dtype.name) for o in outs], attrs)
    return outs
