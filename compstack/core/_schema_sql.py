"""SQL of the results database's later tables (steps 3-5 of
:data:`compstack.core.results.MIGRATIONS`), kept apart so that module stays small.

Each constant is one migration step: a tuple of SQL statements.
"""

from __future__ import annotations

__all__ = ["CONFORMANCE_TABLES", "FUZZ_TABLES", "KERNEL_TABLES"]

#: 3: conformance runs (one row per target) and cases (one row per case and target)
CONFORMANCE_TABLES = ("""CREATE TABLE IF NOT EXISTS conformance_runs (
    run_id TEXT, created REAL, target TEXT, version TEXT, onnx_version TEXT, total INTEGER,
    passed INTEGER, unsupported INTEGER, timeout INTEGER, crashed INTEGER, failed_at_json TEXT,
    seconds REAL, selection_json TEXT)""",
     """CREATE TABLE IF NOT EXISTS conformance_cases (
    run_id TEXT, target TEXT, name TEXT, status TEXT, stage TEXT, error TEXT, seconds REAL)""")

#: 4: fuzz campaigns and their unique findings
FUZZ_TABLES = ("""CREATE TABLE IF NOT EXISTS fuzz_campaigns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started REAL, finished REAL, seed INTEGER, budget_s REAL, targets TEXT, options TEXT,
    graphs INTEGER, rejected INTEGER, outcomes TEXT, stage_seconds TEXT, graphs_per_min REAL, findings INTEGER
)""",
     """CREATE TABLE IF NOT EXISTS fuzz_findings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    campaign INTEGER, number INTEGER, signature TEXT, target TEXT, stage TEXT, kind TEXT, label TEXT, ops TEXT,
    graph TEXT, attribution TEXT, known INTEGER, repeats INTEGER, bundle TEXT, graph_seed INTEGER, error TEXT
)""")

#: 5: one row per target of ``compstack fusion`` / ``compstack profile``
KERNEL_TABLES = ("""CREATE TABLE IF NOT EXISTS kernel_rows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    created REAL NOT NULL,
    command TEXT NOT NULL,
    model_name TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    target TEXT NOT NULL,
    status TEXT NOT NULL,
    stage TEXT,
    error TEXT,
    compile_s REAL,
    kernels INTEGER,
    kernels_json TEXT,
    profile_json TEXT,
    versions_json TEXT,
    flags_json TEXT,
    notes_json TEXT
)""",
     "CREATE INDEX IF NOT EXISTS kernel_rows_model ON kernel_rows (fingerprint, target)")
