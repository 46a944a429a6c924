"""The compact comparison table: what fits an 80-column terminal.

Six columns (target, status, max error against the reference, median latency with a unit
chosen per value, speed-up against a baseline, notes as footnote marks), the notes listed
under the table. Figures never wrap and are never elided (``no_wrap`` and a ``min_width``
of the widest cell on every numeric column); text columns fold instead. ``--wide`` (and any
output that is not a terminal) gets :func:`compstack.report.tables.print_report`'s full
table. The layout follows pytest's and rich's habit of a short table plus numbered notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compstack.analysis.verdict import shown_status
from compstack.core.duration import figure
from compstack.core.duration import format_ms as duration
from compstack.core.results import Report, Result

__all__ = ["duration", "footnote_marks", "max_abs_err", "print_compact", "ratio", "speedups", "status_cell"]


def ratio(x: float | None) -> str:
    """A speed-up factor as ``x1.85`` (``x0.00072`` for a slow row, ``x123`` for a fast one)."""
    if x is None:
        return "-"
    return f"x{x:.0f}" if x >= 100 else f"x{x:.2f}" if x >= 1 else f"x{x:.2g}"


def max_abs_err(result: Result, key: str = "max_abs_err") -> float | None:
    """The largest ``max_abs_err`` (or another per-output figure, ``key``: ``max_rel_err``)
    over a row's outputs. None: no output has a finite one (none compared, or every output's
    shape or dtype differed: a table shows ``-`` and the row's note says why)."""
    errs = [o.get(key) for o in result.outputs]
    vals = [float(e) for e in errs if e is not None]
    return max(vals) if vals else None


def speedups(results: Sequence[Result]) -> tuple[str | None, dict[str, float]]:
    """The baseline and each timed row's speed-up: baseline median / row median (above 1:
    faster than the baseline).

    The baseline is the target with the ``baseline`` role (ort-cpu, the one ``sweep``
    takes ratios against, :data:`compstack.targets.ROLES`) when it is timed, else the first
    timed row. Rows without a median get no entry; no timed row gives ``(None, {})``.
    """
    from compstack import targets as registry

    timed = {r.target: float(r.latency_ms["median"]) for r in results
             if r.latency_ms and r.latency_ms.get("median")}
    if not timed:
        return None, {}
    preferred = registry.with_role("baseline")
    base = next((t for t in preferred if t in timed), next(iter(timed)))
    return base, {t: timed[base] / m for t, m in timed.items()}


def footnote_marks(notes_per_row: Mapping[str, Sequence[str]]) -> tuple[dict[str, str], list[str]]:
    """Number the distinct notes of all rows in order of first appearance.

    Returns:
        ``(target -> "1 3", notes)``: each row's marks (space-separated, so the column can
        fold between them) and the note texts, the first being note 1. A note several
        rows share gets one number.
    """
    texts: list[str] = []
    marks: dict[str, str] = {}
    for target, notes in notes_per_row.items():
        nums = []
        for note in notes:
            if note not in texts:
                texts.append(note)
            nums.append(str(texts.index(note) + 1))
        marks[target] = " ".join(dict.fromkeys(nums))
    return marks, texts


def _numeric(table: Table, header: str, cells: Sequence[str]) -> None:
    """A right-aligned column that never wraps and is as wide as its widest cell."""
    width = max([len(header), *map(len, cells)])
    table.add_column(header, justify="right", no_wrap=True, min_width=width)


def print_compact(report: Report, notes: Mapping[str, Sequence[str]], labels: Mapping[str, str],
                  console: Console, styles: Mapping[str, str]) -> None:
    """Print the compact table of ``report`` on ``console`` and its notes under it.

    Args:
        report: the comparison.
        notes: target -> the row's notes (plain text, shown as numbered footnotes).
        labels: target -> the target cell (rich markup: name and dim path/form words).
        console: where to print (its width is the limit; text columns fold to it).
        styles: status -> rich style (any other status prints unstyled: the column is
            generic, whatever status string a row has).
    """
    base, ups = speedups(report.results)
    marks, texts = footnote_marks(notes)
    rows = []
    for r in report.results:
        lat = r.latency_ms or {}
        rows.append((labels[r.target], status_cell(shown_status(r.status, r.outputs), styles),
                     figure(max_abs_err(r), ".2e"), duration(lat.get("median")), ratio(ups.get(r.target)),
                     marks.get(r.target, "")))
    table = Table()
    table.add_column("target", overflow="fold", min_width=8)
    table.add_column("status", no_wrap=True, min_width=max([6, *(len(r.status) for r in report.results)]))
    for i, header in ((2, "max err"), (3, "median"), (4, "speed-up")):
        _numeric(table, header, [row[i] for row in rows])
    table.add_column("notes", overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    ref = report.reference.get("target", "reference")
    console.print(f"  max err: largest absolute difference from the reference ({escape(str(ref))}) over the "
                  f"outputs" + (f"; speed-up: {base}'s median / the row's median" if base else "")
                  + "; every column: --wide or --json", highlight=False, soft_wrap=False)
    for i, text in enumerate(texts, 1):
        console.print(f"  [bold]{i}[/] {escape(text)}", highlight=False)


def status_cell(status: str, styles: Mapping[str, str]) -> str:
    """``status`` as rich markup in its style; a status without one (a new verdict) plain."""
    style = styles.get(status)
    return f"[{style}]{escape(status)}[/]" if style else escape(status)
