"""The console's tuning table of a ``--tuned`` comparison: each tuned row beside its default
run (issue #26).

One line per row that was tuned (``flags.tuned_as``, or a tuning record from ``--option
tvm-llvm:tune=...``): what "tuned" meant, the default run's status and median, the tuned
median, the speed-up (default median over tuned median) with its significance (the medians'
95 % intervals, :func:`compstack.core.latency.medians_differ`), the tuning seconds and
trials, and the tuning curve's first and last point. The HTML report has the same table
and draws each curve (:func:`compstack.report.html.render`).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from compstack.core.duration import format_ms
from compstack.core.results import Report
from compstack.core.sanitize import rich_text as escape

__all__ = ["print_tuning"]

_SIG = {True: "significant", False: "within noise", None: "no CI"}


def print_tuning(report: Report, console: Console) -> None:
    """Print the tuning table of ``report`` on ``console``; nothing when no row was tuned."""
    rows = [r for r in report.results if r.flags.get("tuned_as") or (r.flags.get("tuning") or {}).get("curve")]
    if not rows or all(str(r.flags.get("tuned_as", "")).startswith("nothing to tune") for r in rows):
        return
    table = Table(title="default vs tuned", title_justify="left")
    for col in ("target", "default", "tuned", "speed-up", "tuning s", "trials", "curve (est. ms)"):
        table.add_column(col, justify="left" if col == "target" else "right", no_wrap=col != "target")
    for r in rows:
        if str(r.flags.get("tuned_as", "")).startswith("nothing to tune"):
            continue
        d, t = r.flags.get("default") or {}, r.flags.get("tuning") or {}
        default = ("ran once" if r.flags.get("tuned_as") else "not run") if not d else (
            format_ms((d.get("latency_ms") or {}).get("median")) if d.get("status") == "ok" else str(d.get("status")))
        tuned = format_ms((r.latency_ms or {}).get("median")) if r.status == "ok" else r.status
        sp = r.flags.get("tuned_speedup")
        pts = (t.get("curve") or {}).get("points") or []
        curve = f"{pts[0]['est_ms']:.4g}@{pts[0]['trials']} → {pts[-1]['est_ms']:.4g}@{pts[-1]['trials']}" if pts else "-"
        table.add_row(escape(r.target), default, tuned,
                      f"x{sp['ratio']:.2f} {_SIG[sp['significant']]}" if sp else "-",
                      "-" if t.get("tune_s") is None else f"{t['tune_s']:.1f}",
                      "-" if t.get("trials") is None else str(t["trials"]), curve)
    console.print(table)
