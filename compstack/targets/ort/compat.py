"""What older onnxruntime releases need from a model: an IR version they accept.

compstack writes models with the IR version of the installed onnx (14 with onnx 1.23);
an onnxruntime release rejects a model whose IR version is newer than its own
(``Unsupported model IR version: 14, max supported IR version: 10`` from 1.20). A
versioned target (``ort-cpu@1.20.0``) runs such a release, so the model is handed to it
at the newest IR version it accepts: what an exporter targeting that runtime writes. The
operator set is left as it is: an opset the release does not know stays that release's
failure (a real difference between releases).
"""

from __future__ import annotations

import re
from typing import Any

import onnx

__all__ = ["fit_ir_version", "max_ir_version"]

_MAX = re.compile(r"max supported IR version: (\d+)")
_CACHE: dict[str, int] = {}


def max_ir_version(ort: Any) -> int:
    """The newest model IR version the imported onnxruntime accepts, read from its own
    error for a one-node model of IR version 99 (once per process); 0 when unknown."""
    if ort.__version__ not in _CACHE:
        from onnx import TensorProto, helper

        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
        m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 7)])
        m.ir_version = 99
        found = 0
        try:
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - the message is what is read
            hit = _MAX.search(str(exc))
            found = int(hit.group(1)) if hit else 0
        _CACHE[ort.__version__] = found
    return _CACHE[ort.__version__]


def fit_ir_version(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with its IR version lowered to :func:`max_ir_version` of the installed
    onnxruntime when it is newer (in place; returned for chaining)."""
    import onnxruntime as ort

    top = max_ir_version(ort)
    if top and proto.ir_version > top:
        proto.ir_version = top
    return proto
