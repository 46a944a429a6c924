"""Kernels and per-kernel times of TorchInductor (``inductor-cpu``; ``inductor-cuda`` inherits).

Kernels: the compile runs with Inductor's provenance tracking on
(``torch._inductor.config.trace.provenance_tracking_level = 1``), which records, for every
kernel it emits (generated ``cpp_fused_*`` kernels and ``extern_kernels.*`` library calls),
a debug handle in emission order (= call order in the wrapper's ``call()``), the post-grad
FX nodes it computes and the pre-grad (TorchDynamo graph) nodes those came from
(``torch._inductor.debug.create_kernel_information_json``; the records are cleared when
the compile ends, so they are read from inside it). Each pre-grad node is then matched to
IR nodes:

* translated path: ``node.meta["custom"]["onnx_node"]`` (set by
  :mod:`compstack.translate.fx` and carried by TorchDynamo);
* native path (the PyTorch source itself): the IR nodes the torch exporter made from the
  same module and source line: ``nn_module_stack`` and the innermost non-torch frame of
  ``stack_trace`` on the Dynamo node, ``pkg.torch.onnx.name_scopes`` and the innermost
  non-torch frame of ``pkg.torch.onnx.stack_trace`` on the IR node. All IR nodes of one PyTorch call (e.g. the dozen
  nodes of ``scaled_dot_product_attention``) go with the kernels of that call.

A generated kernel whose post-grad nodes are all library ops (``convolution``, ``addmm``)
is the layout copy Inductor makes for that call (kind ``copy``).

Per-kernel time: ``torch._inductor.config.cpp.enable_kernel_profile`` wraps each generated
C++ kernel in a ``RecordFunction`` (``graph_<n>_<kernel>``); ``torch.profiler`` records
those and the ATen ops of extern kernels as children of Inductor's
``## Call CompiledFxGraph`` event. Each run is a ``record_function`` range.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from compstack.analysis.kernel_ids import unique_ids
from compstack.analysis.kernels import GraphIndex, Kernel, KernelMap, ProfileSamples, build_map

__all__ = ["compile_with_kernels", "kernel_map", "profile"]

_VIEW_POST = re.compile(r"^(view|reshape|permute|unsqueeze|squeeze|expand|slice|select|t|transpose|alias|"
                        r"as_strided|_unsafe_view|clone)(_\d+)?$")
_LIBRARY_POST = re.compile(r"^(convolution|_convolution|addmm|mm|bmm|baddbmm|linear|_mkl_linear|"
                           r"_convolution_pointwise|mkldnn_\w+)(_\d+)?$")


def compile_with_kernels(lowered: Any) -> Any:
    """Compile ``lowered`` (an ``InductorLowered``) with provenance tracking and kernel
    profiling on and Inductor's caches off; the compiled object gets ``provenance``: a list
    of ``(kernel name, post-grad nodes, pre-grad nodes)`` in call order."""
    import torch._inductor.debug as idebug
    from torch._inductor import config

    captured: dict[str, Any] = {}
    original = idebug.dump_inductor_provenance_info

    def capture() -> Any:
        out = original()
        captured["kernels"] = idebug.create_kernel_information_json()
        captured["post_to_pre"] = dict(idebug._inductor_post_to_pre_grad_nodes.get("postToPre", {}))
        return out

    idebug.dump_inductor_provenance_info = capture
    try:  # caches off, as for recorded stages: a cache hit records no provenance
        with config.patch({"trace.provenance_tracking_level": 1, "cpp.enable_kernel_profile": True,
                           "force_disable_caches": True}):
            compiled = lowered.compile()
    finally:
        idebug.dump_inductor_provenance_info = original
    rows: list[tuple[int, str, list[str], list[str]]] = []
    for key, info in captured.get("kernels", {}).items():
        name, _, handle = key.rpartition(":")
        rows.append((int(handle) if handle.isdigit() else len(rows), name or key,
                     list(info.get("post_grad_nodes", [])), list(info.get("pre_grad_nodes", []))))
    compiled.provenance = [(n, post, pre) for _, n, post, pre in sorted(rows)]
    compiled.post_to_pre = captured.get("post_to_pre", {})
    return compiled


def _module_path(stack: Any) -> str:
    """``L['self'].layer1.conv1[0]`` (Dynamo's ``nn_module_stack``) -> ``layer1.conv1.0``."""
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    path = re.sub(r"\[['\"]?([^'\"\]]+)['\"]?\]", r".\1", path)
    return path.strip(".")


def _frames(stack_trace: str) -> list[str]:
    """``file:line`` of the frames of ``stack_trace`` outside torch, outermost first."""
    import torch

    torch_dir = os.path.dirname(torch.__file__)
    return [f"{p}:{n}" for p, n in re.findall(r'File "([^"]+)", line (\d+)', stack_trace or "")
            if not p.startswith(torch_dir)]


def _ir_keys(index: GraphIndex) -> list[tuple[str, str, str]]:
    """``(module path, innermost non-torch frame, node name)`` of each IR node (native path)."""
    import ast

    out = []
    for node in index.nodes:
        props = node.metadata_props
        try:
            scopes = ast.literal_eval(props.get("pkg.torch.onnx.name_scopes", "[]"))
        except (ValueError, SyntaxError):
            scopes = []
        frames = _frames(props.get("pkg.torch.onnx.stack_trace", ""))
        out.append((str(scopes[-2]) if len(scopes) >= 2 else "", frames[-1] if frames else "", node.name or ""))
    return out


def _pre_grad_nodes(lowered: Any, index: GraphIndex) -> dict[str, list[str]]:
    """Pre-grad (Dynamo graph) node name -> IR node names.

    Native path: an IR node goes to the Dynamo nodes of the same module whose innermost
    non-torch frame is the IR node's; when none, to those with that frame anywhere in
    their stack (the exporter and Dynamo may stop at different depths, e.g. inside a
    library's attention helper).
    """
    from compstack.translate.fx import ONNX_NODE_KEY

    out: dict[str, list[str]] = {}
    dynamo: list[tuple[str, str, list[str]]] = []
    for node in lowered.capture.graph.graph.nodes:
        custom = node.meta.get("custom") or {}
        if ONNX_NODE_KEY in custom:
            out.setdefault(node.name, []).append(custom[ONNX_NODE_KEY])
        elif node.op not in ("placeholder", "output"):
            dynamo.append((node.name, _module_path(node.meta.get("nn_module_stack")),
                           _frames(node.meta.get("stack_trace", ""))))
    if out or lowered.path != "native":
        return out
    for module, frame, ir_name in _ir_keys(index):
        if not frame:
            continue
        same = [d for d, m, fr in dynamo if m == module and fr and fr[-1] == frame]
        same = same or [d for d, m, fr in dynamo if m == module and frame in fr]
        for d in same:
            out.setdefault(d, []).append(ir_name)
    return out



def kernel_map(compiled: Any) -> KernelMap:
    """The :class:`KernelMap` of an Inductor compile made by :func:`compile_with_kernels`."""
    provenance = getattr(compiled, "provenance", None)
    if not provenance:
        raise NotImplementedError("no provenance records (compile without compile_with_kernels)")
    index = GraphIndex(compiled.model)
    to_ir = _pre_grad_nodes(compiled.lowered, index)
    post_to_pre = getattr(compiled, "post_to_pre", {})
    kernels = []
    for kid, (name, post, pre) in zip(unique_ids([p[0] for p in provenance]), provenance):
        if not name.startswith("cpp_fused") and not name.startswith("triton_"):
            kind = "library"
        elif post and all(_LIBRARY_POST.match(p) for p in post):
            kind = "copy"
        else:
            kind = "generated"
        if post_to_pre:
            # views among a kernel's origins only reshape its operands, and a library op
            # among a generated kernel's origins is its operand's layout preparation (the
            # op runs in the extern kernel): neither says what the kernel computes
            keep = [p for p in post if not _VIEW_POST.match(p) and not (kind == "generated" and _LIBRARY_POST.match(p))]
            pre = sorted({q for p in keep for q in post_to_pre.get(p, [])}) or pre
        nodes = sorted({n for p in pre for n in to_ir.get(p, [])})
        kernels.append(Kernel(kid, kind, nodes, detail={"kernel": name, "post_grad_nodes": post[:50],
                                                        "pre_grad_nodes": pre}))
    how = "onnx_node meta of the FX graph" if compiled.lowered.path == "translated" else \
        "module path + source line of the Dynamo graph nodes vs the torch exporter's provenance"
    return build_map(compiled.model, compiled.target.name, kernels, index=index, infer=True,
                     source=f"Inductor provenance tracking (kernel -> post-grad -> pre-grad nodes); {how}",
                     default_reason="no Inductor kernel's origins lead to it (folded, a view, or a pre-grad "
                                    "node with no matching module path/source line)")


# ---- timing ------------------------------------------------------------------------------


def _event_op(kernel_name: str) -> str:
    """The profiler event name expected for a kernel: ``graph_*_<name>`` for generated
    kernels (matched by suffix), ``<ns>::<op>`` for library calls."""
    if kernel_name.startswith("cpp_fused") or kernel_name.startswith("triton_"):
        return kernel_name
    parts = [p for p in kernel_name.split(".") if p not in ("default", "out", "Tensor")]
    return "::" + parts[-1]


def profile(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> ProfileSamples:
    """Per-kernel times from ``torch.profiler`` (module docstring)."""
    from compstack.targets.common.torch import profiled_events

    kmap = compiled.kernels()
    if kmap is None:
        raise NotImplementedError
    return _samples(kmap, profiled_events(compiled, inputs, warmup, runs), runs)


def _samples(kmap: KernelMap, events: Any, runs: int) -> ProfileSamples:
    spans = sorted((e.time_range.start, e.time_range.end, e.name) for e in events
                   if e.name.startswith("compstack_run_"))
    per_run: list[list[Any]] = [[] for _ in spans]
    for e in events:
        parent = e.cpu_parent
        if parent is None or not parent.name.startswith("## Call CompiledFxGraph"):
            continue
        r = next((i for i, (lo, hi, _) in enumerate(spans) if lo <= e.time_range.start <= hi), None)
        if r is not None:
            per_run[r].append(e)
    wanted = [(k.id, _event_op(k.detail.get("kernel", k.id))) for k in kmap.kernels]
    kernels = {kid: [0.0] * len(spans) for kid, _ in wanted}
    other: dict[str, list[float]] = {}
    for r, evs in enumerate(per_run):
        todo = list(wanted)
        for e in sorted(evs, key=lambda x: x.time_range.start):
            hit = next((i for i, (_, op) in enumerate(todo)
                        if (e.name.endswith(op) if op.startswith("::") else e.name.endswith("_" + op) or e.name == op)),
                       None)
            ms = e.time_range.elapsed_us() / 1e3
            if hit is None:
                other.setdefault(e.name, [0.0] * len(spans))[r] += ms
            else:
                kernels[todo.pop(hit)[0]][r] += ms
    notes = [] if len(spans) == runs else [f"{len(spans)} runs found by the profiler (asked for {runs})"]
    notes.append("generated C++ kernels are timed by RecordFunction (cpp.enable_kernel_profile)")
    notes.append(_threads_note())
    return ProfileSamples(profiler="torch.profiler (CPU) with Inductor cpp.enable_kernel_profile",
                          kernels=kernels, calls={k.id: 1 for k in kmap.kernels},
                          run_ms=[(hi - lo) / 1e3 for lo, hi, _ in spans], other=other, notes=notes)


def _threads_note() -> str:
    """Torch's intra-op threads beside the machine's cores and load: Inductor's C++ kernels
    are OpenMP parallel regions, and on a machine whose cores are busy with other work a
    region waits for a descheduled thread (measured here: 0.4 ms runs of zoo:bert became
    120-190 ms with 2 threads on 2 busy cores, and stayed under 13 ms with one thread)."""
    import torch

    threads, cores = torch.get_num_threads(), os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    note = f"torch intra-op threads: {threads} on {cores} cores, load average {load:.1f}"
    if threads > 1 and load > cores:  # more runnable work than cores
        note += ": the cores are oversubscribed, so a parallel kernel can wait for a descheduled thread"
    return note

