"""IREE adapter: each custom op's C kernel linked into an llvm-cpu dispatch.

The approach of IREE's ``samples/custom_dispatch/cpu/embedded``: the kernel sources
are compiled freestanding (``compstack_kernels_iree`` in ``CMakeLists.txt``: no libc,
no libm) together with a generated adapter ``cs_iree__<symbol>(meta, in..., out...)``
(``csrc/include/compstack/iree_adapter.h``), and the objects are linked by IREE into
the dispatch's embedded ELF through ``hal.executable.objects``. Why not IREE's
executable plugins: they need the runtime started with ``--executable_plugin=`` (not
exposed through ``iree.runtime``'s Python API) and leave the vmfb depending on a
``.so`` at run time; linked objects make a self-contained ``.vmfb``.

How the op reaches IREE: ``iree-import-onnx`` drops the domain of unknown ops and
keeps them as ``torch.operator "onnx.<op_type>"``. :func:`mark` renames each custom node
to ``__cs<k>`` before the import; :func:`rewrite` then replaces each such operator in
the imported MLIR with ``torch_c.to_builtin_tensor`` of its operands, a
``flow.dispatch`` of a one-workgroup ``stream.executable`` that calls the adapter
(``hal.import.static``, ``llvm.bareptr``), and ``torch_c.from_builtin_tensor`` of its
results. Shapes, dtypes and attribute values travel in an int64 ``meta`` constant.
Static shapes are required. Only the llvm-cpu backend can take these dispatches.
"""

from __future__ import annotations

import platform
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx_ir as ir

from compstack.core.errors import UnsupportedError
from compstack.ops._spec import DTYPES, CustomOp

__all__ = ["CustomCall", "mark", "rewrite"]

_MLIR_TYPES = {"float32": "f32", "float16": "f16", "float64": "f64", "int8": "si8", "uint8": "ui8",
               "int32": "si32", "int64": "si64", "bool": "i1"}
_BUILTIN = {"float32": "f32", "float16": "f16", "float64": "f64", "int8": "i8", "uint8": "i8",
            "int32": "i32", "int64": "i64", "bool": "i1"}
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm_64", "arm64": "arm_64"}


@dataclass
class CustomCall:
    """One custom node of the model, as the rewrite needs it.

    Attributes:
        index: k of the node's placeholder op type ``__cs<k>``.
        op: the registered op.
        inputs, outputs: ``(shape, dtype)`` per operand and result.
        attrs: attribute values (defaults filled in).
    """

    index: int
    op: CustomOp
    inputs: list[tuple[tuple[int, ...], str]]
    outputs: list[tuple[tuple[int, ...], str]]
    attrs: dict[str, Any]


def _static(value: ir.Value | None, where: str, op: CustomOp) -> tuple[tuple[int, ...], str]:
    if value is None or value.shape is None or value.dtype is None or not value.shape.is_static():
        raise UnsupportedError(f"iree: {where} of {op.qualname} needs a static shape and known dtype", [op.qualname])
    return tuple(int(d) for d in value.shape), value.dtype.numpy().name  # type: ignore[arg-type]


def mark(model: ir.Model, target: str = "iree") -> tuple[ir.Model, list[CustomCall]]:
    """A copy of ``model`` whose registered custom nodes are renamed ``__cs<k>`` (domain
    kept), and the calls to emit for them; ``(model, [])`` when there are none.

    Raises:
        UnsupportedError: an op without a CPU kernel, a dynamic shape, or an optional
            input left out.
    """
    from compstack.ops._registry import lookup

    nodes = [n for n in model.graph if n.domain not in ("", "ai.onnx") and lookup(n.domain, n.op_type)]
    if not nodes:
        return model, []
    copy = ir.serde.deserialize_model(ir.serde.serialize_model(model))
    calls: list[CustomCall] = []
    for node in copy.graph:
        op = lookup(node.domain, node.op_type) if node.domain not in ("", "ai.onnx") else None
        if op is None:
            continue
        if "cpu" not in op.kernels:
            raise UnsupportedError(f"{target}: {op.qualname} has no CPU kernel", [op.qualname])
        where = f"node '{node.name}'"
        ins = [_static(v, f"an input of {where}", op) for v in node.inputs]
        outs = [_static(v, f"an output of {where}", op) for v in node.outputs]
        attrs = op.attr_values({k: a.value for k, a in node.attributes.items()})
        calls.append(CustomCall(len(calls), op, ins, outs, attrs))
        node.op_type = f"__cs{len(calls) - 1}"
    return copy, calls


