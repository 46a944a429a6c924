"""Whose fault a non-ok row is, decided cheaply at the row (issue #23, part 2).

Every non-ok row of compare, sweep and conformance gets ``fault`` (one of
:data:`compstack.core.results.FAULTS`) and a one-line ``fault_reason``:

* ``compstack``: our export, translation or harness. The import stage (loading the
  model, exporting a framework program, our job harness) is ours, and so is a model whose
  export (stage ``torch.export`` or ``onnx-export``) failed; so is an op without a
  converter on a translated path (XLA, Inductor, TorchScript from the common IR), an
  exception raised from compstack's own code (its innermost traceback frame is in
  ``compstack/`` outside the wrappers around a stack: the targets' adapters and
  ``core/tools.py``, which runs the stack's command-line tools; or in
  ``compstack/translate/``), and a
  translated path whose program, run eagerly without the compiler
  (:mod:`compstack.run.tasks.evaluate` mode ``eager``), already disagrees with the
  reference.
* ``stack``: the stack's frontend, compiler or runtime: an op the stack does not
  support, a failure, crash, hang or memory overrun in ``lower``/``compile``/``run``/
  ``latency`` raised inside the stack, a mismatch of a stack that reads the common IR
  itself (the reference ran the same file), a mismatch of a translated path whose eager
  program agrees with the reference (so the compiler changed the result).
* ``compstack`` too: a ``reference-suspect`` row (a second oracle disagrees with the
  reference): the oracle is compstack's to fix (:mod:`compstack.analysis.refdefects`, or
  the translation behind the eager float64 reference), and the stack is not blamed.
* ``undefined``: the verdict says the graph's result is undefined (a UB rule of
  :mod:`compstack.fuzz.ub` fired; status or verdict ``undefined``).
* ``unknown``: the rest (the stack is not installed here; no reference to compare
  with; a stack that failed on a model the reference could not run either (the model may be
  invalid: an attribute or a shape the spec forbids); a worker killed or lost while it
  loaded the model, before any stack ran; a stack's worker killed by SIGKILL from outside,
  which compstack's own limits never send (the kernel's OOM killer when jobs beside it took
  the machine's memory); a model whose own builder raised (stage ``build``); a native
  framework path's mismatch, where the reference ran compstack's ONNX export of the
  program, so either may be wrong: ``compstack explain`` tells them apart).

The deep version is ``compstack explain`` (attribution by re-running with passes off).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["TRANSLATED_STACKS", "Fault", "attribute", "conformance_fault", "innermost_frame", "is_translated",
           "killed_from_outside"]

#: Targets whose stack does not read ONNX: on the ``translated`` path they run
#: compstack's translation of the common IR (JAX for XLA, torch.fx for the others).
TRANSLATED_STACKS = ("xla", "inductor", "torchscript")

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
#: compstack files that wrap a stack: a traceback ending in one of them was raised for the
#: stack (a target's adapter; core/tools.py raises ToolError when the stack's own command-line
#: tool, iree-compile or iree-import-onnx, exits non-zero).
_WRAPPERS = ("compstack/targets/", "compstack/core/tools.py")
_LOST = ("crashed", "timeout", "oom")
_LOST_HOW = {"crashed": "was lost", "timeout": "ran past its time limit", "oom": "ran out of memory"}


def killed_from_outside(row: Any) -> bool:
    """Whether a row's (or a job outcome's) worker died of a SIGKILL that compstack did not
    send (its own limits give ``timeout`` and ``oom``): the kernel's OOM killer, on a
    machine whose memory the jobs beside it took, or another process."""
    return row.status == "crashed" and "SIGKILL" in (row.error or "")


@dataclass(frozen=True)
class Fault:
    """``fault`` and ``fault_reason`` of one row (both empty for an ok row)."""

    fault: str = ""
    reason: str = ""


def is_translated(flags: dict[str, Any]) -> bool:
    """Whether the row ran compstack's translated program (``flags["path"]`` is
    ``translated``: only the two-path targets of :data:`TRANSLATED_STACKS` set it)."""
    return str(flags.get("path", "")) == "translated"


def innermost_frame(log: str) -> str:
    """The file of the innermost frame of the last Python traceback in ``log``
    (empty when it holds none)."""
    frames = _FRAME.findall(log or "")
    return frames[-1][0] if frames else ""


def _rel(path: str) -> str:
    """``compstack/...`` for a file inside the compstack package, else empty."""
    path = path.replace("\\", "/")
    return "compstack/" + path.rsplit("/compstack/", 1)[1] if "/compstack/" in path else ""


def _ours(log: str, translated: bool) -> str:
    """The compstack file to blame for the traceback in ``log``: its innermost frame when
    that is compstack's own code (not a target's wrapper around its stack), or, on a
    translated path, the innermost frame in ``compstack/translate/`` (tracing our
    converters is what lowering a translated program does). Empty otherwise."""
    inner = _rel(innermost_frame(log))
    if inner and not inner.startswith(_WRAPPERS):
        return inner
    if translated:
        ours = [r for r in (_rel(f) for f, _ in _FRAME.findall(log or "")) if r.startswith("compstack/translate/")]
        if ours:
            return ours[-1]
    return ""


def attribute(row: Any, eager_agrees: bool | None = None, eager_note: str = "", reference_error: str = "") -> Fault:
    """The fault of one row (see the module docstring).

    Args:
        row: a :class:`compstack.core.results.Result` (``status``, ``stage``, ``error``,
            ``log``, ``flags``, ``unsupported_ops``, ``target``; ``verdict`` when the
            verdict engine set one).
        eager_agrees: for a translated path's mismatch: whether its program run eagerly
            agrees with the reference (None: not checked).
        eager_note: one line on that check when it could not run.
        reference_error: why no reference ran, when none did (the chosen reference and its
            stand-in both failed on this model); a stack's own failure is then ``unknown``:
            the model may be invalid (ONNX's checker with ``full_check``, or explain, tells).

    Returns:
        A :class:`Fault`; empty for an ok row.
    """
    status, stage = row.status, row.stage or ""
    translated = is_translated(row.flags or {})
    first = (row.error or "").splitlines()[0][:200] if row.error else ""
    if status == "ok":
        return Fault()
    if status == "undefined" or getattr(row, "verdict", "") == "undefined":
        return Fault("undefined", f"undefined behaviour: {first or 'a UB rule fired on these inputs'}")
    if status == "reference-suspect" or getattr(row, "verdict", "") == "reference-suspect":
        return Fault("compstack", f"compstack's oracle is in question, not the stack: {first or 'the float64 oracles disagree'}")
    if status == "unavailable":
        return Fault("unknown", f"not run here: {first}")
    if status == "unsupported":
        ops = ", ".join(row.unsupported_ops[:8])
        if translated:
            return Fault("compstack", f"compstack's translation has no converter for {ops or first}")
        return Fault("stack", f"the stack does not support {ops or first}")
    if stage == "import" and status in _LOST:  # killed while loading the model: no code of a stack or ours to blame
        return Fault("unknown", f"the worker {_LOST_HOW[status]} while it loaded the model (the machine's memory or time, "
                                f"not a stack's code): {first}")
    if stage == "import":
        return Fault("compstack", f"compstack's import/export/harness failed ({status}): {first}")
    if stage in ("torch.export", "onnx-export"):  # no stack ran: the model never reached the common IR
        return Fault("compstack", f"compstack's export of the model failed at {stage}: {first}")
    if stage == "build" and status in _LOST:  # the export worker was lost: the machine, not the model's code
        return Fault("unknown", f"the export worker {_LOST_HOW[status]} before any stack ran (the machine's memory or "
                                f"time, not a stack's code): {first}")
    if stage == "build":
        return Fault("unknown", f"the model's own builder raised before any export: {first}")
    if status == "mismatch":
        return _mismatch(translated, row, eager_agrees, eager_note)
    if killed_from_outside(row):
        return Fault("unknown", f"the stack's worker was killed by SIGKILL in {stage or 'its job'} from outside (the "
                                f"kernel's OOM killer on a machine short of memory, or another process); rerun it "
                                f"alone or under --memory-limit to tell: {first}")
    if status in _LOST:
        return Fault("stack", f"the stack's worker {_LOST_HOW[status]} in {stage or 'its job'}: {first}")
    if status == "failed" and stage == "compare":
        return Fault("unknown", f"nothing to compare with: {first}")
    ours = _ours(row.log or "", translated)
    if ours:
        return Fault("compstack", f"raised in compstack's own code ({ours}) in {stage}: {first}")
    if reference_error and status == "failed":  # the reference refused the model too: it may be invalid
        return Fault("unknown", f"the reference could not run this model either ({reference_error.splitlines()[0][:160]}):"
                                f" the model may be invalid (onnx.checker.check_model(full_check=True) or compstack "
                                f"explain tells); the stack failed in {stage or 'its job'}: {first}")
    return Fault("stack", f"the stack failed in {stage or 'its job'}: {first}")


def _mismatch(translated: bool, row: Any, eager_agrees: bool | None, eager_note: str) -> Fault:
    path = str((row.flags or {}).get("path", ""))
    if translated:
        if eager_agrees is True:
            return Fault("stack", "compstack's translated program agrees with the reference when run eagerly; "
                                  "the compiler changed the result")
        if eager_agrees is False:
            return Fault("compstack", "compstack's translated program already disagrees with the reference when "
                                      "run eagerly, without the compiler")
        return Fault("unknown", f"translated path; eager check not made{': ' + eager_note if eager_note else ''}")
    if path.startswith("native"):
        return Fault("unknown", "native path: the reference ran compstack's ONNX export of the program, so either "
                                "may be wrong (compstack explain tells them apart)")
    return Fault("stack", "the stack's outputs differ from the reference on the same ONNX model")


def conformance_fault(target: str, row: dict[str, Any], stack: str) -> Fault:
    """The fault of one ``compstack conformance`` row (``status`` ``passed``/``failed``/
    ``unsupported``/``timeout``/``crashed``, ``stage``, ``error``, ``log``: the worker's
    traceback frames) of ``target``, by :func:`attribute`'s rules, with the ONNX node
    test's expected outputs as the reference (a ``failed`` row at ``compare`` is a
    mismatch). ``stack`` is the target class's declared stack (``Target.stack``: the
    caller reads the registry, which sits above this layer). On the translated stacks
    (:data:`TRANSLATED_STACKS`) the case ran
    compstack's translation, and no eager check is made (``unknown`` for a mismatch). A
    case the harness cannot feed (sequence or optional inputs) is compstack's."""
    from types import SimpleNamespace

    status, stage, error = row.get("status", ""), row.get("stage", ""), row.get("error", "")
    if status == "passed":
        return Fault()
    if status == "unsupported" and stage == "import" and ("harness" in error or "inputs do not match" in error):
        return Fault("compstack", f"compstack's conformance harness cannot run this case: {error[:200]}")
    if status == "unsupported" and stage == "import" and error.startswith("dtype "):
        return Fault("stack", f"the stack does not take this dtype (the target's declared dtypes): {error[:200]}")
    translated = stack in TRANSLATED_STACKS
    like = SimpleNamespace(status="mismatch" if status == "failed" and stage == "compare" else status, stage=stage,
                           error=error, log=row.get("log", ""), unsupported_ops=[], target=target, verdict="",
                           flags={"path": "translated"} if translated else {})
    return attribute(like)
