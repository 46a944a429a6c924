"""Result rows, the JSON report, and the SQLite results database.

One :class:`Result` per (model, target) job. Each row is written to the database the
moment its job finishes (``ResultsDB.add``), so nothing measured is lost when a later
job dies. ``Report.to_json()`` is the ``--json`` output (``schema_version`` 1).

A database that cannot be written (another process holds its lock past the busy
timeout, the disk is full, its pages are corrupt) never loses a row: the row goes to a
journal beside it (``<db>.journal.jsonl``, one JSON object a line, appended and
flushed), :attr:`ResultsDB.warning` says so in one line, and the run goes on. The next
run that opens the database writes the journal's rows into it and removes the journal.
Each run is recorded in the ``runs`` table (``running``, then ``done``, ``interrupted``
or ``failed``), so a run killed part-way is visible as such.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compstack.core.errors import UserError

__all__ = ["SCHEMA_VERSION", "STATUSES", "Result", "Report", "ResultsDB"]

SCHEMA_VERSION = 1

#: Every status a result can have.
STATUSES = ("ok", "mismatch", "unsupported", "failed", "crashed", "timeout", "oom", "unavailable")


@dataclass
class Result:
    """One target's result on one model.

    Attributes:
        target: target name.
        status: one of :data:`STATUSES`.
        stage: the stage that failed (``import``, ``lower``, ``compile``, ``run``,
            ``latency``, ``compare``), empty when ok.
        error: one line saying what went wrong.
        compile_s: compile wall time in seconds (lower + compile), from the cache
            entry's record when ``cached``.
        latency_ms: ``{"median", "p10", "p90", "mean", "min", "cv", "runs", "noisy"}``.
        outputs: per-output numerics (see :class:`compstack.analysis.numerics.OutputComparison`).
        versions: versions of the stack's packages.
        flags: how the stack was invoked.
        cached: the artifact came from the cache.
        notes: remarks for the reader (untuned TVM, rebuilt cache entry...).
        latency_error: how timing failed (the stack raised, crashed, hung or ran out
            of memory in the ``latency`` stage) after the outputs were written; the
            status is still the numerics verdict. Empty when timing worked or was off.
    """

    target: str
    status: str
    stage: str = ""
    error: str = ""
    compile_s: float | None = None
    latency_ms: dict[str, Any] | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    unsupported_ops: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    latency_error: str = ""
    log: str = ""

    def to_dict(self, with_log: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not with_log:
            d.pop("log")
        return d


@dataclass
class Report:
    """A whole comparison run: the model, the reference, and one result per target."""

    model: dict[str, Any]
    reference: dict[str, Any]
    results: list[Result] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    started: float = field(default_factory=time.time)
    #: One-line warnings for the reader (e.g. rows kept in a journal), also in ``--json``.
    warnings: list[str] = field(default_factory=list)
    #: Outputs by ``<target>::<output>`` (not serialised; for ``compstack run``).
    arrays: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "started": self.started,
            "model": self.model,
            "reference": self.reference,
            "inputs": self.inputs,
            "results": [r.to_dict() for r in self.results],
            "warnings": list(self.warnings),
            "latency_comparison": self.latency_comparison(),
        }

    def latency_comparison(self) -> dict[str, Any]:
        """Pairs of timed targets: median ratio and significance (see
        :func:`compstack.core.latency.compare_latencies`)."""
        from compstack.core.latency import compare_latencies

        return {"method": "95 % moving-block bootstrap CIs of the medians; significant = the CIs do not overlap",
                "interleaved": False,
                "interleaving_note": "targets are timed one after the other, each in its own worker process "
                                     "(one stack per process: isolation), so repetitions are not interleaved; "
                                     "load changes between targets show in each row's load_before/load_after",
                "pairs": compare_latencies([(r.target, r.latency_ms) for r in self.results])}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    created REAL NOT NULL,
    model_name TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    target TEXT NOT NULL,
    status TEXT NOT NULL,
    stage TEXT,
    error TEXT,
    compile_s REAL,
    latency_median_ms REAL,
    latency_json TEXT,
    outputs_json TEXT,
    versions_json TEXT,
    flags_json TEXT,
    reference TEXT,
    cached INTEGER,
    log TEXT
);
CREATE INDEX IF NOT EXISTS results_model ON results (fingerprint, target);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    command TEXT,
    model_name TEXT,
    started REAL,
    ended REAL,
    status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id TEXT PRIMARY KEY,
    started REAL,
    ended REAL,
    status TEXT NOT NULL,
    executor TEXT,
    models_json TEXT,
    targets_json TEXT,
    baseline TEXT,
    summary_json TEXT
);
"""

