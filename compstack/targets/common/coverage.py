"""Op-coverage pre-check: which nodes a vendor toolchain's *documented* ONNX support rejects.

A vendor list is a JSON file in ``compstack/targets/data/`` (``cann_onnx_ops.json``,
``gcu_onnx_ops.json``). Each records where it came from (document title, URL, version,
the date it was transcribed) and, per ONNX op, only what that source states: the opset
versions, input dtypes and ranks, attribute values, and constraints written down but not
checked here (``notes``). A vendor without a public list has ``"ops": null`` and a
``statement`` saying so; its report then says it could not pre-check.

The check is documentation, not a compile: a node it rejects may still convert with a
newer toolchain, and one it passes may still fail (shape ranges and other constraints
are listed, not checked). Findings are ``reject`` (the documented support rules the node
out) or ``warn`` (documented caveats, and rules taken from source code rather than the
documentation).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from compstack.core import ir as cir

__all__ = [
    "CoverageReport",
    "Finding",
    "SupportList",
    "convert_opset",
    "load_support_list",
    "named_nodes",
    "opset_range",
]

#: Precision mode under which a float32 tensor is *not* computed in float16 (ATC
#: ``--precision_mode``; see the ``precision`` section of the CANN data file).
KEEP_DTYPE = "must_keep_origin_dtype"


@dataclass
class Finding:
    """One documented reason a node (or the whole model) may not convert.

    Attributes:
        node: the node's name (``""`` for a model-level finding).
        op: ``Op`` for the default domain, ``domain::Op`` otherwise.
        severity: ``reject`` or ``warn``.
        reason: what the node has and what the source documents.
        quote: the source's own words, when it has them.
        page: the URL of the page the rule comes from.
    """

    node: str
    op: str
    severity: str
    reason: str
    quote: str = ""
    page: str = ""


@dataclass
class CoverageReport:
    """The result of :meth:`SupportList.check` for one model.

    Attributes:
        target: the target that ran the check (``cann``).
        vendor: who documents the list (``Huawei Ascend``).
        checked: False when no public list exists (``statement`` says so).
        statement: a one-line note for the reader (why nothing was checked, or ``""``).
        source: the data file's ``source`` record (title, URL, version, date).
        options: the target options that change the verdict (``soc``, ``precision_mode``).
        opsets: the opset imports of the model that was checked (domain -> version).
        conversion: how the model's opset was chosen/converted for the toolchain.
        nodes: number of nodes checked (subgraphs included).
        op_counts: op -> number of nodes.
        findings: every finding, node by node, model-level ones first.
        unchecked: op -> documented constraints this check does not evaluate.
    """

    target: str
    vendor: str
    checked: bool
    statement: str = ""
    source: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    opsets: Mapping[str, int] = field(default_factory=dict)
    conversion: str = ""
    nodes: int = 0
    op_counts: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    unchecked: dict[str, list[str]] = field(default_factory=dict)

    def rejected(self) -> list[Finding]:
        """The ``reject`` findings."""
        return [f for f in self.findings if f.severity == "reject"]

    def rejected_nodes(self) -> list[str]:
        """Names of the nodes with at least one ``reject`` finding, in graph order."""
        return list(dict.fromkeys(f.node for f in self.rejected() if f.node))

    def rejected_ops(self) -> list[str]:
        """The ops of the rejected nodes (``Op`` / ``domain::Op``), each once."""
        return list(dict.fromkeys(f.op for f in self.rejected() if f.op))

    def summary(self) -> str:
        """One line: how many nodes the documented support rejects, and the main reasons."""
        if not self.checked:
            return self.statement
        bad = self.rejected_nodes()
        if not bad and not any(not f.node for f in self.rejected()):
            return f"the documented support accepts all {self.nodes} nodes"
        per_op: dict[str, set[str]] = {}
        for f in self.rejected():
            per_op.setdefault(f.op or "model", set()).add(f.reason.split(";")[0])
        parts = [f"{op}: {' / '.join(sorted(r))}" for op, r in per_op.items()]
        return f"the documented support rejects {len(bad)} of {self.nodes} nodes ({'; '.join(parts)})"

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON data (``schema`` 1)."""
        return {"schema": 1, "target": self.target, "vendor": self.vendor, "checked": self.checked,
                "statement": self.statement, "summary": self.summary(), "source": self.source,
                "options": dict(self.options), "opsets": dict(self.opsets), "conversion": self.conversion,
                "nodes": self.nodes, "rejected_nodes": self.rejected_nodes(), "rejected_ops": self.rejected_ops(),
                "op_counts": self.op_counts, "findings": [asdict(f) for f in self.findings],
                "unchecked_constraints": self.unchecked}

    def to_text(self) -> str:
        """A readable report: source, per-op table, then every finding with its quote and page."""
        src = self.source or {}
        head = (f"{self.target}: op-coverage pre-check against {self.vendor}'s documented ONNX support "
                "(documentation, not a compile)")
        lines = [head]
        if not self.checked:
            return "\n".join([*lines, self.statement, ""])
        lines += [f"source:  {src.get('title', '?')}, {src.get('version', '?')} (transcribed {src.get('transcribed', '?')})",
                  f"         {src.get('url', '')}",
                  f"options: {json.dumps(dict(self.options))}",
                  f"model:   opsets {json.dumps(dict(self.opsets))}, {self.nodes} nodes; {self.conversion}",
                  f"verdict: {self.summary()}", "", f"{'op':<28}{'nodes':>6}{'rejected':>10}"]
        rejected_per_op = _rejected_per_op(self.findings)
        for op, n in self.op_counts.items():
            lines.append(f"{op:<28}{n:>6}{rejected_per_op.get(op, 0):>10}")
        for title, sev in (("rejected", "reject"), ("warnings", "warn")):
            items = [f for f in self.findings if f.severity == sev]
            if items:
                lines += ["", f"{title}:"]
                for f in items:
                    where = f"{f.node} ({f.op})" if f.node else "model"
                    lines.append(f"  {where}: {f.reason}")
                    if f.quote:
                        lines.append(f"      documented: {f.quote}")
                    if f.page:
                        lines.append(f"      page: {f.page}")
        if self.unchecked:
            lines += ["", "documented constraints not checked here:"]
            lines += [f"  {op}: {note}" for op, notes in self.unchecked.items() for note in notes]
        return "\n".join(lines) + "\n"


