"""``compstack report``: one stored run rendered as one self-contained HTML file.

The page holds everything itself: inline CSS, inline SVG plots (:mod:`compstack.report.svg`),
no script, no font, no link to fetch. It shows what the results database holds for the
run: the per-target table, latency and compile-time plots, numerics per output, versions
and flags, and the newest conformance run of the same database; what the database does
not hold (kernels and fusion, per-kernel time, model size, the terminal's notes) is named
on the page as missing, with the command that produces it.
"""

from __future__ import annotations

import datetime
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compstack.core.errors import UserError
from compstack.report import svg

__all__ = ["ConformanceData", "RunData", "load_run", "newest_is_sweep", "render", "render_sweep", "sweep_line", "write_report",
           "write_sweep_report"]

_TEMPLATE = Path(__file__).parent / "templates" / "report.html.j2"
#: Conformance cases listed in the matrix at most (cases every target passed are not listed).
MAX_MATRIX_ROWS = 300
#: The conformance funnel's stages, in order (as :data:`compstack.conformance.suite.FUNNEL`).
_FUNNEL = ("import", "lower", "compile", "run", "compare")


@dataclass
class ConformanceData:
    """One stored conformance run: per-target funnel rows and per-case statuses."""

    run_id: str
    created: float
    targets: list[dict[str, Any]]
    cases: dict[str, dict[str, dict[str, Any]]]  # case -> target -> {status, stage, error}


@dataclass
class RunData:
    """What the database holds about one run (``rows`` empty for a conformance-only run)."""

    db: Path
    run_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    conformance: ConformanceData | None = None
    conformance_is_run: bool = False
    #: the ``runs`` table's status (``running``, ``done``, ``interrupted``, ``failed``), "" when unrecorded.
    run_status: str = ""


def _when(t: float | None) -> str:
    if not t:
        return "-"
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in ("latency_json", "outputs_json", "versions_json", "flags_json"):
        raw = row.get(key)
        try:
            out[key[:-5]] = json.loads(raw) if raw else ({} if key != "outputs_json" else [])
        except ValueError:
            out[key[:-5]] = {} if key != "outputs_json" else []
    return out


