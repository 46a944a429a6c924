"""Kernel maps and profiles imported from files a stack wrote elsewhere: TensorRT.

TensorRT cannot be installed here (its PyPI packages fetch the real wheel from NVIDIA's
server), so its users bring ``trtexec --exportProfile=P.json --exportLayerInfo=L.json``
(with ``--profilingVerbosity=detailed``) from a GPU machine. :func:`tensorrt_row` maps
those files onto the model with :func:`compstack.targets.trt.profile.map_profile` and returns the
same row type as a live target (:class:`compstack.fusion.run.TargetKernels`), so
TensorRT joins ``compstack fusion`` and ``compstack profile`` tables, ``--missed`` and
``--by-node``.

What the files do not hold is left empty rather than guessed: trtexec exports each
layer's total, mean and median time (no p10/p90/CV), and no end-to-end latency; the
roofline is not applied (the peaks compstack measures are this machine's CPU, not the
GPU the profile came from).
"""

from __future__ import annotations

from pathlib import Path

import onnx_ir as ir

from compstack.analysis.kernels import Kernel, KernelProfile, KernelTime, build_map
from compstack.fusion.run import TargetKernels
from compstack.targets.trt.profile import map_profile

__all__ = ["TENSORRT_IMPORTED", "tensorrt_row"]

#: The row name of an imported TensorRT profile.
TENSORRT_IMPORTED = "tensorrt (trtexec)"

#: TensorRT layer types that move or reformat data without computing (engine inspector
#: ``LayerType`` values).
_COPY_TYPES = {"Reformat", "Shuffle", "NoOp", "Identity", "Copy"}
#: Layer types TensorRT compiles at build time (Myelin regions, fused pointwise code).
_GENERATED_TYPES = {"Myelin", "PointWise", "ForeignNode"}


def _kind(layer_type: str, name: str, nodes: list[str]) -> str:
    if layer_type in _COPY_TYPES or not nodes:
        return "copy"
    if layer_type in _GENERATED_TYPES or "ForeignNode" in name or name.startswith("PWN("):
        return "generated"
    return "library"  # a tactic from TensorRT's kernel library (convolution, GEMM...)


def tensorrt_row(model: ir.Model, profile: str | Path, layer_info: str | Path | None) -> TargetKernels:
    """A fusion/profile row from trtexec's exported files.

    Args:
        model: the common IR of the model the engine was built from.
        profile: ``--exportProfile`` JSON (per-layer ms; see :mod:`compstack.targets.trt.profile`).
        layer_info: ``--exportLayerInfo`` JSON, or None (names-only mapping).

    Returns:
        A row with status ``ok``, the kernel map (one kernel per engine layer, in profile
        order) and the profile (per-layer median ms per run, or the mean where the file
        has no median).

    Raises:
        UserError: a missing or malformed file (see :func:`compstack.targets.trt.profile.map_profile`).
    """
    report = map_profile(model, profile, layer_info)
    kernels, times, seen = [], [], set()
    for layer in report.layers:
        kid, k = layer.name, 1
        while kid in seen:  # layer names are unique in an engine; keep ids unique regardless
            kid, k = f"{layer.name}#{k}", k + 1
        seen.add(kid)
        kernels.append(Kernel(id=kid, kind=_kind(layer.type, layer.name, layer.nodes), nodes=list(layer.nodes),
                              detail={"layer_type": layer.type, "mapped_by": layer.how}))
        median = layer.median_ms if layer.median_ms is not None else layer.average_ms
        times.append(KernelTime(kid, 1, median, None, None, layer.average_ms, None))
    kmap = build_map(model, TENSORRT_IMPORTED, kernels,
                     source="trtexec --exportLayerInfo / --exportProfile (imported; ONNX parser metadata, "
                            "layer names, output tensors)",
                     default_reason="no profiled TensorRT layer names this node")
    total = sum(t.median for t in times)
    prof = KernelProfile(target=TENSORRT_IMPORTED, profiler=f"trtexec --exportProfile ({report.count} iterations)",
                         runs=report.count, warmup=0, kernels=times,
                         kernel_sum={"median": total, "mean": report.total_ms, "cv": None},
                         end_to_end={}, notes=[("imported from trtexec files: per-layer mean and median only (no "
                                                "p10/p90/CV); no end-to-end latency; no roofline (the GPU's peaks "
                                                "are not measured here)")])
    return TargetKernels(target=TENSORRT_IMPORTED, status="ok", kernels=kmap, profile=prof,
                         notes=[f"imported from {Path(profile).name}"
                                + (f" and {Path(layer_info).name}" if layer_info else "")],
                         flags={"imported": True})

