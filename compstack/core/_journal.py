"""Replaying the results journal (``<db>.journal.jsonl``) into the database, one line at
a time: a line that cannot be inserted is quarantined, never a reason to keep every later
row out of the database. And what never gets a journal: a ``--db`` that cannot be a
database at all (:func:`refuse_non_database`), which is bad input."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from compstack.core.errors import UserError

__all__ = ["bad_journal_path", "refuse_non_database", "replay_journal"]


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


def refuse_non_database(path: Path) -> Path:
    """Raise :class:`UserError` (one line naming ``path``) when ``path`` cannot be a results
    database: a folder, a file whose first 16 bytes are not SQLite's header (the SQLite file
    format, section 1.3.1: ``"SQLite format 3\\0"``; an empty file is a new database), or
    a path under a file. Returns ``path``."""
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise UserError(f"--db {path}: {parent} is a file, not a folder")
        if parent.is_dir():
            break
    if path.is_dir():
        raise UserError(f"--db {path}: is a folder; give a database file (e.g. {path / 'results.sqlite'})")
    if path.exists() and not path.is_file():  # a FIFO or a device: reading it could block or never end
        raise UserError(f"--db {path}: not a regular file")
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise UserError(f"--db {path}: cannot read it ({exc.strerror or exc})") from None
    if head and head != b"SQLite format 3\x00":
        raise UserError(f"--db {path}: not an SQLite database (nothing was written to it); give a new "
                        "file or a compstack results database")
    return path
