"""The common IR as a ``torch.fx.GraphModule``: one ``torch`` converter per ONNX op.

:func:`to_fx` records every converter's torch calls into one ``torch.fx.Graph`` through
``fx.Proxy`` values (the shapes converters need come from the IR, not from tensors).
The FX nodes a converter creates are renamed after the IR node (``conv_1``, then
``conv_1_1``...) and carry ``meta["custom"]["onnx_node"]`` (``custom`` is one of the
fields ``torch.fx.traceback`` copies through AOT tracing, so Inductor's kernels can be
traced back to the IR node) and ``meta["stack_trace"]`` pointing at the user's source
line when the IR has it.

Known (numpy) inputs reach converters as ``torch.Tensor`` constants; they are lifted to
buffers of the module afterwards, so the generated code stays printable.
"""

from __future__ import annotations

import contextlib
import keyword
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx_ir as ir

from compstack.translate import OpTable, interpret, static_initializer

__all__ = ["FAMILIES", "ONNX_NODE_KEY", "TABLE", "to_fx"]

#: Converter modules, one per op family.
FAMILIES = ("elementwise", "math", "nn", "reduce", "shape", "index", "misc", "custom")

TABLE = OpTable("fx", [f"compstack.translate.fx.{f}" for f in FAMILIES])

#: Key under ``node.meta["custom"]`` holding the IR node name.
ONNX_NODE_KEY = "onnx_node"


def py_name(name: str) -> str:
    """A Python identifier for ``name`` (FX node and buffer names must be ones)."""
    out = re.sub(r"\W", "_", name).strip("_") or "v"
    if keyword.iskeyword(out):  # an input named "as" or "in" must not become a parameter
        return f"{out}_"
    return out if not out[0].isdigit() else f"v_{out}"


def to_fx(model: ir.Model, share_weights: bool = False) -> Any:
    """Translate ``model`` into a ``torch.fx.GraphModule``.

    Args:
        model: the common IR with static shapes.
        share_weights: a buffer shares the memory of its initializer's array where that is
            a writable, C-contiguous numpy array, instead of a copy. Only for a model whose
            arrays are the caller's own (the float64 copy of a large model,
            :func:`compstack.targets.common.precision.to_float64_model`: a copy there is
            the weights' size again in float64).

    Returns:
        A ``GraphModule`` whose ``forward`` takes the graph inputs positionally (torch
        tensors, IR dtypes) and returns a tuple of the graph outputs. Large float
        initializers are buffers named after the initializer.

    Raises:
        UnsupportedError: every op without an FX converter, listed at once, or a node a
            converter cannot take.
    """
    import torch
    from torch import fx
    from torch.fx.proxy import GraphAppendingTracer

    from compstack.core.ir import source_of

    graph = fx.Graph()
    tracer = GraphAppendingTracer(graph)
    root = torch.nn.Module()
    env: dict[str, Any] = {}
    for value in model.graph.inputs:
        if not value.is_initializer():
            env[value.name or ""] = fx.Proxy(graph.placeholder(py_name(value.name or "")), tracer)
    for name, value in model.graph.initializers.items():
        assert value.const_value is not None  # an initializer read from ONNX holds its tensor
        arr = value.const_value.numpy()
        if static_initializer(value):
            env[name] = arr
        else:
            attr = _unique_attr(root, py_name(name))
            mine = share_weights and isinstance(arr, np.ndarray) and arr.flags.writeable and arr.flags.c_contiguous
            root.register_buffer(attr, torch.from_numpy(arr if mine else np.array(arr)))
            env[name] = fx.Proxy(graph.get_attr(attr), tracer)

    @contextlib.contextmanager
    def scope(node: ir.Node) -> Iterator[None]:
        before = set(graph.nodes)
        yield
        base = py_name(node.name or node.op_type)
        where = source_of(node)
        for fx_node in graph.nodes:
            if fx_node in before or fx_node.op not in ("call_function", "call_method"):
                continue
            fx_node._rename(base)
            fx_node.meta.setdefault("custom", {})[ONNX_NODE_KEY] = node.name
            if where:
                fx_node.meta["stack_trace"] = f'File "{where}"'

    outs = interpret(TABLE, model, env, scope=scope, wrap_static=_to_tensor)
    graph.output(tuple(_as_arg(o) for o in outs))
    _lift_constants(graph, root)
    graph.lint()
    return fx.GraphModule(root, graph, class_name=py_name(model.graph.name or "model"))


def _to_tensor(arr: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.array(arr))


def _as_arg(value: Any) -> Any:
    from torch import fx

    if isinstance(value, fx.Proxy):
        return value.node
    if isinstance(value, np.ndarray):
        return _to_tensor(value)
    return value


def _unique_attr(root: Any, base: str) -> str:
    name, k = base, 0
    while hasattr(root, name):
        k += 1
        name = f"{base}_{k}"
    return name


def _lift_constants(graph: Any, root: Any) -> None:
    """Replace every literal tensor/ndarray argument by a ``get_attr`` of a buffer."""
    import torch
    from torch import fx

    for node in list(graph.nodes):
        if node.op == "placeholder" or node.op == "get_attr":
            continue

        def lift(arg: Any, node: Any = node) -> Any:
            if isinstance(arg, np.ndarray):
                arg = torch.from_numpy(np.array(arg))
            elif isinstance(arg, np.generic):
                return arg.item()
            if isinstance(arg, torch.Tensor):
                attr = _unique_attr(root, "_const")
                root.register_buffer(attr, arg.detach().clone())
                with graph.inserting_before(node):
                    return graph.get_attr(attr)
            return arg

        node.args = fx.node.map_aggregate(node.args, lift)
        node.kwargs = fx.node.map_aggregate(node.kwargs, lift)
