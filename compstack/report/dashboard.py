"""``compstack report --sweep``: a stored sweep as the cross-stack dashboard.

The page is the PyTorch Inductor performance dashboard's layout, across stacks:

* per stack (one column per target name, so ``ort-cpu@1.20.0`` and ``ort-cpu@1.19.0``
  are two stacks): the pass rate (the numerics agree: ``ok``, and ``imprecise`` counted
  as agreeing but shown apart), the geometric-mean speed-up over a baseline, the
  geometric-mean compile time, the peak memory, the faults and a funnel of the stage
  where each failure happened;
* per model: every stack's status, fault, latency, compile time and peak memory, linked
  to the row's explain bundle when the row names one;
* a history view when the database holds earlier sweeps of the same model set: status
  flips and latency ratios, labelled with each side's stack version.

Rows are read through :class:`compstack.core.results.ResultsDB`; every field a newer
compstack adds (``fault``, ``fault_reason``, ``peak_rss_compile_mb``, ``peak_rss_run_mb``,
``bundle``) may be absent or None: the page then says "not recorded". One self-contained
HTML file: inline CSS, no script, nothing fetched.
"""

from __future__ import annotations

import datetime
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from compstack.core.errors import UserError

__all__ = ["AGREE", "Dashboard", "FUNNEL", "load_dashboard", "render_dashboard", "write_dashboard"]

_TEMPLATE = Path(__file__).parent / "templates" / "dashboard.html.j2"
#: Statuses whose numerics agree with the reference (``imprecise``: agrees, shown apart).
AGREE = ("ok", "imprecise")
#: Failure stages in pipeline order (:class:`compstack.core.results.Result`'s ``stage``).
FUNNEL = ("import", "export", "lower", "compile", "run", "latency", "compare")
#: Model rows listed per history comparison at most (the counts cover all of them).
MAX_CHANGES = 200
#: A latency ratio (new / old median) outside [1/x, x] is listed as a change.
RATIO_LISTED = 1.10

Dashboard = dict[str, Any]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _geomean(values: list[float]) -> float | None:
    pos = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, pos)) / len(pos)) if pos else None


def _json(raw: Any, default: Any) -> Any:
    try:
        out = json.loads(raw) if raw else default
    except (TypeError, ValueError):
        return default
    return out if isinstance(out, type(default)) else default


def _href(path: Any) -> str:
    """A link to a local bundle folder (``file:`` URI or a relative path; never a scheme from data)."""
    if not isinstance(path, str) or not path:
        return ""
    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(path)


def _cell(row: dict[str, Any]) -> dict[str, Any]:
    """One stored result row as a dashboard cell (every optional column read with ``.get``)."""
    lat = _json(row.get("latency_json"), {})
    flags = _json(row.get("flags_json"), {})
    rss = [_num(row.get("peak_rss_compile_mb")), _num(row.get("peak_rss_run_mb"))]
    bundle = row.get("bundle") or row.get("explain_bundle") or flags.get("bundle") or ""
    return {"status": row.get("status") or "missing", "stage": row.get("stage") or "",
            "error": (row.get("error") or "")[:240], "fault": row.get("fault") or "",
            "fault_reason": (row.get("fault_reason") or "")[:240], "compile_s": _num(row.get("compile_s")),
            "latency_ms": _num(lat.get("median")), "ci95": lat.get("ci95"), "rss_compile_mb": rss[0], "rss_run_mb": rss[1],
            "peak_mb": max((v for v in rss if v is not None), default=None), "bundle": _href(bundle),
            "versions": _json(row.get("versions_json"), {}), "speedup": None,
            "resumed": row.get("resumed_from") is not None, "stored": (flags.get("stored_row") or {}).get("sweep", "") if isinstance(flags.get("stored_row"), dict) else ""}


def _version(target: str, cells: dict[str, dict[str, Any]]) -> str:
    """``ort-cpu@1.20.0`` -> ``1.20.0``; else the stack's package versions of its first row."""
    if "@" in target:
        return target.split("@", 1)[1]
    for c in cells.values():
        if c["versions"]:
            return ", ".join(f"{k} {v}" for k, v in list(c["versions"].items())[:2])
    return "?"


def _stack(target: str) -> str:
    return target.split("@", 1)[0]


