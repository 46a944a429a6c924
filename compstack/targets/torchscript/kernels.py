"""Kernels and per-kernel times of TorchScript (``torchscript-cpu``).

TorchScript generates no code on the CPU (its fuser, NNC, is off by default): every node
of the optimized graph that computes a tensor calls one ATen or oneDNN kernel. So a
kernel is one such node of ``torchscript-optimized`` (metadata ops such as
``aten::size``, list construction, constants and pure views are left out), kind
``library``, or ``copy`` for the layout conversions ``optimize_for_inference`` inserts
(``aten::to_mkldnn``, ``aten::to_dense``); a ``prim::TensorExprGroup`` (NNC, if someone
turns it on) would be ``generated``.

Each kernel node is mapped to IR nodes with the first of these that answers:

1. translated path: the node's output name. TorchScript names values after the Python
   variables of the scripted FX code, which are the FX node names (``node_relu_3`` →
   ``node_relu_3.1``), and every FX node records its IR node
   (``meta["custom"]["onnx_node"]``).
2. native path: the node's module scope (``__module.layer1/__module.layer1.conv1.0``) →
   module path ``layer1.conv1.0`` → the IR nodes the torch exporter made in that module
   (``pkg.torch.onnx.name_scopes``); when a module has as many traced nodes of one op as
   IR calls of that op, they are paired in order, else the kernel gets all of the
   module's IR nodes.
3. the constants it reads: nodes created by ``freeze``/``optimize_for_inference``
   (``prim::mkldnn_convolution``, the MatMul of a Linear) lose their scope and name but
   read ``self.<module path>.weight…`` (native) or a buffer of the FX module (translated):
   the module's IR nodes, or the IR nodes that read that buffer.
4. otherwise (a layout copy, a transposed-weight MatMul): the nodes of the kernel that
   consumes its output (or, failing that, produces its input), marked ``inferred``.

A BatchNormalization that ``freeze`` folded into the convolution before it is given to that
convolution's kernel (``inferred``).

Per-kernel time: ``torch.profiler`` (CPU). The JIT interpreter records each ATen op it
runs as a child of the method's ``forward`` event; ``prim::`` ops that are not dispatcher
ops (``prim::mkldnn_convolution``) record no event, so their time is reported under
``other`` as the part of ``forward`` no child event covers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from compstack.analysis.kernel_ids import unique_ids
from compstack.analysis.kernels import GraphIndex, Kernel, KernelMap, ProfileSamples, build_map

__all__ = ["NodeInfo", "kernel_map", "kernel_nodes", "node_info", "profile"]

#: Node kinds that compute no tensor: no kernel.
_METADATA = frozenset({
    "prim::Constant", "prim::ConstantMKLDNNTensor", "prim::ListConstruct", "prim::ListUnpack",
    "prim::TupleConstruct", "prim::TupleUnpack", "prim::DictConstruct", "prim::GetAttr", "prim::NumToTensor",
    "prim::dtype", "prim::device", "prim::Uninitialized", "prim::RaiseException", "prim::unchecked_cast",
    "prim::BroadcastMKLDNNTensors", "aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit", "aten::size",
    "aten::dim", "aten::len", "aten::__getitem__", "aten::__is__", "aten::__isnot__", "aten::format",
    "aten::warn"})
#: Pure views: no data is computed or moved.
_VIEW = re.compile(r"^aten::(view|reshape|permute|unsqueeze|squeeze|expand|expand_as|slice|select|t|transpose|"
                   r"alias|as_strided|_unsafe_view|flatten|unflatten|narrow|split|chunk|unbind|detach|numpy_T)_?$")
_COPY = frozenset({"aten::to_mkldnn", "aten::to_dense", "aten::contiguous"})
_GENERATED = ("prim::TensorExprGroup", "prim::FusionGroup", "prim::CudaFusionGroup")


@dataclass(frozen=True)
class NodeInfo:
    """What the mapping reads of one TorchScript node (kept after the node is rewritten)."""

    kind: str
    scope: str
    source: str


def node_info(node: Any) -> NodeInfo:
    return NodeInfo(node.kind(), node.scopeName(), node.sourceRange())


def kernel_nodes(graph: Any) -> list[Any]:
    """The nodes of ``graph``'s top block that run a kernel, in execution order."""
    return [n for n in graph.nodes() if n.kind() not in _METADATA and not _VIEW.match(n.kind())]


