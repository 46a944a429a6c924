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

One database, one schema: the tables of every command (``results`` and ``runs`` of
``compare``/``run``/``sweep``, ``sweeps``, ``kernel_rows`` of ``fusion``/``profile``,
``conformance_runs``/``conformance_cases``, ``fuzz_campaigns``/``fuzz_findings``) are
made by :data:`MIGRATIONS`, and the schema version is SQLite's ``PRAGMA user_version``
(:data:`DB_SCHEMA_VERSION`). Opening a database made by an older compstack upgrades it
in place (:func:`migrate`); every module opens it through :func:`connect` or
:class:`ResultsDB`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compstack.core._journal import refuse_non_database, replay_journal
from compstack.core._schema_sql import CONFORMANCE_TABLES, FUZZ_TABLES, KERNEL_TABLES
from compstack.core.errors import UserError
from compstack.core.sanitize import sql_ident

__all__ = ["DB_SCHEMA_VERSION", "FAULTS", "JOURNAL_TABLES", "MIGRATIONS", "SCHEMA_VERSION", "STATUSES", "AddColumn", "Result",
           "Report", "ResultsDB", "connect", "migrate"]

#: Schema version of the ``--json`` report (:meth:`Report.to_json`).
SCHEMA_VERSION = 1

#: Every status a result can have.
STATUSES = ("ok", "mismatch", "unsupported", "failed", "crashed", "timeout", "oom", "unavailable", "reference-suspect",
            "undefined")
#: Whose fault a non-ok row is (issue #23, part 2).
FAULTS = ("stack", "compstack", "undefined", "unknown")


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
        fault: whose fault a non-ok row is (:data:`FAULTS`; empty when ok), decided at
            the row by :func:`compstack.analysis.fault.attribute`; ``fault_reason`` says
            why in one line.
        peak_rss_compile_mb, peak_rss_run_mb: the worker's resident-memory high-water
            mark (MiB, from the kernel, :mod:`compstack.core.peakmem`) over import +
            lower + compile, and over run + latency alone; None when not measured.
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
    fault: str = ""
    fault_reason: str = ""
    peak_rss_compile_mb: float | None = None
    peak_rss_run_mb: float | None = None

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


#: The first schema (compstack before schema versions): results, runs and sweeps.
_BASE_TABLES = (
    """CREATE TABLE IF NOT EXISTS results (
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
)""",
    "CREATE INDEX IF NOT EXISTS results_model ON results (fingerprint, target)",
    """CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    command TEXT,
    model_name TEXT,
    started REAL,
    ended REAL,
    status TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id TEXT PRIMARY KEY,
    started REAL,
    ended REAL,
    status TEXT NOT NULL,
    executor TEXT,
    models_json TEXT,
    targets_json TEXT,
    baseline TEXT,
    summary_json TEXT
)""",
)


@dataclass(frozen=True)
class AddColumn:
    """A migration step that adds a column unless the table has it already (databases
    made before ``user_version`` was kept may or may not have it)."""

    table: str
    column: str
    decl: str


#: The results database's migrations, oldest first. Step ``i`` (1-based) takes a
#: database from schema version ``i - 1`` to ``i`` (SQLite ``PRAGMA user_version``); a
#: step is a tuple of SQL statements and :class:`AddColumn`\ s, run in one transaction
#: with the version bump. A database made before versions were kept (``user_version``
#: 0) goes through every step: each is a no-op where that database already has it.
MIGRATIONS: tuple[tuple[str | AddColumn, ...], ...] = (
    # 1: results, runs and sweeps
    _BASE_TABLES,
    # 2: sweep rows (``sweep_id``), the target options a row ran with (``--resume`` keys
    #    on them), the id of the earlier row a resumed sweep reused (``resumed_from``)
    (AddColumn("results", "sweep_id", "TEXT DEFAULT ''"), AddColumn("results", "options_json", "TEXT DEFAULT '{}'"),
     AddColumn("results", "resumed_from", "INTEGER"),
     "CREATE INDEX IF NOT EXISTS results_sweep ON results (sweep_id)"),
    # 3: conformance runs (one row per target) and cases (one row per case and target)
    CONFORMANCE_TABLES,
    # 4: fuzz campaigns and their unique findings
    FUZZ_TABLES,
    # 5: one row per target of ``compstack fusion`` / ``compstack profile``
    KERNEL_TABLES,
    # 6: whose fault a row is, and the worker's peak memory per phase
    (AddColumn("results", "fault", "TEXT DEFAULT ''"), AddColumn("results", "fault_reason", "TEXT DEFAULT ''"),
     AddColumn("results", "peak_rss_compile_mb", "REAL"), AddColumn("results", "peak_rss_run_mb", "REAL")),
    # 7: whose fault a conformance case's failure is
    (AddColumn("conformance_cases", "fault", "TEXT DEFAULT ''"),
     AddColumn("conformance_cases", "fault_reason", "TEXT DEFAULT ''")),
)