def _torch_type(shape: tuple[int, ...], dtype: str) -> str:
    return f"!torch.vtensor<[{','.join(map(str, shape))}],{_MLIR_TYPES[dtype]}>"


def _tensor_type(shape: tuple[int, ...], dtype: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{_BUILTIN[dtype]}>"


def _memref_type(shape: tuple[int, ...], dtype: str) -> str:
    return f"memref<{''.join(f'{d}x' for d in shape)}{_BUILTIN[dtype]}>"


def _meta(call: CustomCall) -> list[int]:
    ints, floats = call.op.kernel_attrs(call.attrs)
    meta = [len(call.inputs), len(call.outputs), len(ints), len(floats)]
    for shape, dtype in call.inputs + call.outputs:
        meta += [DTYPES[dtype], len(shape), *shape]
    meta += ints
    meta += [struct.unpack("<q", struct.pack("<d", f))[0] for f in floats]
    return meta


def _executable(call: CustomCall, objects: list[Path], arch: str) -> str:
    symbol = f"cs_iree__{call.op.kernels['cpu']}"
    meta_t = _memref_type((len(_meta(call)),), "int64")
    memrefs = [meta_t] + [_memref_type(s, d) for s, d in call.inputs + call.outputs]
    n = len(memrefs)
    objs = ", ".join(f'#hal.executable.object<{{path = "{p}"}}>' for p in objects)
    bindings = ", ".join(f"%b{i}: !stream.binding" for i in range(n))
    subspans = "\n".join(f"        %m{i} = stream.binding.subspan %b{i}[%c0] : !stream.binding -> {t}"
                         for i, t in enumerate(memrefs))
    args = ", ".join(f"%m{i}" for i in range(n))
    sig = ", ".join(memrefs)
    return f"""  // compstack custom op {call.op.qualname} (compstack.targets.iree.custom_ops)
  stream.executable private @cs_ex{call.index} attributes {{
    hal.executable.objects = #hal.executable.objects<{{
      #hal.executable.target<"llvm-cpu", "embedded-elf-{arch}"> = [{objs}]
    }}>
  }} {{
    stream.executable.export public @cs_entry{call.index} workgroups() -> (index, index, index) {{
      %c1 = arith.constant 1 : index
      stream.return %c1, %c1, %c1 : index, index, index
    }}
    builtin.module {{
      func.func private @{symbol}({sig}) attributes {{hal.import.static, llvm.bareptr = true}}
      func.func @cs_entry{call.index}({bindings}) {{
        %c0 = arith.constant 0 : index
{subspans}
        func.call @{symbol}({args}) : ({sig}) -> ()
        return
      }}
    }}
  }}
"""


_OPERATOR = re.compile(r'^(?P<indent>\s*)%(?P<res>[\w$.]+)(?::(?P<n>\d+))? = torch\.operator "onnx\.__cs(?P<k>\d+)"'
                       r"\((?P<args>[^)]*)\)")


def _dispatch(call: CustomCall, indent: str, result: str, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The lines replacing one ``torch.operator``, and renamed uses ``%r#i -> %new``."""
    k = call.index
    lines = []
    meta = _meta(call)
    lines.append(f"{indent}%cs{k}_meta = arith.constant dense<[{', '.join(map(str, meta))}]> : tensor<{len(meta)}xi64>")
    operands, types = [f"%cs{k}_meta"], [f"tensor<{len(meta)}xi64>"]
    for i, (arg, (shape, dtype)) in enumerate(zip(args, call.inputs)):
        lines.append(f"{indent}%cs{k}_i{i} = torch_c.to_builtin_tensor {arg} : {_torch_type(shape, dtype)} -> "
                     f"{_tensor_type(shape, dtype)}")
        operands.append(f"%cs{k}_i{i}")
        types.append(_tensor_type(shape, dtype))
    results = [_tensor_type(s, d) for s, d in call.outputs]
    res_t = results[0] if len(results) == 1 else f"({', '.join(results)})"
    count = f":{len(results)}" if len(results) > 1 else ""
    lines.append(f"{indent}%cs{k}_r{count} = flow.dispatch @cs_ex{k}::@cs_entry{k}({', '.join(operands)}) : "
                 f"({', '.join(types)}) -> {res_t}")
    renames = {}
    for j, (shape, dtype) in enumerate(call.outputs):
        src = f"%cs{k}_r#{j}" if len(results) > 1 else f"%cs{k}_r"
        dst = f"%{result}" if len(results) == 1 else f"%cs{k}_o{j}"
        lines.append(f"{indent}{dst} = torch_c.from_builtin_tensor {src} : {_tensor_type(shape, dtype)} -> "
                     f"{_torch_type(shape, dtype)}")
        if len(results) > 1:
            renames[f"%{result}#{j}"] = dst
    return lines, renames


def rewrite(mlir: Path, calls: list[CustomCall], llvm_cpu: bool = True, target: str = "iree",
            objects: list[Path] | None = None) -> None:
    """Replace the placeholder operators of ``calls`` in the imported MLIR file ``mlir``
    (in place) with dispatches of the linked kernels (see the module docstring).

    Args:
        objects: the kernel objects to link (default: the kernel library's, built when
            needed).

    Raises:
        UnsupportedError: not the llvm-cpu backend, an unknown host architecture, or no
            kernel objects; also a placeholder the importer did not emit.
    """
    if not calls:
        return
    ops = sorted({c.op.qualname for c in calls})
    if not llvm_cpu:
        raise UnsupportedError(f"{target}: custom ops ({', '.join(ops)}) are linked into llvm-cpu dispatches only "
                               "(their kernels are CPU code)", ops)
    if objects is None:
        from compstack.ops._kernel import library

        objects = list(library().iree_objects)
    arch = _ARCH.get(platform.machine().lower())
    if arch is None or not objects:
        raise UnsupportedError(f"{target}: no embedded-ELF kernel objects for this host ({platform.machine()})", ops)
    lines = mlir.read_text().splitlines()
    out: list[str] = []
    renames: dict[str, str] = {}
    done = set()
    for line in lines:
        m = _OPERATOR.match(line)
        if m is None:
            out.append(line)
            continue
        call = calls[int(m.group("k"))]
        args = [a.strip() for a in m.group("args").split(",") if a.strip()]
        new, more = _dispatch(call, m.group("indent"), m.group("res"), args)
        out += new
        renames.update(more)
        done.add(call.index)
    missing = [c.op.qualname for c in calls if c.index not in done]
    if missing:
        raise UnsupportedError(f"{target}: the ONNX import did not keep custom node(s) {', '.join(missing)}", missing)
    text = "\n".join(out) + "\n"
    if renames:
        pattern = re.compile("|".join(re.escape(k) for k in sorted(renames, key=len, reverse=True)) + r"(?!\d)")
        text = pattern.sub(lambda m: renames[m.group(0)], text)
    start = re.search(r"^module\b[^\n]*\{\s*$", text, re.MULTILINE)
    if start is None:
        raise UnsupportedError(f"{target}: unexpected MLIR from the ONNX import (no module)", ops)
    executables = "".join(_executable(c, objects, arch) for c in calls)
    mlir.write_text(text[: start.end()] + "\n" + executables + text[start.end():])
