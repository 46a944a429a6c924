"""The property a reduction keeps: ``--keep 'xla-cpu!=ref,ort-cpu==ref'``.

A property is a conjunction of clauses ``A!=B`` or ``A==B`` where each side is a target
name or ``ref`` (the float64 reference, judged with the noise floor of
:mod:`compstack.analysis.verdict`). ``T!=ref`` holds when T's outputs are wrong (or T
fails where the reference does not); ``T==ref`` when every output is ok or merely
imprecise; ``A!=B`` between two targets when A's outputs are wrong taking B's outputs as
the reference (B's own float32 noise is the floor). The default is ``T!=ref`` for the
first target of ``--targets`` (what a user who asks "why does T differ" means). When the
target fails on the whole model (a crash, a compile error), the default keeps *that*:
the same status at the same stage, the way Polygraphy's ``debug reduce`` keeps a failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compstack.core.errors import UserError

__all__ = ["Clause", "error_class", "parse_keep"]

_CLAUSE = re.compile(r"^\s*([\w.\-@+]+)\s*(!=|==)\s*([\w.\-@+]+)\s*$")  # a side may be TARGET@VERSION


@dataclass(frozen=True)
class Clause:
    """``left op right``; ``op`` is ``!=`` or ``==``; a side is a target name or ``ref``."""

    left: str
    op: str
    right: str

    def targets(self) -> list[str]:
        return [s for s in (self.left, self.right) if s != "ref"]

    def __str__(self) -> str:
        return f"{self.left}{self.op}{self.right}"


def parse_keep(text: str, known: list[str]) -> list[Clause]:
    """Parse a ``--keep`` expression.

    Args:
        text: comma-separated clauses.
        known: the targets of this explain (``--targets``); every side must be one of
            them or ``ref``.

    Raises:
        UserError: a malformed clause or an unknown side (names the clause).
    """
    clauses = []
    for part in (p for p in text.split(",") if p.strip()):
        m = _CLAUSE.match(part)
        if m is None:
            raise UserError(f"--keep {part.strip()!r}: expected TARGET!=ref, TARGET==ref or A!=B")
        left, op, right = m.groups()
        for side in (left, right):
            if side != "ref" and side not in known:
                raise UserError(f"--keep {part.strip()!r}: {side!r} is not one of --targets ({', '.join(known)}) "
                                "or ref")
        if left == right:
            raise UserError(f"--keep {part.strip()!r}: both sides are {left}")
        if left == "ref":
            left, right = right, left
        clauses.append(Clause(left, op, right))
    if not clauses:
        raise UserError("--keep: no clause given")
    return clauses


_ERROR_CLASS = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Failure))\b")


def error_class(error: str) -> str:
    """The first exception class an error text names (``AssertionError``, ``InternalError``...),
    or "" when it names none; a kept failure must fail with the same class, so a reduction
    cannot trade the bug it was given for another one at the same stage."""
    m = _ERROR_CLASS.search(error or "")
    return m.group(1) if m else ""