def _rejected_per_op(findings: Iterable[Finding]) -> dict[str, int]:
    nodes: dict[str, set[str]] = {}
    for f in findings:
        if f.severity == "reject" and f.node:
            nodes.setdefault(f.op, set()).add(f.node)
    return {op: len(n) for op, n in nodes.items()}


def opset_range(versions: Iterable[int]) -> str:
    """``v9-v18`` for a contiguous list, else ``v8/v11/v13``."""
    vs = sorted(set(versions))
    if not vs:
        return "none"
    if vs == list(range(vs[0], vs[-1] + 1)) and len(vs) > 2:
        return f"v{vs[0]}-v{vs[-1]}"
    return "/".join(f"v{v}" for v in vs)


def _dtype_name(value: ir.Value | None) -> str | None:
    if value is None or value.dtype is None:
        return None
    try:
        return np.dtype(value.dtype.numpy()).name
    except (TypeError, NotImplementedError):
        return value.dtype.name.lower()


def _op_key(node: ir.Node) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-6)
        except (TypeError, ValueError):
            return False
    return a == b


def named_nodes(graph: ir.Graph) -> list[tuple[str, ir.Node]]:
    """Every node (subgraphs included) with its name; an unnamed node is called
    ``<op_type>_<k>``, the name ATC's ONNX parser gives it (``UpdateAllNodeName``)."""
    out, k = [], 0
    for node in ir.traversal.RecursiveGraphIterator(graph):
        name = node.name
        if not name:
            name, k = f"{node.op_type}_{k}", k + 1
        out.append((name, node))
    return out


