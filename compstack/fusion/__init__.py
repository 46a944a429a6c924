"""Fusion analysis and per-kernel timing across stacks, mapped back to the source graph.

``compstack fusion`` and ``compstack profile`` run one worker job per target
(:mod:`compstack.fusion.worker`, job kinds ``kernels`` and ``profile``); each stack's
:meth:`compstack.target.Compiled.kernels` / :meth:`~compstack.target.Compiled.profile`
answer in the common terms of :mod:`compstack.kernels`. The parent side compares the
partitions (:mod:`compstack.fusion.analysis`), attributes time to source nodes, places
kernels on this machine's roofline (:mod:`compstack.fusion.roofline`) and exports Model
Explorer overlays (:mod:`compstack.fusion.explorer`).
"""

from __future__ import annotations

__all__ = ["analysis", "explorer", "roofline", "run", "worker"]
