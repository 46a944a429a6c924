"""The conformance run: ONNX node tests on each target, the stage funnel, XFAIL files
and history.

For each target the cases run on a pool of long-lived workers
(:mod:`compstack.run.pool`). Each case ends in one funnel stage (``import``,
``lower``, ``compile``, ``run``, ``compare``) or passes; ``unsupported``, ``timeout`` and
``crashed`` are counted apart. The pass rate is passed / cases run.

XFAIL files (``<xfail-dir>/<target>@<stack version>.txt``, one failing case per line
with ``# stage: error``) pin the known failures of one stack version: a listed case
that passes is reported ``fixed``, a case that fails and is not listed is a
``regression``. Every run is written to the results database as it goes (its ``runs``
row, then ``conformance_cases`` row by row, ``conformance_runs`` per target) for ``--trend``.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from compstack import targets as registry
from compstack.analysis.fault import conformance_fault
from compstack.conformance.cases import Case
from compstack.core.errors import UserError
from compstack.run.pool import run_pool

if TYPE_CHECKING:
    from compstack.core.results import ResultsDB

__all__ = ["FUNNEL", "RULE", "TargetSummary", "SuiteReport", "run_suite", "store", "trend", "read_xfail",
           "write_xfail", "xfail_path", "DEFAULT_XFAIL_DIR"]

FUNNEL = ("import", "lower", "compile", "run", "compare")
RULE = ("ONNX backend test runner rule: same output count, shapes and dtypes; strings and integers exact; "
        "floats |a-b| <= atol + rtol*|b| (compstack.analysis.verdict.judge) with the case's rtol/atol (default rtol=1e-3, atol=1e-7), NaN equal to NaN; "
        "bfloat16 compared in float32 with rtol >= 2**-6")
DEFAULT_XFAIL_DIR = Path(__file__).parent / "xfail"


@dataclass
class TargetSummary:
    """One target's column of the conformance table."""

    target: str
    version: str = ""
    available: bool = True
    reason: str = ""
    total: int = 0
    passed: int = 0
    failed_at: dict[str, int] = field(default_factory=lambda: {s: 0 for s in FUNNEL})
    unsupported: int = 0
    timeout: int = 0
    crashed: int = 0
    seconds: float = 0.0
    restarts: int = 0
    xfail_file: str = ""
    fixed: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    #: Non-passing cases by whose fault they are (compstack.analysis.fault.conformance_fault).
    faults: dict[str, int] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float:
        """passed / cases run (0 when none ran)."""
        return self.passed / self.total if self.total else 0.0

    def add(self, row: dict[str, Any]) -> None:
        self.total += 1
        status = row["status"]
        if row.get("fault"):
            self.faults[row["fault"]] = self.faults.get(row["fault"], 0) + 1
        if status == "passed":
            self.passed += 1
        elif status in ("unsupported", "timeout", "crashed"):
            setattr(self, status, getattr(self, status) + 1)
        else:
            self.failed_at[row["stage"]] = self.failed_at.get(row["stage"], 0) + 1

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass_rate"] = self.pass_rate
        return d


@dataclass
class SuiteReport:
    """A whole conformance run."""

    run_id: str
    rule: str
    summaries: list[TargetSummary]
    rows: list[dict[str, Any]]
    selection: dict[str, Any]
    #: One-line warnings for the reader (rows kept in the database's journal); not in ``to_json``.
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": 1, "run_id": self.run_id, "rule": self.rule, "selection": self.selection,
                "targets": [s.to_json() for s in self.summaries], "cases": self.rows}


def xfail_path(xfail_dir: Path, target: str, version: str) -> Path:
    """``<dir>/<target>@<version>.txt`` (a versioned target's file is its stack's: ``ort-cpu@1.20.0``)."""
    target = target.partition("@")[0]
    return xfail_dir / f"{target}@{version}.txt"


def read_xfail(path: Path) -> dict[str, str]:
    """``{case: comment}`` of an XFAIL file (empty when it does not exist)."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        name, _, comment = line.partition("#")
        if name.strip():
            out[name.strip()] = comment.strip()
    return out


def write_xfail(path: Path, target: str, version: str, rows: Sequence[dict[str, Any]]) -> None:
    """Record this run's failures, keeping the entries of cases this run did not cover."""
    kept = read_xfail(path)
    for row in rows:
        kept.pop(row["case"], None)
        if row["status"] != "passed":
            kept[row["case"]] = f"{row['status']} at {row['stage']}: {row['error'][:150]}".replace("\n", " ")
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [(f"# XFAIL for {target} {version}: ONNX node tests known to fail (compstack conformance "
              "--update-xfail)")] + [f"{k}  # {v}" for k, v in sorted(kept.items())]
    path.write_text("\n".join(lines) + "\n")


def _version(versions: dict[str, str]) -> str:
    return next(iter(versions.values()), "unknown") if versions else "unknown"