#: Schema version of the results database (``PRAGMA user_version``) this compstack writes.
DB_SCHEMA_VERSION = len(MIGRATIONS)


def _apply(conn: sqlite3.Connection, step: str | AddColumn) -> None:
    if isinstance(step, AddColumn):
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({step.table})")}
        if step.column not in have:
            conn.execute(f"ALTER TABLE {step.table} ADD COLUMN {step.column} {step.decl}")
    else:
        conn.execute(step)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database of ``conn`` to :data:`DB_SCHEMA_VERSION` in place, running the
    :data:`MIGRATIONS` it lacks in one ``BEGIN IMMEDIATE`` transaction (so two processes
    opening an old database at once migrate it once). A newer database is left as it is.

    Returns:
        The schema version the database had before.

    Raises:
        sqlite3.Error: not an SQLite database, locked past the busy timeout, read-only.
    """
    before = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if before >= DB_SCHEMA_VERSION:
        return before
    level = conn.isolation_level
    conn.isolation_level = None  # the transaction below is ours, DDL included
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            have = int(conn.execute("PRAGMA user_version").fetchone()[0])
            for step in MIGRATIONS[have:]:
                for statement in step:
                    _apply(conn, statement)
            conn.execute(f"PRAGMA user_version = {DB_SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.isolation_level = level
    return before


def connect(path: str | Path, busy_timeout_s: float = 30.0) -> sqlite3.Connection:
    """Open (creating) the results database at ``path`` and :func:`migrate` it.

    Raises:
        sqlite3.Error: the file is not an SQLite database or cannot be written.
        OSError: its folder cannot be created.
    """
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=busy_timeout_s)
    try:
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


_COLUMNS = ("run_id", "created", "model_name", "fingerprint", "target", "status", "stage", "error", "compile_s",
            "latency_median_ms", "latency_json", "outputs_json", "versions_json", "flags_json", "reference",
            "cached", "log", "sweep_id", "options_json", "resumed_from", "fault", "fault_reason",
            "peak_rss_compile_mb", "peak_rss_run_mb")

#: Seconds a write waits for another process's lock before the row goes to the journal.
BUSY_TIMEOUT_S = 30.0


class ResultsDB:
    """The SQLite results database (one file; created on first use). Any thread may write
    through it, one write at a time: callers serialise them (the conformance pool's callback lock does).

    Args:
        path: the database file.
        busy_timeout_s: how long a write waits on another process's lock (SQLite's
            busy timeout) before the row is journaled instead.

    Raises:
        UserError: no folder for it, or ``path`` is no database (``_journal.refuse_non_database``).
    """

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = refuse_non_database(Path(path))
        self.journal = self.path.with_name(self.path.name + ".journal.jsonl")
        self.warning = ""
        self.conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--db {self.path}: cannot open results database: {exc.strerror or exc}") from None
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s, check_same_thread=False)
            migrate(self.conn)
            self._replay()
        except sqlite3.Error as exc:
            self._unwritable(exc)

    def _unwritable(self, exc: BaseException) -> None:
        if self.conn is not None:
            with suppress(sqlite3.Error):
                self.conn.close()
        self.conn = None
        if not self.warning:
            self.warning = (f"results database {self.path} cannot be written ({exc}); "
                            f"rows are kept in {self.journal}")

    def write(self, table: str, row: dict[str, Any]) -> None:
        """Insert one row of a :data:`JOURNAL_TABLES` table now (``runs``, ``sweeps``: upsert), else journal it."""
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
        verb = "INSERT OR REPLACE" if table in ("runs", "sweeps") else "INSERT"
        self.conn.execute(f"{verb} INTO {table} ({', '.join(map(sql_ident, cols))}) VALUES ({', '.join('?' * len(cols))})",
                          [row[c] for c in cols])

    def _replay(self) -> None:
        """Move the rows of an earlier run's journal into the database; a line that cannot
        be inserted goes to ``<db>.journal.bad.jsonl`` and :attr:`warning` names it
        (:func:`compstack.core._journal.replay_journal`)."""
        if self.conn is not None and self.journal.is_file():
            self.warning = replay_journal(self.conn, self.journal, self.path, JOURNAL_TABLES, self._insert)

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
                  resumed_from, result.fault, result.fault_reason, result.peak_rss_compile_mb,
                  result.peak_rss_run_mb)
        self.write("results", dict(zip(_COLUMNS, values)))
        if self.warning and self.warning not in report.warnings:
            report.warnings.append(self.warning)

    def set_row_flag(self, row_id: int, key: str, value: Any) -> None:
        """Set ``flags[key]`` of stored row ``row_id`` now (a sweep row's bundle); UserError if unwritable."""
        if self.conn is None:
            raise UserError(self.warning or f"--db {self.path}: cannot write results database")
        with self.conn:
            self.conn.execute("UPDATE results SET flags_json = json_set(coalesce(flags_json, '{}'), ?, ?) WHERE id = ?",
                              (f"$.{key}", value, row_id))

    def run_status(self, report: Report, status: str, command: str = "compare") -> None:
        """Record the run in the ``runs`` table: ``running`` at the start, then ``done``,
        ``interrupted`` (Ctrl-C, SIGTERM) or ``failed`` (compstack's own error)."""
        ended = None if status == "running" else time.time()
        self.write("runs", {"run_id": report.run_id, "command": command, "model_name": report.model.get("name", ""),
                             "started": report.started, "ended": ended, "status": status})
        if self.warning and self.warning not in report.warnings:
            report.warnings.append(self.warning)

    def add_kernels(self, run_id: str, command: str, model: dict[str, Any], row: Any) -> None:
        """Write one target's ``compstack fusion``/``profile`` row now (committed at once,
        else journaled).

        Args:
            run_id: the command's run (also in ``runs``, see :meth:`run_status`).
            command: ``fusion`` or ``profile``.
            model: ``{"name", "fingerprint"}`` of the model.
            row: a :class:`compstack.fusion.run.TargetKernels`-like object
                (``target``, ``status``, ``stage``, ``error``, ``compile_s`` in seconds,
                ``kernels`` (a kernel map with ``to_json()``), ``profile`` (same),
                ``versions``, ``flags``, ``notes``).
        """
        kernels = row.kernels.to_json() if getattr(row, "kernels", None) is not None else None
        profile = row.profile.to_json() if getattr(row, "profile", None) is not None else None
        count = kernels.get("kernel_count") if isinstance(kernels, dict) else None
        self.write("kernel_rows", {
            "run_id": run_id, "created": time.time(), "command": command, "model_name": model.get("name", ""),
            "fingerprint": model.get("fingerprint", ""), "target": row.target, "status": row.status,
            "stage": getattr(row, "stage", ""), "error": getattr(row, "error", ""),
            "compile_s": getattr(row, "compile_s", None), "kernels": count,
            "kernels_json": json.dumps(kernels, default=str) if kernels is not None else None,
            "profile_json": json.dumps(profile, default=str) if profile is not None else None,
            "versions_json": json.dumps(dict(getattr(row, "versions", {}) or {})),
            "flags_json": json.dumps(dict(getattr(row, "flags", {}) or {}), default=str),
            "notes_json": json.dumps(list(getattr(row, "notes", []) or []))})

    def kernel_rows(self, fingerprint: str | None = None) -> list[dict[str, Any]]:
        """Every ``fusion``/``profile`` row (optionally of one model), oldest first.

        Raises:
            UserError: the database cannot be read.
        """
        if self.conn is None:
            raise UserError(self.warning or f"--db {self.path}: cannot read results database")
        cur = self.conn.execute("SELECT * FROM kernel_rows" + (" WHERE fingerprint = ?" if fingerprint else "")
                                + " ORDER BY id", (fingerprint,) if fingerprint else ())
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def sweep_status(self, sweep: dict[str, Any]) -> None:
        """Upsert a sweep's row in the ``sweeps`` table (keys of :data:`_SWEEP_COLUMNS`)."""
        self.write("sweeps", {k: sweep.get(k) for k in _SWEEP_COLUMNS})

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
#: The tables :meth:`ResultsDB.write` writes, so the ones a journal's rows may go back into.
JOURNAL_TABLES = ("results", "runs", "sweeps", "kernel_rows", "conformance_runs", "conformance_cases")