#: Columns added after the first schema: ``ALTER TABLE ADD COLUMN`` on an older database.
#: ``sweep_id``: the sweep a row belongs to (empty outside sweeps); ``options_json``: the
#: target options the job ran with (``--resume`` keys on them); ``resumed_from``: the id
#: of the earlier row a resumed sweep reused (nothing was run for it).
_ADDED_COLUMNS = (("sweep_id", "TEXT DEFAULT ''"), ("options_json", "TEXT DEFAULT '{}'"),
                  ("resumed_from", "INTEGER"))

_COLUMNS = ("run_id", "created", "model_name", "fingerprint", "target", "status", "stage", "error", "compile_s",
            "latency_median_ms", "latency_json", "outputs_json", "versions_json", "flags_json", "reference",
            "cached", "log", "sweep_id", "options_json", "resumed_from")

#: Seconds a write waits for another process's lock before the row goes to the journal.
BUSY_TIMEOUT_S = 30.0


class ResultsDB:
    """The SQLite results database (one file; created on first use).

    Args:
        path: the database file.
        busy_timeout_s: how long a write waits on another process's lock (SQLite's
            busy timeout) before the row is journaled instead.

    Raises:
        UserError: the database's folder cannot be created.
    """

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.journal = self.path.with_name(self.path.name + ".journal.jsonl")
        self.warning = ""
        self.conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--db {self.path}: cannot open results database: {exc.strerror or exc}") from None
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s)
            self.conn.executescript(_SCHEMA)
            self._migrate()
            self._replay()
        except sqlite3.Error as exc:
            self._unwritable(exc)

    def _unwritable(self, exc: BaseException) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass
        self.conn = None
        if not self.warning:
            self.warning = (f"results database {self.path} cannot be written ({exc}); "
                            f"rows are kept in {self.journal}")

    def _write(self, table: str, row: dict[str, Any]) -> None:
        """Insert (or, for ``runs``, upsert) one row; journal it when SQLite refuses."""
        if self.conn is not None:
            try:
                with self.conn:
                    self._insert(table, row)
                return
            except sqlite3.Error as exc:
                self._unwritable(exc)
        try:
            with open(self.journal, "a") as f:
                f.write(json.dumps({"table": table, "row": row}, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            self.warning = (f"results database {self.path} and its journal {self.journal} cannot be written "
                            f"({exc.strerror or exc}); rows are only in this run's output")

    def _insert(self, table: str, row: dict[str, Any]) -> None:
        assert self.conn is not None
        cols = list(row)
        verb = "INSERT" if table == "results" else "INSERT OR REPLACE"
        self.conn.execute(f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                          [row[c] for c in cols])

    def _migrate(self) -> None:
        """Add the columns a database made by an older compstack lacks."""
        assert self.conn is not None
        have = {r[1] for r in self.conn.execute("PRAGMA table_info(results)")}
        with self.conn:
            for name, decl in _ADDED_COLUMNS:
                if name not in have:
                    self.conn.execute(f"ALTER TABLE results ADD COLUMN {name} {decl}")
            self.conn.execute("CREATE INDEX IF NOT EXISTS results_sweep ON results (sweep_id)")

    def _replay(self) -> None:
        """Move the rows of an earlier run's journal into the database."""
        if self.conn is None or not self.journal.is_file():
            return
        records = []
        for line in self.journal.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
                if rec["table"] in _TABLE_COLUMNS and isinstance(rec["row"], dict):
                    allowed = _TABLE_COLUMNS[rec["table"]]
                    records.append((rec["table"], {k: v for k, v in rec["row"].items() if k in allowed}))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line of a killed run
        with self.conn:
            for table, row in records:
                self._insert(table, row)
        self.journal.unlink()

    def add(self, report: Report, result: Result, sweep_id: str = "", options: dict[str, str] | None = None,
            resumed_from: int | None = None) -> None:
        """Write one finished result now (committed immediately, else journaled); a failed
        timing is kept in ``latency_json`` as ``{"error": ...}``. A sweep's rows carry its
        ``sweep_id``, the target ``options`` and, when reused by ``--resume``, the id of
        the earlier row (``resumed_from``)."""
        lat = result.latency_ms or ({"error": result.latency_error} if result.latency_error else {})
        values = (report.run_id, time.time(), report.model.get("name", ""), report.model.get("fingerprint", ""),
                  result.target, result.status, result.stage, result.error, result.compile_s, lat.get("median"),
                  json.dumps(lat), json.dumps(result.outputs), json.dumps(result.versions),
                  json.dumps(result.flags, default=str), report.reference.get("target", ""),
                  int(result.cached), result.log[-20000:], sweep_id, json.dumps(dict(options or {})),
                  resumed_from)
        self._write("results", dict(zip(_COLUMNS, values)))
        if self.warning and self.warning not in report.warnings:
            report.warnings.append(self.warning)

    def run_status(self, report: Report, status: str, command: str = "compare") -> None:
        """Record the run in the ``runs`` table: ``running`` at the start, then ``done``,
        ``interrupted`` (Ctrl-C, SIGTERM) or ``failed`` (compstack's own error)."""
        ended = None if status == "running" else time.time()
        self._write("runs", {"run_id": report.run_id, "command": command, "model_name": report.model.get("name", ""),
                             "started": report.started, "ended": ended, "status": status})
        if self.warning and self.warning not in report.warnings:
            report.warnings.append(self.warning)

    def sweep_status(self, sweep: dict[str, Any]) -> None:
        """Upsert a sweep's row in the ``sweeps`` table (keys of :data:`_SWEEP_COLUMNS`)."""
        self._write("sweeps", {k: sweep.get(k) for k in _SWEEP_COLUMNS})

    def sweeps(self) -> list[dict[str, Any]]:
        """Every recorded sweep, oldest first (empty when the database cannot be read)."""
        if self.conn is None:
            return []
        cur = self.conn.execute(f"SELECT {', '.join(_SWEEP_COLUMNS)} FROM sweeps ORDER BY started")
        return [dict(zip(_SWEEP_COLUMNS, r)) for r in cur.fetchall()]

    def sweep_rows(self, sweep_id: str) -> list[dict[str, Any]]:
        """The result rows of one sweep, oldest first."""
        if self.conn is None:
            raise UserError(self.warning or f"--db {self.path}: cannot read results database")
        cur = self.conn.execute("SELECT * FROM results WHERE sweep_id = ? ORDER BY id", (sweep_id,))
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def rows(self, fingerprint: str | None = None) -> list[dict[str, Any]]:
        """All rows (optionally of one model), oldest first, as dicts.

        Raises:
            UserError: the database cannot be read.
        """
        if self.conn is None:
            raise UserError(self.warning or f"--db {self.path}: cannot read results database")
        cur = self.conn.execute(
            "SELECT * FROM results" + (" WHERE fingerprint = ?" if fingerprint else "") + " ORDER BY id",
            (fingerprint,) if fingerprint else (),
        )
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def runs(self) -> list[dict[str, Any]]:
        """Every recorded run, oldest first."""
        if self.conn is None:
            return []
        cur = self.conn.execute("SELECT run_id, command, model_name, started, ended, status FROM runs ORDER BY started")
        return [dict(zip(_RUN_COLUMNS, r)) for r in cur.fetchall()]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


_RUN_COLUMNS = ("run_id", "command", "model_name", "started", "ended", "status")
_SWEEP_COLUMNS = ("sweep_id", "started", "ended", "status", "executor", "models_json", "targets_json", "baseline",
                  "summary_json")
_TABLE_COLUMNS = {"results": _COLUMNS, "runs": _RUN_COLUMNS, "sweeps": _SWEEP_COLUMNS}
