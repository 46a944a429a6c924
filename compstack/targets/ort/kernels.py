"""Kernels and per-kernel times of ONNX Runtime (``ort-cpu``, ``ort-cuda``).

ONNX Runtime runs one kernel per node of its optimized graph (the artifact). Its graph
optimizer keeps no record of which original nodes a fused node replaced, so the mapping is
recovered from tensor names, in this order:

1. *tensors*: a node of the optimized graph covers the original nodes between the
   original tensors it reads and the original tensors it writes (``ancestors(outputs)``
   minus ``ancestors(inputs)``). A tensor ORT renamed is traced through the layout
   relabels that consume it (``Reshape``, ``ReorderOutput``...) or, for NCHWc convolutions
   named ``<tensor>_nchwc``, through that name; fusion names ``<node>/<Fusion>`` name
   their first original node.
2. *by position* (``Kernel.inferred``): an original compute node still uncovered goes to
   the kernel of its producer (an epilogue ORT fused into it, e.g. the ``Sum`` input and
   activation of an NCHWc ``Conv``), else of its consumer; an inserted copy (a reshape
   around ``Gemm``, a layout reorder) goes with the kernel it feeds or follows.

Per-kernel time: ``SessionOptions.enable_profiling``; the profile is a Chrome trace whose
``Node`` events ``<node name>_kernel_time`` carry each kernel's duration (µs), and whose
``Session`` events ``model_run`` delimit the runs (ONNX Runtime docs, "Profiling tools").
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from compstack.analysis.kernels import GraphIndex, Kernel, KernelMap, ProfileSamples, build_map

__all__ = ["kernel_map", "profile"]

#: Ops that only relabel a tensor (shape or layout): a renamed tensor flowing into one
#: keeps the name the relabel writes.
_RELABEL = frozenset({"Reshape", "ReorderOutput", "ReorderInput", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
#: Data movement ops: an inserted one (covering no original node) is a ``copy`` kernel.
_MOVE = _RELABEL | {"Transpose", "Cast", "Concat", "Expand", "Slice", "Gather", "Tile", "Pad", "MemcpyToHost",
                    "MemcpyFromHost"}


def _ancestor_bits(index: GraphIndex) -> dict[str, int]:
    """Node name -> bitset of the node and all its ancestors (bit = graph position)."""
    bits: dict[str, int] = {}
    for i, node in enumerate(index.nodes):
        b = 1 << i
        for v in node.inputs:
            if v is not None and v.name in index.producer:
                b |= bits.get(index.producer[v.name].name or "", 0)
        bits[node.name or ""] = b
    return bits


def _names(bits: int, index: GraphIndex) -> list[str]:
    return [n.name or "" for i, n in enumerate(index.nodes) if bits >> i & 1]


class _Resolver:
    """Original-tensor anchors of the optimized graph's tensors (rule 1 of the module docstring)."""

    def __init__(self, opt: onnx.ModelProto, index: GraphIndex) -> None:
        self.index = index
        self.nodes = list(opt.graph.node)
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for n in self.nodes:
            for t in n.input:
                self.consumers.setdefault(t, []).append(n)
        self.anchor: dict[str, set[str]] = {}
        for n in reversed(self.nodes):  # consumers first: relabels resolve what feeds them
            for t in n.output:
                self.anchor[t] = self._out_anchor(n, t)

    def _out_anchor(self, node: onnx.NodeProto, t: str) -> set[str]:
        if t in self.index.producer:
            return {t}
        users = self.consumers.get(t, [])
        if users and all(u.op_type in _RELABEL for u in users):
            found = set().union(*(self.anchor.get(o, set()) for u in users for o in u.output))
            if found:
                return found
        if node.name.endswith("_nchwc") and node.name[:-6] in self.index.producer:
            return {self._nchwc_epilogue(node, node.name[:-6])}
        return set()

    def _nchwc_epilogue(self, node: onnx.NodeProto, t: str) -> str:
        """The tensor an NCHWc ``Conv`` really writes: ORT names it after the conv's own
        output, then fuses a residual ``Add`` (its ``Sum`` input) and an activation."""
        def follow(tensor: str, ops: set[str]) -> str:
            users = [c for c in self.index.consumers.get(tensor, []) if c.op_type in ops]
            return users[0].outputs[0].name if len(users) == 1 and users[0].outputs[0].name else tensor

        if len(node.input) > 3 and node.input[3]:
            t = follow(t, {"Add"})
        act = next((a.s.decode() for a in node.attribute if a.name == "activation"), "")
        return follow(t, {act}) if act else t

    def regions(self, bits: dict[str, int]) -> list[tuple[onnx.NodeProto, int]]:
        """Each optimized node with the bitset of original nodes it covers."""
        carried: dict[str, set[str]] = {}  # renamed tensor -> anchors upstream of it
        out = []
        for n in self.nodes:
            ins: set[str] = set()
            for t in n.input:
                if t in self.index.producer:
                    ins.add(t)
                elif self.anchor.get(t):
                    ins |= self.anchor[t]
                else:
                    ins |= carried.get(t, set())
            outs = set().union(*(self.anchor.get(t, set()) for t in n.output)) if n.output else set()
            for t in n.output:
                if not self.anchor.get(t):
                    carried[t] = ins
            above = 0
            for t in ins:
                above |= bits.get(self.index.producer[t].name or "", 0)
            region = 0
            for t in outs:
                region |= bits.get(self.index.producer[t].name or "", 0)
            head = n.name.split("/", 1)[0] if "/" in n.name else ""
            if head in bits:
                region |= 1 << self.index.order[head]
            out.append((n, region & ~above))
        return out


