"""A sweep's summary: the models x targets matrix, geometric-mean speedups, counts."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

__all__ = ["print_summary", "summarize", "summary_from_rows", "summary_of_db"]


def _median(result: Any) -> float | None:
    lat = result.get("latency_ms") if isinstance(result, dict) else result.latency_ms
    if not lat or lat.get("median") is None:
        return None
    return float(lat["median"])


def summary_from_rows(models: list[str], targets: list[str], baseline: str,
                      rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, Any]:
    """The summary of ``rows`` (``(model, target) -> {status, stage, latency_ms, error}``).

    Returns:
        ``matrix``: per model, per target ``{status, stage, latency_ms, speedup, resumed, stored}``
        (``resumed``: the row was reused from an earlier sweep by ``--resume``; ``stored``:
        read from the store, :mod:`compstack.sweep._rowstore`) where
        ``speedup`` = baseline median latency / this target's (above 1: faster than the
        baseline; None unless both are ``ok`` with a latency); ``geomean_speedup``: per
        target, the geometric mean of its speedups and the number of models it covers;
        ``counts``: per target, rows by status and by ``status@stage``.
    """
    matrix: dict[str, dict[str, Any]] = {}
    speedups: dict[str, list[float]] = {t: [] for t in targets}
    counts: dict[str, dict[str, Counter]] = {t: {"status": Counter(), "stage": Counter()} for t in targets}
    for model in models:
        base = rows.get((model, baseline))
        base_ms = _median(base) if base and base["status"] == "ok" else None
        cells: dict[str, Any] = {}
        for t in targets:
            row = rows.get((model, t))
            if row is None:
                cells[t] = {"status": "missing"}
                counts[t]["status"]["missing"] += 1
                continue
            ms = _median(row) if row["status"] == "ok" else None
            speed = base_ms / ms if base_ms and ms else None
            if speed is not None:
                speedups[t].append(speed)
            cells[t] = {"status": row["status"], "stage": row.get("stage") or "", "latency_ms": ms,
                        "speedup": speed, "error": (row.get("error") or "")[:200],
                        "resumed": bool(row.get("resumed")), "stored": bool(row.get("stored"))}
            counts[t]["status"][row["status"]] += 1
            if row["status"] != "ok":
                counts[t]["stage"][f"{row['status']}@{row.get('stage') or '-'}"] += 1
        matrix[model] = cells
    geo = {t: {"geomean": math.exp(sum(map(math.log, v)) / len(v)) if v else None, "models": len(v)}
           for t, v in speedups.items()}
    return {"baseline": baseline, "models": models, "targets": targets, "matrix": matrix,
            "geomean_speedup": geo,
            "counts": {t: {"status": dict(c["status"]), "stage": dict(c["stage"])} for t, c in counts.items()}}


def summarize(sweep: Any) -> dict[str, Any]:
    """:func:`summary_from_rows` of a :class:`compstack.sweep.Sweep`, plus how it ran and
    each model's reference (``references``: spec -> the report's ``reference``: its target,
    precision, ``cached`` when its outputs came from the store, ``error`` and the fallback)."""
    specs = [m.get("spec", m.get("name")) for m in sweep.models]
    rows = {k: {"status": r.status, "stage": r.stage, "latency_ms": r.latency_ms, "error": r.error,
                "resumed": any(n.startswith("resumed: row ") for n in r.notes),
                "stored": "stored_row" in r.flags} for k, r in sweep.rows.items()}
    out = summary_from_rows(specs, sweep.targets, sweep.baseline, rows)
    refs = sum(1 for k in sweep.job_times if k.split("|")[1:2] == ["reference"])
    if sweep.jobs_run == 0 and (sweep.resumed or sweep.stored):
        scheduling = "nothing run: every row was reused (--resume) or read from the store"
    elif "latency_s" in sweep.phases:
        scheduling = ("two phases: every job compiled and run with latency off, as many at a time as the "
                      "executor has slots; then latency measured one job at a time per node")
    else:
        scheduling = "one phase (--no-latency): every job compiled and run, as many at a time as the executor has slots"
    job_s: dict[str, float] = {}  # where the sweep's job time went: seconds per target (and the reference)
    for k, t in sweep.job_times.items():
        job_s[k.split("|")[1]] = job_s.get(k.split("|")[1], 0.0) + t
    out.update(sweep_id=sweep.sweep_id, status=sweep.status, executor=sweep.executor, wall_s=sweep.wall_s,
               phases=sweep.phases, jobs_run=sweep.jobs_run, reference_jobs=refs, resumed=sweep.resumed,
               stored=sweep.stored,
               scheduling=scheduling, job_s={k: round(v, 2) for k, v in sorted(job_s.items())},
               references=sweep.references,
               warnings=sweep.warnings)
    return out


def _cell(c: Mapping[str, Any], baseline: bool) -> str:
    return _status_cell(c, baseline) + (" [dim]*[/]" if c.get("resumed") else "") + (
        " [dim]s[/]" if c.get("stored") else "")


def _status_cell(c: Mapping[str, Any], baseline: bool) -> str:
    status = c["status"]
    if status != "ok":
        return f"[red]{status}[/]" + (f" ({c['stage']})" if c.get("stage") else "") if status not in (
            "unsupported", "unavailable", "missing") else f"[yellow]{status}[/]"
    if c.get("speedup") is not None and not baseline:
        return f"[green]ok[/] {c['speedup']:.2f}x"
    if c.get("latency_ms") is not None:
        from compstack.core.duration import format_ms

        return f"[green]ok[/] {format_ms(c['latency_ms'])}"
    return "[green]ok[/]"


def print_summary(summary: Mapping[str, Any], console: Any = None) -> None:
    """The matrix (a cell: status, and the speedup against the baseline or, for the
    baseline, its median latency), the geometric means, and the counts, with rich."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=max(120, Console().width))
    base = summary["baseline"]
    table = Table(title=f"sweep {summary.get('sweep_id', '')}: speedup = {base} latency / target latency")
    table.add_column("model")
    for t in summary["targets"]:
        table.add_column(t + (" (baseline)" if t == base else ""))
    for model, cells in summary["matrix"].items():
        table.add_row(model, *[_cell(cells[t], t == base) for t in summary["targets"]])
    geo = summary["geomean_speedup"]
    table.add_row("[bold]geomean[/]", *[(f"{geo[t]['geomean']:.2f}x ({geo[t]['models']})"
                                          if geo[t]["geomean"] is not None else "-") for t in summary["targets"]])
    console.print(table)
    if any(c.get("resumed") for cells in summary["matrix"].values() for c in cells.values()):
        console.print("  [dim]*[/] reused by --resume from an earlier sweep's row (not run again)", highlight=False)
    if any(c.get("stored") for cells in summary["matrix"].values() for c in cells.values()):
        console.print("  [dim]s[/] read from the store: an earlier sweep judged this job's numerics (not run again; "
                      "latency, when on, is measured again; --no-cache-results runs it)", highlight=False)
    for t, c in summary["counts"].items():
        status = ", ".join(f"{k} {v}" for k, v in sorted(c["status"].items()))
        stage = ", ".join(f"{k} {v}" for k, v in sorted(c["stage"].items()))
        console.print(f"  {t:<16} {status}" + (f"  [dim]({stage})[/]" if stage else ""), highlight=False)
    if summary.get("wall_s") is not None and "executor" in summary:
        ex = summary["executor"]
        refs = summary.get("reference_jobs")
        of = f" ({refs} of them the models' float64 reference)" if refs else ""
        console.print(f"  {summary.get('jobs_run', 0)} jobs run{of}, {summary.get('resumed', 0)} resumed, "
                      f"{summary.get('stored', 0)} read from the store, "
                      f"{summary['wall_s']:.1f} s on {ex.get('name', '?')} ({ex.get('slots', '?')} slots)",
                      highlight=False)
        if summary.get("scheduling"):
            console.print(f"  [dim]{summary['scheduling']}[/]", highlight=False)


