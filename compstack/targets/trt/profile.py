"""Map a trtexec per-layer profile back to the nodes of the common IR.

Two input files, both written by ``trtexec`` (TensorRT's command-line tool, README at
https://github.com/NVIDIA/TensorRT/tree/main/samples/trtexec, flags ``--exportProfile``
and ``--exportLayerInfo``):

* ``--exportProfile=P.json``: a JSON list whose first element is ``{"count": N}`` (the
  number of profiled iterations) and whose other elements are one per engine layer,
  ``{"name", "timeMs", "averageMs", "medianMs", "percentage"}``: total ms over the N
  runs, ms per run, median ms per run, share of the total time in percent. Source:
  ``Profiler::exportJSONProfile`` in ``samples/common/sampleReporting.cpp`` of
  NVIDIA/TensorRT; ``medianMs`` appeared in TensorRT 8.6 and is optional here (older
  files lack it), ``averageMs`` is computed from ``timeMs / count`` when absent. The
  reader ``samples/trtexec/profiler.py`` of the same repository reads it this way.
* ``--exportLayerInfo=L.json`` (with ``--profilingVerbosity=detailed``): the engine
  inspector's JSON, ``{"Layers": [...], "Bindings": [...]}`` ("Engine Inspector" in the
  TensorRT developer guide,
  https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/engine-tools.html).
  Each detailed layer is an object with ``Name``, ``LayerType``, ``Inputs`` /
  ``Outputs`` (objects with a ``Name``) and ``Metadata``. With the default
  ``layer_names_only`` verbosity each layer is only its name (a string); both are read.

How a layer is mapped to IR nodes, first rule that finds any node wins:

1. ``metadata``: every ``[ONNX Layer: NAME]`` in the layer's ``Metadata``. The ONNX
   parser writes ``[ONNX Layer: NAME | fn-node (fn) ...]`` per node
   (``processMetadata`` in onnx-tensorrt's ``ModelImporter.cpp``; the ``| ...`` local
   function stack is dropped here) and TensorRT joins the entries of a fused layer with a
   control character (third-party parsers of exported files split on ``\\x1f``, the
   unit separator; some also accept ``\\x1e``). Entries are found with a regular
   expression, so the separator does not matter.
2. ``name``: the layer name itself, when it is a node name, or split as a fused name:
   ``a + b + c`` (fused layers), ``PWN(a, PWN(b, c))`` (pointwise fusions, nested), and
   ``{ForeignNode[a...b]}`` (a Myelin region from node ``a`` to node ``b``, expanded to
   every node between them in graph order, both included). Pieces that are not node
   names are ignored.
3. ``tensors``: the IR nodes that produce any of the layer's ``Outputs`` tensors (needs
   the layer-info file; for a fused layer only the last node's output is visible).

Layers none of these map (reformatting copies, TensorRT-inserted shuffles) are listed
with no nodes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx_ir as ir

from compstack.core.errors import UserError

__all__ = [
    "SCHEMA_VERSION",
    "LayerRow",
    "ProfileReport",
    "format_text",
    "load_layer_info",
    "load_profile",
    "map_profile",
    "metadata_nodes",
    "split_layer_name",
]

#: Version of :meth:`ProfileReport.to_json`'s layout.
SCHEMA_VERSION = 1

_ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]]*)\]")
_FOREIGN = re.compile(r"\{ForeignNode\[(.*?)\.\.\.(.*?)\]\}")


@dataclass
class LayerRow:
    """One engine layer of the profile.

    Attributes:
        name: the TensorRT layer name.
        type: ``LayerType`` from the layer-info file ("" when unknown).
        time_ms: total time over the profiled runs.
        average_ms: time per run.
        median_ms: median time per run, when the profile has it.
        percentage: share of the total layer time, in percent (as trtexec wrote it).
        nodes: the IR node names this layer covers, in graph order.
        how: the rule that mapped it: ``metadata``, ``name``, ``tensors``, or ``""``.
    """

    name: str
    type: str = ""
    time_ms: float = 0.0
    average_ms: float = 0.0
    median_ms: float | None = None
    percentage: float = 0.0
    nodes: list[str] = field(default_factory=list)
    how: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "time_ms": self.time_ms, "average_ms": self.average_ms,
                "median_ms": self.median_ms, "percentage": self.percentage, "nodes": self.nodes, "how": self.how}


@dataclass
class ProfileReport:
    """A trtexec profile mapped to one model's IR nodes.

    Attributes:
        model: the model's display name.
        count: profiled iterations (the profile's ``{"count": N}``).
        layers: one row per profiled layer, in profile order.
        node_count: nodes of the model's main graph.
        unmapped: ``(node name, op type)`` of every node no layer covers, graph order.
    """

    model: str
    count: int
    layers: list[LayerRow]
    node_count: int
    unmapped: list[tuple[str, str]]

    @property
    def total_ms(self) -> float:
        """Sum of the layers' average times: ms per run."""
        return sum(r.average_ms for r in self.layers)

    @property
    def total_time_ms(self) -> float:
        """Sum of the layers' total times over all runs."""
        return sum(r.time_ms for r in self.layers)

    @property
    def coverage(self) -> float:
        """Share of the model's nodes covered by at least one layer (0..1)."""
        if not self.node_count:
            return 1.0
        return (self.node_count - len(self.unmapped)) / self.node_count

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "model": self.model, "count": self.count,
                "total_average_ms": self.total_ms, "total_time_ms": self.total_time_ms,
                "coverage": self.coverage, "node_count": self.node_count,
                "mapped_node_count": self.node_count - len(self.unmapped),
                "unmapped_nodes": [{"name": n, "op_type": t} for n, t in self.unmapped],
                "layers": [r.to_json() for r in self.layers]}