def _kind(node_kind: str) -> str:
    if node_kind in _COPY:
        return "copy"
    return "generated" if node_kind.startswith(_GENERATED) else "library"


def _base(name: str) -> str:
    """``node_relu_3.1`` -> ``node_relu_3`` (TorchScript's uniquing suffix dropped)."""
    return re.sub(r"\.\d+$", "", name)


def _op_base(name: str) -> str:
    """``aten::relu_`` / ``relu_1`` -> ``relu``."""
    name = name.split("::")[-1]
    return re.sub(r"(_\d+)+$", "", name).rstrip("_").lstrip("_")


def _module_of_scope(scope: str) -> str | None:
    """``__module.layer1/__module.layer1.conv1.0`` -> ``layer1.conv1.0``; None without a scope."""
    if not scope:
        return None
    return re.sub(r"^__module\.?", "", scope.split("/")[-1])


def _self_constant(value: Any) -> str | None:
    """``self.stem.0.weight_fused_bn_mkldnn`` -> ``stem.0.weight``; None for other values."""
    name = value.debugName()
    producer = value.node()
    if not name.startswith("self.") or not producer.kind().startswith("prim::Constant"):
        return None
    if len(value.uses()) != 1:
        return None  # shared: freeze pools equal constants (all-zero biases) under the first one's name
    name = _base(name[5:])
    while True:
        stripped = re.sub(r"(_mkldnn|_fused_bn|_fused_mul|_fused_add|_transposed)$", "", name)
        if stripped == name:
            return name
        name = stripped


class _Native:
    """Module path -> IR nodes, from the torch exporter's ``pkg.torch.onnx.name_scopes``."""

    def __init__(self, index: GraphIndex) -> None:
        self.by_module: dict[str, list[str]] = {}
        self.calls: dict[tuple[str, str], list[list[str]]] = {}
        for node in index.nodes:
            try:
                scopes = ast.literal_eval(node.metadata_props.get("pkg.torch.onnx.name_scopes", "[]"))
            except (ValueError, SyntaxError):
                continue
            if len(scopes) < 2 or not node.name:
                continue
            module, call = str(scopes[-2]), str(scopes[-1])
            self.by_module.setdefault(module, []).append(node.name)
            groups = self.calls.setdefault((module, _op_base(call)), [])
            if not groups or groups[-1][0] != call:
                groups.append([call])
            groups[-1].append(node.name)

    def map(self, nodes: list[Any], frozen: list[NodeInfo]) -> dict[int, tuple[list[str], str]]:
        """Kernel position -> IR nodes, for kernels whose aligned frozen node has a module
        scope (or that read an unshared ``self.<module>.<param>`` constant)."""
        aligned = _align([node_info(n) for n in nodes], frozen)
        per_module: dict[tuple[str, str], list[int]] = {}
        scoped: dict[int, tuple[tuple[str, str], int]] = {}
        for i, n in enumerate(nodes):
            j, src = aligned.get(i, (-1 - i, node_info(n)))
            module = _module_of_scope(src.scope)
            if module is None and ".py" not in src.source:
                continue  # made by a pass: no scope, no source file (its range is the op's schema)
            key = (module or "", _op_base(src.kind))
            scoped[i] = (key, j)
            group = per_module.setdefault(key, [])
            if j not in group:
                group.append(j)
        out: dict[int, tuple[list[str], str]] = {}
        for i, (key, j) in scoped.items():
            sources, groups = per_module[key], self.calls.get(key, [])
            if len(groups) == len(sources):
                out[i] = (groups[sources.index(j)][1:], "module scope + op")
            else:
                out[i] = (list(self.by_module.get(key[0], [])), "module scope")
        for i, n in enumerate(nodes):
            if i not in out or not out[i][0]:
                names = [m for value in n.inputs() if (c := _self_constant(value)) and "." in c
                         for m in self.by_module.get(c.rsplit(".", 1)[0], [])]
                out[i] = (names, "constant read")
        return {i: v for i, v in out.items() if v[0]}


def _tokens(kind: str) -> list[str]:
    """What a frozen-graph node becomes after ``optimize_for_inference``, as op names."""
    base = kind.split("::")[-1].rstrip("_")
    if "convolution" in base or base.startswith("conv"):
        return ["conv"]
    if base == "linear":  # frozen Linear -> MatMul on the transposed weight + bias Add
        return ["matmul", "add"]
    return [base]


