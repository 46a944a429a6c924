"""The ``cann`` target: Huawei Ascend NPUs through CANN's ATC model converter (``.om``).

Lowering needs no Ascend software. It prepares the model as ATC would receive it and runs
the op-coverage pre-check against Huawei's published ONNX operator list
(``data/cann_onnx_ops.json``: "支持ONNX算子清单", CANN 8.0.0, hiascend.com; per-op opset
versions, dtypes and attribute rules where a page was transcribed, with its URL):

* ATC looks an ONNX node up by the model's opset import (``ai.onnx::<version>::<op>``;
  Ascend/parser ``onnx_parser.cc``), and the documented versions end at v16-v18 while
  compstack's common IR is opset 20 or newer. So the model is first converted with
  ``onnx.version_converter`` to an opset every listed op documents (option ``opset``;
  0 picks it; see :meth:`SupportList.choose_opset`).
* Every node the documented support rejects is named, with the rule, the source's own
  words and the page. Stages: ``onnx`` (the converted model), ``coverage`` (text),
  ``coverage-json``.

Compiling runs ``atc`` when it is found (``COMPSTACK_TOOL_ATC``, the active environment,
then ``PATH``), through :func:`compstack.core.tools.run_tool` (``ToolError`` with stderr,
``COMPSTACK_SAVE_TEMPS``)::

    atc --model=model.onnx --framework=5 --output=<tmp>/model --soc_version=<soc> [--precision_mode=...]

and keeps ``model.om`` (ATC appends ``.om`` to ``--output``; "ATC离线模型编译工具",
hiascend.com). Without ``atc`` nothing is compiled: the row is ``unsupported`` when the
pre-check rejects nodes, else ``unavailable``, and both messages say no ``.om`` was
produced and why. ``.om`` files are never run here (they need an Ascend NPU and the ACL
runtime); the manifest gives the ``ais_bench`` command line (gitee.com/ascend/tools).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core import tools
from compstack.core.errors import ToolError, UnavailableError, UnsupportedError
from compstack.targets.base import Availability, TargetOptions
from compstack.targets.common.coverage import CoverageReport, convert_opset
from compstack.targets.common.vendor import VendorLowered, VendorTarget

__all__ = ["ATC_MISSING", "PRECISION_MODES", "CannOptions", "CannTarget"]

#: What is missing when ``atc`` is not found.
ATC_MISSING = ("atc not on PATH; install the CANN toolkit (and source its set_env.sh) "
               "or set COMPSTACK_TOOL_ATC")

#: Why a produced ``.om`` does not run here.
NO_RUNNER = "compstack does not run .om models (they need an Ascend NPU and the ACL runtime)"

#: ``atc --precision_mode`` values ("--precision_mode", ATC/AOE parameter reference,
#: CANN 8.x/9.0, hiascend.com); ``""`` passes none (ATC's default: float16 compute).
PRECISION_MODES = ("", "force_fp32", "cube_fp16in_fp32out", "force_fp16", "allow_fp32_to_fp16",
                   "must_keep_origin_dtype", "allow_mix_precision", "allow_mix_precision_fp16",
                   "allow_mix_precision_bf16")

#: ``--soc_version``: "Ascend" + the Name that ``npu-smi info`` prints; Atlas A3 uses
#: ``<Chip Name>_<NPU Name>`` (ATC parameter reference, ``--soc_version``).
_SOC = re.compile(r"^Ascend[0-9A-Za-z]+(?:_[0-9A-Za-z]+)?$")




@dataclass(frozen=True)
class CannOptions(TargetOptions):
    """ATC options.

    Attributes:
        soc: ``--soc_version``, the Ascend processor the ``.om`` is for (``Ascend910B``,
            ``Ascend310P3``); needed to run ``atc``, not for the pre-check.
        precision_mode: ``--precision_mode`` (one of :data:`PRECISION_MODES`; ``""``:
            ATC's default). ``must_keep_origin_dtype`` makes float32 tensors count as
            float32 in the pre-check (otherwise ATC computes them in float16).
        opset: ai.onnx opset to convert the model to before the pre-check and ATC;
            0 picks the version every listed op documents.
        extra_flags: more ``atc`` flags, appended last (``--log=info``).
        timeout_s: limit for the ``atc`` run, in seconds.
    """

    soc: str = ""
    precision_mode: str = ""
    opset: int = 0
    extra_flags: tuple[str, ...] = ()
    timeout_s: float = 3600.0

    def validate(self) -> str:
        if self.soc and not _SOC.match(self.soc):
            return (f"soc={self.soc}: expected Ascend<Name> as `npu-smi info` names the chip "
                    "(e.g. Ascend910B, Ascend310P3, Ascend310B1; ATC --soc_version)")
        if self.precision_mode not in PRECISION_MODES:
            return f"precision_mode={self.precision_mode}: expected one of {', '.join(PRECISION_MODES[1:])}"
        if self.opset < 0:
            return f"opset={self.opset}: expected 0 (choose) or an ai.onnx opset version"
        if self.timeout_s <= 0:
            return f"timeout_s={self.timeout_s}: expected > 0"
        return ""


def _find_atc() -> Any:
    try:
        return tools.find_tool("atc")
    except UnavailableError:
        return None


class CannTarget(VendorTarget):
    """Huawei Ascend via CANN ATC: op-coverage pre-check always; ``.om`` when ``atc`` is installed."""

    name = "cann"
    stack = "cann"
    device = "ascend"
    description = "Huawei CANN ATC (.om); op-coverage pre-check against the documented ONNX list"
    Options = CannOptions
    #: The user's options that lower precision (explain says "precision option you chose").
    precision_options = {"precision_mode": ("force_fp16", "allow_fp32_to_fp16", "cube_fp16in_fp32out", "allow_mix_precision",
                                        "allow_mix_precision_fp16", "allow_mix_precision_bf16")}
    stage_names = ("onnx", "coverage", "coverage-json", "atc")
    compiled_stages = ("atc",)
    support_file = "cann_onnx_ops.json"
    artifact = "model.om"
    run_command = "python3 -m ais_bench --model model.om --device 0"
    ops_note = "Huawei's published ONNX operator list (CANN 8.0.0, hiascend.com), data/cann_onnx_ops.json"

    options: CannOptions

    @classmethod
    def availability(cls) -> Availability:
        """Always usable (the pre-check needs nothing); ``atc`` decides whether a ``.om`` is made."""
        versions = {"onnx-op-list": str(cls.support().data["source"]["version"])}
        atc = _find_atc()
        if atc is None:
            return Availability(True, versions=versions, runs=False,
                                run_reason=f"{ATC_MISSING}; only the op-coverage pre-check runs (no .om)")
        versions["atc"] = str(atc)
        return Availability(True, versions=versions, runs=False, run_reason=NO_RUNNER)

    def flags(self) -> dict[str, Any]:
        o = self.options
        return {"soc_version": o.soc or None, "precision_mode": o.precision_mode or "(ATC default)",
                "opset": o.opset or "auto", "framework": 5, "extra_flags": list(o.extra_flags),
                "timeout_s": o.timeout_s}

    def prepare(self, model: ir.Model) -> tuple[ir.Model, CoverageReport]:
        """Inline functions, convert to the chosen opset, and run the pre-check on the result."""
        model = cir.inline_functions(model)
        support = self.support()
        current = model.opset_imports.get("")
        version: int | None
        if self.options.opset:
            version, why = self.options.opset, f"opset {self.options.opset} (option)"
        else:
            version, why = support.choose_opset(model)
        note = why
        if version is not None and version != current:
            try:
                model = convert_opset(model, version)
                note = f"{why}; converted from opset {current} with onnx.version_converter"
            except RuntimeError as exc:
                note = (f"{why}; onnx.version_converter cannot convert opset {current} -> {version} ({exc}), "
                        f"so the model is checked at opset {current}")
        report = support.check(model, self.name, {"soc": self.options.soc,
                                                  "precision_mode": self.options.precision_mode})
        report.conversion = note
        return model, report

    def build(self, lowered: VendorLowered) -> tuple[bytes, str]:
        """Run ``atc``; without it, refuse with the pre-check's verdict."""
        report, o = lowered.report, self.options
        atc = _find_atc()
        if atc is None:
            if report.rejected():
                raise UnsupportedError(f"no .om produced: {report.summary()}; and {ATC_MISSING}",
                                       report.rejected_ops())
            raise UnavailableError(f"no .om produced: {ATC_MISSING} (pre-check: {report.summary()})")
        if not o.soc:
            raise UnavailableError("no .om produced: atc needs --soc_version; give --soc (e.g. Ascend910B) "
                                   "or --option cann:soc=...")
        with tools.Scratch("cann") as scratch:
            onnx_path = cir.save(lowered.model, scratch.path / "model.onnx")
            argv = [atc, f"--model={onnx_path}", "--framework=5", f"--output={scratch.path / 'model'}",
                    f"--soc_version={o.soc}", *([f"--precision_mode={o.precision_mode}"] if o.precision_mode else []),
                    *o.extra_flags]
            proc = tools.run_tool(argv, timeout=o.timeout_s, cwd=scratch.path, temps=scratch)
            out = (proc.stdout + proc.stderr).decode(errors="replace")
            om = scratch.path / "model.om"
            if not om.is_file():
                raise ToolError(argv, 0, f"atc exited 0 but wrote no {om.name}\n{out}",
                                scratch.path if scratch.kept else None)
            log = f"$ {tools.format_command(argv)}\n{out}"
            return om.read_bytes(), log
