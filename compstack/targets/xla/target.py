"""``xla-cpu`` (and ``xla-cuda``): XLA through JAX.

Two paths (see :mod:`compstack.targets.common.twopath`): a JAX source is compiled natively
(``jax.jit(f).lower(*args).compile()``); any other model is translated op by op into a
JAX function (:mod:`compstack.translate.jax`, each node under
``jax.named_scope(<node name>)``) and then jitted. Large float initializers are
arguments of the XLA program (``params``), not constants folded into it.

Stages (JAX's own ``jax.stages`` objects):

* ``stablehlo`` — ``Lowered.as_text()``, the StableHLO module handed to XLA;
* ``hlo`` — ``Lowered.as_text(dialect="hlo")``, HLO before XLA's passes;
* ``hlo-optimized`` — ``Compiled.as_text()``, HLO after XLA's pipeline: fusions
  (``%fusion = ... fusion(...), kind=kLoop, calls=%fused_computation``) are visible,
  and each instruction's ``metadata={op_name=...}`` names the source node.

The artifact (``compstack lower -o``) is ``model.jax_export``: ``jax.export``'s
serialized form (StableHLO plus calling convention; weights included), which
``jax.export.deserialize(...).call(*inputs)`` runs on any JAX of a compatible version
(JAX docs, "Exporting and serializing staged-out computations"). Compiled programs go
through JAX's persistent compilation cache in compstack's store (``<root>/jax-cache/``,
:mod:`compstack.targets.xla.cache`), not compstack's artifact cache.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, cast

import numpy as np
import onnx_ir as ir

from compstack.targets.base import PLAIN_DTYPES, Availability
from compstack.targets.common.twopath import (
    PathOptions,
    TwoPathTarget,
    canonical_for_translation,
)
from compstack.targets.xla.program import (
    XlaLowered,
    _as_float64,
    _input_specs,
    _native_call,
    _translated_call,
    _x64,
)

__all__ = ["XlaCpuTarget", "XlaCudaTarget", "XlaOptions"]


@dataclass(frozen=True)
class XlaOptions(PathOptions):
    """Options of the XLA targets.

    Attributes:
        path: see :class:`~compstack.targets.common.twopath.PathOptions`.
        x64: native path only: trace and run the JAX program with ``jax.enable_x64`` and
            its floating-point inputs as float64, the float64 reference of a JAX source
            whose common IR could not be built (no ONNX reference exists then).
        disable_hlo_passes: HLO passes not to run, by name (``algsimp``, ``fusion``...),
            passed to this compile only as XLA's ``xla_disable_hlo_passes`` debug option
            (``Lowered.compile(compiler_options=...)``).
    """

    x64: bool = False
    disable_hlo_passes: tuple[str, ...] = ()

    def validate(self) -> str:
        problem = super().validate()
        if not problem and self.x64 and self.path == "translated":
            return "x64=true: only the native path runs in float64"
        return problem


class XlaCpuTarget(TwoPathTarget):
    """XLA on the host CPU (jaxlib's XLA:CPU backend)."""

    name: ClassVar[str] = "xla-cpu"
    stack: ClassVar[str] = "xla"
    device: ClassVar[str] = "cpu"
    #: ``XLA_FLAGS=--xla_backend_optimization_level=0`` (XLA's documented debug flag).
    untuned_reason: ClassVar[str] = ("XLA:CPU has no tuning step: fixed fusion and tiling heuristics plus "
                                     "oneDNN/Eigen library calls")
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {
        "env": {"XLA_FLAGS": "--xla_backend_optimization_level=0"}}
    jax_platform: ClassVar[str] = "cpu"
    description: ClassVar[str] = "XLA via JAX (jax.jit); native for JAX sources, translated otherwise"
    Options = XlaOptions
    options: XlaOptions
    stage_names: ClassVar[tuple[str, ...]] = ("stablehlo", "hlo", "hlo-optimized")
    compiled_stages: ClassVar[tuple[str, ...]] = ("hlo-optimized",)
    stage_suffix: ClassVar[dict[str, str]] = {"stablehlo": ".mlir", "hlo": ".hlo", "hlo-optimized": ".hlo"}
    supported_dtypes = PLAIN_DTYPES | {"bfloat16"}
    native_framework: ClassVar[str] = "jax"
    table_module: ClassVar[str] = "compstack.translate.jax"

    @classmethod
    def availability(cls) -> Availability:
        try:
            import jax
        except ImportError:
            return Availability(False, "jax is not installed: pip install 'compstack[all]'")
        versions = {"jax": jax.__version__, "jaxlib": importlib.metadata.version("jaxlib")}
        try:
            jax.devices(cls.jax_platform)
        except RuntimeError as exc:
            return Availability(True, versions=versions, runs=False,
                                run_reason=f"no JAX {cls.jax_platform} device ({str(exc).splitlines()[0][:120]})")
        return Availability(True, versions=versions)

    def flags(self) -> dict[str, Any]:
        """Options and path; XLA:CPU is not tuned (say so)."""
        out = super().flags()
        out["tuning"] = {"tuner": "none", "note": "XLA:CPU does not auto-tune: fixed fusion and tiling heuristics, "
                         "Eigen/oneDNN library calls for dot and convolution"}
        return out

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """jaxlib 0.10's XLA:CPU sizes its intra-op pool (``tf_XLAEigen`` threads) from the
        CPUs the process may run on (tsl ``NumSchedulableCPUs``, i.e. the affinity mask);
        its ``--xla_cpu_multi_thread_eigen=false`` flag was measured not to stop that pool
        here, and no intra-op thread-count flag is exposed to Python. So the knob is the
        affinity: every thread of the worker is restricted to the first ``n`` usable CPUs
        before JAX starts. XLA still runs its caller, dispatch and pool threads (3 busy
        threads were seen on one CPU), so what the row checks is CPUs, not threads
        (``bound: cpus``)."""
        if cls.jax_platform != "cpu":
            return {"knob": "none", "honoured": False, "note": "GPU target: host threads are not the comparison"}
        if not hasattr(os, "sched_setaffinity"):
            return {"knob": "none", "honoured": False, "note": "no sched_setaffinity on this OS"}
        from compstack.core.threads import first_cpus

        cpus = first_cpus(n)
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:
                pass
        honoured = len(cpus) == n
        return {"knob": f"CPU affinity {sorted(cpus)} (XLA sizes its intra-op pool from it)", "honoured": honoured,
                "bound": "cpus",
                **({} if honoured else {"note": f"only {len(cpus)} usable CPUs for {n} threads"})}

    def lower_impl(self, model: ir.Model) -> XlaLowered:
        import jax

        path = self.chosen_path()
        specs = _input_specs(model, self.example_inputs)
        if path == "native":
            native = self.native
            x64 = bool(getattr(self.options, "x64", False))
            specs = [_as_float64(s) for s in specs] if x64 else specs
            args, kwargs = native.pack(specs)
            jitted = jax.jit(native.fn)
            with _x64(x64):
                lowered = jitted.lower(*args, **kwargs)
            call = _native_call(native, x64)

            def flat(*xs: Any) -> Any:  # the artifact takes the IR's inputs in order, like the translated one
                a, k = native.pack(list(xs))
                return native.fn(*a, **k)

            export_args: tuple[tuple[Any, ...], dict[str, Any]]
            export_fn, export_args = jax.jit(flat), (tuple(specs), {})
        else:
            from compstack.translate.jax import to_jax

            with _x64(True):
                model = canonical_for_translation(self.translation_model or model, self.example_inputs)
                specs = _input_specs(model, self.example_inputs)
                prog = to_jax(model)
                jitted = jax.jit(prog.fn)
                params = {k: jax.device_put(v, self._device()) for k, v in prog.params.items()}
                lowered = jitted.lower(params, *specs)
            call = _translated_call(params)

            def baked(*xs: Any) -> Any:
                return prog.fn(prog.params, *xs)

            export_fn, export_args = jax.jit(baked), (tuple(specs), {})
        stages: dict[str, str | Callable[[], str]] = {
            "stablehlo": lowered.as_text,
            "hlo": lambda: lowered.as_text(dialect="hlo"),
        }
        return XlaLowered(self, model, stages, lowered, call, export_fn, export_args, path)

    #: The option that switches HLO passes off by name (see :meth:`applied_passes`).
    pass_option: ClassVar[str] = "disable_hlo_passes"

    def compiler_options(self) -> dict[str, Any]:
        """XLA debug options of this target's compiles (``jax`` ``compiler_options``)."""
        opts = self.options
        return {"xla_disable_hlo_passes": ",".join(opts.disable_hlo_passes)} if opts.disable_hlo_passes else {}

    def applied_passes(self, model: ir.Model) -> list[str]:
        """The HLO passes that changed the module while compiling ``model``, in pipeline
        order, from XLA's own pass dump: with ``xla_dump_hlo_pass_re=.*`` XLA writes
        ``NNNN.<pipeline>.after_<pass>.before_<next>.txt`` only for a pass that changed
        the module. The compile bypasses JAX's persistent cache (its key ignores the dump
        options, so a hit would dump nothing)."""
        import re
        import tempfile

        from compstack.targets.xla.cache import use_store

        lowered = cast("XlaLowered", self.lower(model))  # lower() returns what lower_impl built
        use_store(None)  # JAX's cache key leaves the dump options out: a hit would run no pass, dump nothing
        try:
            with tempfile.TemporaryDirectory(prefix="compstack-xladump-") as tmp:
                with lowered.x64():
                    lowered.jax_lowered.compile(compiler_options={
                        **self.compiler_options(), "xla_dump_to": tmp, "xla_dump_hlo_pass_re": ".*",
                        "xla_dump_hlo_as_text": True})
                files = sorted(Path(tmp).iterdir())
        finally:
            use_store(self.cache_root)
        names = [m.group(1) for f in files if (m := re.search(r"\.\d{4}\.[^.]+\.after_(.+?)\.before_", f.name))]
        return list(dict.fromkeys(n for n in names if n != "pipeline-start"))

    def run_eager(self, model: ir.Model, feeds: dict[str, Any]) -> dict[str, Any]:
        """The translated JAX program run op by op (``jax.disable_jit()``), in the same
        x64 context as the compiled path."""
        import jax

        from compstack.translate.jax import to_jax

        with _x64(True), jax.disable_jit():
            model = canonical_for_translation(model, feeds)
            prog = to_jax(model)
            # device arrays, not numpy: numpy operands would be folded by onnx.reference
            # (compstack.translate.interpret), and the converters would never run
            params = {k: jax.device_put(v, self._device()) for k, v in prog.params.items()}
            got = prog.fn(params, *[jax.device_put(feeds[n], self._device()) for n in prog.input_names])
        return {n: np.asarray(v) for n, v in zip(prog.output_names, got)}

    def _device(self) -> Any:
        import jax

        return jax.devices(self.jax_platform)[0]


class XlaCudaTarget(XlaCpuTarget):
    """XLA on an NVIDIA GPU: needs the CUDA build of jaxlib (``pip install jax[cuda12]``)
    and a GPU; never installed by compstack."""

    name: ClassVar[str] = "xla-cuda"
    device: ClassVar[str] = "cuda"
    jax_platform: ClassVar[str] = "cuda"
    description: ClassVar[str] = "XLA via JAX on an NVIDIA GPU (CUDA jaxlib)"

    @classmethod
    def availability(cls) -> Availability:
        try:
            import jax
        except ImportError:
            return Availability(False, "jax is not installed: pip install 'compstack[all]'")
        versions = {"jax": jax.__version__, "jaxlib": importlib.metadata.version("jaxlib")}
        try:
            jax.devices("cuda")
        except RuntimeError:
            return Availability(False, "no CUDA device visible to JAX (needs a GPU and the CUDA jaxlib: "
                                       "pip install 'jax[cuda12]')", versions)
        return Availability(True, versions=versions)