def summary_of_db(db: Any, sweep_id: str | None = None) -> dict[str, Any]:
    """The summary of a stored sweep (the newest when ``sweep_id`` is None), rebuilt
    from its rows.

    Raises:
        UserError: no sweep in the database, or none of that id.
    """
    from compstack.core.errors import UserError

    sweeps = db.sweeps()
    pick = [s for s in sweeps if sweep_id is None or s["sweep_id"] == sweep_id]
    if not pick:
        raise UserError(f"no sweep {sweep_id + ' ' if sweep_id else ''}in the results database {db.path}")
    entry = pick[-1]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for row in db.sweep_rows(entry["sweep_id"]):  # a sweep's rows are named by the model's spec
        lat = json.loads(row.get("latency_json") or "{}")
        rows[(row["model_name"], row["target"])] = {"status": row["status"], "stage": row["stage"],
                                                    "latency_ms": lat if "median" in lat else None,
                                                    "error": row["error"],
                                                    "resumed": row.get("resumed_from") is not None,
                                                    "stored": "stored_row" in json.loads(row.get("flags_json") or "{}")}
    stored = json.loads(entry.get("summary_json") or "{}")
    models = json.loads(entry.get("models_json") or "[]")
    out = summary_from_rows(models, json.loads(entry["targets_json"]), entry["baseline"], rows)
    out.update({k: stored[k] for k in ("executor", "wall_s", "jobs_run", "reference_jobs", "resumed", "stored",
                                                      "scheduling")
                if k in stored})
    out.update(sweep_id=entry["sweep_id"], status=entry["status"])
    return out
