"""What ``compstack ops list`` shows: each op's signature, kernels, and the stacks that
can run it (and, for those that cannot, why)."""

from __future__ import annotations

import importlib.util
from typing import Any

from compstack.ops._spec import CustomOp

__all__ = ["describe", "stack_support"]


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def stack_support(op: CustomOp) -> dict[str, str]:
    """Target -> how it runs the op (``yes: ...``) or why not (``no: ...``), judged from
    the op's kernels and what is installed (nothing is built or imported)."""
    cpu = "cpu" in op.kernels
    out = {"reference": "yes: the NumPy reference through onnx.reference"}
    if not cpu:
        why = "no: the op declares no CPU kernel"
        out.update({t: why for t in ("ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu",
                                     "torchscript-cpu")})
    else:
        out["ort-cpu"] = ("yes: onnxruntime-extensions Python op calling the C kernel" if _has("onnxruntime_extensions")
                          else "no: pip install onnxruntime-extensions (the onnxruntime wheel ships no C headers)")
        out["tvm-llvm"] = "yes: tvm_ffi packed function, R.call_dps_packed"
        out["iree-llvm-cpu"] = "yes: kernel object linked into an llvm-cpu dispatch (hal.executable.objects)"
        out["xla-cpu"] = ("yes: XLA FFI handler (jax.ffi custom call)" if _has("jaxlib")
                          else "no: jaxlib's FFI headers are needed (pip install jax)")
        out["inductor-cpu"] = "yes: torch.library custom op, an extern kernel for Inductor"
        out["torchscript-cpu"] = "yes: torch.library custom op, called by the TorchScript interpreter"
    if "cuda" in op.kernels:
        out["inductor-cuda"] = "yes (needs an NVIDIA GPU): torch.library CUDA kernel"
        out["tensorrt"] = ("no here: plugin source in csrc/tensorrt, built by CMake where TensorRT's headers "
                           "(NvInfer.h) are found")
    else:
        out["inductor-cuda"] = "no: the op declares no CUDA kernel"
    for t in ("iree-cuda", "iree-vulkan", "iree-rocm"):
        out[t] = "no: the kernels are linked into llvm-cpu dispatches only"
    for t in ("tvm-cuda", "tvm-vulkan"):
        out[t] = "no: the packed functions take CPU tensors; only tvm-llvm"
    out["xla-cuda"] = "no: the FFI handlers are registered for the CPU platform only"
    out["ort-cuda"] = "untested (no GPU here): the Python op would run on ORT's CPU execution provider"
    out["openvino-cpu"] = ("no: not wired; OpenVINO takes custom ops as C++ extensions (ov::op::Op subclass + "
                           "ONNX frontend ConversionExtension, loaded with Core.add_extension)")
    return out


def describe(op: CustomOp) -> dict[str, Any]:
    """The op as plain data (``compstack ops list --json``)."""
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
        "stacks": stack_support(op),
    }
