"""``compstack fuzz``: random valid ONNX graphs, differential/crash/equivalence oracles,
deduplicated findings, each reduced and bundled by :func:`compstack.explain.explain`.

Modules: :mod:`.specs` (op specs as data), :mod:`.builder` (the graph under construction),
:mod:`.families` (attribute/shape builders, one module per op group),
:mod:`.generate` (the seeded generator, static and symbolic shapes), :mod:`.ub` (undefined
behaviour), :mod:`.rewrite` (equivalence rewrites), :mod:`.signature` (dedup, known files),
:mod:`.campaign` (the loop), :mod:`.ray_exec` (``--executor ray``: evaluations on Ray actors),
:mod:`.store` (results-database tables); the CLI's printing is :mod:`compstack.cli.fuzz`.
Nothing here imports a stack.
"""

from __future__ import annotations

__all__: list[str] = []
