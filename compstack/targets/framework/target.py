"""The ``tf``, ``paddle`` and ``mindspore`` targets: the source framework runs the model
itself, eagerly, as a reference row.

A model written in TensorFlow, Paddle or MindSpore reaches the stacks through the
framework's ONNX exporter; running the original program beside them shows an exporter
bug as a disagreement between the framework and every stack. Each run happens in the
framework's own process and environment (:func:`compstack.frontends.from_framework.run_framework`),
with the same time limit as an export; ``build()`` runs again there, and its weights must
match the digest recorded at export (an unseeded ``build()`` fails the row, naming why).

These targets take only models of their own framework (``file.py:build`` or ``zoo:tf-*``,
``zoo:paddle-*``, ``zoo:ms-*``); any other model is ``unsupported``, with the reason. They
measure no latency (each run starts the framework's process: seconds of import, not the
model's time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx_ir as ir

from compstack.core.errors import CompstackError, UnsupportedError, UserError
from compstack.targets.base import PLAIN_DTYPES, Availability, Compiled, Lowered, Target

__all__ = ["FrameworkTarget", "MindSporeTarget", "PaddleTarget", "TfTarget"]


class FrameworkTarget(Target):
    """The source framework, eager, in its own process (see the module docstring)."""

    device = "cpu"
    stage_names = ("program",)
    supported_dtypes = PLAIN_DTYPES
    cacheable = False
    #: Whether a long-lived worker may run a kept compiled program again for a later job
    #: (:mod:`compstack.run.tasks.compare`; any target without this attribute may): not
    #: here, each run starts the framework's own process.
    reusable = False
    measures_latency: ClassVar[bool] = False
    ops_note = "runs the framework's own program, not the ONNX graph"

    @classmethod
    def availability(cls) -> Availability:
        from compstack.frontends.from_framework import probe

        ok, reason, versions = probe(cls.native_framework)
        return Availability(ok, reason, versions=versions)

    def lower_impl(self, model: ir.Model) -> Lowered:
        native = self.native
        if native is None or native.framework != self.native_framework:
            came = self.source_framework or "an ONNX file"
            raise UnsupportedError(f"{self.name}: runs only models written in {self.description.split(',')[0]} "
                                   f"(file.py:build or its zoo models); this one is from {came}")
        spec = str(native.fn)
        return _FrameworkLowered(self, model, {"program": f"{self.native_framework} eager: {spec}"}, spec)


class _FrameworkLowered(Lowered):
    def __init__(self, target: Target, model: ir.Model, stages: dict[str, Any], spec: str) -> None:
        super().__init__(target, model, stages)
        self.spec = spec

    def compile_impl(self) -> Compiled:
        return _FrameworkCompiled(self.target, self.model, self.spec)


class _FrameworkCompiled(Compiled):
    artifact_files = ("program.txt",)

    def __init__(self, target: Target, model: ir.Model, spec: str) -> None:
        super().__init__(target, model)
        self.spec = spec
        self.digest = model.metadata_props.get("compstack.framework.digest", "-")
        #: The framework's own report of the last run (``run_s``, ``wall_s``).
        self.last_run: dict[str, Any] = {}

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        from compstack.frontends.from_framework import run_framework

        try:
            outs, self.last_run = run_framework(self.target.native_framework, self.spec, inputs, self.digest)
        except UserError as exc:  # the framework's failure is this row's, not the comparison's
            raise CompstackError(str(exc)) from None
        return outs

    def save_impl(self, folder: Path) -> None:
        """The framework program is the user's ``build()``: the artifact names it."""
        (folder / "program.txt").write_text(f"{self.target.native_framework} eager: {self.spec}\n")


class TfTarget(FrameworkTarget):
    """TensorFlow/Keras, eager, in compstack's Python (or ``COMPSTACK_TF_PYTHON``)."""

    name = "tf"
    stack = "tensorflow"
    description = "TensorFlow, eager: the source framework itself (reference row for tf2onnx)"
    native_framework = "tf"


class PaddleTarget(FrameworkTarget):
    """PaddlePaddle, dynamic graph, in ``COMPSTACK_PADDLE_PYTHON``."""

    name = "paddle"
    stack = "paddle"
    description = "PaddlePaddle, dynamic graph: the source framework itself (reference row for paddle2onnx)"
    native_framework = "paddle"


class MindSporeTarget(FrameworkTarget):
    """MindSpore, PyNative mode on CPU, in ``COMPSTACK_MINDSPORE_PYTHON``."""

    name = "mindspore"
    stack = "mindspore"
    description = "MindSpore, PyNative on CPU: the source framework itself (reference row for mindspore.onnx)"
    native_framework = "mindspore"
