"""Kernels, per-kernel times and stage texts of OpenVINO's CPU plugin (``openvino-cpu``).

The executed graph (``CompiledModel.get_runtime_model()``) has one node per layer the
plugin runs; its ``rt_info`` names the layer type (``layerType``), the implementation
(``primitiveType``: ``brgconv_avx512_f32``, ``jit_avx512_f32``, ``gemm_mlas_f32``, ``ref_any``),
and ``originalLayersNames``: the ``ov.Model`` ops the layer runs, fused ones included.
Those names are the ONNX node names the frontend gave them, with gaps, filled in this order:

1. *records*: a name that is an ONNX node is that node; ``node/suffix`` (``conv/WithoutBiases``,
   ``MatMul/transpose_b``) is ``node``; a name that is an ONNX tensor is its producer (a node
   that writes a graph output is renamed to the output tensor, ``logits``).
2. *between* (``Kernel.inferred``): a layer whose names are all OpenVINO's own (an op the
   frontend decomposed, ``LayerNormalization`` → ``MVN_19``) gets the uncovered compute
   nodes that lie below every source node of the layers feeding it and above every source
   node of the layers it feeds.
3. *epilogue*: an uncovered elementwise node reading one computed tensor, its other inputs
   constant (a bias ``Add``, a scale ``Mul``), goes to the layer of that tensor's producer
   (the plugin fuses such ops as post-ops and may not record them); then *by position*
   (:func:`compstack.analysis.kernels.infer_by_position`): an uncovered node whose consumers all
   belong to one layer goes to it (after BatchNorm folding a ``Conv`` runs as
   ``Multiply_N`` with the BatchNorm's and ReLU's names, not its own).
4. a layer OpenVINO inserted (``Reorder`` of layouts, ``Convert`` of an index type) gets
   the nodes of the layer it feeds, else of the one that feeds it, all ``inferred``.

Constant layers (``Const``, and layers whose inputs are all constant: folded at compile
time), ``Input``/``Output`` and in-place reshapes are not kernels. Kinds: a Snippets
``Subgraph`` (code generated for this model) is ``generated``; an inserted data-movement
layer is ``copy``; the rest (oneDNN, MLAS, the plugin's JIT and reference kernels) ``library``.

Per-kernel time: ``PERF_COUNT: YES`` and ``InferRequest.profiling_info``. The CPU plugin
keeps, per layer, the sum of whole microseconds over every run since compile and reports
the integer average (``PerfCount::avg``); it has no per-run record. The profiled mean of a
layer is therefore ``(N·avg_N − w·avg_w) / runs`` from the averages read after the ``w``
warm-up runs and after all ``N`` runs, within ``N/runs`` µs; p10/p90/cv are not known.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

import numpy as np

from compstack.analysis.kernels import (
    GraphIndex,
    Kernel,
    KernelMap,
    KernelProfile,
    ProfileSamples,
    build_map,
    infer_by_position,
)
from compstack.targets.openvino.quiet import import_openvino

__all__ = ["kernel_map", "mark_means", "model_text", "profile", "runtime_text"]

#: Runtime layers that are not kernels: graph boundaries and constants.
_NOT_KERNEL = frozenset({"Input", "Output", "Const", "Parameter", "Result", "Constant"})
#: Layers that only relabel memory (in place in the CPU plugin).
_VIEW = frozenset({"Reshape", "Squeeze", "Unsqueeze"})
#: Data movement layers: one covering no source node is a ``copy`` kernel.
_MOVE = frozenset({"Reorder", "Convert", "Transpose", "Concatenation", "Concat", "Split", "Gather", "Broadcast",
                   "StridedSlice", "Pad", "Tile", "Reshape", "Squeeze", "Unsqueeze"})
#: Ops that head a fused layer (never fused into the layer before them).
_HEADS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "ConvInteger", "MatMulInteger",
                    "QLinearConv", "QLinearMatMul"})
#: Snippets: code the plugin generates for this model's eltwise/MHA subgraphs.
_GENERATED = frozenset({"Subgraph"})


def _rt(op: Any, key: str) -> str:
    info = op.get_rt_info()
    try:
        return str(info[key].astype(str))
    except Exception:  # noqa: BLE001 - a missing key or an untyped value: the plugin raises its own types
        return ""


def _port_text(out: Any) -> str:
    return f"{out.get_element_type().get_type_name()}{out.get_partial_shape()}"


def _inputs(op: Any) -> list[Any]:
    return [i.get_source_output().get_node() for i in op.inputs()]


def _attrs(op: Any) -> str:
    if op.get_type_name() == "Constant":
        return ""
    try:
        items = op.get_attributes()
    except Exception:  # noqa: BLE001 - some ops' attributes have no Python binding (the plugin's own errors)
        return ""
    body = ", ".join(f"{k}={v}" for k, v in sorted(items.items()))
    return f" {{{body}}}" if body else ""


def model_text(model: Any) -> str:
    """The ``ov.Model`` one op per line, in topological order:
    ``%name = Type-opsetN(%inputs) -> type[shape] {attributes}``."""
    lines = [f"# ov.Model {model.get_friendly_name()}: {len(model.get_ordered_ops())} ops"]
    for op in model.get_ordered_ops():
        ins = ", ".join(f"%{n.get_friendly_name()}" for n in _inputs(op))
        outs = ", ".join(_port_text(o) for o in op.outputs())
        kind = f"{op.get_type_name()}-{op.get_type_info().version_id}"
        lines.append(f"%{op.get_friendly_name()} = {kind}({ins}) -> {outs}{_attrs(op)}")
    return "\n".join(lines) + "\n"


def runtime_text(model: Any) -> str:
    """The executed graph one layer per line, in execution order:
    ``[order] %name = layerType<primitiveType, runtimePrecision>(%inputs) -> precisions
    layout  <- originalLayersNames``; ``Const`` layers are left out, layers computed from
    constants only are tagged ``[const]``."""
    const: set[str] = set()
    for op in model.get_ordered_ops():  # topological: a layer of constants only is folded
        feeders = _inputs(op)
        if _rt(op, "layerType") == "Const" or (feeders and all(n.get_friendly_name() in const for n in feeders)):
            const.add(op.get_friendly_name())
    ops = [op for op in model.get_ordered_ops() if _rt(op, "layerType") != "Const"]
    ops.sort(key=lambda op: int(_rt(op, "execOrder") or 0))
    lines = [(f"# OpenVINO CPU executed graph: {len(ops)} layers (Const layers left out; [const]: "
              "computed from constants only, at compile time)")]
    for op in ops:
        tag = " [const]" if op.get_friendly_name() in const else ""
        ins = ", ".join(f"%{n.get_friendly_name()}" for n in _inputs(op))
        kind = f"{_rt(op, 'layerType')}<{_rt(op, 'primitiveType')}, {_rt(op, 'runtimePrecision')}>"
        outs = f"{_rt(op, 'outputPrecisions')} {_rt(op, 'outputLayouts')}"
        lines.append(f"[{_rt(op, 'execOrder')}] %{op.get_friendly_name()} = {kind}({ins}) -> {outs}{tag}"
                     f"  <- {_rt(op, 'originalLayersNames') or '(none)'}")
    return "\n".join(lines) + "\n"


# ---- kernels --------------------------------------------------------------------------


class _Layer:
    """One runtime node: name, type, inputs (runtime names) and resolved source nodes."""

    def __init__(self, op: Any) -> None:
        self.name = op.get_friendly_name()
        self.type = _rt(op, "layerType")
        self.primitive = _rt(op, "primitiveType")
        self.precision = _rt(op, "runtimePrecision")
        self.order = int(_rt(op, "execOrder") or 0)
        self.original = [s for s in _rt(op, "originalLayersNames").split(",") if s]
        self.inputs = [n.get_friendly_name() for n in _inputs(op)]


def _resolve(name: str, index: GraphIndex) -> str | None:
    """Rule 1 of the module docstring: the ONNX node a runtime name stands for."""
    for cand in (name, name.split("/", 1)[0]):
        if cand in index.by_name:
            return cand
        if cand in index.producer:
            return index.producer[cand].name
    return None


def _layers(runtime: Any) -> tuple[list[_Layer], set[str]]:
    """The runtime layers in execution order, and the names of constant ones."""
    layers = [_Layer(op) for op in runtime.get_ordered_ops()]
    const: set[str] = set()
    for layer in layers:  # topological order: inputs first
        if layer.type == "Const" or (layer.inputs and all(i in const for i in layer.inputs)):
            const.add(layer.name)
    layers.sort(key=lambda layer: layer.order)
    return layers, const


def _bits(index: GraphIndex, up: bool) -> dict[str, int]:
    """Node name -> bitset of the node and its ancestors (``up``) or descendants."""
    out: dict[str, int] = {}
    nodes = list(enumerate(index.nodes))
    for i, node in nodes if up else reversed(nodes):
        b = 1 << i
        if up:
            near = [index.producer[v.name] for v in node.inputs if v is not None and v.name in index.producer]
        else:
            near = [c for v in node.outputs if v is not None for c in index.consumers.get(v.name or "", [])]
        for m in near:
            b |= out.get(m.name or "", 0)
        out[node.name or ""] = b
    return out


def _named_neighbours(start: str, step: dict[str, list[str]], nodes: dict[str, list[str]]) -> list[str]:
    """Source nodes of the nearest layers from ``start`` along ``step`` that have some,
    looking through layers that have none."""
    seen, todo, found = {start}, list(step.get(start, [])), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if nodes.get(name):
            found += nodes[name]
        else:
            todo += step.get(name, [])
    return found


def _between(layer: str, feeds: dict[str, list[str]], fed: dict[str, list[str]], nodes: dict[str, list[str]],
             index: GraphIndex, anc: dict[str, int], desc: dict[str, int], free: set[str]) -> list[str]:
    """Rule 2: uncovered compute nodes below every feeding layer's nodes and above every
    fed layer's nodes (the layer reads all of the former and feeds all of the latter)."""
    above = _named_neighbours(layer, feeds, nodes)
    below = _named_neighbours(layer, fed, nodes)
    region = (1 << len(index.nodes)) - 1
    for n in above:
        region &= desc.get(n, 0) & ~(1 << index.order[n])
    for n in below:
        region &= anc.get(n, 0) & ~(1 << index.order[n])
    return [n.name or "" for i, n in enumerate(index.nodes) if region >> i & 1 and n.name in free]


