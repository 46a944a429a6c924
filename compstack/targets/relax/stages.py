"""The ``tvm-llvm`` target's staged objects: the lowered Relax module (its pipeline as
stages, per-pass records) and the compiled executable run by the Relax VM; the target
itself is in :mod:`compstack.targets.relax.target`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import onnx_ir as ir

from compstack.core.inputs import contiguous
from compstack.targets.base import Compiled, Lowered, PassRecord, Target

if TYPE_CHECKING:
    from compstack.targets.relax.target import TvmLlvmTarget


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
        if self.target.options.tuned:
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