def _conformance(conn: sqlite3.Connection, run_id: str | None) -> ConformanceData | None:
    """The conformance run ``run_id`` (None: the newest), or None when there is none."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "conformance_runs" not in tables:
        return None
    if run_id is None:
        row = conn.execute("SELECT run_id FROM conformance_runs ORDER BY created DESC LIMIT 1").fetchone()
        if row is None:
            return None
        run_id = row[0]
    cur = conn.execute("SELECT target, version, total, passed, unsupported, timeout, crashed, failed_at_json, "
                       "seconds, created FROM conformance_runs WHERE run_id = ? ORDER BY rowid", (run_id,))
    targets = []
    created = 0.0
    for r in cur.fetchall():
        created = max(created, r[9] or 0.0)
        targets.append({"target": r[0], "version": r[1], "total": r[2], "passed": r[3], "unsupported": r[4],
                        "timeout": r[5], "crashed": r[6], "failed_at": json.loads(r[7] or "{}"), "seconds": r[8],
                        "pass_rate": r[3] / r[2] if r[2] else 0.0})
    if not targets:
        return None
    cases: dict[str, dict[str, dict[str, Any]]] = {}
    for name, target, status, stage, error in conn.execute(
            "SELECT name, target, status, stage, error FROM conformance_cases WHERE run_id = ? ORDER BY name",
            (run_id,)):
        cases.setdefault(name, {})[target] = {"status": status, "stage": stage or "", "error": error or ""}
    return ConformanceData(run_id, created, targets, cases)


def load_run(db: Path, run_id: str | None = None) -> RunData:
    """Read one run (``run_id``, or the newest comparison or conformance run) from ``db``.

    Raises:
        UserError: no database there, no run in it, or no run ``run_id``.
    """
    if not db.is_file():
        raise UserError(f"--db {db}: no results database there (run `compstack compare` first)")
    try:
        conn = sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)  # as_uri: a ? or # in the path
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        raise UserError(f"--db {db}: not a results database ({exc})") from None
    try:
        runs = _run_ids(conn, tables)
        if not runs:
            raise UserError(f"--db {db}: no runs in this database yet (run `compstack compare` first)")
        if run_id is None:
            run_id = runs[0][0]
        kinds = {kind for rid, kind in runs if rid == run_id}
        if not kinds:
            recent = ", ".join(rid for rid, _ in runs[:5])
            raise UserError(f"--run {run_id}: no such run in {db} (newest: {recent})")
        data = RunData(db=db, run_id=run_id)
        if "compare" in kinds:
            cur = conn.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run_id,))
            cols = [c[0] for c in cur.description]
            data.rows = [_decode(dict(zip(cols, r))) for r in cur.fetchall()]
        if "runs" in tables:
            found = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            data.run_status = found[0] if found else ""
        data.conformance_is_run = "conformance" in kinds
        data.conformance = _conformance(conn, run_id if data.conformance_is_run else None)
        return data
    finally:
        conn.close()


#: ``runs.command`` of runs that are not comparisons (the HTML report shows comparison
#: and conformance runs; conformance has its own tables).
_NOT_COMPARE = ("conformance", "fusion", "profile")


def _run_ids(conn: sqlite3.Connection, tables: set[str]) -> list[tuple[str, str]]:
    """(run id, kind) of every run, newest first; kind is ``compare`` or ``conformance``."""
    runs: list[tuple[float, str, str]] = []
    if "results" in tables:
        runs += [(t, rid, "compare") for rid, t in
                 conn.execute("SELECT run_id, MAX(created) FROM results GROUP BY run_id")]
    if "runs" in tables:  # a run stopped before its first row still exists
        # runs of other commands (conformance, fusion, profile) are in the same table
        runs += [(t, rid, "compare") for rid, t, cmd in conn.execute("SELECT run_id, started, command FROM runs")
                 if cmd not in _NOT_COMPARE]
    if "conformance_runs" in tables:
        runs += [(t, rid, "conformance") for rid, t in
                 conn.execute("SELECT run_id, MAX(created) FROM conformance_runs GROUP BY run_id")]
    ordered = sorted(runs, key=lambda r: -(r[0] or 0.0))
    return list(dict.fromkeys((rid, kind) for _, rid, kind in ordered))


def newest_is_sweep(db: Path) -> bool:
    """Whether the newest run in ``db`` is part of a sweep (then ``report --last`` shows the
    sweep's matrix, not its last sub-run alone). False for no database or no run."""
    if not db.is_file():
        return False
    try:
        conn = sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)  # as_uri: a ? or # in the path
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        runs = _run_ids(conn, tables)
        cols = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
        if not runs or runs[0][1] != "compare" or "sweep_id" not in cols:
            return False
        row = conn.execute("SELECT sweep_id FROM results WHERE run_id = ? AND sweep_id != '' LIMIT 1",
                           (runs[0][0],)).fetchone()
        return row is not None
    except sqlite3.Error:
        return False


def _target_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        lat = r["latency"] or {}
        errs = [o.get("max_abs_err") for o in r["outputs"]]
        out.append({"target": r["target"], "status": r["status"], "stage": r["stage"] or "", "error": r["error"] or "",
                    "compile_s": r["compile_s"], "cached": bool(r["cached"]), "median": lat.get("median"),
                    "p10": lat.get("p10"), "p90": lat.get("p90"), "cv": lat.get("cv"), "runs": lat.get("runs"),
                    "noisy": bool(lat.get("noisy")), "path": (r["flags"] or {}).get("path", ""),
                    "max_abs_err": None if any(e is None for e in errs) or not errs else max(errs),
                    "versions": r["versions"] or {},
                    "flags": json.dumps(r["flags"] or {}, indent=1, sort_keys=True, default=str)})
    return out


def _plots(rows: list[dict[str, Any]]) -> dict[str, str]:
    plots: dict[str, str] = {}
    lat = [svg.Interval(r["target"], r["median"], r["p10"], r["p90"]) for r in rows
           if r["median"] is not None and r["p10"] is not None and r["p90"] is not None and r["median"] > 0]
    if lat:
        plots["latency"] = svg.latency_plot(lat)
    comp = [(r["target"], float(r["compile_s"])) for r in rows if r["compile_s"] is not None]
    if comp:
        plots["compile"] = svg.bar_plot(comp, "seconds (lower + compile; cached rows: the original compile)")
    return plots


