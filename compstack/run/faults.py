"""Fault and peak memory on the rows of compare and sweep (issue #23, parts 2 and 4).

:func:`finish_row` copies the worker's peak-memory marks onto a
:class:`~compstack.core.results.Result` and sets its ``fault``/``fault_reason`` with
:func:`compstack.analysis.fault.attribute`. For the mismatch of a translated path
(XLA, Inductor, TorchScript from the common IR) compare first runs :func:`eager_check`:
one ``evaluate`` job in mode ``eager`` (:mod:`compstack.run.tasks.evaluate`) runs
compstack's translated program without the compiler on input set 0, and its outputs are
compared with the reference under the row's own tolerances.

:func:`write_fault_bundle` writes the explain bundle of a ``stack`` fault when the user
asked for one (``compare --bundle-faults DIR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from compstack.analysis.fault import attribute, is_translated
from compstack.core.results import Result

__all__ = ["bundle_faults", "eager_check", "finish_row", "set_fault", "write_fault_bundle"]


def finish_row(result: Result, outcome: Any, eager: Callable[[], tuple[bool | None, str]] | None = None,
               reference_error: str = "") -> Result:
    """Set ``result``'s peak memory (from ``outcome.extra``) and fault, in place.

    Args:
        result: the row.
        outcome: the worker's :class:`~compstack.run.jobs.JobOutcome`.
        eager: called for a translated path's mismatch only:
            ``(eager program agrees with the reference, note)`` (:func:`eager_check`).
        reference_error: why no reference ran, when none did (the note of
            :func:`compstack.run.refchoice.reference_note`); used only when the reference
            failed on the model (:func:`compstack.run.refchoice.refused`), not when it was lost.

    Returns:
        ``result``.
    """
    extra = outcome.extra or {}
    result.peak_rss_compile_mb = extra.get("peak_rss_compile_mb")
    result.peak_rss_run_mb = extra.get("peak_rss_run_mb")
    agrees, note = None, ""
    if result.status == "mismatch" and eager is not None and is_translated(result.flags):
        agrees, note = eager()
    from compstack.run.refchoice import refused

    return set_fault(result, agrees, note, reference_error if refused(reference_error) else "")


def set_fault(result: Result, eager_agrees: bool | None = None, eager_note: str = "",
              reference_error: str = "") -> Result:
    """Set ``result``'s ``fault`` and ``fault_reason`` (:func:`compstack.analysis.fault.attribute`)
    and note them, in place; returns ``result``."""
    found = attribute(result, eager_agrees, eager_note, reference_error)
    result.fault, result.fault_reason = found.fault, found.reason
    if found.fault:
        result.notes.append(f"fault: {found.fault}: {found.reason}")
    return result


def eager_check(executor: Any, job: Any, limits: Any, ref: Mapping[str, np.ndarray] | None,
                expected: Mapping[str, Any], rtol: float | None, atol: float | None,
                oracle: Any = None) -> tuple[bool | None, str]:
    """Run ``job`` (an ``evaluate`` job in mode ``eager``) and compare its outputs with
    ``ref`` by the same verdict as the row (:func:`compstack.run.oracle.judge_row`, with
    the comparison's ``oracle`` for the float32 noise floor).

    Returns:
        ``(True, "")`` when every output is within tolerance, ``(False, "")`` when one is
        not, ``(None, why)`` when the check could not be made (no reference, the eager
        run failed).
    """
    from compstack.core.inputs import decode_arrays
    from compstack.run.oracle import judge_row

    if ref is None:
        return None, "no reference outputs"
    outcome = executor.run(job, limits)
    path = Path(job.outputs_path)
    if outcome.status != "ok" or not path.exists():
        return None, f"eager run {outcome.status} in {outcome.stage}: {(outcome.error or '').splitlines()[:1]}"
    with np.load(path, allow_pickle=False) as data:
        actual = decode_arrays({k: data[k] for k in data.files})
    row = Result(target=str(job.target), status="ok")
    judge_row(row, actual, ref, expected, rtol, atol, oracle)
    return row.status == "ok", ""


def write_fault_bundle(model: Any, target: str, result: Result, folder: Path, explain: Callable[..., Any]) -> str:
    """Write the explain bundle of one ``stack`` fault into ``folder/<target>``; returns
    the bundle folder, or a one-line reason when none was written.

    Args:
        model: the model spec or source the row ran.
        target: the row's target.
        result: the row (only ``stack`` faults get a bundle).
        folder: the ``--bundle-faults`` folder.
        explain: ``explain(model, target, out_dir) -> anything`` that writes a bundle
            (the CLI passes :func:`compstack.api.explain_model` bound to its options).
    """
    if result.fault != "stack":
        return ""
    out = folder / target
    try:
        explain(model, target, out)
    except Exception as exc:  # noqa: BLE001 - a bundle that cannot be made is a note, never the row
        return f"no bundle: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return str(out)


def bundle_faults(report: Any, model: Any, folder: Path, explain: Callable[..., Any]) -> dict[str, str]:
    """An explain bundle for every ``stack`` fault of ``report``
    (:func:`write_fault_bundle`); each row gets a note naming its bundle (or why there is
    none).

    Returns:
        ``{target: bundle folder or reason}`` for the rows that have a ``stack`` fault.
    """
    done: dict[str, str] = {}
    for row in report.results:
        if row.fault != "stack":
            continue
        where = write_fault_bundle(model, row.target, row, folder, explain)
        done[row.target] = where
        row.notes.append(f"explain bundle: {where}" if not where.startswith("no bundle") else where)
        if not where.startswith("no bundle"):
            row.flags = {**row.flags, "bundle": where}  # the dashboard links a row's flags["bundle"]
    return done
