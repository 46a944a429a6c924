"""Conformance: the ONNX node tests on every target, with a stage funnel.

See :mod:`compstack.conformance.suite` for the run, :mod:`.cases` for the cases,
:mod:`.pool` and :mod:`.worker` for the long-lived isolated workers.
"""

from __future__ import annotations

__all__: list[str] = []