def _tuning(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tuning table of a ``--tuned`` run, or of rows tuned by ``--option``: per row what
    "tuned" meant, its default run beside it (``flags.default``), the speed-up, and its
    tuning curve as a plot (:func:`compstack.report.svg.curve_plot`); empty when no row was
    tuned (issue #26)."""
    out = []
    for r in rows:
        flags = r["flags"] or {}
        tuning = flags.get("tuning") or {}
        if not flags.get("tuned_as") and not tuning.get("curve"):
            continue
        default = flags.get("default") or {}
        points = [(int(p["trials"]), float(p["est_ms"])) for p in (tuning.get("curve") or {}).get("points", [])]
        as_ = str(flags.get("tuned_as", ""))
        why = ("" if default else str(flags["no_default"]) if flags.get("no_default") else
               "no default run: tuned by --option (compare without it)" if not as_ else
               "ran once: nothing to tune" if as_.startswith("nothing to tune") else "ran once: tuned is its default")
        out.append({"target": r["target"], "tuned_as": as_, "status": r["status"], "no_default": why,
                    "median": (r["latency"] or {}).get("median"), "compile_s": r["compile_s"],
                    "tune_s": tuning.get("tune_s"), "trials": tuning.get("trials"),
                    "summary": tuning.get("summary", ""), "default": default,
                    "default_median": (default.get("latency_ms") or {}).get("median"),
                    "speedup": flags.get("tuned_speedup"),
                    "curve_method": (tuning.get("curve") or {}).get("method", ""),
                    "curve": svg.curve_plot(r["target"], points) if points else ""})
    return out


def _numerics(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    table, abs_items, rel_items = [], [], []
    for r in rows:
        for o in r["outputs"]:
            label = f"{r['target']} · {o.get('name', '?')}"
            table.append({"target": r["target"], **o})
            abs_items.append(svg.Threshold(label, o.get("max_abs_err"), float(o.get("atol") or 0.0),
                                           bool(o.get("ok"))))
            rel_items.append(svg.Threshold(label, o.get("max_rel_err"), float(o.get("rtol") or 0.0),
                                           bool(o.get("ok"))))
    plots = {}
    if abs_items:
        plots["abs"] = svg.threshold_plot(abs_items, "max |a − b| (log scale); tick: atol", "plot-abs-err",
                                          "max absolute error vs atol")
        plots["rel"] = svg.threshold_plot(rel_items, "max |a − b| / |b| (log scale); tick: rtol", "plot-rel-err",
                                          "max relative error vs rtol")
    return table, plots


def _conformance_context(c: ConformanceData | None) -> dict[str, Any] | None:
    if c is None:
        return None
    names = [t["target"] for t in c.targets]
    failing = [(case, by) for case, by in c.cases.items()
               if any(by.get(t, {}).get("status") != "passed" for t in names)]
    return {"run_id": c.run_id, "when": _when(c.created), "targets": c.targets, "names": names,
            "funnel": sorted({s for t in c.targets for s, n in t["failed_at"].items() if n},
                             key=lambda s: _FUNNEL.index(s) if s in _FUNNEL else len(_FUNNEL)),
            "failing": failing[:MAX_MATRIX_ROWS], "failing_total": len(failing), "cases": len(c.cases),
            "all_passed": len(c.cases) - len(failing)}


def _missing(data: RunData) -> list[str]:
    out = [("kernels and fusion groups per target: not stored in the results database "
            "(run `compstack fusion MODEL --targets ...`)"),
           ("per-kernel time: not stored in the results database "
            "(run `compstack profile MODEL --trace trace.json` and open the trace in ui.perfetto.dev)")]
    if data.rows:
        out.append("model size (nodes, parameters, FLOPs), the inputs used and the terminal table's notes: "
                   "not stored in the results database (`compstack compare --json` has them)")
    else:
        out.append("comparison results: this run is a conformance run")
    if data.conformance is None:
        out.append("conformance matrix: no conformance run in this database (run `compstack conformance`)")
    return out


def render(data: RunData) -> str:
    """The page for ``data``, as one HTML string."""
    import jinja2

    rows = _target_rows(data.rows)
    numerics, num_plots = _numerics(data.rows)
    first = data.rows[0] if data.rows else {}
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    timed = [r for r in rows if r["median"] is not None and r["status"] == "ok"]  # a wrong row is nobody's fastest
    fastest = min(timed, key=lambda r: r["median"]) if timed else None
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda x, spec=".4g": "-" if x is None else format(x, spec)
    template = env.from_string(_TEMPLATE.read_text(encoding="utf-8"))
    return template.render(
        run_id=data.run_id, db=str(data.db), model=first.get("model_name", ""),
        fingerprint=first.get("fingerprint", ""), reference=first.get("reference", ""),
        when=_when(max((r["created"] for r in data.rows), default=None)), rows=rows, counts=counts,
        fastest=fastest, plots={**_plots(rows), **{f"num_{k}": v for k, v in num_plots.items()}},
        numerics=numerics, tuning=_tuning(data.rows), conformance=_conformance_context(data.conformance),
        conformance_is_run=data.conformance_is_run, missing=_missing(data), run_status=data.run_status,
        generated=_when(datetime.datetime.now(datetime.timezone.utc).timestamp()))


def write_page(out: Path, page: str) -> int:
    """Write the HTML ``page`` (UTF-8) to ``out``; its size in bytes.

    Raises:
        UserError: ``out`` cannot be written (one line naming ``-o``).
    """
    data = page.encode("utf-8")
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise UserError(f"-o {out}: cannot write ({exc.strerror or exc})") from None
    return len(data)


def write_report(db: Path, out: Path, run_id: str | None = None) -> tuple[RunData, int]:
    """Render run ``run_id`` (None: the newest) of ``db`` to ``out``; returns the run and
    the file's size in bytes.

    Raises:
        UserError: see :func:`load_run`; ``out`` cannot be written.
    """
    data = load_run(db, run_id)
    return data, write_page(out, render(data))


def render_sweep(summary: dict[str, Any], db: Path) -> str:
    """The page of a stored sweep (:func:`compstack.sweep.summary_of_db`'s ``summary``):
    its models x targets matrix (status, median ms, speed-up over the baseline), the
    geometric-mean speed-ups and the rows by status, as one self-contained HTML string
    (inline CSS, no script)."""
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda x, spec=".4g": "-" if x is None else format(x, spec)
    executor = summary.get("executor")
    template = env.from_string((_TEMPLATE.parent / "sweep.html.j2").read_text(encoding="utf-8"))
    return template.render(s=summary, targets=list(summary["targets"]), baseline=summary["baseline"], db=str(db),
                           executor=executor.get("name", "") if isinstance(executor, dict) else (executor or ""),
                           generated=_when(datetime.datetime.now(datetime.timezone.utc).timestamp()))


def write_sweep_report(db: Path, out: Path, sweep_id: str | None = None) -> tuple[dict[str, Any], int]:
    """Render sweep ``sweep_id`` (None: the newest) of ``db`` to ``out``; returns its
    summary and the file's size in bytes.

    Raises:
        UserError: no database, no such sweep, or ``out`` cannot be written.
    """
    from compstack.core.results import ResultsDB
    from compstack.sweep import summary_of_db

    if not Path(db).exists():
        raise UserError(f"no results database at {db} (run `compstack sweep` first)")
    store = ResultsDB(db)
    try:
        summary = summary_of_db(store, sweep_id)
    finally:
        store.close()
    return summary, write_page(out, render_sweep(summary, Path(db)))


def sweep_line(db: Path) -> str:
    """``compstack report --sweep`` without ``-o``: one line naming the newest stored
    sweep (``-o FILE.html`` renders its page; ``compstack sweep --last --matrix`` prints
    its matrix), or saying there is none."""
    from compstack.core.results import ResultsDB

    store = ResultsDB(db) if Path(db).exists() else None
    try:
        sweeps = store.sweeps() if store is not None else []
    finally:
        if store is not None:
            store.close()
    if not sweeps:
        return f"no sweeps in this database yet ({db})"
    last = sweeps[-1]
    n_models, n_targets = len(json.loads(last["models_json"] or "[]")), len(json.loads(last["targets_json"] or "[]"))
    return (f"newest sweep {last['sweep_id']} ({last['status']}, {n_models} models x {n_targets} targets, "
            f"{last['executor']}): `compstack report --sweep -o FILE.html` renders it, "
            "`compstack sweep --last --matrix` prints its matrix")