def _read_json(path: str | Path, flag: str) -> Any:
    p = Path(path)
    if not p.exists():
        raise UserError(f"{flag} {p}: no such file")
    if not p.is_file():
        raise UserError(f"{flag} {p}: not a regular file (a folder, FIFO or device)")
    try:
        return json.loads(p.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{flag} {p}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise UserError(f"{flag} {p}: JSON nested too deeply to be a trtexec file") from None
    except OSError as exc:
        raise UserError(f"{flag} {p}: cannot read ({exc.strerror or exc})") from None


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"{what}: expected a finite number, got {value!r}")
    return float(value)


def load_profile(path: str | Path, flag: str = "--profile") -> tuple[int, list[LayerRow]]:
    """Read a trtexec ``--exportProfile`` file.

    Returns:
        ``(count, rows)``: the iteration count (0 when the file has none) and one
        :class:`LayerRow` per layer, without nodes.

    Raises:
        UserError: missing file, invalid JSON, not the profile layout, or no layers.
    """
    data = _read_json(path, flag)
    where = f"{flag} {path}"
    if not isinstance(data, list):
        raise UserError(f"{where}: expected a JSON list (trtexec --exportProfile), got {type(data).__name__}")
    count = 0
    rows: list[LayerRow] = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise UserError(f"{where}: element {i} is not an object")
        if "name" not in item:
            if "count" in item:
                count = int(_number(item["count"], f"{where}: count"))
                continue
            raise UserError(f"{where}: element {i} has neither 'name' nor 'count'")
        label = f"{where}: layer {item['name']!r}"
        time_ms = _number(item.get("timeMs", 0.0), f"{label} timeMs")
        if "averageMs" in item:
            average = _number(item["averageMs"], f"{label} averageMs")
        elif count:
            average = time_ms / count
        else:
            raise UserError(f"{label}: no averageMs and no count to compute it")
        median = _number(item["medianMs"], f"{label} medianMs") if "medianMs" in item else None
        pct = _number(item.get("percentage", 0.0), f"{label} percentage")
        rows.append(LayerRow(name=str(item["name"]), time_ms=time_ms, average_ms=average, median_ms=median,
                             percentage=pct))
    if not rows:
        raise UserError(f"{where}: the profile has no layers")
    return count, rows


def load_layer_info(path: str | Path, flag: str = "--layer-info") -> dict[str, dict[str, Any]]:
    """Read a trtexec ``--exportLayerInfo`` file: layer name -> layer object.

    Layers given as bare names (``layer_names_only`` verbosity) become ``{"Name": n}``.

    Raises:
        UserError: missing or non-regular file, invalid or too deeply nested JSON, no
            ``Layers`` list, or a layer whose ``Inputs``/``Outputs``/``Metadata`` have
            the wrong type.
    """
    data = _read_json(path, flag)
    layers = data.get("Layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        raise UserError(f"{flag} {path}: expected an object with a 'Layers' list "
                        "(trtexec --exportLayerInfo)")
    out: dict[str, dict[str, Any]] = {}
    for item in layers:
        if isinstance(item, str):
            out[item] = {"Name": item}
        elif isinstance(item, dict) and isinstance(item.get("Name"), str):
            _check_layer(item, f"{flag} {path}: layer {item['Name']!r}")
            out[item["Name"]] = item
    return out


def _check_layer(layer: dict[str, Any], where: str) -> None:
    """The fields the mapping reads have the engine inspector's types.

    Raises:
        UserError: ``Inputs``/``Outputs`` not a list, ``Metadata``/``LayerType`` not a string.
    """
    for key in ("Inputs", "Outputs"):
        if key in layer and layer[key] is not None and not isinstance(layer[key], list):
            raise UserError(f"{where}: '{key}' is {type(layer[key]).__name__}, expected a list of tensors")
    for key in ("Metadata", "LayerType"):
        if key in layer and layer[key] is not None and not isinstance(layer[key], str):
            raise UserError(f"{where}: '{key}' is {type(layer[key]).__name__}, expected a string")


