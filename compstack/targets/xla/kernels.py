"""Kernels and per-kernel times of XLA (``xla-cpu``; ``xla-cuda`` inherits).

A kernel is one instruction of the entry computation of the optimized HLO
(``jax.stages.Compiled.as_text()``) that does work: a ``fusion`` (its body is a fused
computation), a ``convolution``/``dot``/``custom-call`` left unfused, a ``copy``;
``parameter``, ``constant``, ``tuple``, ``get-tuple-element`` and ``bitcast`` are not
kernels. The translated path runs each ONNX node under ``jax.named_scope(<node name>)``,
so every HLO instruction's ``metadata={op_name="jit(main_graph)/<node>/..."}`` names its
node; a kernel covers the nodes named in its own metadata and in the instructions of the
computations it calls. For a JAX-native source, an instruction's ``stack_frame_id`` (JAX's
``StackFrames`` table at the top of the HLO text) gives its source line, and the nodes of that
line whose ``pkg.jax.primitive`` is the last part of its ``op_name`` are its nodes (the IR nodes
carry ``compstack.source``, see :mod:`compstack.frontends.from_jax`). Layout copies XLA inserts
(``transpose_copy_fusion``, no metadata) go to the kernel they feed (``Kernel.inferred``).

Per-kernel time: the JAX profiler (``jax.profiler.start_trace``); its Chrome trace has one
complete event per executed HLO instruction with ``args.hlo_op`` (JAX docs, "Profiling
computation"); each run is wrapped in a ``jax.profiler.TraceAnnotation`` that delimits it.
"""

from __future__ import annotations

import glob
import gzip
import json
import re
import tempfile
from typing import Any, Iterator

import numpy as np

from compstack.analysis.kernels import GraphIndex, Kernel, KernelMap, ProfileSamples, build_map

__all__ = ["kernel_map", "profile", "parse_hlo", "stack_frames"]

