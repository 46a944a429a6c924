"""Fusion analysis and per-kernel timing across stacks, mapped back to the source graph.

``compstack fusion`` and ``compstack profile`` run one worker job per target
(:mod:`compstack.run.tasks.kernels`, job kinds ``kernels`` and ``profile``); each stack's
:meth:`compstack.targets.base.Compiled.kernels` / :meth:`~compstack.targets.base.Compiled.profile`
answer in the common terms of :mod:`compstack.analysis.kernels`. The parent side compares the
partitions (:mod:`compstack.analysis.fusion.analysis`), attributes time to source nodes, places
kernels on this machine's roofline (:mod:`compstack.analysis.fusion.roofline`) and exports Model
Explorer overlays (:mod:`compstack.analysis.fusion.explorer`).
"""

from __future__ import annotations

__all__ = ["analysis", "explorer", "roofline", "run", "worker"]