_NO_START = "worker did not start"


def run_suite(cases: Sequence[Case], cases_file: Path, target_names: Sequence[str], *, workers: int,
              timeout: float, cache_dir: Path | None, xfail_dir: Path, update_xfail: bool = False,
              target_options: dict[str, dict[str, str]] | None = None,
              on_result: Callable[[str, dict[str, Any]], None] | None = None,
              on_target: Callable[[str, int], None] | None = None,
              selection: dict[str, Any] | None = None, db: ResultsDB | None = None) -> SuiteReport:
    """Run ``cases`` on each target; see the module docstring.

    Args:
        cases: the selected cases; ``cases_file`` is the cache file the workers load.
        target_names: resolved target names.
        workers: worker processes per target.
        timeout: per-case wall-clock limit, seconds.
        cache_dir: artifact cache root (compiled cases are cached), or None.
        xfail_dir: where the XFAIL files are.
        update_xfail: rewrite each target's XFAIL file from this run.
        on_result: progress callback ``(target, row)``, called after the row is in ``db``;
            ``on_target(target, n)`` at start.
        selection: how the cases were chosen (filter, sample), stored with the run.
        db: the results database the run is written to as it goes (see :class:`_Recorder`:
            a run killed part-way keeps every finished case), or None.

    Raises:
        UserError: unknown target (before anything runs or is written).
    """
    entries = {e.name: e for e in registry.entries()}
    for tname in target_names:  # NAME@VERSION: that release's worker runs in its env (the pool's executor)
        if tname.partition("@")[0] not in entries:
            raise UserError(f"unknown target '{tname}'; run `compstack targets` to list them")
    names = [c.name for c in cases]
    report = SuiteReport(uuid.uuid4().hex[:12], RULE, [], [], {"cases": len(names), **(selection or {})})
    recorder = _Recorder(db, report) if db is not None else None
    status = "failed"
    try:
        for tname in target_names:
            spec = {"target": tname, "target_ref": entries[tname.partition("@")[0]].ref,
                    "options": (target_options or {}).get(tname, {}), "cases": str(cases_file),
                    "cache_dir": str(cache_dir) if cache_dir else None}
            summary, target_rows = _run_target(spec, names, workers, timeout, recorder, on_result, on_target)
            if summary.available and not summary.reason.startswith(_NO_START):
                _check_xfail(summary, target_rows, xfail_dir, update_xfail)
            target_rows.sort(key=lambda r: r["case"])
            report.rows.extend(target_rows)
            report.summaries.append(summary)
        status = "done"
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (the CLI turns it into KeyboardInterrupt)
        status = "interrupted"
        raise
    finally:
        if recorder is not None:
            recorder.finish(status)
    return report


def _run_target(spec: dict[str, Any], names: list[str], workers: int, timeout: float, recorder: _Recorder | None,
                on_result: Callable[[str, dict[str, Any]], None] | None,
                on_target: Callable[[str, int], None] | None) -> tuple[TargetSummary, list[dict[str, Any]]]:
    """One target's cases on its pool: its summary and rows (each written as it comes)."""
    tname = spec["target"]
    summary = TargetSummary(tname)
    if on_target:
        on_target(tname, len(names))
    rows: list[dict[str, Any]] = []
    stack = registry.get(tname).stack  # the target class's declared stack

    def collect(row: dict[str, Any]) -> None:  # serialised by run_pool's lock
        found = conformance_fault(tname, row, stack)
        row = {"target": tname, **{k: v for k, v in row.items() if k != "log"}, "fault": found.fault,
               "fault_reason": found.reason}
        summary.add(row)
        rows.append(row)
        if recorder is not None:
            recorder.case(row)
        if on_result:
            on_result(tname, row)

    t0 = time.perf_counter()
    info = run_pool(spec, names, workers, timeout, collect)
    summary.seconds = time.perf_counter() - t0
    summary.version = _version(info.get("versions", {}))
    summary.available = bool(info.get("available", True))
    summary.reason = info.get("reason", "")
    summary.restarts = int(info.get("restarts", 0))
    if info.get("start_error"):
        summary.reason = f"{_NO_START}: {info['start_error']}"
    if recorder is not None:
        recorder.target(summary)
    return summary, rows