_COMP = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INST = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([a-z][a-z0-9\-]*)\((.*)$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations)=\{?%?([\w.\-]+(?:,\s*%[\w.\-]+)*)\}?")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_SOURCE = re.compile(r'source_file="((?:[^"\\]|\\.)*)"\s+source_line=(\d+)')
_KIND = re.compile(r"kind=(k\w+)")
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
#: Entry opcodes that do no work at run time.
_FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
                   "partition-id", "replica-id", "opt-barrier"})
_LIBRARY = frozenset({"convolution", "dot", "custom-call", "fft", "triangular-solve", "cholesky"})


def parse_hlo(text: str) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """``(entry name, computations)``: each computation's instructions as dicts with
    ``name``, ``op``, ``calls`` (called computations), ``op_names``, ``sources``
    (``(file, line)``), ``fusion_kind`` and ``line``."""
    comps: dict[str, list[dict[str, Any]]] = {}
    entry, current = "", None
    for line in text.splitlines():
        m = _COMP.match(line)
        if m:
            current = comps.setdefault(m.group(2), [])
            if m.group(1):
                entry = m.group(2)
            continue
        if current is None:
            continue
        if line.strip() == "}":
            current = None
            continue
        im = _INST.match(line)
        if not im:
            continue
        calls = [c.strip().lstrip("%") for m2 in _CALLS.finditer(line) for c in m2.group(1).split(",")]
        kind = _KIND.search(line)
        current.append({"name": im.group(1), "op": im.group(2), "calls": calls,
                        "op_names": _OP_NAME.findall(line),
                        "sources": [(f, int(n)) for f, n in _SOURCE.findall(line)],
                        "frames": [int(x) for x in _FRAME_ID.findall(line)],
                        "fusion_kind": kind.group(1) if kind else "", "line": line.strip()})
    return entry, comps


def _walk(inst: dict[str, Any], comps: dict[str, list[dict[str, Any]]], seen: set[str]) -> Iterator[dict[str, Any]]:
    yield inst
    for c in inst["calls"]:
        if c in comps and c not in seen:
            seen.add(c)
            for sub in comps[c]:
                yield from _walk(sub, comps, seen)


def stack_frames(text: str) -> dict[int, tuple[str, int]]:
    """``stack_frame_id`` -> ``(file, line)`` from the ``FileNames``/``FileLocations``/
    ``StackFrames`` tables JAX puts at the top of the HLO text (innermost frame)."""
    tables: dict[str, dict[int, str]] = {}
    current = ""
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = line
            tables[current] = {}
            continue
        m = _TABLE_ROW.match(line) if current else None
        if m:
            tables[current][int(m.group(1))] = m.group(2)
        elif line.strip() and current:
            current = ""
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    out = {}
    for fid, row in tables.get("StackFrames", {}).items():
        loc = re.search(r"file_location_id=(\d+)", row)
        where = tables.get("FileLocations", {}).get(int(loc.group(1))) if loc else None
        fm = re.search(r"file_name_id=(\d+).*?\bline=(\d+)", where or "")
        if fm and int(fm.group(1)) in files:
            out[fid] = (files[int(fm.group(1))], int(fm.group(2)))
    return out


def _node_matcher(index: GraphIndex, frames: dict[int, tuple[str, int]]) -> Any:
    """Nodes of an instruction: node names in its ``op_name`` path (translated path), else
    (JAX-native source) the nodes of the same source line and JAX primitive."""
    by_source: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for node in index.nodes:
        src = node.metadata_props.get("compstack.source", "")
        m = re.match(r"(.+):(\d+)", src.split(" ", 1)[0]) if src else None
        if m:
            prim = node.metadata_props.get("pkg.jax.primitive", "")
            by_source.setdefault((m.group(1), int(m.group(2))), []).append((node.name or "", prim))

    def nodes_of(inst: dict[str, Any]) -> set[str]:
        out = {seg for name in inst["op_names"] for seg in name.split("/") if seg in index.order}
        if out:
            return out
        prims = {name.rsplit("/", 1)[-1] for name in inst["op_names"]}
        where = list(inst["sources"]) + [frames[f] for f in inst["frames"] if f in frames]
        for key in where:
            found = [n for n, p in by_source.get(key, []) if p in prims]
            out.update(found)
        return out

    return nodes_of


def _kind(inst: dict[str, Any]) -> str:
    if inst["op"] == "copy":
        return "copy"
    if inst["op"] in _LIBRARY or inst["fusion_kind"] == "kCustom":
        return "library"
    return "generated"


def kernel_map(compiled: Any) -> KernelMap:
    """The :class:`KernelMap` of an XLA executable (``compiled.compiled``: a
    ``jax.stages.Compiled``)."""
    text = compiled.compiled.as_text()
    entry, comps = parse_hlo(text)
    if not entry:
        raise NotImplementedError("no ENTRY computation in the optimized HLO")
    index = GraphIndex(compiled.model)
    nodes_of = _node_matcher(index, stack_frames(text))
    kernels: list[Kernel] = []
    for inst in comps[entry]:
        if inst["op"] in _FREE:
            continue
        names: set[str] = set()
        for sub in _walk(inst, comps, set()):
            names |= nodes_of(sub)
        detail = {"opcode": inst["op"]}
        if inst["fusion_kind"]:
            detail["fusion_kind"] = inst["fusion_kind"]
        kernels.append(Kernel(inst["name"], _kind(inst), sorted(names), detail=detail))
    _attach_layout_copies(kernels, comps[entry])
    return build_map(compiled.model, compiled.target.name, kernels, index=index, infer=True,
                     source="HLO op_name metadata (jax.named_scope per ONNX node; for a JAX source: "
                            "source line + primitive) in the optimized entry computation and the computations "
                            "it calls",
                     default_reason="no HLO instruction's metadata names it (folded into a neighbour, "
                                    "e.g. a transpose absorbed into a dot's dimension numbers)")


def _attach_layout_copies(kernels: list[Kernel], entry: list[dict[str, Any]]) -> None:
    """A kernel without nodes (a layout copy/broadcast XLA inserted) gets the nodes of the
    first kernel that reads its result."""
    by_name = {k.id: k for k in kernels}
    readers: dict[str, list[Kernel]] = {}
    for inst in entry:
        k = by_name.get(inst["name"])
        if k is None:
            continue
        for operand in re.findall(r"%([\w.\-]+)", inst["line"].split("=", 1)[1]):
            readers.setdefault(operand, []).append(k)
    for k in kernels:
        if k.nodes:
            continue
        k.kind = "copy"  # no metadata: data movement XLA inserted (layout copy, broadcast)
        near = [r for r in readers.get(k.id, []) if r.nodes]
        if near:
            k.nodes = list(near[0].nodes)
            k.inferred = list(near[0].nodes)


# ---- timing ------------------------------------------------------------------------------


def profile(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> ProfileSamples:
    """Per-instruction times from the JAX profiler's trace (module docstring)."""
    import jax

    kmap = compiled.kernels()
    if kmap is None:
        raise NotImplementedError
    calls = [compiled.prepare_impl(arrays) for arrays in inputs]
    for i in range(warmup):
        calls[i % len(calls)]()
    with tempfile.TemporaryDirectory(prefix="compstack-jaxprof-") as tmp:
        jax.profiler.start_trace(tmp)
        try:
            for i in range(runs):
                with jax.profiler.TraceAnnotation(f"compstack_run_{i}"):
                    calls[(warmup + i) % len(calls)]()
        finally:
            jax.profiler.stop_trace()
        files = glob.glob(f"{tmp}/**/*.trace.json.gz", recursive=True)
        if not files:
            raise RuntimeError("the JAX profiler wrote no trace")
        with gzip.open(files[0]) as f:
            events = json.load(f)["traceEvents"]
    return _samples(kmap, events, runs)


def _samples(kmap: KernelMap, events: list[dict[str, Any]], runs: int) -> ProfileSamples:
    spans = sorted((e["ts"], e["ts"] + e.get("dur", 0), e["name"]) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("compstack_run_"))
    ids = {k.id for k in kmap.kernels}
    kernels = {k.id: [0.0] * len(spans) for k in kmap.kernels}
    other: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for e in events:
        args = e.get("args") or {}
        op = args.get("hlo_op")
        if e.get("ph") != "X" or not op or e.get("name") != op:
            continue
        r = next((i for i, (lo, hi, _) in enumerate(spans) if lo <= e["ts"] <= hi), None)
        if r is None:
            continue
        row = kernels[op] if op in ids else other.setdefault(op, [0.0] * len(spans))
        row[r] += e.get("dur", 0) / 1e3
        if r == 0:
            counts[op] = counts.get(op, 0) + 1
    notes = [] if len(spans) == runs else [f"{len(spans)} runs found in the trace (asked for {runs})"]
    return ProfileSamples(profiler="JAX profiler trace (jax.profiler.start_trace; events by args.hlo_op)",
                          kernels=kernels, calls={k: counts.get(k, 0) for k in kernels},
                          run_ms=[(hi - lo) / 1e3 for lo, hi, _ in spans], other=other, notes=notes)
