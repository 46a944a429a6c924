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
``torch._inductor.utils.run_and_get_code`` uses). Inductor's FX graph cache, in
compstack's store (``<root>/inductor-cache/``, :mod:`compstack.targets.inductor.cache`),
serves warm compiles; when stages are written (``compstack lower``/``dump``) the compile runs
with caches disabled so every stage is recorded. The artifact of ``compstack lower -o``
is ``output_code.py``: ``python output_code.py`` benchmarks the compiled module with
random inputs (Inductor's own ``benchmark_compiled_module`` entry point).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np
import onnx_ir as ir

from compstack.targets.base import Availability
from compstack.targets.common.torch import example_arrays
from compstack.targets.common.twopath import (
    PathOptions,
    TwoPathTarget,
    canonical_for_translation,
)
from compstack.targets.inductor.capture import NO_GRAPH, Capture
from compstack.targets.inductor.program import InductorLowered

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
        disable_config: Inductor optimisations to switch off for this compile, by the
            names of :data:`PASS_SWITCHES` (each a ``torch._inductor.config`` switch);
            ``compstack explain`` searches them one by one to name the one at fault.
        precision: ``""`` (the model's own), or ``float64``: the translated path computes
            every float32 tensor in float64 (:func:`compstack.targets.common.precision.to_float64`;
            float32 inputs are widened, outputs stay float64). With ``backend=aot_eager`` this is
            the float64 reference of a model too large for ``onnx.reference``
            (:func:`compstack.run.refchoice.pick_reference`), as PyTorch's accuracy gate runs
            the eager model in float64 (``torch/_dynamo/utils.py``, ``fp64_ref``).
    """

    freezing: bool = False
    mode: str = "default"
    backend: str = "inductor"
    disable_config: tuple[str, ...] = ()
    precision: str = ""

    def validate(self) -> str:
        unknown = [n for n in self.disable_config if n not in PASS_SWITCHES]
        if unknown:
            return f"disable_config={unknown[0]}: expected some of {', '.join(PASS_SWITCHES)}"
        if self.mode not in _MODES:
            return f"mode={self.mode}: expected one of {', '.join(_MODES)}"
        if self.backend not in ("inductor", "aot_eager"):
            return f"backend={self.backend}: expected inductor or aot_eager"
        if self.precision not in ("", "float64"):
            return f"precision={self.precision}: expected float64 (or leave it out)"
        if self.precision and self.path == "native":
            return "precision=float64: needs path=translated (the native program keeps its own dtypes)"
        return super().validate()


#: Inductor's optimisations that a ``torch._inductor.config`` switch turns off (name ->
#: (config key, value that turns it off)); all on by default in torch 2.13
#: (``torch/_inductor/config.py``). ``fusion`` is the scheduler's fusion of kernels
#: (``max_fusion_size=1``: no kernel takes a second node).
PASS_SWITCHES: dict[str, tuple[str, Any]] = {
    "pattern_matcher": ("pattern_matcher", False),  # pre/post-grad FX rewrites (mm+add -> addmm, ...)
    "joint_graph_constant_folding": ("joint_graph_constant_folding", False),
    "split_cat_fx_passes": ("split_cat_fx_passes", False),
    "batch_fusion": ("batch_fusion", False),
    "split_reductions": ("split_reductions", False),
    "reorder_for_locality": ("reorder_for_locality", False),
    "epilogue_fusion": ("epilogue_fusion", False),
    "loop_ordering_after_fusion": ("loop_ordering_after_fusion", False),
    "shape_padding": ("shape_padding", False),
    "comprehensive_padding": ("comprehensive_padding", False),
    "fusion": ("max_fusion_size", 1),
}

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

    tuned_as = ({"mode": "max-autotune"}, ("torch.compile mode=max-autotune (Inductor benchmarks GEMM/conv candidates "
                                           "in the compile; limit + {budget} s)"))
    #: Inductor's optimisations are config switches, turned off by name (:data:`PASS_SWITCHES`).
    pass_option: ClassVar[str] = "disable_config"
    native_framework: ClassVar[str] = "torch"
    table_module: ClassVar[str] = "compstack.translate.fx"

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
        out["dynamo_config"] = {"allow_rnn": True}
        out["tuning"] = {"tuner": "none", "note": "mode=default: no autotuning (max-autotune benchmarks candidates)"}
        if self.options.mode != "default":
            from torch._inductor import list_mode_options

            out["tuned"] = True
            out["tuning"] = {"tuner": f"Inductor mode={self.options.mode}",
                             "inductor_config": list_mode_options(self.options.mode),
                             "summary": f"Inductor {self.options.mode}: candidate kernels benchmarked at compile "
                                        "(the time is inside compile s)"}
        return out

    def applied_passes(self, model: ir.Model) -> list[str]:
        """The :data:`PASS_SWITCHES` that were on when ``model`` compiled, in pipeline
        order (FX passes, then the scheduler's). Inductor keeps a record only of its
        pattern matcher (``torch._dynamo.utils.counters["inductor"]["pattern_matcher_count"]``):
        it is listed only when it rewrote something; the others are listed when switched on.
        One compile, with Inductor's caches off (a cache hit runs no pass)."""
        from torch._dynamo.utils import counters
        from torch._inductor import config

        counters["inductor"].clear()
        with config.patch({"force_disable_caches": True}):
            self.lower(model).compile()
        hits = counters["inductor"].get("pattern_matcher_count", 0)
        out = []
        for name, (key, off) in PASS_SWITCHES.items():
            if name in self.options.disable_config or getattr(config, key) == off:
                continue
            if name == "pattern_matcher" and not hits:
                continue
            out.append(name)
        return out

    def config_patches(self) -> dict[str, Any]:
        """``torch._inductor.config`` values of ``disable_config`` (see :data:`PASS_SWITCHES`)."""
        return {PASS_SWITCHES[n][0]: PASS_SWITCHES[n][1] for n in self.options.disable_config}

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
            wide = self.options.precision == "float64"
            if wide:
                model = _widened(model)
                examples = [t.double() if t.dtype == torch.float32 else t for t in examples]
            module = to_fx(model, share_weights=wide)  # the widened arrays are this job's own

            def pack(xs: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
                return tuple(xs), {}

        if isinstance(module, torch.nn.Module):
            module = module.to(self.torch_device).eval()
        capture = Capture(eager_first=path == "native")
        import torch._dynamo

        torch._dynamo.reset()
        # fullgraph=True turns Dynamo's default graph break at nn.LSTM/GRU/RNN into an error;
        # allow_rnn traces them into the graph, so Inductor compiles the whole model (flags: dynamo_config)
        torch._dynamo.config.allow_rnn = True
        optimized = torch.compile(module, backend=capture, fullgraph=True, dynamic=False)
        args, kwargs = pack(examples)
        with torch.no_grad():
            optimized(*args, **kwargs)
            if path == "native":  # a program that fills its own state on the first call is traced again
                optimized(*args, **kwargs)
        if capture.graph is None:  # nothing to compile: outputs are inputs or constants
            stages: dict[str, Any] = {"fx": NO_GRAPH}
        else:
            stages = {"fx": lambda: capture.graph.print_readable(print_output=False)}
        return InductorLowered(self, model, stages, optimized, capture, pack, names, path)


def _widened(model: ir.Model) -> ir.Model:
    """``model`` computing every float32 tensor in float64 (``precision=float64``), its
    weights widened one by one, not through a protobuf copy (``to_float64_model``)."""
    from compstack.targets.common.precision import to_float64_model

    return to_float64_model(model)


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
