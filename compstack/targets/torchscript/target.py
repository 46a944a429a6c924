"""``torchscript-cpu``: the PyTorch JIT (TorchScript) on the host CPU.

Two paths (see :mod:`compstack.targets.common.twopath`): a PyTorch source is compiled
natively (the original ``nn.Module``, rebuilt in the worker as for Inductor); any other
model is translated op by op into a ``torch.fx.GraphModule``
(:mod:`compstack.translate.fx`, FX nodes named after the IR nodes). Then the program goes
the way PyTorch documents for inference with TorchScript:

* ``lower``: capture a ``torch.jit.ScriptModule``. The native path traces
  (``torch.jit.trace`` with input set 0, ``strict=False`` so dict/list outputs are taken,
  positional or keyword inputs as the source was exported); the translated path scripts
  the FX module (``torch.jit.script``: no eager run, no input values baked in). The
  ``capture`` option overrides either (``trace`` / ``script``).
* ``compile``: ``torch.jit.freeze`` (weights and attributes become constants, Conv+BatchNorm
  and Conv+Add/Mul folding, dropout removed), then ``torch.jit.optimize_for_inference``
  (oneDNN conversion of convolutions and their pointwise neighbours, Linear → transposed
  MatMul, in-place activations) unless ``optimize=false``.

Stages (TorchScript IR text, ``str(graph)``): ``torchscript`` (the captured graph with
submodule calls inlined, ``inlined_graph``, before freezing), ``torchscript-frozen`` (after
``freeze``) and ``torchscript-optimized`` (after ``optimize_for_inference``; the graph that
runs). The JIT's profiling executor specialises the graph further on the first calls
(the latency warm-up absorbs them); TorchScript's CPU fuser (NNC) is off by default and
stays off. (torch 2.13 marks ``optimize_for_inference`` deprecated in favour of
``torch.compile``; TorchScript is in maintenance. This target measures it as it still ships.)

Artifact: ``model.pt`` (``torch.jit.save`` of the *frozen* module) and ``call.json`` (how
inputs are passed). The optimized module cannot be saved in a loadable form
(``optimize_for_inference`` embeds oneDNN tensors as ``prim::ConstantMKLDNNTensor``, which
``torch.jit.load`` rejects), so loading runs ``optimize_for_inference`` again on the
loaded frozen module: the same pass on the same graph. ``torch.jit.load`` reads only
TorchScript code and tensors (its unpickler builds TorchScript types, it imports no Python
module); compstack loads only files it wrote, through the artifact cache, which verifies
every file's SHA-256 first.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

import numpy as np
import onnx_ir as ir

from compstack.targets.base import Availability, Compiled
from compstack.targets.common.torch import example_arrays
from compstack.targets.common.twopath import (
    PathOptions,
    TwoPathTarget,
    canonical_for_translation,
)
from compstack.targets.torchscript.stages import TorchScriptCompiled, TorchScriptLowered, _graph_text

__all__ = ["CAPTURES", "TorchScriptCpuTarget", "TorchScriptOptions"]

#: Values of the ``capture`` option.
CAPTURES = ("auto", "trace", "script")


@dataclass(frozen=True)
class TorchScriptOptions(PathOptions):
    """Options of ``torchscript-cpu``.

    Attributes:
        path: see :class:`~compstack.targets.common.twopath.PathOptions`.
        capture: ``auto`` (trace the native module, script the translated FX module),
            ``trace`` or ``script``.
        optimize: run ``torch.jit.optimize_for_inference`` after ``torch.jit.freeze``.
        threads: ``torch.set_num_threads`` (intra-op threads, process-wide) before the
            module runs; 0 keeps torch's default (one per core).
    """

    capture: str = "auto"
    optimize: bool = True
    threads: int = 0

    def validate(self) -> str:
        problem = super().validate()
        if problem:
            return problem
        if self.capture not in CAPTURES:
            return f"capture={self.capture}: expected one of {', '.join(CAPTURES)}"
        if self.threads < 0:
            return f"threads={self.threads}: expected >= 0"
        return ""


class TorchScriptCpuTarget(TwoPathTarget):
    """TorchScript (``torch.jit``): trace/script → freeze → optimize_for_inference, on the CPU."""

    name: ClassVar[str] = "torchscript-cpu"
    custom_op_support: ClassVar[Mapping[str, str]] = {
        "cpu": "yes: torch.library custom op, called by the TorchScript interpreter",
        "": "no: the op declares no CPU kernel"}
    stack: ClassVar[str] = "torchscript"
    device: ClassVar[str] = "cpu"
    description: ClassVar[str] = ("PyTorch JIT (torch.jit trace/script, freeze, optimize_for_inference); "
                                  "native for PyTorch sources, translated otherwise")
    Options = TorchScriptOptions
    stage_names: ClassVar[tuple[str, ...]] = ("torchscript", "torchscript-frozen", "torchscript-optimized")
    compiled_stages: ClassVar[tuple[str, ...]] = ("torchscript-frozen", "torchscript-optimized")
    supported_dtypes = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8",
                                  "float16", "float32", "float64"})
    needs_torch: ClassVar[bool] = True
    native_framework: ClassVar[str] = "torch"
    table_module: ClassVar[str] = "compstack.translate.fx"

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """``torch.set_num_threads(n)`` (intra-op; inter-op 1) before anything runs; an
        explicit ``threads`` option still wins when the target is built."""
        import torch

        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # only settable before the first inter-op work
            pass
        return {"knob": f"torch.set_num_threads({n})", "honoured": True}
    #: no ``torch.jit.optimize_for_inference`` (``torch.jit.freeze`` still runs).
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {"options": {"optimize": "false"}}
    untuned_reason: ClassVar[str] = ("TorchScript has no tuning step; freeze + optimize_for_inference already "
                                     "run by default")
    #: ``model.pt`` reloads (the translated path's artifacts go to the artifact cache;
    #: the job never caches a native program, whose code the IR fingerprint does not cover).
    cacheable: ClassVar[bool] = True

    @classmethod
    def availability(cls) -> Availability:
        try:
            import torch
        except ImportError:
            return Availability(False, "torch is not installed: pip install 'compstack[all]'")
        return Availability(True, versions={"torch": torch.__version__})

    def capture_mode(self) -> str:
        """``trace`` or ``script`` for this job (``auto``: trace native, script translated).

        Raises:
            UnsupportedError: ``path=native`` without a PyTorch source.
        """
        capture = self.options.capture  # type: ignore[attr-defined]
        if capture != "auto":
            return capture
        return "trace" if self.chosen_path() == "native" else "script"

    def flags(self) -> dict[str, Any]:
        flags = super().flags()
        try:
            flags["capture"] = self.capture_mode()
        except Exception:  # noqa: BLE001 - path=native without a source: the row says so at lower
            flags["capture"] = "unavailable"
        flags["passes"] = ["torch.jit.freeze"] + (["torch.jit.optimize_for_inference"]
                                                  if self.options.optimize else [])  # type: ignore[attr-defined]
        return flags

    def lower_impl(self, model: ir.Model) -> TorchScriptLowered:
        import torch

        path = self.chosen_path()
        capture = self.capture_mode()
        if path == "native":
            module, pack = self.native.fn, self.native.pack
            keywords = _keyword_names(self.native)
        else:
            from compstack.translate.fx import to_fx

            model = canonical_for_translation(model)
            module, pack, keywords = _scriptable(to_fx(model)), _positional, None
        if isinstance(module, torch.nn.Module):
            module = module.eval()
        fx_module = module if path == "translated" else None
        if capture == "script":
            with warnings.catch_warnings():  # torch's script frontend on FX's generated __init__
                warnings.filterwarnings("ignore", message=".*instance-level annotations")
                scripted = torch.jit.script(module)
        else:
            args, kwargs = pack([torch.from_numpy(np.array(a))
                                 for a in example_arrays(model, self, lambda d: d not in self.supported_dtypes)])
            with torch.no_grad():
                scripted = torch.jit.trace(module, args or None, example_kwarg_inputs=kwargs or None,
                                           check_trace=False, strict=False)
        stages = {"torchscript": _graph_text(scripted, inlined=True)}
        return TorchScriptLowered(self, model, stages, scripted, pack, keywords, path, fx_module)

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        """Load ``model.pt`` (the frozen module) and re-run ``optimize_for_inference``.

        Raises:
            Exception: the file does not load (the cache then rebuilds the entry).
        """
        import torch

        call = json.loads((folder / "call.json").read_text())
        keywords = call.get("keywords")
        data = (folder / "model.pt").read_bytes()
        frozen = torch.jit.load(io.BytesIO(data), map_location="cpu")
        frozen_text = _graph_text(frozen)
        optimized = self._optimize(frozen)
        pack = _positional if keywords is None else _by_keyword(list(keywords))
        out = TorchScriptCompiled(self, model, optimized, pack, keywords, data, frozen_text, None)
        out.loaded = True
        return out

    def _optimize(self, frozen: Any) -> Any:
        import torch

        if self.options.threads:  # type: ignore[attr-defined]
            torch.set_num_threads(self.options.threads)  # type: ignore[attr-defined]

        if not self.options.optimize:  # type: ignore[attr-defined]
            return frozen
        return torch.jit.optimize_for_inference(frozen)  # in place on ``frozen``; returns it


def _scriptable(gm: Any) -> Any:
    """``gm`` with every call of one op overload (``torch.ops.ns.op.default``, how the
    converters call ``torch.library`` custom ops) made a call of its overload packet
    (``torch.ops.ns.op``): TorchScript resolves overloads itself and cannot look up the
    ``.default`` attribute. Same op, same FX node names and metadata."""
    import torch

    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            node.target = node.target.overloadpacket
            changed = True
    if changed:
        gm.recompile()
    return gm


def _positional(xs: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return tuple(xs), {}


def _by_keyword(names: list[str]) -> Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]]:
    return lambda xs: ((), dict(zip(names, xs)))


def _keyword_names(native: Any) -> list[str] | None:
    """The keyword names the native program is called with, or None when positional."""
    args, kwargs = native.pack(list(range(len(native.input_names))))
    return list(kwargs) if kwargs and not args else None






