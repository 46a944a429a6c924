"""``compstack fuzz``: random valid ONNX graphs, differential/crash/equivalence oracles,
deduplicated findings, each reduced and bundled by :func:`compstack.explain.explain`.

Modules: :mod:`.specs` (op specs as data), :mod:`.families` (attribute/shape builders),
:mod:`.generate` (the seeded generator), :mod:`.ub` (undefined behaviour),
:mod:`.rewrite` (equivalence rewrites), :mod:`.signature` (dedup, known files),
:mod:`.campaign` (the loop), :mod:`.store` (results-database tables),
:mod:`.commands` (the CLI's printing). Nothing here imports a stack.
"""

from __future__ import annotations

__all__: list[str] = []