class SupportList:
    """One vendor's documented ONNX support, loaded from its data file.

    Attributes:
        data: the parsed JSON (see the module docstring for the fields).
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.ops: dict[str, Any] | None = data.get("ops")
        self._lower = {k.lower(): k for k in self.ops or {}}

    @property
    def available(self) -> bool:
        """True when a public list exists (``ops`` is not null)."""
        return self.ops is not None

    def entry(self, node: ir.Node) -> tuple[str, dict[str, Any]] | None:
        """The list's entry for ``node`` (key, entry), or None when the op is not listed.

        Default-domain ops match the ONNX op_type (case-insensitively, as the vendor's
        spelling sometimes differs); vendor ops outside the ONNX standard match by
        op_type in any domain.
        """
        key = self._lower.get(node.op_type.lower())
        if key is None:
            return None
        entry = self.ops[key]  # type: ignore[index]
        standard = entry.get("standard", True)
        if node.domain in ("", "ai.onnx") or not standard:
            return key, entry
        return None

    def documented_opsets(self, entry: Mapping[str, Any]) -> tuple[list[int], str, str]:
        """(versions, where from, page) of an entry: its own page, else the list's default."""
        if "opsets" in entry:
            return list(entry["opsets"]), "op page", entry.get("page", "")
        default = self.data.get("default_opsets") or {}
        return list(default.get("opsets", [])), "general statement", default.get("url", "")

    def choose_opset(self, model: ir.Model) -> tuple[int | None, str]:
        """The ai.onnx opset to hand the toolchain, and why.

        Keeps the model's opset when every listed op documents it; else the highest
        version documented for every listed op (at most the model's, when one is); else,
        when no version suits them all, the one documented for the most nodes.
        Returns ``(None, why)`` when the model has no ai.onnx import or nothing to go by.
        """
        current = model.opset_imports.get("")
        sets = []
        for _, node in named_nodes(model.graph):
            found = self.entry(node)
            if found is not None and node.domain in ("", "ai.onnx") and found[1].get("standard", True):
                versions = set(self.documented_opsets(found[1])[0])
                if versions:
                    sets.append(versions)
        if current is None or not sets:
            return current, "opset kept (nothing documented to choose by)"
        common = set.intersection(*sets)
        if current in common:
            return current, f"opset {current} kept: documented for every listed op"
        if common:
            lower = [v for v in common if v <= current]
            pick = max(lower) if lower else min(common)
            return pick, f"opset {pick}: the version documented for every listed op closest to the model's {current}"
        every = set().union(*sets)
        pick = max(every, key=lambda v: (sum(v in s for s in sets), v <= current, v))
        return pick, (f"no opset is documented for every listed op; opset {pick} is documented for the most "
                      f"nodes ({sum(pick in s for s in sets)} of {len(sets)})")

    def check(self, model: ir.Model, target: str, options: Mapping[str, Any]) -> CoverageReport:
        """Check every node of ``model`` against the list.

        Args:
            model: the model as the toolchain would receive it.
            target: the target name, for the report.
            options: ``precision_mode`` (and anything else worth recording).
        """
        report = CoverageReport(target=target, vendor=self.data.get("vendor", "?"), checked=self.available,
                                statement="" if self.available else self.data.get("statement", ""),
                                source=self.data.get("source"), options=dict(options),
                                opsets={d or "ai.onnx": v for d, v in model.opset_imports.items()})
        nodes = named_nodes(model.graph)
        report.nodes = len(nodes)
        for _, node in nodes:
            report.op_counts[_op_key(node)] = report.op_counts.get(_op_key(node), 0) + 1
        if not self.available:
            return report
        report.findings += self._model_findings(model, nodes)
        precision = str(options.get("precision_mode", ""))
        for name, node in nodes:
            report.findings += self._node_findings(name, node, model, precision, report.unchecked)
        return report

    def _model_findings(self, model: ir.Model, nodes: list[tuple[str, ir.Node]]) -> list[Finding]:
        rule = self.data.get("opset_semantics") or {}
        if len(model.opset_imports) > 1 and any(n.domain == "" for _, n in nodes) and rule:
            return [Finding("", "", "warn", f"the model imports {len(model.opset_imports)} opsets "
                            f"({', '.join(sorted(d or 'ai.onnx' for d in model.opset_imports))}); per the parser's "
                            "source, a node with an empty domain is refused unless there is exactly one (E16005)",
                            rule.get("statement", ""), rule.get("url", ""))]
        return []

    def _node_findings(self, name: str, node: ir.Node, model: ir.Model, precision: str,
                       unchecked: dict[str, list[str]]) -> list[Finding]:
        op = _op_key(node)
        found = self.entry(node)
        src = self.data.get("source") or {}
        if found is None:
            where = "" if node.domain in ("", "ai.onnx") else f" (domain {node.domain})"
            return [Finding(name, op, "reject", f"not in the documented operator list{where}",
                            "", src.get("url", ""))]
        key, entry = found
        out: list[Finding] = []
        page = entry.get("page", "")
        quote = entry.get("quote", "")
        version = model.opset_imports.get(node.domain if node.domain != "ai.onnx" else "", None)
        if entry.get("standard", True) and version is not None:
            versions, origin, opage = self.documented_opsets(entry)
            if versions and version not in versions:
                out.append(Finding(name, op, "reject", f"opset {version} not in the documented {opset_range(versions)} "
                                   f"({origin})", quote if origin == "op page" else
                                   (self.data.get("default_opsets") or {}).get("quote", ""), opage))
        out += _input_findings(name, op, node, entry, precision, version)
        out += _attribute_findings(name, op, node, entry)
        for f in out:
            f.page = f.page or page
        if entry.get("notes") and key not in unchecked:
            unchecked[key] = list(entry["notes"])
        return out


