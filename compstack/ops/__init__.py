"""Custom ops: write the kernel once, register it once, run it in every stack.

A kernel developer declares an op once, in Python::

    from compstack.ops import Attr, custom_op, same_as

    @custom_op(
        "mylib::rms_norm",
        inputs=["x: T", "weight: T"], outputs=["y: T"],
        dtypes={"T": ["float32", "float16"]},
        attrs={"epsilon": Attr(float, 1e-6, "added to the mean square")},
        shape=same_as(0),                       # or a function of TensorTypes
        kernels={"cpu": "mylib_rms_norm"},      # C symbols (csrc/include/compstack/kernel.h ABI)
        sources=["kernels/rms_norm.cc"],        # compiled into the kernel library
        test_shapes=[((3, 7), (7,)), ((1, 1), (1,))],
    )
    def rms_norm(x, weight, *, epsilon=1e-6):   # the NumPy reference
        ...

and writes the kernel in C++ against ``csrc/include/compstack/kernel.h`` (a CUDA one
too, optionally). Registration validates everything, registers an ONNX ``OpSchema``
(the checker and shape inference accept the op) and the ``onnx.reference``
implementation. Each stack then runs the same C kernel through a thin adapter:

* PyTorch / Inductor: a ``torch.library.custom_op`` with a fake kernel
  (:func:`torch_op`), an opaque extern kernel to ``torch.export`` and Inductor; the
  PyTorch frontend exports it as a node of the op's ONNX domain;
* XLA: an XLA FFI handler compiled against jaxlib's headers (:func:`jax_call`);
* ONNX Runtime: onnxruntime-extensions' Python custom-op route calling the C kernel;
* TVM Relax: a ``tvm_ffi`` global function called with ``R.call_dps_packed``;
* IREE: the kernel compiled freestanding and linked into an llvm-cpu dispatch.

``compstack ops list`` shows the registered ops, ``compstack ops test NAME`` runs each
stack against the reference. compstack's own ops (``compstack::rms_norm``,
``compstack::bias_gelu``) live in :mod:`compstack.ops.library`.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from compstack.ops._registry import all_ops, get, register
from compstack.ops._spec import Attr, CustomOp, OpDefinitionError, Reference, ShapeRule, TensorType, make_op, same_as

__all__ = ["Attr", "CustomOp", "OpDefinitionError", "TensorType", "all_ops", "custom_op", "get", "jax_call",
           "register", "run_kernel", "same_as", "torch_op"]


def _origin(fn: Callable[..., Any]) -> tuple[str, Path | None]:
    """Where ``fn`` is defined: ``module:NAME`` for importable modules, ``file:PATH``
    for files run by path (``file.py:function`` models); and that file's folder."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    base = Path(path).resolve().parent if path else None
    name = getattr(module, "__name__", "")
    if not name or name == "__main__" or name.startswith("_compstack_user_"):
        return (f"file:{Path(path).resolve()}" if path else ""), base
    return f"module:{name}", base


def custom_op(
    qualname: str,
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
    shape: ShapeRule,
    dtypes: Mapping[str, Sequence[str]] | None = None,
    attrs: Mapping[str, Any] | None = None,
    kernels: Mapping[str, str] | None = None,
    sources: Sequence[str] = (),
    cuda_sources: Sequence[str] = (),
    test_shapes: Sequence[Sequence[Sequence[int]]] = (),
    doc: str = "",
    version: int = 1,
) -> Callable[[Reference], CustomOp]:
    """Declare a custom op; decorates its NumPy reference implementation.

    Args:
        qualname: ``domain::name``; both Python identifiers, the domain not a standard
            ONNX one (it is the op's ONNX domain and its ``torch.library`` namespace).
        inputs: ``"name: TYPE"`` per input, TYPE a dtype (``int64``), alternatives
            (``float32|float16``) or a type variable from ``dtypes``.
        outputs: likewise; a type variable must be bound by an input.
        shape: ``shape(*input_types, **attrs)`` -> the output :class:`TensorType` (or a
            list, one per output); raises ``ValueError`` for shapes the op rejects.
            :func:`same_as` covers ops whose outputs look like an input.
        dtypes: type variable -> allowed dtypes (float16, float32, float64, int8, uint8,
            int32, int64, bool).
        attrs: name -> default value (its type is the attribute's: ``1e-6`` is a float),
            ``int``/``float``/``bool`` for a required one, or an :class:`Attr`.
        kernels: device (``cpu``, ``cuda``) -> C symbol of the kernel, with the ABI of
            ``csrc/include/compstack/kernel.h``. Without a ``cpu`` kernel the op still
            runs on the ``reference`` target and nowhere else.
        sources: C++ files (relative to the declaring module's folder) compiled into the
            kernel library beside ``csrc/cpu``.
        cuda_sources: CUDA files compiled into the CUDA kernel library.
        test_shapes: input shapes for ``compstack ops test``: one tuple of shapes (one per
            input) per case.
        doc: what the op computes (default: the reference's docstring, first paragraph).
        version: the op's version in its domain's opset.

    Returns:
        A decorator returning the registered :class:`CustomOp` (calling it runs the
        NumPy reference).

    Raises:
        OpDefinitionError: any invalid field, named in one line; or the name is taken
            by an op with another signature.
    """

    def decorate(reference: Reference) -> CustomOp:
        origin, base = _origin(reference)
        op = make_op(qualname, inputs=inputs, outputs=outputs, reference=reference, shape=shape, dtypes=dtypes,
                     attrs=attrs, kernels=kernels, sources=sources, cuda_sources=cuda_sources,
                     test_shapes=test_shapes, doc=doc, version=version, origin=origin, base_dir=base)
        return register(op)

    if inspect.isfunction(qualname):
        raise OpDefinitionError("custom_op needs arguments: @custom_op('domain::name', inputs=..., ...)")
    return decorate


def torch_op(qualname: str) -> Any:
    """The PyTorch op of a registered custom op (``torch.ops.<domain>.<name>``),
    defined on first use with a CPU kernel calling the C entry point and a fake kernel
    from the shape rule. Ops registered while torch is imported are defined at once, so
    ``forward`` may call this under ``torch.compile``.

    Raises:
        KeyError: no such op.
        RuntimeError: first called inside a TorchDynamo trace (call it once outside).
    """
    from compstack.ops import _torch

    packet = _torch.PACKETS.get(qualname)  # no lock, no registry: traceable inside forward()
    if packet is not None:
        return packet
    import torch

    if torch.compiler.is_compiling():
        raise RuntimeError(f"compstack.ops.torch_op({qualname!r}) was first called inside a traced function; "
                           "call it once outside (e.g. at module level) so the op is defined before tracing")
    return _torch.ensure(get(qualname))


def jax_call(qualname: str) -> Callable[..., Any]:
    """A JAX function ``f(*arrays, **attrs)`` calling the op's XLA FFI handler
    (``jax.ffi.ffi_call``); returns one array or a tuple for several outputs.

    Raises:
        KeyError: no such op.
        UnsupportedError: the op has no CPU kernel, or jaxlib's FFI headers are missing.
    """
    from compstack.ops import _jax

    return _jax.caller(get(qualname))


def run_kernel(qualname: str, *arrays: Any, **attrs: Any) -> Any:
    """Run the op's CPU kernel on NumPy arrays; one array, or a tuple for several outputs.

    Raises:
        KeyError: no such op.
        KernelError: the kernel returned an error status.
    """
    from compstack.ops._kernel import run_kernel as run

    outs = run(get(qualname), *arrays, **attrs)
    return outs[0] if len(outs) == 1 else tuple(outs)
