"""The package's layers, read from its imports: no upward import, no circle outside one folder,
no stack importing another stack (issue #12, part 1).

Every ``import`` and ``from ... import`` of every module under ``compstack/`` counts, at any
depth (a function-level lazy import is still an import). The layers, bottom to top, are the
top-level folders in :data:`LAYERS`; a module may import only from a lower layer or from its own
layer's folder. Modules of one folder may import each other in a circle; a circle through two
folders fails.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[1] / "compstack"

#: Bottom to top. Folders on one row are siblings: neither may import the other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),          # IR, errors, config, store, results DB, measuring protocol, processes
    ("analysis",),      # pure functions on data: numerics, op stats, kernel maps, IR-text normalisers, fusion
    ("ops",),           # the custom-op registry, specs and kernel builds
    ("frontends",),     # model sources: ONNX, torch, JAX, Python files, frameworks, the zoo
    ("translate",),     # ONNX -> FX / JAX translators that the Inductor, TorchScript and XLA paths run
    ("targets",),       # one folder per stack, the base classes and the registry
    ("run",),           # jobs, tasks, the worker, executors
    ("conformance", "fusion", "explain", "sweep"),
    ("fuzz",),          # reduces and bundles through explain
    ("report",),        # tables, HTML, JUnit, traces
    ("api",),           # the Python API (``compstack/__init__.py`` re-exports it lazily)
    ("cli",),           # one module per command
)
RANK = {name: i for i, row in enumerate(LAYERS) for name in row}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> nx.DiGraph:
    """Module -> module edges of every compstack import (module names, dotted)."""
    files = {module_name(p): p for p in PKG.rglob("*.py")}

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for mod, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t.startswith("compstack"):
                    dst = owner(t)
                    if dst and dst != mod:
                        graph.add_edge(mod, dst)
    return graph


def layer(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "api"


def folder(mod: str, graph: nx.DiGraph) -> str:
    path = PKG.parent / Path(*mod.split("."))
    return mod if (path / "__init__.py").exists() else mod.rpartition(".")[0]


def stack(mod: str) -> str | None:
    parts = mod.split(".")
    if len(parts) > 3 and parts[1] == "targets" and parts[2] != "common":
        return parts[2]
    return None


def violations(graph: nx.DiGraph) -> dict[str, list[str]]:
    """Upward or sibling imports, circles through two folders, stack -> other stack."""
    out: dict[str, list[str]] = defaultdict(list)
    for a, b in graph.edges:
        la, lb = layer(a), layer(b)
        if la not in RANK or lb not in RANK:
            out["unlayered"].append(f"{a} -> {b}")
        elif la != lb and RANK[la] <= RANK[lb] and la != "api":
            out["upward"].append(f"{a} -> {b}")
        sa, sb = stack(a), stack(b)
        if sa and sb and sa != sb:
            out["stack to stack"].append(f"{a} -> {b}")
    for scc in nx.strongly_connected_components(graph):
        if len(scc) > 1 and len({folder(m, graph) for m in scc}) > 1:
            out["circle"].append(" <-> ".join(sorted(scc)))
    return dict(out)


def test_every_module_is_in_a_layer() -> None:
    tops = {layer(m) for m in import_graph().nodes}
    assert tops <= set(RANK) | {"__main__"}, sorted(tops - set(RANK))


def test_no_upward_import_no_circle_across_folders_no_stack_to_stack() -> None:
    bad = violations(import_graph())
    assert not bad, "\n".join(f"{k}: {v}" for k, vs in bad.items() for v in vs)


if __name__ == "__main__":
    g = import_graph()
    for kind, rows in violations(g).items():
        print(f"{kind}: {len(rows)}")
        for r in rows:
            print("  ", r)


def test_module_names_in_strings_exist() -> None:
    """``"compstack.x.y"`` / ``"compstack.x.y:Name"`` literals (registry rows, worker
    modules, lazy tables) name modules that exist: a move that misses one breaks only at
    run time, out of sight of the import walk above."""
    import re

    files = {module_name(p) for p in PKG.rglob("*.py")}
    tops = {m.split(".")[1] for m in files if m.count(".") >= 1}
    pattern = re.compile(r"^compstack(\.\w+)+(:\w+)?$")
    missing = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.match(node.value):
                mod = node.value.partition(":")[0]
                if mod.split(".")[1] in tops and mod not in files:
                    missing.append(f"{module_name(path)}: {node.value!r}")
    assert not missing, "\n".join(missing)
