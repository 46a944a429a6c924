"""Output folders that lose nothing compstack did not write.

Every command that writes a folder (``lower -o``, ``dump -o``) claims it first:

* an empty path is refused (``-o ''`` would write into the current folder);
* a file, or a non-empty folder without compstack's ownership record, is refused and
  left untouched, whatever else it holds (a ``manifest.json`` another tool wrote
  included);
* a folder that holds the record (``.compstack-owned.json``) of an earlier run of the
  same command: only the entries that record lists are removed, never anything else.

The record is written twice: when the folder is claimed (``state: writing``, with the
entries that were there already and are not ours), and when the command is done
(``state: done``, the entries it wrote). A run killed between the two leaves a
``writing`` record: the next run removes what is in the folder except the foreign
entries it listed. The record is data read back from disk, so each name in it must be a
plain entry name of the folder (no ``/``, no ``..``); anything else is ignored.

This is the rule ``explain -o`` follows for bundles (:mod:`compstack.explain.bundle`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from compstack.core.errors import UserError

__all__ = ["RECORD", "OutputDir", "check_distinct", "claim_dir"]

_T = TypeVar("_T")

#: The ownership record's file name inside a claimed folder.
RECORD = ".compstack-owned.json"


class OutputDir:
    """A claimed output folder (see :func:`claim_dir`).

    Attributes:
        path: the folder (created).
        command: the command that owns it (``lower``, ``dump``).
        foreign: entry names that were in the folder before and are not compstack's.
    """

    def __init__(self, path: Path, command: str, foreign: set[str]) -> None:
        self.path = path
        self.command = command
        self.foreign = foreign

    def _write(self, state: str, names: list[str]) -> None:
        key = "entries" if state == "done" else "foreign"
        body = {"tool": "compstack", "command": self.command, "state": state, key: sorted(names)}
        try:
            (self.path / RECORD).write_text(json.dumps(body, indent=1) + "\n")
        except OSError as exc:
            raise UserError(f"-o {self.path}: cannot write {RECORD} ({exc.strerror or exc})") from None

    def done(self, value: _T) -> _T:
        """Record every entry of the folder that is not foreign as this command's own.

        Args:
            value: returned as is (the command's result: ``return out.done(result)``).

        Raises:
            UserError: the record cannot be written (full disk, read-only).
        """
        self._write("done", [n for n in os.listdir(self.path) if n != RECORD and n not in self.foreign])
        return value


def _plain(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..", RECORD) and "/" not in name and "\0" not in name


def _owned(folder: Path, command: str) -> list[str] | None:
    """The entries an earlier run of ``command`` recorded as its own; None: no such record."""
    try:
        rec = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("tool") != "compstack" or rec.get("command") != command:
        return None
    present = set(os.listdir(folder))
    if rec.get("state") == "done" and isinstance(rec.get("entries"), list):
        return [n for n in rec["entries"] if _plain(n) and n in present]
    if rec.get("state") == "writing" and isinstance(rec.get("foreign"), list):
        foreign = {n for n in rec["foreign"] if _plain(n)}
        return [n for n in present if _plain(n) and n not in foreign]
    return None


def _remove(folder: Path, name: str) -> None:
    p = folder / name
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)


def claim_dir(path: str | os.PathLike[str], command: str, flag: str = "-o") -> OutputDir:
    """Claim ``path`` as ``command``'s output folder: check it, create it, remove what an
    earlier run of ``command`` recorded there, and write the ``writing`` record.

    Args:
        path: the folder the user gave.
        command: the command name recorded as the owner.
        flag: the flag named in messages.

    Returns:
        The :class:`OutputDir`; call :meth:`OutputDir.done` when the command has written it.

    Raises:
        UserError: an empty path, a file, a non-empty folder that compstack ``command``
            did not write (nothing in it is touched), or a folder that cannot be written.
    """
    text = os.fspath(path)
    if not text.strip():
        raise UserError(f"{flag} '': empty path; give a folder")
    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{flag} {text}: not a folder")
    foreign: set[str] = set()
    if folder.is_dir():
        try:
            present = set(os.listdir(folder)) - {RECORD}
        except OSError as exc:
            raise UserError(f"{flag} {text}: cannot read the folder ({exc.strerror or exc})") from None
        owned = _owned(folder, command) if present or (folder / RECORD).exists() else []
        if owned is None and present:
            raise UserError(f"{flag} {text}: the folder is not empty and was not written by compstack {command}; "
                            "give a new or empty folder (nothing in it was touched)")
        try:
            for name in owned or []:
                _remove(folder, name)
        except OSError as exc:
            raise UserError(f"{flag} {text}: cannot remove an earlier {command}'s files "
                            f"({exc.strerror or exc})") from None
        foreign = present - set(owned or [])
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{flag} {text}: output folder not writable ({exc.strerror or exc})") from None
    out = OutputDir(folder, command, foreign)
    out._write("writing", sorted(foreign))
    return out


def check_distinct(paths: Mapping[str, str | os.PathLike[str] | None]) -> None:
    """Refuse two flags that name the same file (one would overwrite the other), and
    empty paths.

    Args:
        paths: ``{flag: path or None}``; None (not given) is skipped.

    Raises:
        UserError: ``--save-inputs F and --save-outputs F: the same file``, or an empty path.
    """
    seen: dict[str, tuple[str, str]] = {}
    for flag, value in paths.items():
        if value is None:
            continue
        text = os.fspath(value)
        if not text.strip():
            raise UserError(f"{flag} '': empty path; give a file")
        key = os.path.realpath(text)
        if key in seen:
            first, given = seen[key]
            raise UserError(f"{first} {given} and {flag} {text}: the same file; give two different paths")
        seen[key] = (flag, text)
