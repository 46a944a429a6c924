"""OpenVINO's exceptions as compstack errors for ``openvino-cpu``: the ONNX frontend's
"no conversion rule" messages become :class:`~compstack.core.errors.UnsupportedError`
naming the ops; other messages are cut to their first meaningful line."""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

import onnx_ir as ir

from compstack.core.errors import UnsupportedError

#: The ONNX frontend's messages for ops it has no conversion rule for.
_NO_RULE = re.compile(r"No conversion rule found for operations?:\s*(?P<ops>[^\n]+)")

_NOT_SUPPORTED = re.compile(r"OpenVINO does not support the following ONNX operations?:\s*(?P<ops>[^\n]+)")

def _unsupported(message: str, target: str, model: ir.Model | None = None) -> UnsupportedError | None:
    """An UnsupportedError when the ONNX frontend refused ops it cannot convert.

    The frontend names an op of another domain ``domain.Op``; with ``model`` given, it is
    reported as ``domain::Op`` like every other target does.
    """
    found: list[str] = []
    for pattern in (_NO_RULE, _NOT_SUPPORTED):
        for m in pattern.finditer(message):
            found += [op.strip().split("-")[0] for op in m.group("ops").split(",") if op.strip()]
    if not found:
        return None
    keys = {}
    if model is not None:
        for node in model.graph:
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            keys[f"{node.domain}.{node.op_type}" if node.domain else node.op_type] = key
    ops = sorted({keys.get(op, op) for op in found})
    return UnsupportedError(f"{target}: unsupported ops: {', '.join(ops)}", ops)

def ov_message(exc: BaseException) -> str:
    """OpenVINO's error on one line: its ``Exception from src/...:`` and
    ``Check '...' failed at src/...:`` location lines dropped, the reasons kept."""
    lines = [line.strip() for line in str(exc).splitlines()]
    keep = [line for line in lines if line and not line.startswith("Exception from ")
            and not _CHECK_AT.fullmatch(line)]
    return " ".join(keep)[:600] or (lines[0] if lines else type(exc).__name__)

_CHECK_AT = re.compile(r"Check '.*' failed at \S+:\d+:")

@contextlib.contextmanager
def ov_errors() -> Iterator[None]:
    """Re-raise OpenVINO's own ``RuntimeError`` with :func:`ov_message` as its text
    (other exceptions pass unchanged)."""
    try:
        yield
    except RuntimeError as exc:
        if "Exception from src/" not in str(exc):
            raise
        raise RuntimeError(f"openvino: {ov_message(exc)}") from exc

def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
