"""ONNX Runtime adapter: custom ops through onnxruntime-extensions' Python ops.

The ``onnxruntime`` wheel ships no C/C++ headers, so no native custom-op library can
be compiled against the installed ORT here. onnxruntime-extensions (a separate PyPI
wheel) ships a compiled custom-op library whose ``PyOp`` kernel calls back into Python
(``onnxruntime_extensions.onnx_op``); each callback runs the op's C kernel through
ctypes on the NumPy arrays ORT hands over. Costs: one Python round trip per node, and
the extension copies outputs through Python lists.

A ``PyOp`` has one fixed dtype signature and lives in the ``ai.onnx.contrib`` domain,
so :func:`prepare` rewrites each custom node to ``ai.onnx.contrib`` with the op type
``<domain>__<name>__<dtypes>`` (e.g. ``compstack__rms_norm__float32_float32``), with
every attribute written out, and defines that ``PyOp``. :func:`add_to_session`
registers the extension library with a session that needs it (also for an optimized
model loaded back from the artifact cache).

The extension keeps its Python-op definitions in a vector ORT points into; defining one
after a session registered the library crashes the next session. So the first session
defines every registered op's variants at once, and an op registered later in the same
process is ``unsupported`` (with that reason) instead of a crash.

The extension's Python ops take no float16 (its process aborts on one), so float16
inputs reach the ``PyOp`` through ``Cast`` to float32 and back (both exact: every
float16 is a float32), and the kernel still runs in float16.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import onnx

from compstack.core.errors import UnsupportedError
from compstack.ops._spec import CustomOp

__all__ = ["CONTRIB", "add_to_session", "prepare"]

#: The domain onnxruntime-extensions' Python ops live in.
CONTRIB = "ai.onnx.contrib"

_DEFINED: set[str] = set()
_LOCK = threading.Lock()
#: Set once the extension library is registered with a session: from then on no new
#: Python op may be defined in this process (the extension keeps its op definitions in
#: a vector that ORT holds pointers into; growing it crashes the next session).
_frozen = False


def _extensions() -> Any:
    try:
        import onnxruntime_extensions
    except ImportError:
        raise UnsupportedError("ort-cpu: custom ops need onnxruntime-extensions (pip install onnxruntime-extensions):"
                               " the onnxruntime wheel ships no C headers to build a custom-op library against, and "
                               "the extension's Python-op route is how compstack calls the C kernel") from None
    return onnxruntime_extensions


def _variant(op: CustomOp, dtypes: list[str]) -> str:
    return f"{op.domain}__{op.name}__{'_'.join(dtypes)}"


def _define(op: CustomOp, dtypes: list[str]) -> str:
    """Define the ``PyOp`` for ``op`` at these input dtypes (once per process)."""
    ext = _extensions()
    name = _variant(op, dtypes)
    with _LOCK:
        if name in _DEFINED:
            return name
        if _frozen:
            raise UnsupportedError(f"ort-cpu: {op.qualname} was registered after this process created its first "
                                   "ONNX Runtime session with custom ops; onnxruntime-extensions cannot add Python "
                                   "ops then (run it in a new process)", [op.qualname])
        P = ext.PyCustomOpDef
        # float16 travels as float32 (see the module docstring).
        code = {"float32": P.dt_float, "float16": P.dt_float, "float64": P.dt_double, "int8": P.dt_int8,
                "uint8": P.dt_uint8, "int32": P.dt_int32, "int64": P.dt_int64, "bool": P.dt_bool}
        outs = _out_dtypes(op, dtypes)
        attrs = {n: P.dt_float if a.kind is float else P.dt_int64 for n, a in op.attrs}
        qualname = op.qualname
        in_dtypes = [np.dtype(d) for d in dtypes]

        def body(*arrays: np.ndarray, **values: Any) -> Any:
            from compstack.ops._kernel import run_kernel
            from compstack.ops._registry import get

            arrays = tuple(a.astype(d, copy=False) for a, d in zip(arrays, in_dtypes))
            result = [r.astype(np.float32) if r.dtype == np.float16 else r
                      for r in run_kernel(get(qualname), *arrays, **values)]
            return result[0] if len(result) == 1 else tuple(result)

        body.__name__ = name
        ext.onnx_op(op_type=name, inputs=[code[d] for d in dtypes], outputs=[code[d] for d in outs],
                    attrs=attrs)(body)
        _DEFINED.add(name)
    return name


def _out_dtypes(op: CustomOp, dtypes: list[str]) -> list[str]:
    bound = op.bind_dtypes(dtypes)
    return [bound[p.type_var] if p.type_var else p.dtypes[0] for p in op.outputs]


def _widen(node: onnx.NodeProto, dtypes: list[str], outs: list[str]) -> tuple[list[onnx.NodeProto], list[onnx.NodeProto]]:
    """Cast nodes taking ``node``'s float16 inputs to float32 and its float16 outputs
    back (``node`` is renamed to use them); ``(before, after)``."""
    before, after = [], []
    F32, F16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    for i, (name, dt) in enumerate(zip(node.input, dtypes)):
        if dt == "float16":
            wide = f"{name}__cs_f32_{node.name}_{i}"
            before.append(onnx.helper.make_node("Cast", [name], [wide], name=f"{node.name}__cast_in{i}", to=F32))
            node.input[i] = wide
    for j, (name, dt) in enumerate(zip(node.output, outs)):
        if dt == "float16" and name:
            wide = f"{name}__cs_f32"
            after.append(onnx.helper.make_node("Cast", [wide], [name], name=f"{node.name}__cast_out{j}", to=F16))
            node.output[j] = wide
    return before, after


def _dtypes_of(proto: onnx.ModelProto) -> dict[str, str]:
    from compstack.ops._onnx import ONNX_DTYPE_NAMES

    out = {}
    g = proto.graph
    for v in [*g.input, *g.output, *g.value_info]:
        code = v.type.tensor_type.elem_type
        if code in ONNX_DTYPE_NAMES:
            out[v.name] = ONNX_DTYPE_NAMES[code]
    for t in g.initializer:
        if t.data_type in ONNX_DTYPE_NAMES:
            out[t.name] = ONNX_DTYPE_NAMES[t.data_type]
    return out


def prepare(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every registered custom node rewritten to its ``PyOp`` (see the
    module docstring); ``proto`` itself when it has none.

    Raises:
        UnsupportedError: onnxruntime-extensions is missing, an input dtype is unknown,
            or the op has no CPU kernel.
    """
    from compstack.ops._registry import lookup

    if not any(lookup(n.domain, n.op_type) for n in proto.graph.node if n.domain not in ("", "ai.onnx")):
        return proto
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    types = _dtypes_of(out)
    nodes: list[onnx.NodeProto] = []
    for node in out.graph.node:
        op = lookup(node.domain, node.op_type) if node.domain not in ("", "ai.onnx") else None
        if op is None:
            nodes.append(node)
            continue
        if "cpu" not in op.kernels:
            raise UnsupportedError(f"ort-cpu: {op.qualname} has no CPU kernel", [op.qualname])
        if any(i not in types for i in node.input):
            raise UnsupportedError(f"ort-cpu: node '{node.name}' ({op.qualname}): an input's dtype is unknown",
                                   [op.qualname])
        dtypes = [types[i] for i in node.input]
        given = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        values = op.attr_values(given)
        del node.attribute[:]
        for name, attr in op.attrs:
            value = values[name]
            node.attribute.append(onnx.helper.make_attribute(name, float(value) if attr.kind is float else int(value)))
        node.op_type, node.domain = _define(op, dtypes), CONTRIB
        before, after = _widen(node, dtypes, _out_dtypes(op, dtypes))
        nodes += [*before, node, *after]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    if not any(o.domain == CONTRIB for o in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid(CONTRIB, 1))
    return out


def _define_all() -> None:
    """Define the Python op of every registered op at every dtype signature it declares,
    before the extension library is first registered (see ``_frozen``)."""
    from compstack.ops._registry import all_ops

    for op in all_ops():
        if "cpu" in op.kernels:
            for dtypes in op.dtype_cases():
                _define(op, list(dtypes))


def add_to_session(so: Any, model: onnx.ModelProto | bytes) -> None:
    """Register onnxruntime-extensions' library with session options ``so`` when
    ``model`` (a proto or serialized bytes) has custom-op nodes, defining their
    ``PyOp``s first (a fresh worker loading a cached optimized model)."""
    if isinstance(model, (bytes, bytearray)):
        proto = onnx.ModelProto()
        proto.ParseFromString(bytes(model))
        model = proto
    names = {n.op_type for n in model.graph.node if n.domain == CONTRIB}
    if not names:
        return
    from compstack.ops._registry import all_ops

    global _frozen
    if not _frozen:
        _define_all()
    for op in all_ops():
        prefix = f"{op.domain}__{op.name}__"
        for name in names:
            if name.startswith(prefix):
                _define(op, name[len(prefix):].split("_"))
    with _LOCK:
        _frozen = True
    so.register_custom_ops_library(_extensions().get_library_path())
