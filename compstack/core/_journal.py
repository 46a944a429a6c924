"""Replaying the results journal (``<db>.journal.jsonl``) into the database, one line at
a time: a line that cannot be inserted is quarantined, never a reason to keep every later
row out of the database."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["bad_journal_path", "replay_journal"]


def bad_journal_path(db: Path) -> Path:
    """``<db>.journal.bad.jsonl``: where journal lines that could not be inserted go."""
    return db.with_name(db.name + ".journal.bad.jsonl")


def _record(line: str, columns: Mapping[str, set[str]]) -> tuple[str, dict[str, Any]] | None:
    """``(table, row)`` of one journal line, its keys cut to ``columns``; None when unusable."""
    try:
        rec = json.loads(line)
        table, row = rec["table"], rec["row"]
    except (ValueError, KeyError, TypeError):
        return None  # not JSON (a torn last line of a killed run), or not a record
    if not isinstance(table, str) or table not in columns or not isinstance(row, dict):
        return None
    kept = {k: v for k, v in row.items() if k in columns[table]}
    return (table, kept) if kept else None


def _database_level(exc: sqlite3.Error) -> bool:
    """True when ``exc`` is about the database (locked, read-only, full, I/O), not one row."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and any(
        w in text for w in ("locked", "busy", "readonly", "read-only", "disk", "full", "i/o"))


def replay_journal(conn: sqlite3.Connection, journal: Path, db: Path, tables: tuple[str, ...],
                   insert: Callable[[str, dict[str, Any]], None]) -> str:
    """Insert every line of ``journal`` through ``insert`` in one transaction, then remove it.

    Each line runs in its own savepoint. A line that is not a record, names no table of
    ``tables``, or that SQLite refuses (a value it cannot bind, a broken constraint) is
    appended to :func:`bad_journal_path` instead, and the other lines are kept.

    Returns:
        A one-line warning naming the quarantine file, or ``""`` when every line went in.

    Raises:
        sqlite3.Error: a database-level error (locked, read-only, full): nothing is
            committed and the journal stays for the next run.
        sqlite3.OperationalError: the quarantine file cannot be written (the journal stays).
    """
    bad: list[str] = []
    columns = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    with conn:
        for line in journal.read_text(errors="replace").splitlines():
            record = _record(line, columns)
            if record is None:
                if line.strip():
                    bad.append(line)
                continue
            conn.execute("SAVEPOINT journal_line")
            try:
                insert(*record)
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK TO journal_line")
                if _database_level(exc):
                    raise
                bad.append(line)
            conn.execute("RELEASE journal_line")
        if bad:
            target = bad_journal_path(db)
            try:
                with open(target, "a") as f:
                    f.write("".join(line + "\n" for line in bad))
            except OSError as exc:
                raise sqlite3.OperationalError(f"cannot write {target}: {exc.strerror or exc}") from None
    journal.unlink()
    if not bad:
        return ""
    return (f"{len(bad)} line(s) of the results journal {journal} could not be inserted and were moved to "
            f"{bad_journal_path(db)}; the other rows were replayed")
