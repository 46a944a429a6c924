"""Kernels and per-kernel times of IREE (``iree-llvm-cpu``; the GPU targets inherit).

A kernel is one dispatch call site. IREE's ONNX import (as compstack runs it, see
:mod:`compstack.targets.iree.target`) keeps each ONNX node's name as the MLIR location of the ops
made from it, and the locations survive dispatch formation. ``iree-compile`` runs once
more from the ``input`` phase to ``flow`` with ``--mlir-print-debuginfo
--dump-compilation-phases-to``:

* ``dispatch-creation``: every dispatch region is still inline in the function, with the
  located ops it contains: the nodes of that call site.
* ``flow``: regions are outlined into ``flow.executable`` s, deduplicated (layers with the
  same shapes share one), and called by ``flow.dispatch @exe::@export`` in the same order
  as the regions: the kernel's name.

Ops left outside dispatches name the nodes IREE made no kernel for (``flow.tensor.reshape``:
metadata only; ``flow.tensor.update``/``splat``: queue transfers).

Per-kernel time: IREE's HAL profiling on the CPU driver
(``iree-benchmark-module --device_profiling_mode=host-execution`` writes a ``.ireeprof``
bundle; ``iree-profile dispatch --dispatch_events --format=jsonl`` lists one
``host_dispatch_event`` per dispatch with its submission and ``command_index``; IREE
3.13 tools' ``--help``). One submission is one run; the N-th event of an export within it is
that export's N-th call site.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from compstack.analysis.kernel_ids import unique_ids
from compstack.analysis.kernels import GraphIndex, Kernel, KernelMap, ProfileSamples, build_map
from compstack.core import tools
from compstack.core.inputs import contiguous

__all__ = ["kernel_map", "profile", "parse_locations", "dispatch_regions", "dispatch_calls"]

_LOC_ALIAS = re.compile(r"^(#loc\d*) = (loc\(.*\))\s*$", re.M)
_LOC = re.compile(r"loc\((#loc\d*|(?:[^()\"]|\"(?:[^\"\\]|\\.)*\"|\((?:[^()\"]|\"(?:[^\"\\]|\\.)*\")*\))*)\)")
_STRING = re.compile(r"\"((?:[^\"\\]|\\.)*)\"")
_DISPATCH = re.compile(r"flow\.dispatch @([\w$.\-]+)::@([\w$.\-]+)\(")
_TENSOR_OP = re.compile(r"= flow\.tensor\.(\w+)")
#: Ops CSE merges across nodes keeping the first one's location (accumulator inits,
#: constants): their location does not say which node the dispatch computes.
_SHARED = re.compile(r"= (?:tensor\.empty|linalg\.fill|arith\.constant)\b")
#: Export names of dispatches that only move data.
_COPY = re.compile(r"memcpy|_pack_|_unpack_|_copy")


def parse_locations(text: str) -> tuple[dict[str, str], Any]:
    """``(aliases, names_in)``: the ``#locN = loc(...)`` table of a printed module and a
    function giving every quoted name in the locations of a text span (aliases resolved)."""
    aliases = {m.group(1): m.group(2) for m in _LOC_ALIAS.finditer(text)}

    def names_in(span: str, depth: int = 0) -> set[str]:
        out: set[str] = set()
        for m in _LOC.finditer(span):
            body = m.group(1)
            if body.startswith("#loc"):
                if depth < 8 and body in aliases:
                    out |= names_in(aliases[body], depth + 1)
                continue
            out.update(s for s in _STRING.findall(body))
        return out

    return aliases, names_in


def _strip_initializers(text: str) -> str:
    """``text`` without ``util.initializer`` bodies (they run once at load, not per run)."""
    out, pos = [], 0
    for m in re.finditer(r"util\.initializer\b[^{]*\{", text):
        if m.start() < pos:
            continue
        end = _block_end(text, m.end() - 1)
        out.append(text[pos:m.start()])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _block_end(text: str, brace: int) -> int:
    """Index just past the ``}`` closing the ``{`` at ``brace`` (strings skipped)."""
    depth, i, n = 0, brace, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _op_locations(span: str, names_in: Any) -> set[str]:
    """Names in the locations of the *operations* of ``span``: the trailing ``loc(...)`` of
    each line, block-argument lines (``^bb0(%in: f32 loc(...))``: the producer's location)
    and signatures left out."""
    out: set[str] = set()
    for line in span.splitlines():
        stripped = line.strip()
        if stripped.startswith("^") or not stripped.endswith(")") or _SHARED.search(stripped):
            continue
        at = stripped.rfind(" loc(")
        if at >= 0:
            out |= names_in(stripped[at + 1:])
    return out


def dispatch_regions(text: str) -> list[set[str]]:
    """The location names of the ops inside each dispatch region of a
    ``dispatch-creation`` dump, in order (``flow.dispatch.workgroups`` /
    ``flow.dispatch.region`` ops, initializers left out)."""
    _, names_in = parse_locations(text)
    body = _strip_initializers(text)
    out = []
    for m in re.finditer(r"= flow\.dispatch\.(?:workgroups|region)\b", body):
        brace = body.find("{", m.end())
        if brace < 0:
            continue
        end = _block_end(body, brace)
        tail = body[end:body.find("\n", end)]
        out.append(_op_locations(body[m.start():end] + tail, names_in))
    return out


def dispatch_calls(text: str) -> list[tuple[str, str, set[str]]]:
    """``(executable, export, location names)`` of each ``flow.dispatch`` of a ``flow``
    dump, in order (initializers left out)."""
    _, names_in = parse_locations(text)
    out = []
    for line in _strip_initializers(text).splitlines():
        m = _DISPATCH.search(line)
        if m:
            out.append((m.group(1), m.group(2), names_in(line)))
    return out


def _tensor_ops(text: str) -> dict[str, str]:
    """Node name -> ``flow.tensor.<op>`` of the non-dispatch tensor ops in ``flow``."""
    _, names_in = parse_locations(text)
    out: dict[str, str] = {}
    for line in _strip_initializers(text).splitlines():
        m = _TENSOR_OP.search(line)
        if m:
            for name in names_in(line):
                out.setdefault(name, m.group(1))
    return out


def _phases(compiled: Any) -> tuple[str, str]:
    """Texts of the ``dispatch-creation`` and ``flow`` phases, with locations."""
    lowered = getattr(compiled, "lowered", None)
    if lowered is None or not hasattr(lowered, "scratch"):
        raise NotImplementedError("no lowered module (artifact loaded from the cache)")
    scratch = lowered.scratch
    dump = scratch.path / "phases"
    # the lowered module's own iree-compile run: the target's flags and any the flag search kept
    lowered.run_phase("flow", start=scratch.path / "input.mlir", output=scratch.path / "flow-kernels.mlir",
                      debuginfo=True, flags=[f"--dump-compilation-phases-to={dump}"])
    dc = next(dump.glob("*dispatch-creation.mlir"))
    return dc.read_text(), (scratch.path / "flow-kernels.mlir").read_text()




def kernel_map(compiled: Any) -> KernelMap:
    """The :class:`KernelMap` of an IREE artifact compiled in this process."""
    dc_text, flow_text = _phases(compiled)
    regions = dispatch_regions(dc_text)
    calls = dispatch_calls(flow_text)
    index = GraphIndex(compiled.model)
    notes = []
    if len(regions) != len(calls):
        notes.append(f"{len(regions)} dispatch regions but {len(calls)} flow.dispatch calls: "
                     "nodes from each call's own location and its executable's body only")
        regions = []
    exports = [export for _, export, _ in calls]
    kernels = []
    for i, (kid, (exe, export, site_locs)) in enumerate(zip(unique_ids(exports), calls)):
        names = set(site_locs) | (regions[i] if regions else set())
        kind = "copy" if _COPY.search(export) else "generated"
        kernels.append(Kernel(kid, kind, sorted(names), detail={"executable": exe, "export": export}))
    reasons = {name: f"IREE lowered it to flow.tensor.{op} (no dispatch: "
                     f"{'metadata only' if op in ('reshape', 'bitcast') else 'a transfer done by the runtime queue'})"
               for name, op in _tensor_ops(flow_text).items()}
    return build_map(compiled.model, compiled.target.name, kernels, reasons=reasons, index=index, notes=notes,
                     infer=True,
                     source="MLIR locations (ONNX node names) in dispatch regions (iree-compile "
                            "--compile-to=flow --dump-compilation-phases-to)",
                     default_reason="no dispatch carries its location (folded by const-eval or into a "
                                    "neighbour's location-less op)")


# ---- timing ------------------------------------------------------------------------------


def profile(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> ProfileSamples:
    """Per-dispatch times from ``iree-benchmark-module`` with HAL host-execution profiling
    (module docstring). Input set 0 only: the tool takes one set."""
    kmap = compiled.kernels()
    if kmap is None:
        raise NotImplementedError
    scratch = tools.Scratch("iree-prof")
    try:
        folder = scratch.path
        module = folder / "model.vmfb"
        module.write_bytes(compiled.vmfb)
        flags = []
        for i, arr in enumerate(inputs[0]):
            path = folder / f"input{i}.npy"
            np.save(path, contiguous(arr))
            flags.append(f"--input=@{path}")
        prof = folder / "run.ireeprof"
        timeout = compiled.target.options.compile_timeout_s
        tools.run_tool([tools.find_tool("iree-benchmark-module"), f"--module={module}",
                        f"--device={compiled.driver}", f"--function={compiled.function}", *flags,
                        f"--benchmark_min_time={warmup + runs}x",
                        "--device_profiling_mode=host-execution,executable-metadata,queue-events",
                        f"--device_profiling_output={prof}"], timeout=timeout, temps=scratch)
        done = tools.run_tool([tools.find_tool("iree-profile"), "dispatch", "--dispatch_events", "--format=jsonl",
                               prof], timeout=timeout, temps=scratch)
        rows = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    finally:
        scratch.cleanup()
    return _samples(kmap, rows, runs)


def _samples(kmap: KernelMap, rows: list[dict[str, Any]], runs: int) -> ProfileSamples:
    exports = [k.detail["export"] for k in kmap.kernels]
    ids = [k.id for k in kmap.kernels]
    events = [r for r in rows if r.get("type") == "host_dispatch_event" and r.get("valid", True)]
    by_sub: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        by_sub.setdefault(int(e.get("submission_id", 0)), []).append(e)
    full = [sorted(ev, key=lambda e: e.get("command_index", 0)) for _, ev in sorted(by_sub.items())
            if sorted(e["key"] for e in ev) == sorted(exports)]
    notes = []
    if len(full) < runs:
        notes.append(f"{len(full)} complete runs in the profile (asked for {runs})")
    full = full[-runs:] if runs else full
    kernels = {kid: [0.0] * len(full) for kid in ids}
    span = []
    for r, ev in enumerate(full):
        slots: dict[str, list[str]] = {}
        for kid, ex in zip(ids, exports):
            slots.setdefault(ex, []).append(kid)
        for e in ev:
            kernels[slots[e["key"]].pop(0)][r] += e["duration_ns"] / 1e6
        span.append((max(e["end_host_time_ns"] for e in ev) - min(e["start_host_time_ns"] for e in ev)) / 1e6)
    notes.append("profiled run = first dispatch start to last dispatch end of the submission; input set 0 only")
    return ProfileSamples(profiler="IREE HAL profiling (iree-benchmark-module --device_profiling_mode="
                                   "host-execution; iree-profile dispatch --dispatch_events)",
                          kernels=kernels, calls={k: 1 for k in ids}, run_ms=span, notes=notes)