def _infer(kernels: list[Kernel], index: GraphIndex) -> None:
    """Rule 2 of the module docstring, in place."""
    owner: dict[str, Kernel] = {}
    for k in kernels:
        if k.kind != "copy":
            for n in k.nodes:
                owner.setdefault(n, k)
    compute = set(index.compute)
    for node in index.nodes:
        name = node.name or ""
        if name not in compute or name in owner:
            continue
        near = [index.producer[v.name].name or "" for v in node.inputs
                if v is not None and v.name in index.producer and index.producer[v.name].name in owner]
        if not near:
            near = [c.name or "" for v in node.outputs if v is not None for c in index.consumers.get(v.name or "", [])
                    if c.name in owner]
        if near:
            k = owner[near[0]]
            k.nodes.append(name)
            k.inferred.append(name)
            owner[name] = k


def _attach_copies(kernels: list[Kernel], opt_nodes: list[onnx.NodeProto], index: GraphIndex) -> None:
    """Give each inserted copy the nodes of the kernel it finishes (when it writes an
    original tensor: the producer's) or else of the kernel it feeds."""
    by_out = {t: k for k, n in zip(kernels, opt_nodes) for t in n.output}
    users: dict[str, list[Kernel]] = {}
    for k, n in zip(kernels, opt_nodes):
        for t in n.input:
            users.setdefault(t, []).append(k)
    for k, n in zip(kernels, opt_nodes):
        if k.nodes or k.kind != "copy":
            continue
        before = [by_out[t] for t in n.input if t in by_out and by_out[t].nodes and by_out[t].kind != "copy"]
        after = [u for t in n.output for u in users.get(t, []) if u.nodes and u.kind != "copy"]
        finishes = any(t in index.producer for t in n.output)
        near = (before or after) if finishes else (after or before)
        if near:
            k.nodes = list(near[0].nodes)
            k.inferred = list(near[0].nodes)


def kernel_map(compiled: Any) -> KernelMap:
    """The :class:`KernelMap` of an ONNX Runtime artifact (``compiled.optimized``: the
    optimized model's bytes)."""
    index = GraphIndex(compiled.model)
    opt = onnx.ModelProto()
    opt.ParseFromString(compiled.optimized)
    bits = _ancestor_bits(index)
    kernels: list[Kernel] = []
    opt_nodes = []
    for n, region in _Resolver(opt, index).regions(bits):
        nodes = _names(region, index)
        op = f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        kind = "copy" if not nodes and n.op_type in _MOVE else "library"
        kernels.append(Kernel(n.name, kind, nodes, detail={"op": op}))
        opt_nodes.append(n)
    _infer(kernels, index)
    _attach_copies(kernels, opt_nodes, index)
    level = compiled.target.options.opt_level
    return build_map(compiled.model, compiled.target.name, kernels, index=index,
                     source=f"optimized graph (opt_level={level}): tensor names",
                     default_reason="ONNX Runtime's optimized graph has no node whose tensors lead to it "
                                    "(removed, or fused without a trace in tensor names)")


def profile(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> ProfileSamples:
    """Per-kernel times from ``SessionOptions.enable_profiling`` on a session of the
    artifact (graph optimization off: the optimized graph runs as it is)."""
    import onnxruntime as ort

    from compstack.targets.ort.target import _session_options

    with tempfile.TemporaryDirectory(prefix="compstack-ortprof-") as tmp:
        so = _session_options(ort, compiled.target.options, level="disable", threads=compiled.target.threads)
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(tmp) / "ort")
        if compiled.data is not None:  # a large model's initializers, beside the artifact (ort/large.py)
            so.add_session_config_entry("session.model_external_initializers_file_folder_path", str(compiled.data.parent))
        sess = ort.InferenceSession(compiled.optimized, so, providers=list(compiled.target.providers))
        feeds = [dict(zip(compiled.input_names, arrays)) for arrays in inputs]
        for i in range(warmup + runs):
            sess.run(None, feeds[i % len(feeds)])
        events = json.loads(Path(sess.end_profiling()).read_text())
    return _samples(events, warmup, runs)


def _samples(events: list[dict[str, Any]], warmup: int, runs: int) -> ProfileSamples:
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("cat") == "Session" and e.get("name") == "model_run")
    spans = spans[warmup:warmup + runs]
    kernels: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    for r, (lo, hi) in enumerate(spans):
        seen: dict[str, int] = {}
        for e in events:
            name = e.get("name", "")
            if e.get("cat") != "Node" or not name.endswith("_kernel_time") or not lo <= e["ts"] <= hi:
                continue
            kid = name[: -len("_kernel_time")]
            row = kernels.setdefault(kid, [0.0] * len(spans))
            row[r] += e["dur"] / 1e3
            seen[kid] = seen.get(kid, 0) + 1
        for kid, c in seen.items():
            calls[kid] = max(calls.get(kid, 0), c)
    return ProfileSamples(profiler="onnxruntime SessionOptions.enable_profiling (Node *_kernel_time events)",
                          kernels=kernels, calls=calls, run_ms=[(hi - lo) / 1e3 for lo, hi in spans])
