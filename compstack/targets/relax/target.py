"""The ``tvm-llvm`` target: Apache TVM Relax on the CPU (LLVM), untuned by default.

Lowering imports the model with ``tvm.relax.frontend.onnx.from_onnx`` (weights
folded in as constants). Compiling runs the target's default Relax pipeline
(``relax.get_default_pipeline(target)``: legalize, FuseOps/FuseTIR, memory planning,
VM lowering) -- plain ``tvm.compile(mod, target)`` does *not* fuse -- then TVM's TIR
pipeline and LLVM. No MetaSchedule/DLight runs on CPU by default: the loops are TVM's
default, untuned schedules (``flags()["tuned"]`` is False).

With ``--option tvm-llvm:tune_trials=N`` the compile first runs the steps of TVM's
``static_shape_tuning`` pipeline (``relax.pipeline.static_shape_tuning_pipeline``:
``DecomposeOpsForInference``, ``zero_pipeline`` (legalize, fuse),
``MetaScheduleTuneIRMod``'s ``tune_relax`` with ``max_trials_per_task=N`` and longer
builder/runner limits, ``MetaScheduleApplyDatabase``),
then the default pipeline as above. The MetaSchedule database (``database_workload.json``,
``database_tuning_record.json``) is kept under ``<cache root>/tvm-tuning/<key>/``, the key
hashing the Relax module, the target and N; a later compile of the same module finds the
finished records there and only applies them (no second tuning). The tuning time is
reported apart from the compile time (``flags["tuning"]["tune_s"]``).

Stages, in pipeline order:

* ``relax``: the imported IRModule.
* ``relax-fused``: after FuseTIR (Relax ``main`` plus the fused PrimFuncs, named
  ``fused_<ops>``); before compilation it is computed by running the pipeline's
  dispatch and legalize phases, after it is the module the compile saw.
* ``relax-final`` (after compile): the module after the last Relax pass
  (``AttachGlobalSymbol``: VM builtins, planned memory, PrimFuncs).
* ``tir`` (after compile): the PrimFuncs of ``relax-final``, one per generated kernel.
* ``tir-lowered`` (after compile): the kernels after TVM's TIR lowering (flattened,
  vectorised, packed API), as handed to LLVM.
* ``llvm``, ``asm`` (after compile): the generated LLVM IR and assembly.

With the option ``pass_stages=True`` the module after every Relax-level pass is kept
as well, as ``relax.NN.<PassName>`` (about 30 stages, text made on demand).

Recipe and traps: ``/work/shared/notes/STACKS.md`` section 4 (TVM 0.27: dict targets
only, ``tvm.runtime.tensor``, VM from ``relax.VirtualMachine``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import numpy as np
import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core.inputs import contiguous
from compstack.targets.base import Availability, Compiled, Lowered, PassRecord, Target, TargetOptions

__all__ = ["TvmLlvmTarget", "TvmOptions", "TvmCudaTarget", "TvmCudaOptions", "TvmVulkanTarget"]

#: Domains whose ops TVM's ONNX frontend dispatches by op type alone.
_TVM_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
#: Ops the frontend handles outside its converter map.
_DIRECT_OPS = frozenset({"Constant", "If"})


@dataclass(frozen=True)
class TvmOptions(TargetOptions):
    """Options of the ``tvm-llvm`` target.

    Attributes:
        opt_level: ``tvm.transform.PassContext(opt_level=...)`` (0-3).
        num_cores: the target's ``num-cores``; 0 means ``os.cpu_count()``.
        mcpu: LLVM CPU name (``skylake-avx512``); empty means this host's CPU
            (``llvm_get_system_cpu()``), as TVM users set ``-mcpu=native``.
        pass_stages: also keep the module after every Relax pass as a stage.
        disabled_passes: passes not to run (``PassContext(disabled_pass=...)``), e.g.
            ``FuseOps``; TVM skips them wherever a ``Sequential`` would run them.
        tune_trials: MetaSchedule trials per tuning task (kernel); 0: no tuning (TVM's
            default schedules).
    """

    opt_level: int = 3
    num_cores: int = 0
    mcpu: str = ""
    pass_stages: bool = False
    disabled_passes: tuple[str, ...] = ()
    tune_trials: int = 0

    def validate(self) -> str:
        if self.tune_trials < 0:
            return f"tune_trials={self.tune_trials}: expected >= 0 (MetaSchedule trials per task)"
        if not 0 <= self.opt_level <= 3:
            return f"opt_level={self.opt_level}: expected 0..3 (tvm.transform.PassContext)"
        if self.num_cores < 0:
            return f"num_cores={self.num_cores}: expected >= 0"
        return ""


def _op_label(domain: str, op_type: str) -> str:
    return f"{domain}::{op_type}" if domain not in ("", "ai.onnx") else op_type


def _node_ops(nodes: Any, functions: Any, seen: set[Any]) -> list[tuple[str, str]]:
    """(domain, op_type) of ``nodes`` and their subgraphs, calls to local functions expanded."""
    out: list[tuple[str, str]] = []
    for node in nodes:
        key = (node.domain, node.op_type, node.overload)
        if key in functions:
            if key not in seen:
                seen.add(key)
                out += _node_ops(functions[key], functions, seen)
            continue
        out.append((node.domain, node.op_type))
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                out += _node_ops(attr.value, functions, seen)
            elif attr.type == ir.AttributeType.GRAPHS:
                for g in attr.value:
                    out += _node_ops(g, functions, seen)
    return out


class TvmLlvmTarget(Target):
    """TVM Relax, LLVM CPU backend, default (untuned) pipeline."""

    name = "tvm-llvm"
    stack = "tvm"
    device = "cpu"
    description = "Apache TVM Relax, LLVM CPU codegen, default pipeline (untuned)"
    Options = TvmOptions
    #: File suffix of each stage's text when written to disk (TVMScript is Python).
    stage_suffix: ClassVar[dict[str, str]] = {
        "relax": ".py", "relax-fused": ".py", "relax-final": ".py", "tir": ".py", "tir-lowered": ".py",
        "llvm": ".ll", "asm": ".s"}
    stage_names: ClassVar[tuple[str, ...]] = ("relax", "relax-fused", "relax-final", "tir", "tir-lowered", "llvm", "asm")
    #: ``PassContext(opt_level=0)``.
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {"options": {"opt_level": "0"}}
    #: ``PassContext(disabled_pass=[...])`` (see :meth:`applied_passes`).
    pass_option: ClassVar[str] = "disabled_passes"

    def pass_context(self, **kw: Any) -> Any:
        """The ``tvm.transform.PassContext`` of every build: the opt level and the
        disabled passes of the options."""
        import tvm

        return tvm.transform.PassContext(opt_level=self.options.opt_level,
                                         disabled_pass=list(self.options.disabled_passes), **kw)

    def applied_passes(self, model: ir.Model) -> list[str]:
        """The Relax and TIR passes that changed the module while compiling ``model``, in
        pipeline order, from TVM's own pass instrument (``PassInstrument`` hooks with a
        structural hash before and after each pass: :meth:`Lowered.passes`)."""
        records = self.lower(model).passes("changed") or []
        return list(dict.fromkeys(r.name for r in records if r.changed))
    compiled_stages: ClassVar[tuple[str, ...]] = ("relax-final", "tir", "tir-lowered", "llvm", "asm")

    options: TvmOptions
    #: ``tvm.device`` kind the artifacts run on, and the Relax backend package.
    tvm_device: ClassVar[str] = "cpu"
    relax_backend: ClassVar[str] = "cpu_generic"

    ops_note: ClassVar[str] = "TVM Relax's ONNX frontend converter map (tvm.relax.frontend.onnx)"

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        from tvm.relax.frontend.onnx import onnx_frontend

        return sorted(onnx_frontend._get_convert_map())

    @classmethod
    def availability(cls) -> Availability:
        """Whether ``apache-tvm`` imports here and was built with LLVM."""
        try:
            import tvm
            from tvm.relax.frontend import onnx as _  # noqa: F401
        except ImportError as exc:
            return Availability(False, f"tvm does not import ({exc}); pip install apache-tvm")
        versions = {"apache-tvm": _dist_version("apache-tvm", tvm.__version__)}
        if not tvm.runtime.enabled("llvm"):
            return Availability(False, "this TVM build has no LLVM backend (USE_LLVM=OFF)", versions)
        return Availability(True, versions=versions)

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """TVM's runtime thread pool reads ``TVM_NUM_THREADS`` when it is created (the
        runner sets it before the worker starts; set here too for inline jobs). The
        calling thread is one of the ``n``. The artifact is unchanged (``num-cores`` of the
        target only steers tuning and some schedules)."""
        os.environ["TVM_NUM_THREADS"] = str(n)
        return {"knob": f"TVM_NUM_THREADS={n} (runtime thread pool)", "honoured": True}

    def target_dict(self) -> dict[str, Any]:
        """The ``tvm.target.Target`` as a dict (string targets with ``-mcpu`` are rejected in 0.27)."""
        from tvm.target import codegen

        return {"kind": "llvm", "num-cores": self.options.num_cores or os.cpu_count() or 1,
                "mcpu": self.options.mcpu or codegen.llvm_get_system_cpu()}

    def flags(self) -> dict[str, Any]:
        """Target dict, pipeline, opt level; ``tuned`` (MetaSchedule ran or its records were applied)."""
        tuned = self.options.tune_trials > 0
        out = {"target": self.target_dict(),
               "pipeline": ("static_shape_tuning steps (MetaSchedule) + " if tuned else "")
               + "relax.get_default_pipeline (relax.backend.cpu_generic)",
               "opt_level": self.options.opt_level, "tuned": tuned,
               "frontend": "relax.frontend.onnx.from_onnx(keep_params_in_input=False)"}
        if self.options.disabled_passes:
            out["disabled_passes"] = list(self.options.disabled_passes)
        if tuned:
            out["tuning"] = {"tuner": "MetaSchedule (MetaScheduleTuneIRMod + MetaScheduleApplyDatabase)",
                             "trials_per_task": self.options.tune_trials}
        return out

    def unsupported_ops(self, model: ir.Model) -> list[str]:
        """Ops missing from TVM's ONNX converter map (``_get_convert_map()``), all at once.

        Model-local functions are expanded (they are inlined before import); ops of
        subgraphs are included. Ops of a domain other than ai.onnx/com.microsoft are
        listed too: the frontend would dispatch them by op type alone.
        """
        from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

        from compstack.targets.relax.custom_ops import handles

        known = set(_get_convert_map()) | _DIRECT_OPS
        missing = {_op_label(d, op) for d, op in _node_ops(model.graph, model.functions, set())
                   if (d not in _TVM_DOMAINS or op not in known) and not handles(d, op)}
        return sorted(missing)

    def lower_impl(self, model: ir.Model) -> Lowered:
        from tvm.relax.frontend.onnx import from_onnx

        from compstack.targets.relax.custom_ops import importing
        from compstack.targets.relax.kernels import named_bindings

        proto = cir.to_proto(cir.inline_functions(model))
        # Registered custom ops (compstack.ops) become R.call_dps_packed calls of their C kernels.
        with named_bindings(), importing(proto, self.tvm_device, self.name) as proto:
            mod = from_onnx(proto, keep_params_in_input=False)
        return _TvmLowered(self, model, mod)

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        """Load ``folder/model.so`` (written by :meth:`Compiled.save`) into a new VM.

        Raises:
            FileNotFoundError: no ``model.so`` there.
            tvm.error.TVMError: the library cannot be loaded.
        """
        import tvm

        from compstack.ops._registry import ops_in
        from compstack.targets.relax.custom_ops import register_packed

        path = folder / "model.so"
        if not path.is_file():
            raise FileNotFoundError(path)
        register_packed(ops_in(model))  # the VM looks custom ops' packed functions up by name
        lib = tvm.runtime.load_module(str(path))
        return _TvmCompiled(self, model, lib, export=lambda dst: shutil.copyfile(path, dst))


def _dist_version(dist: str, fallback: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return fallback


def _script(mod: Any) -> Callable[[], str]:
    return lambda: mod.script(show_meta=False)


def _is_relax_module(mod: Any) -> bool:
    from tvm import relax

    return any(isinstance(f, relax.Function) for f in mod.functions.values())


def _kernels_only(mod: Any) -> Any:
    """The PrimFuncs of ``mod`` as their own IRModule."""
    import tvm
    from tvm import relax

    return tvm.IRModule({gv: f for gv, f in mod.functions.items() if not isinstance(f, relax.Function)})


def _recorder(keep_all: bool) -> tuple[Any, dict[str, Any], list[tuple[str, Any]]]:
    """A pass instrument keeping module *references* (no text) at the stages we show."""
    import tvm

    marks: dict[str, Any] = {}
    passes: list[tuple[str, Any]] = []

    @tvm.instrument.pass_instrument
    class _Keep:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if info.name == "FuseOps":  # kernel mapping (compstack.targets.relax.kernels)
                marks["pre-FuseOps"] = mod

        def run_after_pass(self, mod: Any, info: Any) -> None:
            name = info.name
            if _is_relax_module(mod):
                marks["relax-final"] = mod
                if name == "FuseOps":
                    marks["FuseOps"] = mod
                if name == "FuseTIR":
                    marks["relax-fused"] = mod
                if keep_all and name not in ("sequential", "_pipeline"):
                    passes.append((name, mod))
            elif len(mod.functions):
                marks["tir-lowered"] = mod

    return _Keep(), marks, passes


class _TvmLowered(Lowered):
    target: TvmLlvmTarget

    def __init__(self, target: TvmLlvmTarget, model: ir.Model, mod: Any) -> None:
        super().__init__(target, model, {"relax": _script(mod), "relax-fused": self._fused_text})
        self.mod = mod

    def _tvm_target(self) -> Any:
        import tvm

        return tvm.target.Target(self.target.target_dict())

    def _fused_text(self) -> str:
        """FuseTIR output without compiling: the pipeline's dispatch + legalize phases."""
        import importlib

        import tvm

        target = self._tvm_target()
        backend = importlib.import_module(f"tvm.relax.backend.{self.target.relax_backend}.pipeline")
        with target, self.target.pass_context():
            seq = tvm.transform.Sequential(backend.library_dispatch_passes(target) + backend.legalize_passes(target))
            return seq(self.mod).script(show_meta=False)

    def passes_impl(self, mode: str) -> list[PassRecord]:
        """Build once with a pass instrument that times every pass of ``tvm.compile``
        (Relax pipeline, TIR lowering) and keeps the module after it.

        ``changed`` compares ``tvm_ffi.structural_hash`` before and after each pass and
        keeps only the passes that changed the module. Wall times are measured around
        each pass by the instrument (TVM's ``PassInstrument`` hooks), nested
        ``Sequential`` wrappers excluded.
        """
        import tvm
        from tvm import relax

        target = self._tvm_target()
        inst, records = _pass_recorder(mode == "changed")
        with self.target.pass_context(instruments=[inst]):
            tvm.compile(self.mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
        return records

    def compile_impl(self) -> Compiled:
        import time

        import tvm
        from tvm import relax

        target = self._tvm_target()
        mod, tuning, tune_s = self.mod, None, 0.0
        if self.target.options.tune_trials > 0:
            t0 = time.perf_counter()
            from compstack.targets.relax.tuning import tune

            mod, tuning = tune(self.mod, target, self.target)
            tune_s = time.perf_counter() - t0
        keep, marks, passes = _recorder(self.target.options.pass_stages)
        with self.target.pass_context(instruments=[keep]):
            ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
        compiled = _TvmCompiled(self.target, self.model, ex, export=lambda dst: ex.export_library(str(dst)))
        if tuning is not None:
            compiled.tuning, compiled.tune_s = tuning, tune_s
        compiled.pass_names = [name for name, _ in passes]
        compiled.marks = marks
        stages: dict[str, Callable[[], str]] = {}
        for i, (name, mod) in enumerate(passes):
            stages[f"relax.{i:02d}.{name}"] = _script(mod)
        for name in ("relax-fused", "relax-final"):
            if name in marks:
                stages[name] = _script(marks[name])
        if "relax-final" in marks:
            stages["tir"] = _script(_kernels_only(marks["relax-final"]))
        if "tir-lowered" in marks:
            stages["tir-lowered"] = _script(marks["tir-lowered"])
        stages.update(_codegen_stages(ex))
        compiled.stages.update(stages)
        for name, text in stages.items():
            self.add_stage(name, text)
        return compiled


#: Pass names of TVM's pipeline wrappers, which contain other passes.
_WRAPPERS = frozenset({"sequential", "_pipeline", "tvm.relax.transform.Sequential"})


def _pass_recorder(only_changed: bool) -> tuple[Any, list[PassRecord]]:
    """A TVM pass instrument producing :class:`PassRecord` s (module kept by reference)."""
    import time

    import tvm
    import tvm_ffi

    records: list[PassRecord] = []
    stack: list[tuple[float, int | None]] = []

    @tvm.instrument.pass_instrument
    class _Record:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            before = tvm_ffi.structural_hash(mod) if only_changed and info.name not in _WRAPPERS else None
            stack.append((time.perf_counter(), before))

        def run_after_pass(self, mod: Any, info: Any) -> None:
            t0, before = stack.pop()
            if info.name in _WRAPPERS:
                return
            changed = None if before is None else tvm_ffi.structural_hash(mod) != before
            if only_changed and not changed:
                records.append(PassRecord(len(records), info.name, time.perf_counter() - t0, False))
                return
            records.append(PassRecord(len(records), info.name, time.perf_counter() - t0, changed,
                                      "module", _script(mod)))

    return _Record(), records


def _codegen_stages(ex: Any) -> dict[str, Callable[[], str]]:
    """``llvm``/``asm`` text of the host LLVM module and ``cuda`` (CUDA C) of a device
    module, when the executable has them."""
    llvm = [m for m in ex.mod.imports if m.kind == "llvm"]
    if not llvm:
        return {}
    stages = {"llvm": lambda: llvm[0].inspect_source("ll"), "asm": lambda: llvm[0].inspect_source("asm")}
    cuda = [m for m in llvm[0].imports if m.kind == "cuda"]
    if cuda:
        stages["cuda"] = lambda: cuda[0].inspect_source()
    return stages


def _outputs(value: Any) -> list[np.ndarray]:
    """VM results (a Tensor, a Shape, or an Array of them for tuple outputs) as host arrays.

    A Relax ``R.shape`` result (an ONNX ``Shape`` output folded to a constant shape) is
    one int64 tensor, as ONNX defines it, not one output per dimension.
    """
    import tvm_ffi

    if hasattr(value, "numpy"):
        return [value.numpy()]
    if isinstance(value, tvm_ffi.Shape):
        return [np.asarray(tuple(value), dtype=np.int64)]
    if isinstance(value, (int, float, bool)):
        return [np.asarray(value)]
    return [out for item in value for out in _outputs(item)]


class _TvmCompiled(Compiled):
    """A Relax VM executable (or the library it was exported to) bound to the target's
    device (``tvm.cpu()``, ``tvm.cuda()``); the VM is created on first use, so a GPU
    artifact can be built and saved on a machine without the GPU."""

    artifact_files = ("model.so",)

    def __init__(self, target: Target, model: ir.Model, executable: Any, export: Callable[[Path], Any]) -> None:
        super().__init__(target, model)
        self.executable = executable
        self._vm: Any = None
        self._export = export
        #: Names of the Relax passes that ran (only with ``pass_stages=True``).
        self.pass_names: list[str] = []
        #: Relax modules kept at compile (``pre-FuseOps``, ``FuseOps``, ``relax-final``...).
        self.marks: dict[str, Any] = {}
        #: What MetaSchedule did (``tune_trials > 0``), for ``flags["tuning"]``; None when untuned.
        self.tuning: dict[str, Any] | None = None

    @property
    def device(self) -> Any:
        import tvm

        return tvm.device(getattr(self.target, "tvm_device", "cpu"), 0)

    @property
    def _main(self) -> Any:
        if self._vm is None:
            from tvm import relax

            self._vm = relax.VirtualMachine(self.executable, self.device)
        return self._vm["main"]

    def _tensors(self, inputs: list[np.ndarray]) -> list[Any]:
        import tvm

        return [tvm.runtime.tensor(contiguous(a), self.device) for a in inputs]

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return _outputs(self._main(*self._tensors(inputs)))

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        args = self._tensors(inputs)
        main, sync = self._main, self.device.sync

        def call() -> Any:
            out = main(*args)
            sync()
            return out

        return call

    def save_impl(self, folder: Path) -> None:
        self._export(folder / "model.so")

    def kernels_impl(self) -> Any:
        from compstack.targets.relax.kernels import kernel_map

        return kernel_map(self)

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets.relax.kernels import profile

        return profile(self, inputs, warmup, runs)


@dataclass(frozen=True)
class TvmCudaOptions(TvmOptions):
    """Options of ``tvm-cuda``; ``arch`` is the ``sm_XX`` the kernels are generated for."""

    arch: str = "sm_80"

    def validate(self) -> str:
        if not self.arch.startswith("sm_") or not self.arch[3:].rstrip("a").isdigit():
            return f"arch={self.arch}: expected sm_XX (e.g. sm_80, sm_90)"
        return super().validate()


class TvmCudaTarget(TvmLlvmTarget):
    """TVM Relax for NVIDIA GPUs: the default CUDA pipeline (DLight GPU schedules),
    CUDA C kernels in the library; runs where TVM's CUDA runtime finds a device."""

    name = "tvm-cuda"
    device = "cuda"
    description = "Apache TVM Relax, CUDA codegen (DLight default schedules), host LLVM"
    Options = TvmCudaOptions
    tvm_device = "cuda"
    relax_backend = "cuda"
    stage_suffix: ClassVar[dict[str, str]] = {**TvmLlvmTarget.stage_suffix, "cuda": ".cu"}
    stage_names = ("relax", "relax-fused", "relax-final", "tir", "tir-lowered", "llvm", "asm", "cuda")
    compiled_stages = ("relax-final", "tir", "tir-lowered", "llvm", "asm", "cuda")
    options: TvmCudaOptions  # type: ignore[assignment]

    @classmethod
    def availability(cls) -> Availability:
        """Compiles wherever TVM imports (CUDA C is generated without nvcc); runs only
        where the TVM runtime has CUDA enabled and a device exists."""
        base = super().availability()
        if not base.ok:
            return base
        import tvm

        if not tvm.runtime.enabled("cuda"):
            return Availability(True, versions=base.versions, runs=False,
                                run_reason="this TVM build's runtime has no CUDA device API (or no CUDA driver)")
        if not tvm.cuda(0).exist:
            return Availability(True, versions=base.versions, runs=False, run_reason="no CUDA device")
        return Availability(True, versions=base.versions)

    def target_dict(self) -> dict[str, Any]:
        return {"kind": "cuda", "arch": self.options.arch, "host": super().target_dict()}

    def flags(self) -> dict[str, Any]:
        out = super().flags()
        out.update(pipeline="relax.get_default_pipeline (relax.backend.cuda: DLight default GPU schedules)",
                   tuned=False)
        return out


class TvmVulkanTarget(TvmLlvmTarget):
    """TVM Relax for Vulkan (SPIR-V); only where the TVM build has Vulkan codegen."""

    name = "tvm-vulkan"
    device = "vulkan"
    description = "Apache TVM Relax, Vulkan/SPIR-V codegen"

    @classmethod
    def availability(cls) -> Availability:
        base = super().availability()
        if not base.ok:
            return base
        import tvm

        if tvm.get_global_func("target.build.vulkan", allow_missing=True) is None:
            return Availability(False, "this TVM wheel is built without Vulkan (USE_VULKAN=OFF): no "
                                "target.build.vulkan; build TVM from source with USE_VULKAN=ON", base.versions)
        return Availability(True, versions=base.versions, runs=bool(tvm.vulkan(0).exist),
                            run_reason="" if tvm.vulkan(0).exist else "no Vulkan device")

    def target_dict(self) -> dict[str, Any]:
        return {"kind": "vulkan", "host": super().target_dict()}
