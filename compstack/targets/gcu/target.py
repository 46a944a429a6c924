"""The ``gcu`` target: Enflame GCU through the TopsInference SDK (Enflame TopsRider).

No public operator list for Enflame GCU was found (``data/gcu_onnx_ops.json`` records
where we looked), so the pre-check says it cannot pre-check rather than guess; the
``coverage`` stages say so too.

Enflame documents no converter command line publicly. Its public samples
(EnflameTechnology/tops_inference_sample, ``python/sampleONNXBert/sampleBert.py``) build
an engine with the TopsInference Python API; when ``TopsInference`` imports, compiling
runs that same sequence in a subprocess (a script written into the scratch folder, run
through :func:`compstack.core.tools.run_tool`, so ``ToolError`` carries its stderr and
``COMPSTACK_SAVE_TEMPS`` keeps a replayable command)::

    with TopsInference.device(card_id, cluster_id):
        parser = TopsInference.create_parser(TopsInference.ONNX_MODEL)
        parser.set_input_names("a,b"); parser.set_input_shapes("1,64:1,64")
        network = parser.read("model.onnx")
        optimizer = TopsInference.create_optimizer(); optimizer.set_build_flag(TopsInference.KFP16_MIX)
        optimizer.build(network).save_executable("model.exec")

This wrapper was written from those samples and has not run against the real SDK (it is
not installable here). Executables are never run by compstack.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Any

import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core import tools
from compstack.core.errors import ToolError, UnavailableError, UnsupportedError
from compstack.targets.base import Availability, TargetOptions
from compstack.targets.common.coverage import CoverageReport
from compstack.targets.common.vendor import VendorLowered, VendorTarget

__all__ = ["SDK_MISSING", "GcuOptions", "GcuTarget"]

#: What is missing when ``import TopsInference`` fails.
SDK_MISSING = "TopsInference not installed (Enflame TopsRider SDK; it needs Enflame's own installer)"

#: ``--option gcu:precision=`` -> the TopsInference build flag (sampleBert.py's ``--precision``).
_FLAGS = {"default": "KDEFAULT", "fp16": "KFP16", "mix": "KFP16_MIX"}

_BUILD_SCRIPT = """\
# Written by compstack.targets.gcu.target: python build_engine.py MODEL.onnx OUT.exec NAMES SHAPES FLAG CARD CLUSTER
# (the TopsInference calls of EnflameTechnology/tops_inference_sample, python/sampleONNXBert/sampleBert.py)
import sys
import TopsInference
src, dst, names, shapes, flag, card, cluster = sys.argv[1:8]
with TopsInference.device(int(card), int(cluster)):
    parser = TopsInference.create_parser(TopsInference.ONNX_MODEL)
    parser.set_input_names(names)
    parser.set_input_shapes(shapes)
    network = parser.read(src)
    optimizer = TopsInference.create_optimizer()
    optimizer.set_build_flag(getattr(TopsInference, flag))
    engine = optimizer.build(network)
    engine.save_executable(dst)
"""


@dataclass(frozen=True)
class GcuOptions(TargetOptions):
    """TopsInference build options.

    Attributes:
        precision: ``default``, ``fp16`` or ``mix`` (``TopsInference.KDEFAULT`` /
            ``KFP16`` / ``KFP16_MIX``).
        card_id: the GCU card (``TopsInference.device(card_id, cluster_id)``).
        cluster_id: the cluster on that card.
        timeout_s: limit for the build, in seconds.
    """

    precision: str = "mix"
    card_id: int = 0
    cluster_id: int = 0
    timeout_s: float = 3600.0

    def validate(self) -> str:
        if self.precision not in _FLAGS:
            return f"precision={self.precision}: expected one of {', '.join(_FLAGS)}"
        if self.card_id < 0 or self.cluster_id < 0:
            return "card_id/cluster_id: expected >= 0"
        if self.timeout_s <= 0:
            return f"timeout_s={self.timeout_s}: expected > 0"
        return ""


def _sdk_found() -> bool:
    return importlib.util.find_spec("TopsInference") is not None


class GcuTarget(VendorTarget):
    """Enflame GCU via TopsInference: no public op list to pre-check; ``.exec`` when the SDK imports."""

    name = "gcu"
    stack = "topsinference"
    device = "gcu"
    description = "Enflame GCU, TopsInference engine (.exec); no public op list to pre-check"
    Options = GcuOptions
    #: The user's options that lower precision (explain says "precision option you chose").
    precision_options = {"precision": ("fp16", "mix")}
    stage_names = ("onnx", "coverage", "coverage-json", "build")
    compiled_stages = ("build",)
    support_file = "gcu_onnx_ops.json"
    artifact = "model.exec"
    run_command = "TopsInference.PyEngine().load_tops_executable('model.exec') (Enflame TopsInference Python API)"
    ops_note = "no public operator list for Enflame GCU (see data/gcu_onnx_ops.json for where we looked)"

    options: GcuOptions

    @classmethod
    def availability(cls) -> Availability:
        """Usable for lowering always; the SDK decides whether an ``.exec`` is built."""
        versions = {"onnx-op-list": "none public"}
        if not _sdk_found():
            return Availability(True, versions=versions, runs=False,
                                run_reason=f"{SDK_MISSING}; no public op list either, so lowering only says so")
        return Availability(True, versions=versions, runs=False,
                            run_reason="compstack does not run TopsInference executables")

    def flags(self) -> dict[str, Any]:
        o = self.options
        return {"build_flag": f"TopsInference.{_FLAGS[o.precision]}", "card_id": o.card_id,
                "cluster_id": o.cluster_id, "timeout_s": o.timeout_s}

    def prepare(self, model: ir.Model) -> tuple[ir.Model, CoverageReport]:
        model = cir.inline_functions(model)
        return model, self.support().check(model, self.name, {"precision": self.options.precision})

    def build(self, lowered: VendorLowered) -> tuple[bytes, str]:
        """Build the engine with TopsInference; without it, say why nothing was built."""
        if not _sdk_found():
            raise UnavailableError(f"no .exec produced: {SDK_MISSING}; {lowered.report.statement}")
        inputs = cir.graph_inputs(lowered.model)
        dynamic = [i.name for i in inputs if not i.is_static]
        if dynamic:
            raise UnsupportedError(f"{self.name}: inputs with dynamic dims need fixed shapes: {', '.join(dynamic)}")
        names = ",".join(i.name for i in inputs)
        shapes = ":".join(",".join(str(d) for d in i.shape) for i in inputs)
        o = self.options
        with tools.Scratch("gcu") as scratch:
            onnx_path = cir.save(lowered.model, scratch.path / "model.onnx")
            script = scratch.path / "build_engine.py"
            script.write_text(_BUILD_SCRIPT)
            exe = scratch.path / "model.exec"
            argv = [sys.executable, str(script), str(onnx_path), str(exe), names, shapes, _FLAGS[o.precision],
                    str(o.card_id), str(o.cluster_id)]
            proc = tools.run_tool(argv, timeout=o.timeout_s, cwd=scratch.path, temps=scratch)
            out = (proc.stdout + proc.stderr).decode(errors="replace")
            if not exe.is_file():
                raise ToolError(argv, 0, f"the build exited 0 but wrote no {exe.name}\n{out}",
                                scratch.path if scratch.kept else None)
            return exe.read_bytes(), f"$ {tools.format_command(argv)}\n{out}"
