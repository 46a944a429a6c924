"""What ``inductor-cpu`` compiles and runs: the captured graph (:class:`InductorLowered`)
and the compiled program (:class:`InductorCompiled`) (moved out of
:mod:`compstack.targets.inductor.target`, unchanged)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from compstack.core.errors import UnsupportedError
from compstack.frontends.native import mutated_inputs
from compstack.targets.base import Compiled, Lowered
from compstack.targets.inductor.capture import Capture

if TYPE_CHECKING:
    from compstack.targets.inductor.target import InductorCpuTarget

__all__ = ["InductorCompiled", "InductorLowered"]


class InductorLowered(Lowered):
    """The graph TorchDynamo captured, ready for Inductor."""

    target: InductorCpuTarget

    def __init__(self, target: InductorCpuTarget, model: ir.Model, stages: dict[str, Any], optimized: Any,
                 capture: Capture, pack: Callable[[list[Any]], Any], names: list[str], path: str) -> None:
        super().__init__(target, model, stages)
        self.optimized = optimized
        self.capture = capture
        self.pack = pack
        self.names = names
        self.path = path
        #: Native path: positions (in ``names``) of the inputs the program mutates in place,
        #: in the order of the graph's ``<input>@mutated`` outputs; they are compared too.
        self.mutated = mutated_inputs(model, names) if path == "native" else []

    def compile_impl(self) -> InductorCompiled:
        target = self.target
        if target.options.backend == "aot_eager":
            post, codes = self.capture.compile_aot_eager()
        else:
            from compstack.targets.inductor.cache import use_store

            store = use_store(target.cache_root)  # None: --no-cache, or not private: caches off
            post, codes = self.capture.compile(target.record_stages or store is None,
                                               bool(target.options.freezing), target.options.mode,
                                               target.config_patches())
            from compstack.targets.common.twopath import seal_cache_dir

            seal_cache_dir(store)
        out = InductorCompiled(target, self.model, self)
        cached = "(not recorded: Inductor's FX graph cache served this compile; `compstack lower` and " \
                 "`compstack dump` compile with caches off)\n"
        out.stages["post-grad"] = "\n".join(post) if post else cached
        out.stages["output-code"] = "\n".join(codes) if codes else cached
        out.output_code = "\n".join(codes)
        return out

    def compile_with_kernels(self) -> "InductorCompiled":
        """Compile with Inductor's provenance tracking and kernel profiling on (see
        :mod:`compstack.targets.inductor.kernels`)."""
        from compstack.targets.inductor.kernels import compile_with_kernels

        return compile_with_kernels(self)


class InductorCompiled(Compiled):
    """The ``torch.compile``'d program with Inductor's compiled graph in place."""

    target: InductorCpuTarget

    artifact_files = ("output_code.py",)

    def __init__(self, target: InductorCpuTarget, model: ir.Model, lowered: InductorLowered) -> None:
        super().__init__(target, model)
        self.lowered = lowered
        self.output_code = ""
        self.run_command = ""

    def _call(self, tensors: list[Any]) -> list[Any]:
        import torch

        from compstack.frontends.native import flatten_outputs

        args, kwargs = self.lowered.pack(tensors)
        with torch.no_grad():
            outs = flatten_outputs(self.lowered.optimized(*args, **kwargs))
        return outs + [tensors[i] for i in self.lowered.mutated]  # the inputs it changed in place, after the call

    def _tensors(self, inputs: list[np.ndarray]) -> list[Any]:
        """The inputs as torch tensors on the device; float32 widened under ``precision=float64``."""
        import torch

        wide = self.target.options.precision == "float64"
        return [torch.from_numpy(np.array(x, np.float64 if wide and np.asarray(x).dtype == np.float32 else None))
                .to(self.target.torch_device) for x in inputs]

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        tensors = self._tensors(inputs)
        return [o.detach().cpu().numpy() for o in self._call(tensors)]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        import torch

        tensors = self._tensors(inputs)
        # packed once, outputs not flattened per call: the timed call is the compiled
        # module's call (and the CUDA sync), as a bare loop over torch.compile times it
        args, kwargs = self.lowered.pack(tensors)
        fn, no_grad = self.lowered.optimized, torch.no_grad
        if self.target.torch_device == "cuda":
            sync = torch.cuda.synchronize

            def once() -> Any:
                with no_grad():
                    out = fn(*args, **kwargs)
                sync()
                return out
        else:
            def once() -> Any:
                with no_grad():
                    return fn(*args, **kwargs)

        return once

    def kernels_impl(self) -> Any:
        from compstack.targets.inductor.kernels import kernel_map

        return kernel_map(self)

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets.inductor.kernels import profile

        return profile(self, inputs, warmup, runs)  # type: ignore[arg-type]

    def save_impl(self, folder: Path) -> None:
        path = folder / self.artifact_files[0]
        if not self.output_code:
            raise UnsupportedError(f"{self.target.name}: no output code was recorded (cache hit)")
        path.write_text(self.output_code)
        self.run_command = f"python {path}"
