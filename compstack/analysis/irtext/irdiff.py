"""Diff two IR dumps for compiler engineers (the analysis half of ``compstack diff``).

Three views, each a read-only analysis:

* :func:`op_histogram`: how many ops of each kind a dump holds, per dialect.
* :func:`match_graphs`: for two graph-level stages in compstack's ONNX text form
  (ORT's ``onnx`` vs ``optimized``), which nodes were fused, split, removed, added,
  kept or changed op (the rule is in :func:`match_graphs`).
* :func:`diff_texts`: both dumps normalised (:mod:`compstack.analysis.irtext.normalize`), a
  unified diff, the op histogram with deltas and, for ONNX text, the graph match,
  as one typed :class:`GraphDiff`.

No compiler stack is imported; :mod:`networkx` is imported when a graph is built.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compstack.analysis.irtext.normalize import (
    NormalizeOptions,
    detect_dialect,
    name_stem,
    normalize,
    parse_onnx_node_line,
)

if TYPE_CHECKING:
    import networkx as nx  # type: ignore[import-untyped]

__all__ = [
    "GraphDiff",
    "GraphMatch",
    "HistogramRow",
    "NodeGroup",
    "NodePair",
    "NodeRef",
    "diff_texts",
    "match_graphs",
    "onnx_text_graph",
    "op_histogram",
]


# ---- op histograms -------------------------------------------------------------------------

#: An MLIR statement: optional results (`%a, %b:2 =`), then the op name in custom form
#: (`dialect.op`, or a bare `return`/`call`/`module`) or generic form (`"dialect.op"`).
_MLIR_STMT = re.compile(r'^\s*(?:%[\w$.\-]+(?::\d+)?(?:\s*,\s*%[\w$.\-]+(?::\d+)?)*\s*=\s*)?'
                        r'(?:"(?P<generic>[\w$.]+)"|(?P<op>[a-z_][\w$]*(?:\.[\w$]+)+|return|call_indirect|call|module)\b)')
#: The ONNX op name of `torch.operator "onnx.Conv"`.
_TORCH_OPERATOR = re.compile(r'torch\.operator\s+"(?P<name>[^"]+)"')
_MLIR_BARE = {"return": "func.return", "call": "func.call", "call_indirect": "func.call_indirect",
              "module": "builtin.module"}

#: An HLO instruction: `[ROOT ]%?name = TYPE opcode(`; the type is the shortest prefix
#: after which ` opcode(` follows.
_HLO_STMT = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.+?\s(?P<op>[a-z][\w\-]*)\(")
#: The fusion kind (`kind=kLoop`) and custom-call target of an HLO instruction.
_HLO_KIND = re.compile(r"\bkind=(?P<kind>k\w+)")
_HLO_TARGET = re.compile(r'custom_call_target="(?P<target>[^"]*)"')

#: An LLVM instruction in a function body: optional `%x =`, optional tail-call marker, opcode.
_LLVM_STMT = re.compile(r'^\s+(?:%[\w.\-$"]+\s*=\s*)?(?:(?:tail|musttail|notail)\s+)?(?P<op>[a-z][a-z0-9_.]*)\b')
#: An assembly instruction: an indented mnemonic (directives start with `.`).
_ASM_STMT = re.compile(r"^\s+(?P<op>[a-z][a-z0-9_.]*)\b")

#: TVMScript calls that wrap a callee named by their first argument.
_TVM_WRAPPERS = {"R.call_tir": "call_tir", "R.call_tir_inplace": "call_tir_inplace",
                 "R.call_tir_with_grad": "call_tir_with_grad", "R.call_dps_packed": "call_dps_packed",
                 "R.call_packed": "call_packed", "R.call_pure_packed": "call_pure_packed"}
#: Structural TVMScript calls that are not ops.
_TVM_STRUCTURAL = frozenset({"R.output", "R.func_attr", "T.func_attr"})


def _mlir_histogram(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in text.split("{-#", 1)[0].split("\n"):
        m = _MLIR_STMT.match(line)
        if m is None:
            continue
        op = m.group("generic") or _MLIR_BARE.get(m.group("op"), m.group("op"))
        if op == "torch.operator":
            named = _TORCH_OPERATOR.search(line)
            op = named.group("name") if named else op
        counts[op] += 1
    return counts


def _dotted(node: ast.AST) -> str:
    """``R.nn.conv2d`` for an attribute chain, ``""`` for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _decorator_kind(fn: ast.FunctionDef) -> str:
    for dec in fn.decorator_list:
        name = _dotted(dec.func if isinstance(dec, ast.Call) else dec)
        if name == "T.prim_func":
            return "prim_func"
        if name == "R.function":
            return "function"
    return ""


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, entering ``with``/``if``/``for``/``while`` blocks."""
    for stmt in body:
        yield stmt
        for inner in ("body", "orelse"):
            yield from _statements(getattr(stmt, inner, []) or [])


def _tvm_call_label(call: ast.Call, classes: set[str]) -> str:
    """The histogram label of one Relax call (see :func:`op_histogram`)."""
    name = _dotted(call.func)
    if name in _TVM_WRAPPERS and call.args:
        first = call.args[0]
        callee = _dotted(first).rsplit(".", 1)[-1] if isinstance(first, ast.Attribute) else ""
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            callee = first.value
        elif callee:
            callee = name_stem(callee)
        return f"{_TVM_WRAPPERS[name]}:{callee}" if callee else _TVM_WRAPPERS[name]
    head, _, attr = name.rpartition(".")
    if head in classes and attr:
        return f"call:{name_stem(attr)}"
    return name


def _tvmscript_histogram(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return _tvmscript_histogram_lines(text)
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)} | {"cls"}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        kind = _decorator_kind(fn)
        if kind == "prim_func":
            counts["prim_func"] += 1
        elif kind == "function":
            for stmt in _statements(fn.body):
                value = getattr(stmt, "value", None)
                if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) and isinstance(value, ast.Call):
                    label = _tvm_call_label(value, classes)
                    if label and label not in _TVM_STRUCTURAL:
                        counts[label] += 1
    return counts


def _tvmscript_histogram_lines(text: str) -> Counter[str]:
    """Fallback for TVMScript that does not parse: ``= R.op(`` calls and prim_func decorators."""
    counts: Counter[str] = Counter()
    counts["prim_func"] = len(re.findall(r"^\s*@T\.prim_func\b", text, re.M))
    # A binding or statement whose value is a Relax call.
    for m in re.finditer(r"^\s*(?:[\w, ]+(?::[^=]*)?=\s*)?(?P<op>R\.[\w.]+)\(", text, re.M):
        if m.group("op") not in _TVM_STRUCTURAL:
            counts[m.group("op")] += 1
    return +counts


def _onnx_text_histogram(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in text.split("\n"):
        node = parse_onnx_node_line(line)
        if node is not None:
            counts[node.op] += 1
    return counts


def _hlo_histogram(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in text.split("\n"):
        m = _HLO_STMT.match(line)
        if m is None:
            continue
        op = m.group("op")
        extra = _HLO_KIND.search(line) if op == "fusion" else _HLO_TARGET.search(line) if op == "custom-call" else None
        counts[f"{op}:{extra.group(1)}" if extra else op] += 1
    return counts


def _llvm_histogram(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    inside = False
    for line in text.split("\n"):
        if line.startswith("define "):
            inside = True
        elif line.startswith("}"):
            inside = False
        elif inside:
            m = _LLVM_STMT.match(line)
            if m:
                counts[m.group("op")] += 1
    return counts


def _asm_histogram(text: str) -> Counter[str]:
    return Counter(m.group("op") for m in map(_ASM_STMT.match, text.split("\n")) if m)


_HISTOGRAMS: dict[str, Callable[[str], Counter[str]]] = {
    "mlir": _mlir_histogram,
    "tvmscript": _tvmscript_histogram,
    "onnx-text": _onnx_text_histogram,
    "hlo": _hlo_histogram,
    "llvm": _llvm_histogram,
    "asm": _asm_histogram,
    "python": lambda text: Counter(),
    "text": lambda text: Counter(),
}


def op_histogram(text: str, dialect: str | None = None) -> Counter[str]:
    """Count the ops of a dump by kind.

    Kinds per dialect:

    * ``mlir``: the op name of every statement (``linalg.generic``, ``flow.dispatch``,
      ``flow.executable``, ``stream.cmd.dispatch``, ``util.global``; the bare
      ``return``, ``call`` and ``module`` count as ``func.return``, ``func.call``,
      ``builtin.module``); ``torch.operator
      "onnx.Conv"`` counts as ``onnx.Conv``. The ``{-# #-}`` section is skipped.
    * ``tvmscript``: each ``@T.prim_func`` definition counts as ``prim_func`` (its
      body is not counted); in ``@R.function`` bodies, the call of every binding or
      expression statement: ``R.nn.conv2d``; ``R.call_tir(cls.fused_conv2d_add1, ...)``
      -> ``call_tir:fused_conv2d_add`` (uniqueness digits dropped, see
      :func:`~compstack.analysis.irtext.normalize.name_stem`); ``R.call_packed("vm.builtin.x")``
      -> ``call_packed:vm.builtin.x``; a direct ``cls.f(...)`` -> ``call:f``.
      ``R.output`` and ``R.func_attr`` are not counted.
    * ``onnx-text``: the op type of each node (``domain::Op``, plain ``Op`` for ai.onnx).
    * ``hlo``: the opcode of each instruction in every computation; a fusion counts as
      ``fusion:<kind>`` (``fusion:kLoop``), a custom call as ``custom-call:<target>``.
    * ``llvm``: instruction opcodes in ``define`` bodies; ``asm``: mnemonics.
    * ``python``, ``text``: nothing.

    Args:
        text: the dump (raw or normalised).
        dialect: one of :data:`~compstack.analysis.irtext.normalize.DIALECTS`; default: detected.

    Returns:
        A :class:`collections.Counter` of op kind -> count.

    Raises:
        ValueError: unknown ``dialect``.
    """
    dialect = dialect or detect_dialect(text)
    if dialect not in _HISTOGRAMS:
        raise ValueError(f"unknown dialect {dialect!r}")
    return _HISTOGRAMS[dialect](text)


# ---- graph match (ONNX text) --------------------------------------------------------------

@dataclass(frozen=True)
class NodeRef:
    """A node of a graph: its name and ``domain::Op``."""

    name: str
    op: str

    def __str__(self) -> str:
        return f"{self.name} [{self.op}]"


@dataclass(frozen=True)
class NodeGroup:
    """One node and the nodes of the other graph it corresponds to.

    For ``fused``: ``node`` is in B and ``covers`` are the A nodes it replaces. For
    ``split``: ``node`` is in A and ``covers`` are the B nodes that each cover it.
    """

    node: NodeRef
    covers: tuple[NodeRef, ...]


@dataclass(frozen=True)
class NodePair:
    """A 1:1 correspondence: node ``a`` of A and node ``b`` of B."""

    a: NodeRef
    b: NodeRef


@dataclass(frozen=True)
class GraphMatch:
    """How the nodes of graph B correspond to those of graph A (see :func:`match_graphs`).

    Attributes:
        fused: B nodes covering two or more A nodes, in B order.
        split: A nodes covered by two or more B nodes, in A order.
        removed: A nodes covered by no B node (folded constants, dead code).
        added: B nodes covering no A node (layout reorders, casts).
        kept: 1:1 pairs with the same op.
        changed_op: 1:1 pairs whose op differs (``Conv`` -> ``com.microsoft::FusedConv``).
    """

    fused: tuple[NodeGroup, ...] = ()
    split: tuple[NodeGroup, ...] = ()
    removed: tuple[NodeRef, ...] = ()
    added: tuple[NodeRef, ...] = ()
    kept: tuple[NodePair, ...] = ()
    changed_op: tuple[NodePair, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain data: lists of ``{"name", "op"}`` dicts."""
        def ref(r: NodeRef) -> dict[str, str]:
            return {"name": r.name, "op": r.op}

        return {
            "fused": [{"node": ref(g.node), "covers": [ref(c) for c in g.covers]} for g in self.fused],
            "split": [{"node": ref(g.node), "covers": [ref(c) for c in g.covers]} for g in self.split],
            "removed": [ref(r) for r in self.removed],
            "added": [ref(r) for r in self.added],
            "kept": [{"a": ref(p.a), "b": ref(p.b)} for p in self.kept],
            "changed_op": [{"a": ref(p.a), "b": ref(p.b)} for p in self.changed_op],
        }


def onnx_text_graph(text: str) -> nx.DiGraph:
    """Parse :func:`compstack.core.ir.to_text` output into a :class:`networkx.DiGraph`.

    Nodes are node names (``Op_<i>`` when the text has none; ``name#k`` for
    repeats) with attributes ``op``, ``inputs``, ``outputs`` (tensor-name tuples,
    ``""`` for a missing optional input) and ``index`` (position in the text). An
    edge ``u -> v`` means v reads a tensor u writes; its ``tensors`` attribute lists
    them. ``graph.graph["inputs"]``, ``["initializers"]`` and ``["outputs"]`` list
    the graph's value names.
    """
    import networkx as nx

    g = nx.DiGraph(inputs=[], initializers=[], outputs=[])
    producer: dict[str, str] = {}
    kinds = {"input": "inputs", "init": "initializers", "output": "outputs"}
    for line in text.split("\n"):
        value = re.match(r"^\s+(input|init|output)\s+%(.+?): ", line)
        if value is not None:
            g.graph[kinds[value.group(1)]].append(value.group(2))
            continue
        node = parse_onnx_node_line(line)
        if node is None:
            continue
        name = base = node.name or f"{node.op.rsplit('::', 1)[-1]}_{g.number_of_nodes()}"
        k = 1
        while name in g:
            name, k = f"{base}#{k}", k + 1
        g.add_node(name, op=node.op, inputs=tuple(node.inputs), outputs=tuple(node.outputs),
                   index=g.number_of_nodes())
        for t in node.inputs:
            if t in producer:
                src = producer[t]
                if g.has_edge(src, name):
                    g.edges[src, name]["tensors"].append(t)
                else:
                    g.add_edge(src, name, tensors=[t])
        for t in node.outputs:
            producer[t] = name
    return g


def _tensor_names(g: nx.DiGraph) -> set[str]:
    names = set(g.graph["inputs"]) | set(g.graph["initializers"]) | set(g.graph["outputs"])
    for _, data in g.nodes(data=True):
        names.update(t for t in data["inputs"] + data["outputs"] if t)
    return names


def _ordered(g: nx.DiGraph, nodes: set[str]) -> list[str]:
    return sorted(nodes, key=lambda n: g.nodes[n]["index"])


def _consumers(g: nx.DiGraph) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in _ordered(g, set(g.nodes)):
        for t in g.nodes[n]["inputs"]:
            if t:
                out.setdefault(t, []).append(n)
    return out


def _producers(g: nx.DiGraph) -> dict[str, str]:
    return {t: n for n in g.nodes for t in g.nodes[n]["outputs"]}


def _b_regions(gb: nx.DiGraph, shared: set[str]) -> list[list[str]]:
    """B nodes grouped by the B-only tensors that connect them, in B order."""
    import networkx as nx

    links = nx.Graph()
    links.add_nodes_from(gb.nodes)
    for u, v, data in gb.edges(data=True):
        if any(t not in shared for t in data["tensors"]):
            links.add_edge(u, v)
    regions = [_ordered(gb, set(c)) for c in nx.connected_components(links)]
    return sorted(regions, key=lambda r: gb.nodes[r[0]]["index"])


def _between(ga: nx.DiGraph, ins: set[str], outs: set[str], shared: set[str]) -> set[str]:
    """A nodes on a path from a tensor of ``ins`` to one of ``outs`` whose inner
    tensors all exist in A only."""
    consumers, producers = _consumers(ga), _producers(ga)
    forward: set[str] = set()
    todo = list(ins)
    while todo:
        for n in consumers.get(todo.pop(), []):
            if n not in forward:
                forward.add(n)
                todo += [t for t in ga.nodes[n]["outputs"] if t not in shared]
    backward: set[str] = set()
    todo = list(outs)
    while todo:
        p = producers.get(todo.pop())
        if p is not None and p not in backward:
            backward.add(p)
            todo += [t for t in ga.nodes[p]["inputs"] if t and t not in shared]
    return forward & backward


def _local_op(op: str) -> str:
    return op.rsplit("::", 1)[-1]


def _nearest(ga: nx.DiGraph, start: str, owner: dict[str, str], pool: set[str]) -> str | None:
    """Owner of the nearest matched A node, searching ancestors then descendants in ``pool``."""
    for step in (ga.predecessors, ga.successors):
        frontier, seen = [start], {start}
        while frontier:
            hits = [n for n in frontier if n != start and n in owner]
            if hits:
                return owner[_ordered(ga, set(hits))[0]]
            nxt = {m for n in frontier for m in step(n) if m in pool and m not in seen}
            seen |= nxt
            frontier = _ordered(ga, nxt)
    return None


def _distribute(ga: nx.DiGraph, gb: nx.DiGraph, region: list[str], a_nodes: set[str]) -> dict[str, str]:
    """Assign each A node of a region's span to one B node of the region (A name -> B name)."""
    if len(region) == 1:
        return {a: region[0] for a in a_nodes}
    owner: dict[str, str] = {}
    for b in region:
        b_op = _local_op(gb.nodes[b]["op"])
        for a in _ordered(ga, a_nodes):
            a_op = _local_op(ga.nodes[a]["op"])
            if a not in owner and (a_op == b_op or a_op in b_op):
                owner[a] = b
                break
    principal = next((b for b in region if b in owner.values()), region[0])
    result = dict(owner)
    for a in _ordered(ga, a_nodes - set(owner)):
        result[a] = _nearest(ga, a, owner, a_nodes) or principal
    return result


def _ref(g: nx.DiGraph, n: str) -> NodeRef:
    return NodeRef(n, g.nodes[n]["op"])


def match_graphs(a_text: str, b_text: str) -> GraphMatch:
    """Match the nodes of two graphs in compstack's ONNX text form.

    Tensors present in both graphs (same name: ORT keeps tensor names) anchor the
    match. The rule:

    1. B nodes connected by B-only tensors form a region (one node, usually; a
       layout-converted chain such as ``nchwc::Conv -> ReorderOutput``, or a node
       decomposed into several).
    2. A region covers the A nodes on a path in A from a shared tensor the region
       reads to a shared tensor it writes, through A-only tensors (a shared tensor
       inside the path would be produced by another B node).
    3. In a region of one node, that node covers them all. Otherwise each B node
       (in B order) takes the first uncovered A node with the same op type (ignoring
       the domain; ``Conv`` also matches ``FusedConv``), and every other A node goes
       to the B node of its nearest matched A ancestor (else descendant; else the
       region's first matching node).

    Then: a B node covering >= 2 A nodes is ``fused``; an A node covered by >= 2 B
    nodes (of different regions) is ``split``; A nodes covered by none are
    ``removed``; B nodes covering none are ``added``; the remaining 1:1 pairs are
    ``kept`` (same ``domain::Op``) or ``changed_op``.

    Args:
        a_text: graph A (e.g. ORT stage ``onnx``), as :func:`compstack.core.ir.to_text` prints it.
        b_text: graph B (e.g. ORT stage ``optimized``).

    Returns:
        The :class:`GraphMatch`; node lists in their graph's order.
    """
    ga, gb = onnx_text_graph(a_text), onnx_text_graph(b_text)
    shared = _tensor_names(ga) & _tensor_names(gb)
    cover: dict[str, list[str]] = {b: [] for b in _ordered(gb, set(gb.nodes))}
    covered_by: dict[str, list[str]] = {a: [] for a in _ordered(ga, set(ga.nodes))}
    for region in _b_regions(gb, shared):
        ins = {t for b in region for t in gb.nodes[b]["inputs"] if t in shared}
        outs = {t for b in region for t in gb.nodes[b]["outputs"] if t in shared}
        for a, b in sorted(_distribute(ga, gb, region, _between(ga, ins, outs, shared)).items(),
                           key=lambda ab: ga.nodes[ab[0]]["index"]):
            cover[b].append(a)
            covered_by[a].append(b)
    for a, b_nodes in covered_by.items():
        covered_by[a] = _ordered(gb, set(b_nodes))
    return _classify(ga, gb, cover, covered_by)


def _classify(ga: nx.DiGraph, gb: nx.DiGraph, cover: dict[str, list[str]],
              covered_by: dict[str, list[str]]) -> GraphMatch:
    kept: list[NodePair] = []
    changed: list[NodePair] = []
    for b, a_nodes in cover.items():
        if len(a_nodes) == 1 and len(covered_by[a_nodes[0]]) == 1:
            pair = NodePair(_ref(ga, a_nodes[0]), _ref(gb, b))
            (kept if pair.a.op == pair.b.op else changed).append(pair)
    return GraphMatch(
        fused=tuple(NodeGroup(_ref(gb, b), tuple(_ref(ga, a) for a in a_nodes))
                    for b, a_nodes in cover.items() if len(a_nodes) >= 2),
        split=tuple(NodeGroup(_ref(ga, a), tuple(_ref(gb, b) for b in b_nodes))
                    for a, b_nodes in covered_by.items() if len(b_nodes) >= 2),
        removed=tuple(_ref(ga, a) for a, b_nodes in covered_by.items() if not b_nodes),
        added=tuple(_ref(gb, b) for b, a_nodes in cover.items() if not a_nodes),
        kept=tuple(kept),
        changed_op=tuple(changed),
    )


# ---- the diff ------------------------------------------------------------------------------

@dataclass(frozen=True)
class HistogramRow:
    """Count of one op kind in each dump."""

    op: str
    a: int
    b: int

    @property
    def delta(self) -> int:
        """``b - a``."""
        return self.b - self.a


@dataclass(frozen=True)
class GraphDiff:
    """The diff of two IR dumps (:func:`diff_texts`).

    Attributes:
        a_name, b_name: the labels of the two sides (file names, ``target:stage``).
        a_dialect, b_dialect: the dialect each side was normalised as.
        equal: True when the normalised texts are identical.
        unified: ``difflib.unified_diff`` lines of the normalised texts (no newlines).
        histogram: op kind -> :class:`HistogramRow`, every kind of either side,
            sorted by kind.
        added: number of op kinds present in b only.
        removed: number of op kinds present in a only.
        changed: number of op kinds present in both with different counts.
        graph: the node match when both sides are ONNX text, else None.
    """

    a_name: str
    b_name: str
    a_dialect: str
    b_dialect: str
    equal: bool
    unified: list[str] = field(default_factory=list)
    histogram: dict[str, HistogramRow] = field(default_factory=dict)
    added: int = 0
    removed: int = 0
    changed: int = 0
    graph: GraphMatch | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data (JSON-ready): the fields, histogram rows with their delta."""
        return {
            "a_name": self.a_name, "b_name": self.b_name,
            "a_dialect": self.a_dialect, "b_dialect": self.b_dialect,
            "equal": self.equal, "unified": list(self.unified),
            "histogram": {k: {"a": r.a, "b": r.b, "delta": r.delta} for k, r in self.histogram.items()},
            "added": self.added, "removed": self.removed, "changed": self.changed,
            "graph": self.graph.to_json() if self.graph is not None else None,
        }

    def stat_text(self) -> list[str]:
        """A short summary as plain text lines: the op kinds whose count changed
        (``a``, ``b``, signed delta), then the fused/split/added/removed/changed-op
        nodes of the graph match."""
        plus = sum(1 for ln in self.unified if ln.startswith("+") and not ln.startswith("+++"))
        minus = sum(1 for ln in self.unified if ln.startswith("-") and not ln.startswith("---"))
        state = "equal" if self.equal else f"{plus} line{'s' * (plus != 1)} added, {minus} removed"
        lines = [f"{self.a_name} ({self.a_dialect}) vs {self.b_name} ({self.b_dialect}): {state}"]
        rows = [r for r in self.histogram.values() if r.delta]
        if rows:
            width = max(len("op kind"), *(len(r.op) for r in rows))
            lines.append(f"  {'op kind':<{width}}  {'a':>6}  {'b':>6}  {'delta':>6}")
            lines += [f"  {r.op:<{width}}  {r.a:>6}  {r.b:>6}  {r.delta:>+6}" for r in rows]
        unchanged = len(self.histogram) - len(rows)
        lines.append(f"  op kinds: {self.added} added, {self.removed} removed, {self.changed} changed, "
                     f"{unchanged} unchanged")
        if self.graph is not None:
            lines += _graph_lines(self.graph)
        return lines


def _graph_lines(g: GraphMatch) -> list[str]:
    counts = (f"  nodes: {len(g.fused)} fused, {len(g.split)} split, {len(g.added)} added, "
              f"{len(g.removed)} removed, {len(g.changed_op)} changed op, {len(g.kept)} kept")
    lines = [counts]
    lines += [f"    fused    {grp.node} <- {', '.join(map(str, grp.covers))}" for grp in g.fused]
    lines += [f"    split    {grp.node} -> {', '.join(map(str, grp.covers))}" for grp in g.split]
    lines += [f"    added    {r}" for r in g.added]
    lines += [f"    removed  {r}" for r in g.removed]
    lines += [f"    changed  {p.a} -> {p.b}" for p in g.changed_op]
    return lines


def _histogram_rows(a: Counter[str], b: Counter[str]) -> dict[str, HistogramRow]:
    return {op: HistogramRow(op, a.get(op, 0), b.get(op, 0)) for op in sorted(set(a) | set(b))}


def diff_texts(a: str, b: str, *, a_name: str = "a", b_name: str = "b", dialect: str | None = None,
               options: NormalizeOptions = NormalizeOptions()) -> GraphDiff:
    """Normalise two dumps and diff them.

    Args:
        a, b: the two dumps (any dialect of :mod:`compstack.analysis.irtext.normalize`).
        a_name, b_name: labels for the unified diff and the summary.
        dialect: the dialect of both; default: detected for each side.
        options: the normalisation steps.

    Returns:
        A :class:`GraphDiff`: ``unified`` diff and ``histogram`` of the normalised
        texts; ``graph`` (:func:`match_graphs` on the texts as given, whose tensor
        names anchor the match) when both sides are ``onnx-text``.

    Raises:
        ValueError: unknown ``dialect``.
    """
    a_dialect = dialect or detect_dialect(a)
    b_dialect = dialect or detect_dialect(b)
    na, nb = normalize(a, a_dialect, options), normalize(b, b_dialect, options)
    unified = list(difflib.unified_diff(na.splitlines(), nb.splitlines(), fromfile=a_name, tofile=b_name,
                                        lineterm=""))
    rows = _histogram_rows(op_histogram(na, a_dialect), op_histogram(nb, b_dialect))
    both = a_dialect == b_dialect == "onnx-text"
    return GraphDiff(
        a_name=a_name, b_name=b_name, a_dialect=a_dialect, b_dialect=b_dialect,
        equal=na == nb, unified=unified, histogram=rows,
        added=sum(1 for r in rows.values() if r.a == 0 and r.b > 0),
        removed=sum(1 for r in rows.values() if r.a > 0 and r.b == 0),
        changed=sum(1 for r in rows.values() if r.a > 0 and r.b > 0 and r.delta),
        graph=match_graphs(a, b) if both else None,
    )