def _stats(target: str, models: list[str], grid: dict[str, dict[str, dict[str, Any]]], baseline: str,
           ) -> dict[str, Any]:
    """Per-stack figures; sets each cell's ``speedup`` (baseline median / this median)."""
    speed, compile_s, peaks = [], [], []
    funnel: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    agree = imprecise = 0
    for m in models:
        c = grid[m][target]
        if c["status"] in AGREE:
            agree += 1
            imprecise += c["status"] == "imprecise"
            base = grid[m].get(baseline, {})
            if base.get("status") in AGREE and base.get("latency_ms") and c["latency_ms"]:
                c["speedup"] = base["latency_ms"] / c["latency_ms"]
                speed.append(c["speedup"])
        else:
            funnel[c["stage"] or c["status"]] += 1
            faults[c["fault"] or "not recorded"] += 1
        if c["compile_s"] is not None and c["compile_s"] > 0:
            compile_s.append(c["compile_s"])
        if c["peak_mb"] is not None:
            peaks.append((c["peak_mb"], m))
    top = max(peaks, default=None)
    return {"target": target, "models": len(models), "agree": agree, "imprecise": imprecise,
            "pass_rate": agree / len(models) if models else 0.0, "geomean_speedup": _geomean(speed),
            "speedup_models": len(speed), "geomean_compile_s": _geomean(compile_s), "compiled": len(compile_s),
            "peak_mb": top[0] if top else None, "peak_model": top[1] if top else "",
            "funnel": dict(funnel), "faults": dict(faults), "failed": len(models) - agree}


def _grid(db: Any, entry: dict[str, Any]) -> tuple[list[str], list[str], dict[str, dict[str, dict[str, Any]]]]:
    """(models, targets, model -> target -> cell) of one stored sweep; the last row of a pair wins."""
    models = [str(m) for m in _json(entry.get("models_json"), [])]
    targets = [str(t) for t in _json(entry.get("targets_json"), [])]
    grid: dict[str, dict[str, dict[str, Any]]] = {}
    for row in db.sweep_rows(entry["sweep_id"]):
        model, target = str(row.get("model_name") or ""), str(row.get("target") or "")
        if model not in models:
            models.append(model)
        if target not in targets:
            targets.append(target)
        grid.setdefault(model, {})[target] = _cell(row)
    for m in models:
        for t in targets:
            grid.setdefault(m, {}).setdefault(t, _cell({"status": "missing"}))
    return models, targets, grid


def _changes(label: str, old_t: str, new_t: str, old_grid: dict[str, Any], new_grid: dict[str, Any],
             models: list[str]) -> dict[str, Any]:
    """Status flips and latency ratios (new / old median) of one stack between two columns.

    A ratio is ``significant`` when the two medians' 95 % intervals do not overlap
    (:func:`compstack.core.latency.medians_differ`; None: a cell has no interval). A
    *regression* is a flip from agreeing to not (``broke``) or a significant slow-down past
    ``RATIO_LISTED``; ``regressions`` counts both and each listed ratio says ``regression``.
    """
    from compstack.core.latency import medians_differ

    flips, ratios = [], []
    for m in models:
        a, b = old_grid[m][old_t], new_grid[m][new_t]
        if a["status"] != b["status"]:
            kind = ("fixed" if b["status"] in AGREE and a["status"] not in AGREE else
                    "broke" if a["status"] in AGREE and b["status"] not in AGREE else "changed")
            flips.append({"model": m, "before": a["status"], "after": b["status"], "kind": kind,
                          "stage": b["stage"] or a["stage"], "error": b["error"] or a["error"]})
        if a["status"] in AGREE and b["status"] in AGREE and a["latency_ms"] and b["latency_ms"]:
            ratio, sig = b["latency_ms"] / a["latency_ms"], medians_differ(a, b)
            ratios.append({"model": m, "before": a["latency_ms"], "after": b["latency_ms"], "ratio": ratio,
                           "significant": sig, "regression": bool(sig) and ratio > RATIO_LISTED,
                           "judged": ("regression: significant" if sig and ratio > RATIO_LISTED else
                                      {True: "significant", False: "intervals overlap (noise)",
                                       None: "no interval"}[sig])})
    listed = [r for r in ratios if not 1 / RATIO_LISTED <= r["ratio"] <= RATIO_LISTED]
    listed.sort(key=lambda r: -abs(math.log(r["ratio"])))
    kinds = Counter(f["kind"] for f in flips)
    old_cells = {m: old_grid[m][old_t] for m in models}
    new_cells = {m: new_grid[m][new_t] for m in models}
    return {"label": label, "old": old_t, "new": new_t, "old_version": _version(old_t, old_cells),
            "new_version": _version(new_t, new_cells),
            "fixed": kinds["fixed"], "broke": kinds["broke"], "changed": kinds["changed"], "flips": flips[:MAX_CHANGES],
            "flips_total": len(flips), "geomean_ratio": _geomean([r["ratio"] for r in ratios]),
            "timed": len(ratios), "ratios": listed[:MAX_CHANGES], "ratios_total": len(listed),
            "regressions": kinds["broke"] + sum(r["regression"] for r in ratios)}


def _partner(target: str, targets: list[str]) -> str | None:
    """The column of ``target``'s stack in an earlier sweep: the same name, else one release of its stack."""
    if target in targets:
        return target
    same = [t for t in targets if _stack(t) == _stack(target)]
    return same[-1] if same else None


