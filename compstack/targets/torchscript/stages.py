"""The ``torchscript-cpu`` target's staged objects: the captured ``torch.jit`` module (its
graph before and after freezing as stages) and the frozen module run by the TorchScript
interpreter; the target itself is in :mod:`compstack.targets.torchscript.target`."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from compstack.targets.base import Compiled, Lowered

if TYPE_CHECKING:
    from compstack.targets.torchscript.target import TorchScriptCpuTarget


def _graph_text(module: Any, inlined: bool = False) -> str:
    """The TorchScript IR of ``module.forward`` (``inlined``: submodule calls inlined)."""
    graph = module.inlined_graph if inlined else module.graph
    return str(graph)

class TorchScriptLowered(Lowered):
    """The captured ``ScriptModule``, not yet frozen."""

    def __init__(self, target: TorchScriptCpuTarget, model: ir.Model, stages: dict[str, Any], scripted: Any,
                 pack: Callable[[list[Any]], Any], keywords: list[str] | None, path: str, fx_module: Any) -> None:
        super().__init__(target, model, stages)
        self.scripted = scripted
        self.pack = pack
        self.keywords = keywords
        self.path = path
        self.fx_module = fx_module

    def compile_impl(self) -> TorchScriptCompiled:
        import torch

        from compstack.targets.torchscript.kernels import kernel_nodes, node_info

        target: TorchScriptCpuTarget = self.target  # type: ignore[assignment]
        frozen = torch.jit.freeze(self.scripted.eval())
        buffer = io.BytesIO()
        torch.jit.save(frozen, buffer)
        frozen_text = _graph_text(frozen)
        frozen_nodes = [node_info(n) for n in kernel_nodes(frozen.graph)]  # before the pass rewrites them
        optimized = target._optimize(frozen)
        out = TorchScriptCompiled(target, self.model, optimized, self.pack, self.keywords, buffer.getvalue(),
                                  frozen_text, self)
        out.frozen_nodes = frozen_nodes
        return out

class TorchScriptCompiled(Compiled):
    """The frozen, optimized ``ScriptModule``."""

    artifact_files = ("model.pt", "call.json")

    def __init__(self, target: TorchScriptCpuTarget, model: ir.Model, module: Any,
                 pack: Callable[[list[Any]], Any], keywords: list[str] | None, artifact: bytes, frozen_text: str,
                 lowered: TorchScriptLowered | None) -> None:
        super().__init__(target, model)
        self.module = module
        self.pack = pack
        self.keywords = keywords
        self.artifact = artifact
        self.lowered = lowered
        self.loaded = False
        #: the frozen graph's kernel nodes before ``optimize_for_inference`` (kernel mapping)
        self.frozen_nodes: list[Any] = []
        self.stages["torchscript-frozen"] = frozen_text
        self.stages["torchscript-optimized"] = _graph_text(module)

    def _call(self, tensors: list[Any]) -> list[Any]:
        import torch

        from compstack.frontends.native import flatten_outputs

        args, kwargs = self.pack(tensors)
        with torch.no_grad():
            return flatten_outputs(self.module(*args, **kwargs))

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        import torch

        tensors = [torch.from_numpy(np.array(x)) for x in inputs]
        return [o.detach().cpu().numpy() if isinstance(o, torch.Tensor) else np.asarray(o)
                for o in self._call(tensors)]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        import torch

        args, kwargs = self.pack([torch.from_numpy(np.array(x)) for x in inputs])
        module, no_grad = self.module, torch.no_grad()

        def once() -> Any:  # what a bare loop does: the module's call, outputs left as they are
            with no_grad:
                return module(*args, **kwargs)

        return once

    def kernels_impl(self) -> Any:
        from compstack.targets.torchscript.kernels import kernel_map

        return kernel_map(self)

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets.torchscript.kernels import profile

        return profile(self, inputs, warmup, runs)

    def save_impl(self, folder: Path) -> None:
        (folder / "model.pt").write_bytes(self.artifact)
        (folder / "call.json").write_text(json.dumps({"keywords": self.keywords, "format": "torch.jit.save of the "
                                                      "frozen module; load with torch.jit.load, then "
                                                      "torch.jit.optimize_for_inference"}))