def _kind(layer: _Layer, nodes: Iterable[str], index: GraphIndex) -> str:
    if layer.type in _GENERATED:
        return "generated"
    if layer.type in _MOVE and not any(n in index.compute_set for n in nodes):
        return "copy"
    return "library"


def kernel_map(compiled: Any) -> KernelMap:
    """The :class:`KernelMap` of a compiled OpenVINO model (``compiled.compiled_model``),
    mapped to the source graph by the rules of the module docstring."""
    index = GraphIndex(compiled.model)
    layers, const = _layers(compiled.compiled_model.get_runtime_model())
    feeds = {la.name: [i for i in la.inputs if i not in const] for la in layers}
    fed: dict[str, list[str]] = {}
    for la in layers:
        for i in feeds[la.name]:
            fed.setdefault(i, []).append(la.name)
    nodes: dict[str, list[str]] = {}
    for la in layers:
        nodes[la.name] = index.sort(n for n in (_resolve(s, index) for s in la.original) if n)
    run = [la for la in layers if la.type not in _NOT_KERNEL and la.name not in const and la.type not in _VIEW]
    kernels = {la.name: Kernel(la.name, _kind(la, nodes[la.name], index), list(nodes[la.name]),
                               detail={"layer_type": la.type, "primitive": la.primitive, "precision": la.precision,
                                       "original_layers": la.original, "exec_order": la.order})
               for la in run}
    _fill_between(run, kernels, feeds, fed, nodes, index)
    _epilogues(list(kernels.values()), index)
    infer_by_position(list(kernels.values()), index)
    _attach_inserted(run, kernels, feeds, fed)
    opts = compiled.target.options
    return build_map(compiled.model, compiled.target.name, list(kernels.values()), index=index,
                     source=f"executed graph (precision={opts.precision}): originalLayersNames, tensor names, "
                            "graph structure",
                     notes=["OpenVINO folds constants and in-place reshapes: they are not kernels"],
                     default_reason="OpenVINO's executed graph names no layer running this node "
                                    "(originalLayersNames), and none was inferred from the graph structure")


