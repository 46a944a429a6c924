"""A model that does not export becomes rows, not a traceback.

When ``torch.export``, the ONNX exporter or a zoo builder fails
(:class:`compstack.core.errors.ExportError`), ``compstack compare`` still answers: one
``failed`` row per target, at the stage that failed (``torch.export``, ``onnx-export`` or
``build``) with the exporter's one-line reason, written to the results database like any
other row. (No stack ran: every stack needs the common IR, or the native program, which
did not build.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compstack.core.config import Settings
from compstack.core.errors import ExportError
from compstack.core.results import Report, Result, ResultsDB
from compstack.run.faults import set_fault

__all__ = ["export_failed"]


def export_failed(name: str, exc: ExportError, targets: Sequence[str], settings: Settings,
                  on_result: Callable[[Result], None] | None = None) -> Report:
    """The report of a model whose export failed: a row per target (status ``exc.status``:
    ``failed``, or ``crashed``/``timeout`` for a lost export worker), stored.

    Args:
        name: the model spec (``zoo:resnet50``, ``model.py:build``).
        exc: the export failure; its ``stage`` becomes each row's ``stage``, its message
            the row's ``error``.
        targets: resolved target names, in order.
        settings: the results database (``settings.db``).
        on_result: called with each row (progress display).

    Returns:
        A :class:`~compstack.core.results.Report` whose ``model`` has ``name``,
        ``fingerprint`` ``""``, ``nodes`` and ``params`` 0, ``export_stage`` and ``export_error``.

    Raises:
        UserError: the results database cannot be written.
    """
    report = Report(model={"name": name, "fingerprint": "", "nodes": 0, "params": 0, "export_stage": exc.stage,
                           "export_error": str(exc)}, reference={"target": "none (the model did not export)"})
    db = ResultsDB(settings.db, settings.db_busy_timeout_s)
    try:
        db.run_status(report, "running")
        for target in targets:
            row = set_fault(Result(target=target, status=exc.status, stage=exc.stage, error=str(exc),
                                   notes=["the model did not export, so no stack ran"]))
            report.results.append(row)
            db.add(report, row)
            if on_result:
                on_result(row)
        db.run_status(report, "done")
    finally:
        db.close()
    return report
