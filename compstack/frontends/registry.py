"""The table of frontends: every way a model gets into the common IR, and whether it works
here (``compstack frontends``).

Nothing is imported to answer: in-process frontends are found with
``importlib.util.find_spec`` and their versions read from package metadata; the
TensorFlow, Paddle and MindSpore frontends ask their own Python
(:func:`compstack.frontends.from_framework.probe`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FrontendRow", "frontend_rows"]


@dataclass
class FrontendRow:
    """One frontend.

    Attributes:
        name: ``onnx``, ``torch``, ``jax``, ``tf``, ``paddle``, ``mindspore``.
        accepts: what it imports (the model form).
        available: whether it works here.
        reason: when not available, what to do.
        versions: versions of the framework and exporter it uses.
        python: the interpreter it runs in (compstack's own for in-process frontends).
        exporter: the exporter that writes ONNX.
    """

    name: str
    accepts: str
    available: bool
    reason: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    python: str = ""
    exporter: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


# name, accepts, exporter, modules needed in compstack's own Python, distributions reported, install hint
_IN_PROCESS = (
    ("onnx", "model.onnx (external data beside it), or build() returning an onnx.ModelProto", "(none: ONNX)",
     ("onnx", "onnx_ir"), ("onnx", "onnx-ir"), "pip install compstack"),
    ("torch", "build() returning (nn.Module | ExportedProgram, example_inputs)", "torch.onnx (dynamo)",
     ("torch", "onnxscript"), ("torch", "onnxscript"), "pip install 'compstack[all]'"),
    ("jax", "build() returning (jax_function, example_args)", "compstack's jaxpr converter",
     ("jax", "jaxlib"), ("jax", "jaxlib"), "pip install 'compstack[all]'"),
)

_FOREIGN_ACCEPTS = {
    "tf": ("build() returning (tf.keras.Model | tf.function, inputs)", "tf2onnx"),
    "paddle": ("build() returning (paddle.nn.Layer, inputs)", "paddle2onnx"),
    "mindspore": ("build() returning (mindspore.nn.Cell, inputs)", "mindspore.onnx"),
}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def frontend_rows() -> list[FrontendRow]:
    """Every frontend, in a fixed order: onnx, torch, jax, tf, paddle, mindspore."""
    from compstack.core.errors import UserError
    from compstack.frontends.from_framework import FRAMEWORKS, probe, python_for

    rows = []
    for name, accepts, exporter, modules, dists, hint in _IN_PROCESS:
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        versions = {d: v for d in dists if (v := _version(d)) is not None}
        rows.append(FrontendRow(name, accepts, not missing,
                                f"{', '.join(missing)} not installed: {hint}" if missing else "",
                                versions, sys.executable, exporter))
    for name, info in FRAMEWORKS.items():
        accepts, exporter = _FOREIGN_ACCEPTS[name]
        ok, reason, versions = probe(name)
        try:
            python = python_for(name)
        except UserError:
            python = f"(set {info.env_var})"
        rows.append(FrontendRow(name, accepts, ok, reason, versions, python, exporter))
    return rows
