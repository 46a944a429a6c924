"""Errors raised by compstack.

Two families:

* :class:`UserError` — bad input that the user can fix (a missing file, an unknown
  target, a malformed ONNX model, a bad flag). The CLI prints its message as one line
  on stderr and exits with status 2; no traceback.
* Errors inside a compiler stack (TVM, IREE, ORT, ...) are *data*: they become the
  ``status``/``stage``/``error`` of that target's result row (see
  :mod:`compstack.core.results`). :class:`UnsupportedError` and :class:`ToolError` are the
  two typed ones; any other exception raised by a stack is reported as ``failed``.

Anything else escaping from compstack is a bug in compstack and is not swallowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

__all__ = [
    "CompstackError",
    "UserError",
    "ExportError",
    "UnavailableError",
    "UnsupportedError",
    "ToolError",
    "ToolTimeoutError",
]


class CompstackError(Exception):
    """Base class of every error compstack raises on purpose.

    Attributes:
        hint: what the user can change to get past this failure, where compstack knows
            (e.g. a target option); empty otherwise. Shown beside the error.
    """

    hint: str = ""


class UserError(CompstackError):
    """Bad input from the user: printed as one line, exit status 2."""


class ExportError(UserError):
    """A framework program did not export to the common IR (``torch.export`` or the ONNX
    exporter failed, or a zoo builder raised).

    A :class:`UserError` for a user's own program (one line, exit 2 where nothing else can
    run); ``compare`` and ``sweep`` make it one ``failed`` row per target at :attr:`stage`.

    Attributes:
        stage: ``torch.export``, ``onnx-export`` or ``build`` (a zoo builder).
        status: the rows' status: ``failed`` (the exporter or builder said why: it fails
            the same way again), or, for a zoo export worker that was lost, ``crashed``
            (killed by a signal, the kernel's OOM killer among them, or gone without a word)
            or ``timeout``: as for a job's worker, ``--resume`` runs these again.
    """

    def __init__(self, message: str, stage: str, status: str = "failed") -> None:
        super().__init__(message)
        self.stage = stage
        self.status = status


class UnavailableError(CompstackError):
    """A target's stack is not installed or its device is absent.

    The message says what to install or what is missing.
    """


class UnsupportedError(CompstackError):
    """The stack cannot take this model (e.g. an op it does not implement).

    Attributes:
        ops: the unsupported ``domain::OpType`` names, all of them at once, when known.
    """

    def __init__(self, message: str, ops: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ops = list(ops)


class ToolError(CompstackError):
    """An external compiler tool (``iree-compile``, ``iree-import-onnx``...) failed.

    Attributes:
        argv: the command line that was run.
        returncode: its exit status.
        stderr_tail: the last lines of its stderr.
        temps: the folder where inputs and outputs were kept
            (``COMPSTACK_SAVE_TEMPS``), or None.
    """

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int,
        stderr: str,
        temps: Path | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.returncode = returncode
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        self.stderr_tail = "\n".join(lines[-20:])
        self.temps = temps
        first_err = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
        msg = f"{Path(self.argv[0]).name} exited with status {returncode}: {first_err.strip()}"
        if temps is not None:
            msg += f" (temps kept in {temps})"
        super().__init__(msg)


class ToolTimeoutError(ToolError):
    """A tool ran past its time limit and was killed (exit status 124, like ``timeout``).

    Attributes:
        timeout: the limit, in seconds.
    """

    def __init__(self, argv: Sequence[str], timeout: float, stderr: str, temps: Path | None) -> None:
        self.timeout = timeout
        super().__init__(argv, 124, f"{stderr}\nerror: timed out after {timeout:g} s", temps)
