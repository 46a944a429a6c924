"""Fuzz campaigns in the results database (the SQLite file of ``settings().db``).

Two tables of the one results schema (:data:`compstack.core.results.MIGRATIONS`):

* ``fuzz_campaigns``: one row per campaign (seed, budget, options, graphs tried,
  outcomes per target and stage as JSON, throughput, start and end);
* ``fuzz_findings``: one row per unique finding (signature, target, stage, kind, ops,
  reduced graph in one line, attribution, known or new, bundle folder, seed of the graph).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

__all__ = ["FuzzStore"]

class FuzzStore:
    """Writes and reads campaign rows; every write commits at once."""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0) -> None:
        from compstack.core.errors import UserError

        self.path = Path(path)
        try:
            from compstack.core.results import connect

            self.conn = connect(self.path, busy_timeout_s)  # tables: compstack.core.results.MIGRATIONS
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"--db {self.path}: cannot open the results database ({exc})") from None
        self.conn.row_factory = sqlite3.Row

    def start(self, seed: int, budget_s: float, targets: list[str], options: dict[str, Any]) -> int:
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO fuzz_campaigns (started, seed, budget_s, targets, options, graphs, rejected, findings) "
                "VALUES (?, ?, ?, ?, ?, 0, 0, 0)",
                (time.time(), seed, budget_s if budget_s != float("inf") else None, ",".join(targets),
                 json.dumps(options, default=str)))
        return int(cur.lastrowid or 0)

    def update(self, cid: int, graphs: int, rejected: int, outcomes: dict[str, Any], stage_seconds: dict[str, Any],
               gpm: float, findings: int, finished: bool = False) -> None:
        with self.conn:
            self.conn.execute(
                "UPDATE fuzz_campaigns SET graphs=?, rejected=?, outcomes=?, stage_seconds=?, graphs_per_min=?, "
                "findings=?, finished=? WHERE id=?",
                (graphs, rejected, json.dumps(outcomes), json.dumps(stage_seconds), gpm, findings,
                 time.time() if finished else None, cid))

    def finding(self, cid: int, row: dict[str, Any]) -> None:
        cols = ("number", "signature", "target", "stage", "kind", "label", "ops", "graph", "attribution", "known",
                "repeats", "bundle", "graph_seed", "error")
        with self.conn:
            self.conn.execute(f"INSERT INTO fuzz_findings (campaign, {', '.join(cols)}) VALUES "
                              f"(?, {', '.join('?' * len(cols))})", (cid, *[row.get(c) for c in cols]))

    def repeat(self, cid: int, signature: str) -> None:
        with self.conn:
            self.conn.execute("UPDATE fuzz_findings SET repeats = repeats + 1 WHERE campaign=? AND signature=?",
                              (cid, signature))

    def campaigns(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM fuzz_campaigns ORDER BY id")]

    def findings(self, cid: int) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM fuzz_findings WHERE campaign=? ORDER BY number",
                                                   (cid,))]

    def close(self) -> None:
        self.conn.close()
