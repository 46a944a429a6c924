"""``inductor-cpu`` (and ``inductor-cuda``): TorchInductor, PyTorch's compiler.

Two paths (see :mod:`compstack.targets.common.twopath`): a PyTorch source is compiled
natively (the original ``nn.Module``); any other model is translated op by op into a
``torch.fx.GraphModule`` (:mod:`compstack.translate.fx`, FX nodes named after the IR
nodes). Either way the program goes the way ``torch.compile(m, backend="inductor")``
takes it, split at the seam so each half is timed and shown on its own:

* ``lower``: TorchDynamo captures the FX graph (a backend that records the graph and
  runs it eagerly once, under ``torch.no_grad()``: an inference graph);
* ``compile``: ``torch._inductor.compile_fx.compile_fx(graph, example_inputs)``, the
  function the ``inductor`` backend calls, on that graph.

Why not AOTInductor: its package build links a full C++ wrapper (tens of seconds more
per model here) and it is not how most Inductor users run; ``torch.compile`` is.

Stages: ``fx`` (the captured graph handed to Inductor), ``post-grad`` (the graph after
Inductor's post-grad passes, recorded by a ``post_grad_custom_post_pass``) and
``output-code`` (the generated Python module with its C++/Triton kernels, from the hook
``torch._inductor.utils.run_and_get_code`` uses). Inductor's FX graph cache serves warm
compiles; when stages are written (``compstack lower``/``dump``) the compile runs
with caches disabled so every stage is recorded. The artifact of ``compstack lower -o``
is ``output_code.py``: ``python output_code.py`` benchmarks the compiled module with
random inputs (Inductor's own ``benchmark_compiled_module`` entry point).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping
from unittest import mock

import numpy as np
import onnx_ir as ir

from compstack.core.errors import UnsupportedError
from compstack.frontends.native import mutated_inputs
from compstack.targets.base import Availability, Compiled, Lowered
from compstack.targets.common.torch import example_arrays
from compstack.targets.common.twopath import (
    PathOptions,
    TwoPathTarget,
    canonical_for_translation,
)

__all__ = ["InductorCpuTarget", "InductorCudaTarget", "InductorOptions"]


@dataclass(frozen=True)
class InductorOptions(PathOptions):
    """Options of the Inductor targets.

    Attributes:
        path: see :class:`~compstack.targets.common.twopath.PathOptions`.
        freezing: ``torch._inductor.config.freezing``: treat weights as constants
            (folds BatchNorm into Conv, uses oneDNN/MKL prepacked kernels on CPU).
        mode: ``torch.compile``'s mode: ``default``, or ``max-autotune`` /
            ``max-autotune-no-cudagraphs`` (Inductor benchmarks candidate GEMM/conv
            templates, C++ ones on CPU, and tunes launch parameters; the options it sets
            are ``torch._inductor.list_mode_options(mode)``, recorded in the flags).
        backend: ``inductor``, or ``aot_eager`` (TorchDynamo's debug backend: the same
            captured graph through AOTAutograd's decompositions, run eagerly without
            Inductor's code generation; what ``compstack explain`` compares against).
    """

    freezing: bool = False
    mode: str = "default"
    backend: str = "inductor"

    def validate(self) -> str:
        if self.mode not in _MODES:
            return f"mode={self.mode}: expected one of {', '.join(_MODES)}"
        if self.backend not in ("inductor", "aot_eager"):
            return f"backend={self.backend}: expected inductor or aot_eager"
        return super().validate()


#: ``torch.compile`` modes of ``--option inductor-cpu:mode=...`` ("reduce-overhead" is CUDA graphs only).
_MODES = ("default", "max-autotune", "max-autotune-no-cudagraphs")

#: torch dtypes by numpy name; uint16/32/64 have little operator support in torch.
_SKIP = {"uint16", "uint32", "uint64"}


class InductorCpuTarget(TwoPathTarget):
    """TorchInductor generating C++/OpenMP kernels for the host CPU."""

    name: ClassVar[str] = "inductor-cpu"
    stack: ClassVar[str] = "inductor"
    device: ClassVar[str] = "cpu"
    torch_device: ClassVar[str] = "cpu"
    description: ClassVar[str] = "TorchInductor (torch.compile); native for PyTorch sources, translated otherwise"
    Options = InductorOptions
    options: InductorOptions
    stage_names: ClassVar[tuple[str, ...]] = ("fx", "post-grad", "output-code")
    compiled_stages: ClassVar[tuple[str, ...]] = ("post-grad", "output-code")
    stage_suffix: ClassVar[dict[str, str]] = {"fx": ".py", "post-grad": ".txt", "output-code": ".py"}
    supported_dtypes = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8",
                                  "float16", "float32", "float64"})
    needs_torch: ClassVar[bool] = True
    #: TorchDynamo's ``aot_eager`` backend: the captured graph without Inductor.
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {"options": {"backend": "aot_eager"}}
    native_framework: ClassVar[str] = "torch"
    table_module: ClassVar[str] = "compstack.translate.fx"

    #: Set by the job when stages are written: compile with Inductor's caches off.
    record_stages: bool = False

    @classmethod
    def availability(cls) -> Availability:
        try:
            import torch
        except ImportError:
            return Availability(False, "torch is not installed: pip install 'compstack[all]'")
        versions = {"torch": str(torch.__version__)}  # TorchVersion is a str subclass
        try:
            versions["triton"] = importlib.metadata.version("triton")
        except importlib.metadata.PackageNotFoundError:
            pass
        return Availability(True, versions=versions)

    def flags(self) -> dict[str, Any]:
        """Options, path, and what ``mode`` set (``tuned``: max-autotune benchmarked candidates)."""
        out = super().flags()
        out["tuning"] = {"tuner": "none", "note": "mode=default: no autotuning (max-autotune benchmarks candidates)"}
        if self.options.mode != "default":
            from torch._inductor import list_mode_options

            out["tuned"] = True
            out["tuning"] = {"tuner": f"Inductor mode={self.options.mode}",
                             "inductor_config": list_mode_options(self.options.mode),
                             "summary": f"Inductor {self.options.mode}: candidate kernels benchmarked at compile "
                                        "(the time is inside compile s)"}
        return out

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """``torch.set_num_threads(n)`` before compiling, and Inductor's
        ``config.cpp.threads = n`` (the ``#pragma omp parallel num_threads`` of the
        generated C++ kernels is fixed at compile time from it, and it is part of
        Inductor's cache key, so a cached compile for another count is not reused)."""
        import torch
        import torch._inductor.config as inductor_config

        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # only settable before the first inter-op work
            pass
        inductor_config.cpp.threads = n
        return {"knob": f"torch.set_num_threads({n}), torch._inductor.config.cpp.threads={n}", "honoured": True}

    def lower_impl(self, model: ir.Model) -> InductorLowered:
        import torch

        path = self.chosen_path()
        names = [v.name or "" for v in model.graph.inputs if not v.is_initializer()]
        examples = [torch.from_numpy(np.array(a)).to(self.torch_device)
                    for a in example_arrays(model, self, lambda d: d in _SKIP)]
        if path == "native":
            native = self.native
            module = native.fn
            pack = native.pack
        else:
            from compstack.translate.fx import to_fx

            model = canonical_for_translation(self.translation_model or model, self.example_inputs)
            module = to_fx(model)

            def pack(xs: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
                return tuple(xs), {}

        if isinstance(module, torch.nn.Module):
            module = module.to(self.torch_device).eval()
        capture = _Capture()
        import torch._dynamo

        torch._dynamo.reset()
        optimized = torch.compile(module, backend=capture, fullgraph=True, dynamic=False)
        args, kwargs = pack(examples)
        with torch.no_grad():
            optimized(*args, **kwargs)
        if capture.graph is None:  # nothing to compile: outputs are inputs or constants
            stages: dict[str, Any] = {"fx": _NO_GRAPH}
        else:
            stages = {"fx": lambda: capture.graph.print_readable(print_output=False)}
        return InductorLowered(self, model, stages, optimized, capture, pack, names, path)


class InductorCudaTarget(InductorCpuTarget):
    """TorchInductor generating Triton kernels for an NVIDIA GPU (CUDA build of torch)."""

    name: ClassVar[str] = "inductor-cuda"
    device: ClassVar[str] = "cuda"
    torch_device: ClassVar[str] = "cuda"
    description: ClassVar[str] = "TorchInductor (torch.compile) on an NVIDIA GPU (Triton kernels)"

    @classmethod
    def availability(cls) -> Availability:
        base = InductorCpuTarget.availability()
        if not base.ok:
            return base
        import torch

        if torch.version.cuda is None:
            return Availability(False, f"torch {torch.__version__} is a CPU build; install a CUDA build of torch "
                                       "for inductor-cuda", base.versions)
        if not torch.cuda.is_available():
            return Availability(False, "no CUDA device visible to torch", base.versions)
        return base


def _zeros_like_outputs(gm: Any) -> Any:
    """Zeros shaped like ``gm``'s outputs (``meta["example_value"]``), or None when an
    output's shape is not recorded."""
    import torch

    out = next(n for n in gm.graph.nodes if n.op == "output")
    values = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    result = []
    for v in values:
        fake = v.meta.get("example_value") if hasattr(v, "meta") else None
        if not isinstance(fake, torch.Tensor):
            return None
        result.append(torch.zeros(tuple(fake.shape), dtype=fake.dtype, device=fake.device))
    return type(out.args[0])(result) if isinstance(out.args[0], (tuple, list)) else result[0]


#: Stage text when TorchDynamo found no tensor computation to hand to Inductor.
_NO_GRAPH = "(no graph: the program computes nothing TorchDynamo captures (outputs are inputs or constants); " \
            "it runs as plain Python)\n"


class _Capture:
    """A TorchDynamo backend that records the graph and defers Inductor until
    :meth:`compile` swaps in Inductor's compiled function.

    The call that triggers the capture (in ``lower``) does not compute: it returns zeros
    shaped like the graph's outputs (from the fake tensors TorchDynamo traced with), so
    input values that would fail eagerly (an integer division by zero, an index out of
    range) fail at ``run``, where they belong, not while capturing. Where the outputs'
    shapes are unknown, the graph runs eagerly instead.
    """

    def __init__(self) -> None:
        self.graph: Any = None
        self.example_inputs: list[Any] = []
        self.compiled: Any = None
        self.count = 0

    def __call__(self, gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        self.count += 1
        self.graph, self.example_inputs = gm, list(example_inputs)

        def run(*args: Any) -> Any:
            if self.compiled is not None:
                return self.compiled(*args)
            placeholder = _zeros_like_outputs(self.graph)
            return placeholder if placeholder is not None else self.graph(*args)

        return run

    def compile_aot_eager(self) -> tuple[list[str], list[str]]:
        """TorchDynamo's ``aot_eager`` backend on the captured graph instead of Inductor."""
        if self.graph is None:
            return [_NO_GRAPH], [_NO_GRAPH]
        import torch
        from torch._dynamo.backends.registry import lookup_backend

        with torch.no_grad():
            self.compiled = lookup_backend("aot_eager")(self.graph, self.example_inputs)
        note = "(backend=aot_eager: no Inductor code generation)\n"
        return [note], [note]

    def compile(self, record: bool, freezing: bool, mode: str = "default") -> tuple[list[str], list[str]]:
        """Run Inductor on the captured graph; returns (post-grad graphs, output code).
        Without a graph (a program with no tensor computation) there is nothing to do."""
        if self.graph is None:
            return [_NO_GRAPH], [_NO_GRAPH]
        import torch
        from torch._inductor import config
        from torch._inductor.compile_fx import compile_fx
        from torch._inductor.custom_graph_pass import CustomGraphPass
        from torch._inductor.graph import GraphLowering

        post: list[str] = []
        codes: list[str] = []

        class RecordPostGrad(CustomGraphPass):
            def __call__(self, graph: Any) -> None:
                post.append(str(graph))

            def uuid(self) -> Any:
                return "compstack-record-post-grad-1"  # a fixed uuid keeps the FX graph cache usable

        from torch._inductor import list_mode_options

        patches = {"post_grad_custom_post_pass": RecordPostGrad(), "freezing": freezing,
                   **(list_mode_options(mode) if mode != "default" else {})}
        if record:
            patches["force_disable_caches"] = True
        with config.patch(patches), mock.patch.object(GraphLowering, "save_output_code", codes.append), \
                torch.no_grad():
            self.compiled = compile_fx(self.graph, self.example_inputs)
        return post, codes


class InductorLowered(Lowered):
    """The graph TorchDynamo captured, ready for Inductor."""

    target: InductorCpuTarget

    def __init__(self, target: InductorCpuTarget, model: ir.Model, stages: dict[str, Any], optimized: Any,
                 capture: _Capture, pack: Callable[[list[Any]], Any], names: list[str], path: str) -> None:
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
            post, codes = self.capture.compile(target.record_stages, bool(target.options.freezing),
                                               target.options.mode)
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

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        import torch

        tensors = [torch.from_numpy(np.array(x)).to(self.target.torch_device) for x in inputs]
        return [o.detach().cpu().numpy() for o in self._call(tensors)]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        import torch

        tensors = [torch.from_numpy(np.array(x)).to(self.target.torch_device) for x in inputs]
        sync = torch.cuda.synchronize if self.target.torch_device == "cuda" else (lambda: None)

        def once() -> Any:
            out = self._call(tensors)
            sync()
            return out

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