def _align(nodes: list[NodeInfo], frozen: list[NodeInfo]) -> dict[int, tuple[int, NodeInfo]]:
    """Optimized kernel position -> (position, info) of the frozen-graph node it came from.

    ``optimize_for_inference`` rewrites nodes in place, in order, and drops their scope
    (``prim::mkldnn_convolution``, the MatMul of a Linear); the frozen graph, recorded
    before the pass, still has it. The two op sequences are aligned (longest matching
    blocks, :class:`difflib.SequenceMatcher`)."""
    import difflib

    tokens, owner = [], []
    for j, n in enumerate(frozen):
        for t in _tokens(n.kind):
            tokens.append(t)
            owner.append(j)
    mine = [_tokens(n.kind)[0] for n in nodes]
    out: dict[int, tuple[int, NodeInfo]] = {}
    matcher = difflib.SequenceMatcher(a=mine, b=tokens, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            out[a + k] = (owner[b + k], frozen[owner[b + k]])
    return out


def _translated(nodes: list[Any], fx_module: Any) -> dict[int, tuple[list[str], str]]:
    """Kernel position -> IR nodes from FX node names (output names, then buffers read)."""
    from compstack.translate.fx import ONNX_NODE_KEY

    by_fx: dict[str, str] = {}
    by_attr: dict[str, set[str]] = {}
    for fx_node in fx_module.graph.nodes:
        onnx_node = (fx_node.meta.get("custom") or {}).get(ONNX_NODE_KEY)
        if onnx_node:
            by_fx[fx_node.name] = onnx_node
        if fx_node.op == "get_attr":
            for user in fx_node.users:
                name = (user.meta.get("custom") or {}).get(ONNX_NODE_KEY)
                if name:
                    by_attr.setdefault(str(fx_node.target), set()).add(name)
    out: dict[int, tuple[list[str], str]] = {}
    for i, n in enumerate(nodes):
        found = [by_fx[_base(o.debugName())] for o in n.outputs() if _base(o.debugName()) in by_fx]
        if found:
            out[i] = (found, "value name")
            continue
        found = [m for value in n.inputs() if (c := _self_constant(value)) for m in sorted(by_attr.get(c, ()))]
        if found:
            out[i] = (found, "constant read")
    return out


def _neighbours(nodes: list[Any], mapped: dict[int, tuple[list[str], str]]) -> dict[int, list[str]]:
    """Kernel position -> the nodes of its consumer kernel (else producer), for unmapped ones."""
    position = {n: i for i, n in enumerate(nodes)}
    inferred: dict[int, list[str]] = {}
    for i, n in enumerate(nodes):
        if i in mapped:
            continue
        users = [position[u.user] for o in n.outputs() for u in o.uses() if u.user in position]
        producers = [position[v.node()] for v in n.inputs() if v.node() in position]
        for j in sorted(users) + sorted(producers, reverse=True):
            if j in mapped:
                inferred[i] = list(mapped[j][0])
                break
    return inferred


def _folded_batch_norms(kernels: list[Kernel], index: GraphIndex) -> None:
    """Give a BatchNormalization no kernel covers to the kernel of the Conv feeding it."""
    covered = {n for k in kernels for n in k.nodes}
    for k in kernels:
        if k.kind == "copy":
            continue
        for name in list(k.nodes):
            node = index.by_name.get(name)
            if node is None or node.op_type != "Conv" or not node.outputs:
                continue
            for user in index.consumers.get(node.outputs[0].name or "", []):
                if user.op_type == "BatchNormalization" and user.name and user.name not in covered:
                    k.nodes.append(user.name)
                    k.inferred.append(user.name)
                    covered.add(user.name)



def kernel_map(compiled: Any) -> KernelMap:
    """The :class:`KernelMap` of a :class:`~compstack.targets.torchscript.stages.TorchScriptCompiled`.

    Raises:
        NotImplementedError: the artifact was loaded from the cache (no FX module or
            traced source to map from): compile afresh.
    """
    lowered = compiled.lowered
    if lowered is None:
        raise NotImplementedError("loaded from the artifact cache: no capture to map kernels from")
    index = GraphIndex(compiled.model)
    nodes = kernel_nodes(compiled.module.graph)
    if lowered.path == "translated":
        mapped = _translated(nodes, lowered.fx_module)
        how = "output names of the scripted FX code (FX node -> onnx_node), then the buffers a node reads"
    else:
        mapped = _Native(index).map(nodes, compiled.frozen_nodes)
        how = ("module scope of the traced nodes (aligned with the frozen graph, where passes have not dropped "
               "it) vs the torch exporter's name_scopes, then the weights a node reads")
    inferred = _neighbours(nodes, mapped)
    kernels = []
    ways: dict[str, int] = {}
    for kid, (i, n) in zip(unique_ids([n.kind() for n in nodes]), enumerate(nodes)):
        names, how_one = mapped.get(i) or (inferred.get(i, []), "neighbour" if i in inferred else "none")
        ways[how_one] = ways.get(how_one, 0) + 1
        kernels.append(Kernel(kid, _kind(n.kind()), list(names), inferred=list(inferred.get(i, [])),
                              detail={"op": n.kind(), "outputs": [o.debugName() for o in n.outputs()],
                                      "mapped_by": how_one}))
    _folded_batch_norms(kernels, index)
    return build_map(compiled.model, compiled.target.name, kernels, index=index, infer=True,
                     source=f"nodes of the torchscript-optimized graph; {how}",
                     notes=["every kernel is an ATen/oneDNN call of the JIT interpreter (no generated code on CPU)",
                            "kernels mapped by " + ", ".join(f"{k}: {v}" for k, v in sorted(ways.items())) +
                            " ('module scope': all IR nodes of the module, coarser than one call)"],
                     default_reason="no node of the optimized TorchScript graph leads to it (folded into a "
                                    "constant by freeze, or a view)")


# ---- timing ------------------------------------------------------------------------------

_UNRECORDED = "(inside forward, no event: prim ops such as prim::mkldnn_convolution, interpreter)"


def profile(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> ProfileSamples:
    """Per-kernel times from ``torch.profiler`` (module docstring)."""
    from compstack.targets.common.torch import profiled_events

    kmap = compiled.kernels()
    if kmap is None:
        raise NotImplementedError
    return _samples(kmap, profiled_events(compiled, inputs, warmup, runs), runs)


def _samples(kmap: KernelMap, events: Any, runs: int) -> ProfileSamples:
    run_of = {e.id: int(e.name.rsplit("_", 1)[1]) for e in events if e.name.startswith("compstack_run_")}
    methods = {e.id: run_of[e.cpu_parent.id] for e in events
               if e.cpu_parent is not None and e.cpu_parent.id in run_of and e.name == "forward"}
    n = len(set(run_of.values()))
    children: list[list[Any]] = [[] for _ in range(n)]
    method_ms = [0.0] * n
    for e in events:
        if e.id in methods:
            method_ms[methods[e.id]] += e.time_range.elapsed_us() / 1e3
        elif e.cpu_parent is not None and e.cpu_parent.id in methods:
            children[methods[e.cpu_parent.id]].append(e)
    wanted = [(k.id, k.detail.get("op", k.id)) for k in kmap.kernels]
    kernels: dict[str, list[float]] = {}
    other: dict[str, list[float]] = {}
    for r, evs in enumerate(children):
        todo = list(wanted)
        for e in sorted(evs, key=lambda x: x.time_range.start):
            ms = e.time_range.elapsed_us() / 1e3
            hit = next((i for i, (_, op) in enumerate(todo) if op == e.name), None)
            if hit is None:
                other.setdefault(e.name, [0.0] * n)[r] += ms
            else:
                kernels.setdefault(todo.pop(hit)[0], [0.0] * n)[r] += ms
        other.setdefault(_UNRECORDED, [0.0] * n)[r] = max(0.0, method_ms[r] - sum(
            e.time_range.elapsed_us() / 1e3 for e in evs))
    silent = [kid for kid, _ in wanted if kid not in kernels]
    notes = [] if n == runs else [f"{n} runs found by the profiler (asked for {runs})"]
    if silent:
        notes.append(f"{len(silent)} kernel(s) recorded no profiler event (not dispatcher ops): "
                     f"{', '.join(silent[:8])}{' …' if len(silent) > 8 else ''}; their time is in other "
                     f"'{_UNRECORDED}'")
    spans = sorted((e.time_range.start, e.time_range.end) for e in events if e.id in run_of)
    return ProfileSamples(profiler="torch.profiler (CPU), JIT interpreter op events", kernels=kernels,
                          calls={kid: 1 for kid in kernels}, run_ms=[(hi - lo) / 1e3 for lo, hi in spans],
                          other=other, notes=notes)