class _Recorder:
    """Writes a conformance run to the results database the moment each row exists: its
    ``runs`` row (``running`` at the start; ``done``, ``interrupted`` or ``failed`` at the
    end, as :meth:`ResultsDB.run_status` does for ``compare``), each case's
    ``conformance_cases`` row as the pool reports it, and each target's
    ``conformance_runs`` row once its cases are done. A write SQLite refuses goes to the
    database's journal; its one-line warning ends up in :attr:`SuiteReport.warnings`.
    """

    def __init__(self, db: ResultsDB, report: SuiteReport) -> None:
        import onnx

        from compstack.core.results import Report

        self.db, self.report, self.onnx_version = db, report, onnx.__version__
        self.run = Report(model={"name": f"onnx-{onnx.__version__}"}, reference={}, run_id=report.run_id)
        db.run_status(self.run, "running", command="conformance")

    def case(self, row: dict[str, Any]) -> None:
        self.db.write("conformance_cases", {"run_id": self.report.run_id, "target": row["target"],
                                            "name": row["case"], "status": row["status"], "stage": row["stage"],
                                            "error": row["error"], "seconds": row["seconds"],
                                            "fault": row["fault"], "fault_reason": row["fault_reason"]})

    def target(self, s: TargetSummary) -> None:
        self.db.write("conformance_runs", {
            "run_id": self.report.run_id, "created": time.time(), "target": s.target, "version": s.version,
            "onnx_version": self.onnx_version, "total": s.total, "passed": s.passed, "unsupported": s.unsupported,
            "timeout": s.timeout, "crashed": s.crashed, "failed_at_json": json.dumps(s.failed_at),
            "seconds": s.seconds, "selection_json": json.dumps(self.report.selection)})

    def finish(self, status: str) -> None:
        self.db.run_status(self.run, status, command="conformance")
        self.report.warnings.extend(w for w in [*self.run.warnings, self.db.warning]
                                    if w and w not in self.report.warnings)


def _check_xfail(summary: TargetSummary, rows: list[dict[str, Any]], xfail_dir: Path, update: bool) -> None:
    path = xfail_path(xfail_dir, summary.target, summary.version)
    if path.exists():
        known = read_xfail(path)
        summary.xfail_file = str(path)
        summary.fixed = sorted(r["case"] for r in rows if r["status"] == "passed" and r["case"] in known)
        summary.regressions = sorted(r["case"] for r in rows if r["status"] != "passed" and r["case"] not in known)
    if update:
        write_xfail(path, summary.target, summary.version, rows)
        summary.xfail_file = str(path)


def store(report: SuiteReport, db: Path) -> None:
    """Append a run made without ``run_suite(db=...)`` to the results database at once (its ``runs`` row, one
    ``conformance_runs`` row per target, one ``conformance_cases`` row per case and
    target; tables of :data:`compstack.core.results.MIGRATIONS`).

    Raises:
        UserError: the database cannot be opened or written (names ``--db``).
    """
    import onnx

    from compstack.core.results import connect

    try:
        conn = connect(db)
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"--db {db}: cannot open results database: {exc}") from None
    now = time.time()
    with conn:
        conn.execute("INSERT OR REPLACE INTO runs (run_id, command, model_name, started, ended, status) "
                     "VALUES (?,?,?,?,?,?)", (report.run_id, "conformance", f"onnx-{onnx.__version__}",
                                              now - sum(s.seconds or 0.0 for s in report.summaries), now, "done"))
        for s in report.summaries:
            conn.execute("INSERT INTO conformance_runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         (report.run_id, time.time(), s.target, s.version, onnx.__version__, s.total, s.passed,
                          s.unsupported, s.timeout, s.crashed, json.dumps(s.failed_at), s.seconds,
                          json.dumps(report.selection)))
        conn.executemany("INSERT INTO conformance_cases (run_id, target, name, status, stage, error, seconds, "
                         "fault, fault_reason) VALUES (?,?,?,?,?,?,?,?,?)",
                         [(report.run_id, r["target"], r["case"], r["status"], r["stage"], r["error"], r["seconds"],
                           r.get("fault", ""), r.get("fault_reason", "")) for r in report.rows])
    conn.close()


def trend(db: Path) -> list[dict[str, Any]]:
    """Pass rate per target per stored run, oldest first.

    Raises:
        UserError: ``db`` is not a file, not an SQLite database, or cannot be read.
    """
    if not db.exists():
        return []
    if not db.is_file():
        raise UserError(f"--db {db}: not a regular file")
    from compstack.core.results import connect

    try:
        conn = connect(db)
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"--db {db}: not a readable results database ({exc})") from None
    try:
        cur = conn.execute("SELECT run_id, created, target, version, total, passed, selection_json "
                           "FROM conformance_runs ORDER BY created")
        rows = [{"run_id": r[0], "created": r[1], "target": r[2], "version": r[3], "total": r[4], "passed": r[5],
                 "pass_rate": (r[5] / r[4]) if r[4] else 0.0, "selection": json.loads(r[6] or "{}")}
                for r in cur.fetchall()]
    except sqlite3.Error as exc:
        raise UserError(f"--db {db}: not a readable results database ({exc})") from None
    except (TypeError, ValueError) as exc:  # a table of that name with other contents
        raise UserError(f"--db {db}: its conformance_runs table is not compstack's ({exc})") from None
    finally:
        conn.close()
    return rows