def _input_findings(name: str, op: str, node: ir.Node, entry: Mapping[str, Any], precision: str,
                    version: int | None) -> list[Finding]:
    out: list[Finding] = []
    for idx, spec in (entry.get("inputs") or {}).items():
        i = int(idx)
        value = node.inputs[i] if i < len(node.inputs) else None
        if value is None:
            continue
        label = f"input {i} ({spec.get('name', i)})"
        if spec.get("unsupported"):
            out.append(Finding(name, op, "reject", f"{label} is given (documented: not supported)",
                               spec.get("quote", "")))
            continue
        dtype = _dtype_name(value)
        allowed = spec.get("dtypes")
        if dtype and allowed and dtype not in allowed:
            if dtype == "float32" and "float16" in allowed:
                if precision == KEEP_DTYPE:
                    out.append(Finding(name, op, "warn", f"{label} is float32, documented {', '.join(allowed)}; "
                                       f"under {KEEP_DTYPE} ATC may fall back to an AI CPU kernel or fail",
                                       entry.get("quote", "")))
            else:
                out.append(Finding(name, op, "reject", f"{label} is {dtype}; documented {', '.join(allowed)}",
                                   entry.get("quote", "")))
        ranks = spec.get("ranks")
        if ranks and value.shape is not None and not ranks[0] <= len(value.shape) <= ranks[1]:
            want = f"{ranks[0]}-D" if ranks[0] == ranks[1] else f"{ranks[0]}-D to {ranks[1]}-D"
            out.append(Finding(name, op, "reject", f"{label} is {len(value.shape)}-D; documented {want}",
                               entry.get("quote", "")))
    for rule in entry.get("rules") or []:
        if rule.get("precision_mode") != precision or (rule.get("opsets") and version not in rule["opsets"]):
            continue
        i = int(rule.get("input", 0))
        dtype = _dtype_name(node.inputs[i] if i < len(node.inputs) else None)
        if dtype in rule.get("dtypes", []):
            out.append(Finding(name, op, "reject", f"input {i} is {dtype} under --precision_mode={precision}",
                               rule.get("quote", "")))
    return out


def _attribute_findings(name: str, op: str, node: ir.Node, entry: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    for attr, spec in (entry.get("attributes") or {}).items():
        given = node.attributes.get(attr)
        value = given.value if given is not None else spec.get("default")
        allowed = spec.get("allowed")
        if allowed is not None and value is not None and not any(_same(value, a) for a in allowed):
            out.append(Finding(name, op, "reject", f"attribute {attr}={value!r}; documented: "
                               f"{' or '.join(repr(a) for a in allowed)}", spec.get("quote", "")))
    return out


def convert_opset(model: ir.Model, version: int) -> ir.Model:
    """``model`` converted to ai.onnx opset ``version`` with ``onnx.version_converter``.

    Raises:
        RuntimeError: the converter cannot convert an op (its message names the op).
    """
    if model.opset_imports.get("") == version:
        return model
    try:
        proto = onnx.version_converter.convert_version(cir.to_proto(model), version)
    except Exception as exc:  # noqa: BLE001 - the converter raises bare RuntimeError/ValueError/IndexError
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        first = lines[0] if lines else type(exc).__name__
        raise RuntimeError(first.split("Assertion `false` failed: ")[-1]) from None
    return ir.serde.deserialize_model(proto)


@cache
def load_support_list(filename: str) -> SupportList:
    """Load ``compstack/targets/data/<filename>`` (package data).

    Raises:
        FileNotFoundError: the file is not installed with the package.
    """
    text = resources.files("compstack.targets").joinpath("data", filename).read_text(encoding="utf-8")
    return SupportList(json.loads(text))
