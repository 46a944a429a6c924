"""Google Model Explorer node-data overlays: per-node time and kernel per target.

Model Explorer (``pip install ai-edge-model-explorer``) shows a model's graph and colours
its nodes from *node data* files. The format is the one ``model_explorer.node_data_builder``
writes (``ModelNodeData.to_json_string``): ``{graph_id: {"results": {node_id: {"value":
number, "bgColor": css}}, "name": ..., "gradient": [{"stop": 0..1, "bgColor": css}]}}``.
For ONNX models (``model-explorer-onnx``), the graph id is the ONNX graph name and node
ids are the ONNX node names, which are the IR's.

Written per target (``<model>.<target>.<what>.json``):

* ``time``: each source node's share of the kernel time (ms per run, as ``--by-node``),
  coloured by a gradient;
* ``kernel``: the execution index of the kernel computing each node; nodes fused into
  one kernel share the value and a colour. ``<model>.<target>.kernels.json`` lists the
  kernel id of each index (node data values must be numbers).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from compstack.analysis.kernels import KernelMap

__all__ = ["node_data", "export"]

_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
            "#bab0ac")
_GRADIENT = [{"stop": 0, "bgColor": "#f7fbff"}, {"stop": 0.5, "bgColor": "#fdae6b"}, {"stop": 1, "bgColor": "#d62728"}]


def node_data(graph_id: str, name: str, results: dict[str, dict[str, Any]],
              gradient: bool = False) -> dict[str, Any]:
    """One node-data document (see the module docstring)."""
    body: dict[str, Any] = {"results": results, "name": name}
    if gradient:
        body["gradient"] = _GRADIENT
    return {graph_id: body}


def _kernel_index(kmap: KernelMap) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    results: dict[str, dict[str, Any]] = {}
    table = []
    for i, k in enumerate(kmap.kernels):
        table.append({"index": i, "kernel": k.id, "kind": k.kind, "nodes": k.nodes})
        if k.kind == "copy":
            continue
        for n in k.nodes:
            results.setdefault(n, {"value": i, "bgColor": _PALETTE[i % len(_PALETTE)]})
    return results, table


def _safe(text: str) -> str:
    return re.sub(r"[^\w.\-]+", "_", text)


def export(folder: Path, model_name: str, graph_id: str, rows: Sequence[Any], node_times: Sequence[Any]) -> list[Path]:
    """Write the overlays of every target with a kernel map (and times when profiled).

    Args:
        folder: output folder (created).
        model_name: used in file names.
        graph_id: the model's main graph id (the ONNX graph name).
        rows: :class:`compstack.fusion.run.TargetKernels` rows.
        node_times: :func:`compstack.analysis.fusion.analysis.by_node` rows (may be empty).

    Returns:
        The files written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    stem = _safe(model_name)
    for row in rows:
        if row.kernels is None:
            continue
        target = _safe(row.target)
        results, table = _kernel_index(row.kernels)
        doc = node_data(graph_id, f"{row.target}: kernel index (execution order)", results)
        written.append(_write(folder / f"{stem}.{target}.kernel.json", doc))
        written.append(_write(folder / f"{stem}.{target}.kernels.json", {"target": row.target, "kernels": table}))
        times = {t.node: {"value": round(t.ms[row.target], 6)} for t in node_times
                 if t.ms.get(row.target) is not None}
        if times:
            doc = node_data(graph_id, f"{row.target}: time per node (ms)", times, gradient=True)
            written.append(_write(folder / f"{stem}.{target}.time.json", doc))
    return written


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1))
    return path
