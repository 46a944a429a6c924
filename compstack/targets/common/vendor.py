"""Shared pieces of the vendor-toolchain targets (``cann``, ``gcu``).

Such a target lowers without the vendor's toolchain: lowering runs the op-coverage
pre-check (:mod:`compstack.targets.common.coverage`) and records it as two stages, ``coverage``
(text) and ``coverage-json``. Compiling runs the vendor's converter when it is installed
and produces its artifact; otherwise it refuses with the pre-check's verdict
(:class:`~compstack.core.errors.UnsupportedError`, when the documented support rejects nodes)
or with what is missing (:class:`~compstack.core.errors.UnavailableError`). It never pretends
a compile or a run happened: running the artifacts is not implemented, and
``Compiled.run`` says so.

The pre-check's refusal is raised at compile time, not by :meth:`Target.lower`, so that
``compstack lower -o`` has already written the coverage report when the row turns
``unsupported``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core.errors import UnavailableError
from compstack.targets.base import Compiled, Lowered, Target
from compstack.targets.common.coverage import CoverageReport, SupportList, load_support_list

__all__ = ["VendorCompiled", "VendorLowered", "VendorTarget"]


class VendorTarget(Target):
    """Base of a target whose compiler is a vendor tool that may be absent.

    Subclasses set :attr:`support_file`, :attr:`artifact` and :attr:`run_command`, and
    implement :meth:`prepare` (the model the tool receives, and the coverage report) and
    :meth:`build` (run the tool; return the artifact's bytes and a log).
    """

    #: File name of the vendor list in ``compstack/targets/data/``.
    support_file: ClassVar[str] = ""
    #: File name of the artifact in the output folder (``model.om``).
    artifact: ClassVar[str] = ""
    #: How to run the artifact with the vendor's own tool (for the manifest).
    run_command: ClassVar[str] = ""
    stage_names: ClassVar[tuple[str, ...]] = ("onnx", "coverage", "coverage-json")
    stage_suffix: ClassVar[dict[str, str]] = {"coverage-json": ".json"}

    @classmethod
    def support(cls) -> SupportList:
        """The vendor's documented ONNX support (package data)."""
        return load_support_list(cls.support_file)

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        """The ops of the vendor's public list, or None when there is none."""
        ops = cls.support().ops
        return None if ops is None else sorted(ops)

    def prepare(self, model: ir.Model) -> tuple[ir.Model, CoverageReport]:
        """Hook: the model as the vendor tool will receive it, and its coverage report."""
        raise NotImplementedError

    def build(self, lowered: VendorLowered) -> tuple[bytes, str]:
        """Hook: run the vendor tool on ``lowered.model``; returns (artifact bytes, log text).

        Raises:
            UnsupportedError / UnavailableError: the tool is absent (with the pre-check's verdict).
            ToolError: the tool failed (argv, exit status, stderr tail, kept temps).
        """
        raise NotImplementedError

    def unsupported_ops(self, model: ir.Model) -> list[str]:
        """The ops of the nodes the vendor's documented support rejects."""
        return self.prepare(model)[1].rejected_ops()

    def lower(self, model: ir.Model) -> Lowered:
        """Run the pre-check and keep its report as stages (never raises for unsupported ops:
        the refusal comes at :meth:`Lowered.compile`, after the report is written)."""
        t0 = time.perf_counter()
        lowered = self.lower_impl(model)
        lowered.lower_s = time.perf_counter() - t0
        return lowered

    def lower_impl(self, model: ir.Model) -> Lowered:
        prepared, report = self.prepare(model)
        return VendorLowered(self, prepared, report)

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        return VendorCompiled(self, model, (folder / self.artifact).read_bytes(), "(loaded from the cache)")


class VendorLowered(Lowered):
    """The model handed to the vendor tool, with the pre-check's report as stages.

    Attributes:
        report: the :class:`~compstack.targets.common.coverage.CoverageReport`.
    """

    target: VendorTarget

    def __init__(self, target: VendorTarget, model: ir.Model, report: CoverageReport) -> None:
        super().__init__(target, model, {
            "onnx": lambda: cir.to_text(model),
            "coverage": report.to_text(),
            "coverage-json": json.dumps(report.to_json(), indent=1, ensure_ascii=False) + "\n",
        })
        self.report = report

    def compile_impl(self) -> Compiled:
        data, log = self.target.build(self)
        compiled = VendorCompiled(self.target, self.model, data, log)
        for name, text in compiled.stages.items():
            self.add_stage(name, text)
        return compiled


class VendorCompiled(Compiled):
    """The vendor tool's artifact (bytes); saved as ``target.artifact``; not runnable here."""

    target: VendorTarget

    def __init__(self, target: VendorTarget, model: ir.Model, data: bytes, log: str) -> None:
        super().__init__(target, model)
        self.data = data
        self.artifact_files = (target.artifact,)
        self.run_command = target.run_command
        self.stages[target.compiled_stages[0] if target.compiled_stages else "log"] = log

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        raise UnavailableError(f"{self.target.name}: compstack does not run {self.target.artifact} files; "
                               f"run it with the vendor's tool: {self.target.run_command}")

    def save_impl(self, folder: Path) -> None:
        (folder / self.target.artifact).write_bytes(self.data)

