"""What ONNX Runtime's errors mean: a missing kernel or schema is an unsupported op.

ORT refuses a session whose graph holds an op it has no kernel for (``Could not find an
implementation for Op(opset)``) or no schema for (``domain:Op(opset) is not a registered
function/op``); compstack reports those as ``unsupported`` with the ops named, not as a
compile failure.
"""

from __future__ import annotations

import re

from compstack.core.errors import UnsupportedError

__all__ = ["unsupported_ops"]

#: ORT's messages for an op it has no kernel or schema for.
_NO_KERNEL = re.compile(r"Could not find an implementation for (?P<op>\w+)\(\d+\)")
_NO_SCHEMA = re.compile(r"(?P<dom>[\w.]+):(?P<op>\w+)\(-?\d+\) is not a registered function/op")


def unsupported_ops(message: str, target: str) -> UnsupportedError | None:
    """An :class:`UnsupportedError` naming every op ``message`` (ORT's session error) says
    it lacks a kernel or schema for, sorted; None when it names none."""
    ops = [m.group("op") for m in _NO_KERNEL.finditer(message)]
    ops += [f"{m.group('dom')}::{m.group('op')}" for m in _NO_SCHEMA.finditer(message)]
    if not ops:
        return None
    return UnsupportedError(f"{target}: unsupported ops: {', '.join(sorted(set(ops)))}", sorted(set(ops)))