def _history(db: Any, entry: dict[str, Any], models: list[str], targets: list[str],
             grid: dict[str, Any]) -> dict[str, Any]:
    """Earlier sweeps of the same model set, and what changed since the newest of them."""
    same = [s for s in db.sweeps() if s["sweep_id"] != entry["sweep_id"]
            and (s.get("started") or 0) <= (entry.get("started") or 0)
            and sorted(map(str, _json(s.get("models_json"), []))) == sorted(models)]
    timeline, changes = [], []
    for s in same[-10:]:
        _, ts, g = _grid(db, s)
        timeline.append({"sweep_id": s["sweep_id"], "when": _when(s.get("started")), "status": s.get("status") or "",
                         "agree": {t: sum(g[m][t]["status"] in AGREE for m in models) for t in ts}})
    if same:
        prev = same[-1]
        _, prev_targets, prev_grid = _grid(db, prev)
        for t in targets:
            p = _partner(t, prev_targets)
            if p is not None:
                changes.append(_changes(f"since sweep {prev['sweep_id']}", p, t, prev_grid, grid, models))
    by_stack: dict[str, list[str]] = {}
    for t in targets:  # releases of one stack side by side in this sweep
        by_stack.setdefault(_stack(t), []).append(t)
    for cols in by_stack.values():
        for old, new in zip(cols, cols[1:]):
            changes.append(_changes("in this sweep", old, new, grid, grid, models))
    return {"earlier": timeline, "changes": changes, "model_count": len(models)}


def _when(t: Any) -> str:
    if not isinstance(t, (int, float)) or not t:
        return "-"
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pick_baseline(wanted: str | None, stored: str | None, targets: list[str]) -> str:
    if wanted:
        if wanted not in targets:
            raise UserError(f"--baseline {wanted}: not a target of this sweep ({', '.join(targets)})")
        return wanted
    if stored in targets:
        return str(stored)
    from compstack import targets as registry

    usual = registry.role_target("baseline")[0]  # the registry's baseline stack (ONNX Runtime)
    return next((t for t in targets if _stack(t) == usual), targets[0] if targets else "")


def load_dashboard(db: Path, sweep_id: str | None = None, baseline: str | None = None) -> Dashboard:
    """Everything the dashboard shows of sweep ``sweep_id`` (None: the newest) of ``db``.

    Args:
        db: the results database (SQLite file).
        sweep_id: the sweep, or None for the newest recorded one.
        baseline: the target speed-ups are against (latency: baseline median / target
            median, both in ms, both rows agreeing); None: the sweep's own baseline when
            it is a column, else the first ``ort-cpu`` column, else the first column.

    Returns:
        ``{"sweep": entry, "models", "targets", "baseline", "grid": model -> target ->
        cell, "stacks": per-target figures, "funnel_stages", "history"}``.

    Raises:
        UserError: no database there, no sweep (of that id) in it, or ``baseline`` is not
            one of the sweep's targets.
    """
    from compstack.core.results import ResultsDB

    if not Path(db).is_file():
        raise UserError(f"--db {db}: no results database there (run `compstack sweep` first)")
    store = ResultsDB(db)
    try:
        sweeps = store.sweeps()
        pick = [s for s in sweeps if sweep_id is None or s["sweep_id"] == sweep_id]
        if not pick:
            raise UserError(f"--db {db}: no sweep {sweep_id + ' ' if sweep_id else ''}in this database "
                            "(run `compstack sweep` first)")
        entry = pick[-1]
        models, targets, grid = _grid(store, entry)
        base = _pick_baseline(baseline, entry.get("baseline"), targets)
        stacks = [_stats(t, models, grid, base) for t in targets]
        history = _history(store, entry, models, targets, grid)
    finally:
        store.close()
    seen = {s for st in stacks for s in st["funnel"]}
    stages = [s for s in FUNNEL if s in seen] + sorted(seen - set(FUNNEL))
    return {"sweep": entry, "models": models, "targets": targets, "baseline": base, "grid": grid,
            "stacks": stacks, "funnel_stages": stages, "history": history, "db": str(db)}


def render_dashboard(d: Dashboard) -> str:
    """The dashboard page of :func:`load_dashboard`'s ``d``, as one self-contained HTML string."""
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda x, spec=".3g": "-" if x is None else format(x, spec)
    template = env.from_string(_TEMPLATE.read_text(encoding="utf-8"))
    return template.render(d=d, s=d["sweep"], targets=d["targets"], baseline=d["baseline"],
                           when=_when(d["sweep"].get("started")), ratio_listed=RATIO_LISTED,
                           generated=_when(datetime.datetime.now(datetime.timezone.utc).timestamp()))


def write_dashboard(db: Path, out: Path, sweep_id: str | None = None,
                    baseline: str | None = None) -> tuple[Dashboard, int]:
    """Render the dashboard of sweep ``sweep_id`` (None: the newest) of ``db`` to ``out``.

    Returns:
        The dashboard data and the file's size in bytes.

    Raises:
        UserError: see :func:`load_dashboard`; ``out`` cannot be written.
    """
    from compstack.report.html import write_page

    d = load_dashboard(db, sweep_id, baseline)
    return d, write_page(out, render_dashboard(d))
