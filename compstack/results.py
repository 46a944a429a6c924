"""Result rows, the JSON report, and the SQLite results database.

One :class:`Result` per (model, target) job. Each row is written to the database the
moment its job finishes (``ResultsDB.add``), so nothing measured is lost when a later
job dies. ``Report.to_json()`` is the ``--json`` output (``schema_version`` 1).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compstack.errors import UserError

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
        outputs: per-output numerics (see :class:`compstack.compare.OutputComparison`).
        versions: versions of the stack's packages.
        flags: how the stack was invoked.
        cached: the artifact came from the cache.
        notes: remarks for the reader (untuned TVM, rebuilt cache entry...).
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
            "latency_comparison": self.latency_comparison(),
        }

    def latency_comparison(self) -> dict[str, Any]:
        """Pairs of timed targets: median ratio and significance (see
        :func:`compstack.latency.compare_latencies`)."""
        from compstack.latency import compare_latencies

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
"""


class ResultsDB:
    """The SQLite results database (one file; created on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(self.path))
            self.conn.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"--db {self.path}: cannot open results database: {exc}") from None

    def add(self, report: Report, result: Result) -> None:
        """Write one finished result now (committed immediately)."""
        lat = result.latency_ms or {}
        with self.conn:
            self.conn.execute(
                "INSERT INTO results (run_id, created, model_name, fingerprint, target, status, stage, "
                "error, compile_s, latency_median_ms, latency_json, outputs_json, versions_json, flags_json, "
                "reference, cached, log) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (report.run_id, time.time(), report.model.get("name", ""), report.model.get("fingerprint", ""),
                 result.target, result.status, result.stage, result.error, result.compile_s, lat.get("median"),
                 json.dumps(lat), json.dumps(result.outputs), json.dumps(result.versions),
                 json.dumps(result.flags, default=str), report.reference.get("target", ""),
                 int(result.cached), result.log[-20000:]),
            )

    def rows(self, fingerprint: str | None = None) -> list[dict[str, Any]]:
        """All rows (optionally of one model), oldest first, as dicts."""
        cur = self.conn.execute(
            "SELECT * FROM results" + (" WHERE fingerprint = ?" if fingerprint else "") + " ORDER BY id",
            (fingerprint,) if fingerprint else (),
        )
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def close(self) -> None:
        self.conn.close()