def _fill_between(run: list[_Layer], kernels: dict[str, Kernel], feeds: dict[str, list[str]],
                  fed: dict[str, list[str]], nodes: dict[str, list[str]], index: GraphIndex) -> None:
    """Rule 2 of the module docstring, in place."""
    anc, desc = _bits(index, up=True), _bits(index, up=False)
    covered = {n for k in kernels.values() for n in k.nodes}
    for la in run:
        k = kernels[la.name]
        if k.nodes or k.kind == "copy":
            continue
        free = index.compute_set - covered
        found = _between(la.name, feeds, fed, nodes, index, anc, desc, free)
        k.nodes += found
        k.inferred += found
        nodes[la.name] = found
        covered |= set(found)


def _epilogues(kernels: list[Kernel], index: GraphIndex) -> None:
    """Rule 3a: an uncovered elementwise-like node reading one computed tensor (the others
    constants: a bias ``Add``, a scale ``Mul``) goes to the kernel of that tensor's
    producer; the CPU plugin fuses such ops into the layer before them as post-ops."""
    owner = {n: k for k in kernels if k.kind != "copy" for n in k.nodes}
    for node in index.nodes:
        name = node.name or ""
        if name not in index.compute_set or name in owner or node.op_type in _HEADS:
            continue
        live = [v for v in node.inputs if v is not None and v.name and v.name in index.producer
                and index.producer[v.name].name not in index.constants]
        graph_in = [v for v in node.inputs if v is not None and v.name not in index.producer
                    and not v.is_initializer() and v.const_value is None]
        if len(live) != 1 or graph_in:
            continue
        k = owner.get(index.producer[live[0].name or ""].name or "")
        if k is not None:
            k.nodes.append(name)
            k.inferred.append(name)
            owner[name] = k


