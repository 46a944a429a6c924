"""Finding signatures: what makes two findings the same bug, and the known ones.

A signature is ``target|stage|kind|ops|error``: the target, the stage that failed
(``import``, ``lower``, ``compile``, ``run``, or ``compare`` for a wrong result), the
kind (``failed``, ``crashed``, ``timeout``, ``wrong``, ``nan``, ``shape``,
``equivalence``), the sorted op set of the *reduced* graph, and the first error line
normalised (numbers, tensor names, hex addresses and paths replaced by placeholders) so
that the same crash on other shapes groups with it.

Known findings live beside the package, one file per stack version, like the
conformance XFAIL files: ``compstack/fuzz/known/<target>@<version>.txt``, one signature
a line, ``#`` comments.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

__all__ = ["KNOWN_DIR", "normalise", "signature", "known_path", "read_known", "write_known"]

KNOWN_DIR = Path(__file__).parent / "known"

_SUBS = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x#"),
    (re.compile(r"(/[\w.+-]+)+"), "<path>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "'…'"),
    (re.compile(r"\b(in|t|n|c|w)\d+\w*"), "<name>"),
    (re.compile(r"\b(lv|gv|v|x|y)\d*\b"), "<var>"),  # TVM/MLIR SSA-style value names
    (re.compile(r"-?\d+(\.\d+)?(e-?\d+)?"), "#"),
    (re.compile(r"#(, #)+"), "#…"),  # shapes of any rank
    (re.compile(r"\s+"), " "),
]


def normalise(error: str) -> str:
    """The first line of ``error`` with numbers, names, quoted text and paths abstracted."""
    line = next((ln.strip() for ln in (error or "").splitlines() if ln.strip()), "")
    for pat, rep in _SUBS:
        line = pat.sub(rep, line)
    return line[:160]


def signature(target: str, stage: str, kind: str, ops: Iterable[str], error: str = "") -> str:
    """The dedup key of a finding (see the module docstring)."""
    return "|".join([target, stage or "-", kind, "+".join(sorted(set(ops))) or "-", normalise(error)])


def known_path(target: str, version: str, folder: Path = KNOWN_DIR) -> Path:
    return folder / f"{target}@{version}.txt"


def read_known(target: str, version: str, folder: Path = KNOWN_DIR) -> set[str]:
    """Known signatures of ``target`` at ``version`` (empty when there is no file)."""
    path = known_path(target, version, folder)
    if not path.is_file():
        return set()
    return {ln.split("  #")[0].strip() for ln in path.read_text().splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")}


def write_known(target: str, version: str, rows: Iterable[tuple[str, str]], folder: Path = KNOWN_DIR) -> Path:
    """Add ``(signature, comment)`` rows to the known file (kept sorted, no repeats)."""
    path = known_path(target, version, folder)
    lines: dict[str, str] = {}
    if path.is_file():
        for ln in path.read_text().splitlines():
            if ln.strip() and not ln.startswith("#"):
                sig, _, note = ln.partition("  # ")
                lines[sig.strip()] = note
    for sig, note in rows:
        lines.setdefault(sig, note)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = [f"# known fuzz findings for {target} {version} (compstack fuzz --update-known)"]
    body += [f"{s}  # {n}" if n else s for s, n in sorted(lines.items())]
    path.write_text("\n".join(body) + "\n")
    return path