def metadata_nodes(metadata: str) -> list[str]:
    """The node names of every ``[ONNX Layer: NAME | ...]`` entry in a ``Metadata`` string."""
    return [m.group(1).split(" | ")[0].strip() for m in _ONNX_LAYER.finditer(metadata or "")]


def split_layer_name(name: str, order: list[str]) -> list[str]:
    """The IR node names a TensorRT layer name covers (rule 2 of the module docs).

    Args:
        name: the layer name (``a + b``, ``PWN(a, b)``, ``{ForeignNode[a...b]}``).
        order: the IR's node names in graph order.

    Returns:
        Known node names, in graph order, without duplicates; empty when none.
    """
    index = {n: i for i, n in enumerate(order)}
    if name in index:
        return [name]
    found: set[str] = set()
    for m in _FOREIGN.finditer(name):
        a, b = m.group(1).strip(), m.group(2).strip()
        if a in index and b in index:
            lo, hi = sorted((index[a], index[b]))
            found.update(order[lo:hi + 1])
        else:
            found.update(x for x in (a, b) if x in index)
    rest = _FOREIGN.sub(" + ", name)
    for piece in re.split(r" \+ |PWN\(|\)|, ", rest):
        piece = piece.strip()
        if piece in index:
            found.add(piece)
    return sorted(found, key=index.__getitem__)


def _tensor_nodes(layer: dict[str, Any], producers: dict[str, str]) -> list[str]:
    out = []
    for t in layer.get("Outputs") or []:
        tname = t.get("Name") if isinstance(t, dict) else t
        node = producers.get(tname) if isinstance(tname, str) else None
        if node and node not in out:
            out.append(node)
    return out


def map_profile(model: ir.Model, profile: str | Path, layer_info: str | Path | None = None,
                model_name: str = "") -> ProfileReport:
    """Read the trtexec files and map every profiled layer to ``model``'s nodes.

    Args:
        model: the common IR of the model the engine was built from.
        profile: the ``--exportProfile`` JSON.
        layer_info: the ``--exportLayerInfo`` JSON, or None.
        model_name: display name for the report.

    Raises:
        UserError: a missing or malformed file, or a profile with no layers.
    """
    count, rows = load_profile(profile)
    info = load_layer_info(layer_info) if layer_info is not None else {}
    nodes = list(model.graph)
    order = [n.name or "" for n in nodes]
    known = set(order)
    producers = {v.name: n.name for n in nodes for v in n.outputs if v is not None and v.name and n.name}
    index = {n: i for i, n in enumerate(order)}
    covered: set[str] = set()
    for row in rows:
        layer = info.get(row.name, {})
        row.type = str(layer.get("LayerType", ""))
        meta = layer.get("Metadata")
        found = [n for n in metadata_nodes(meta) if n in known] if isinstance(meta, str) else []
        if found:
            row.how = "metadata"
        else:
            found = split_layer_name(row.name, order)
            if found:
                row.how = "name"
            else:
                found = _tensor_nodes(layer, producers)
                row.how = "tensors" if found else ""
        row.nodes = sorted(dict.fromkeys(found), key=index.__getitem__)
        covered.update(row.nodes)
    unmapped = [(n.name or "", n.op_type) for n in nodes if n.name not in covered]
    return ProfileReport(model=model_name, count=count, layers=rows, node_count=len(nodes), unmapped=unmapped)


def format_text(report: ProfileReport, max_nodes: int = 6) -> list[str]:
    """The report as lines of a plain-text table (for the CLI)."""
    rows = [("layer", "type", "avg ms", "%", "ONNX nodes")]
    for r in report.layers:
        shown = ", ".join(r.nodes[:max_nodes]) + (f", ... (+{len(r.nodes) - max_nodes})"
                                                   if len(r.nodes) > max_nodes else "")
        rows.append((r.name, r.type or "-", f"{r.average_ms:.4f}", f"{r.percentage:.1f}", shown or "-"))
    widths = [min(max(len(row[i]) for row in rows), 60) for i in range(4)]
    lines = []
    for row in rows:
        cells = [row[i][:60].ljust(widths[i]) if i != 2 and i != 3 else row[i].rjust(widths[i]) for i in range(4)]
        lines.append("  ".join(cells + [row[4]]).rstrip())
    lines.insert(1, "-" * min(len(lines[0]), 120))
    mapped = report.node_count - len(report.unmapped)
    lines.append("")
    lines.append(f"layers: {len(report.layers)}   iterations: {report.count}   "
                 f"sum of layer times: {report.total_ms:.4f} ms/run ({report.total_time_ms:.2f} ms total)")
    lines.append(f"coverage: {mapped}/{report.node_count} nodes ({report.coverage * 100:.1f} %)")
    if report.unmapped:
        lines.append("unmapped nodes: " + ", ".join(f"{n} ({t})" for n, t in report.unmapped))
    return lines