def _attach_inserted(run: list[_Layer], kernels: dict[str, Kernel], feeds: dict[str, list[str]],
                     fed: dict[str, list[str]]) -> None:
    """Rule 4 of the module docstring, in place (repeated: a chain of inserted layers
    takes the nodes of the first layer past it)."""
    changed = True
    while changed:
        changed = False
        for la in run:
            k = kernels[la.name]
            if k.nodes:
                continue
            for side in (fed, feeds):
                near = [kernels[n] for n in side.get(la.name, []) if n in kernels and kernels[n].nodes]
                if near:
                    k.nodes = list(near[0].nodes)
                    k.inferred = list(near[0].nodes)
                    changed = True
                    break


# ---- per-kernel time -------------------------------------------------------------------


def _averages(request: Any) -> dict[str, int]:
    """Layer name -> the plugin's average time so far, whole µs (executed layers only)."""
    out: dict[str, int] = {}
    for p in request.profiling_info:
        us = round(p.real_time.total_seconds() * 1e6)
        if us > 0:
            out[p.node_name] = us
    return out


def profile(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> ProfileSamples:
    """Per-layer mean times over ``runs`` profiled runs on the artifact imported with
    ``PERF_COUNT: YES`` (see the module docstring); each kernel's list repeats its mean
    once per run, since the plugin keeps no per-run record (:func:`mark_means`)."""
    ov = import_openvino()

    from compstack.targets.openvino.target import c_order, core

    cm = core().import_model(compiled.blob, "CPU", {**compiled.target.ov_config(), "PERF_COUNT": "YES"})
    request = cm.create_infer_request()
    sets = [[ov.Tensor(c_order(a)) for a in arrays] for arrays in inputs]

    def once(i: int) -> float:
        for port, t in zip(compiled.input_ports, sets[i % len(sets)]):
            if port is not None:
                request.set_input_tensor(port, t)
        t0 = time.perf_counter()
        request.infer(share_outputs=True)
        return (time.perf_counter() - t0) * 1e3

    for i in range(warmup):
        once(i)
    before = _averages(request)
    run_ms = [once(warmup + i) for i in range(runs)]
    after = _averages(request)
    total = warmup + runs
    kernels: dict[str, list[float]] = {}
    for name, avg in after.items():
        mean_us = (total * avg - warmup * before.get(name, 0)) / runs
        if mean_us > 0:  # else: under the counters' resolution once warm
            kernels[name] = [mean_us / 1e3] * runs
    kmap = compiled.kernels()
    silent = [k.id for k in kmap.kernels if k.id not in kernels] if kmap is not None else []
    resolution = (f"means from the plugin's integer-µs running averages (within {total / runs:.2g} µs per layer, "
                  "each run's time truncated to whole µs); no per-run spread")
    notes = [resolution]
    if silent:
        shown = ", ".join(silent[:8]) + (" ..." if len(silent) > 8 else "")
        notes.append(f"{len(silent)} kernel(s) reported no time (under 1 µs per run, or not executed): {shown}")
    return ProfileSamples(profiler="OpenVINO CPU plugin PERF_COUNT (InferRequest.profiling_info)",
                          kernels=kernels, calls={name: 1 for name in kernels}, run_ms=run_ms, notes=notes)


def mark_means(prof: KernelProfile) -> KernelProfile:
    """Drop the spread statistics the plugin cannot give (p10, p90, cv: None)."""
    for k in prof.kernels:
        k.p10 = k.p90 = k.cv = None
    # every run repeats each kernel's mean, so the "median" of the per-run sums is the sum of
    # the means: "of" tells the cross-checks to set it beside mean run times (KernelProfile.statistic)
    total: dict[str, Any] = {"median": prof.kernel_sum["median"], "mean": prof.kernel_sum["mean"], "cv": None,
                             "of": "mean"}
    prof.kernel_sum = total
    return prof
