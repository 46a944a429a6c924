"""The ``tvm-llvm`` target: Apache TVM Relax on the CPU (LLVM), untuned by default.

Lowering imports the model with ``tvm.relax.frontend.onnx.from_onnx`` (weights
folded in as constants). Compiling runs the target's default Relax pipeline
(``relax.get_default_pipeline(target)``: legalize, FuseOps/FuseTIR, memory planning,
VM lowering) -- plain ``tvm.compile(mod, target)`` does *not* fuse -- then TVM's TIR
pipeline and LLVM. No MetaSchedule/DLight runs on CPU by default: the loops are TVM's
default, untuned schedules (``flags()["tuned"]`` is False).

With ``--option tvm-llvm:tune_trials=N`` (trials per task) or ``tune=5m`` (a budget) the
compile first tunes with MetaSchedule, records kept in the store and reused, the tuning
time apart from the compile time (:mod:`compstack.targets.relax.tuning`).

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
from typing import Any, ClassVar, Mapping

import onnx_ir as ir

from compstack.core import ir as cir
from compstack.targets.base import Availability, Compiled, Lowered, Target, TargetOptions
from compstack.targets.relax.stages import _TvmCompiled, _TvmLowered
from compstack.targets.relax.tuning import budget_s

__all__ = ["TvmLlvmTarget", "TvmOptions"]  # the GPU targets: compstack.targets.relax.gpu

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
            default schedules), unless ``tune`` is set.
        tune: a tuning budget (``20s``, ``5m``, ``1h``) spent on the tasks in turn; the job's
            time limit grows by it (:mod:`compstack.targets.relax.tuning`).
    """

    opt_level: int = 3
    num_cores: int = 0
    mcpu: str = ""
    pass_stages: bool = False
    disabled_passes: tuple[str, ...] = ()
    tune_trials: int = 0
    tune: str = ""

    @property
    def tune_budget_s(self) -> float | None:
        """``tune`` in seconds; None: no budget, or not a duration (see :meth:`validate`)."""
        return budget_s(self.tune)

    @property
    def tuned(self) -> bool:  # MetaSchedule runs, or its kept records are applied
        return self.tune_trials > 0 or bool(self.tune)

    def validate(self) -> str:
        if self.tune and self.tune_budget_s is None:
            return f"tune={self.tune}: expected a positive duration like 90s, 10m or 1h (a MetaSchedule budget)"
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
    custom_op_support = {"cpu": "yes: tvm_ffi packed function, R.call_dps_packed", "": "no: the op declares no CPU kernel"}
    stack = "tvm"
    device = "cpu"
    description = "Apache TVM Relax, LLVM CPU codegen, default pipeline (untuned)"
    Options = TvmOptions
    #: File suffix of each stage's text when written to disk (TVMScript is Python).
    stage_suffix: ClassVar[dict[str, str]] = {
        "relax": ".py", "relax-fused": ".py", "relax-final": ".py", "tir": ".py", "tir-lowered": ".py",
        "llvm": ".ll", "asm": ".s"}
    stage_names: ClassVar[tuple[str, ...]] = ("relax", "relax-fused", "relax-final", "tir", "tir-lowered", "llvm", "asm")
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {"options": {"opt_level": "0"}}  # PassContext
    tuned_as = ({"tune": "{budget}s"}, "MetaSchedule within a {budget} s budget (records kept in the store for the next run)")
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
                "mcpu": self.options.mcpu or str(codegen.llvm_get_system_cpu())}  # 0.25: a tvm_ffi String

    def flags(self) -> dict[str, Any]:
        """Target dict, pipeline, opt level; ``tuned`` (MetaSchedule ran or its records were applied)."""
        tuned = self.options.tuned
        out = {"target": self.target_dict(),
               "pipeline": ("static_shape_tuning steps (MetaSchedule) + " if tuned else "")
               + "relax.get_default_pipeline (relax.backend.cpu_generic)",
               "opt_level": self.options.opt_level, "tuned": tuned,
               "frontend": "relax.frontend.onnx.from_onnx(keep_params_in_input=False)"}
        if self.options.disabled_passes:
            out["disabled_passes"] = list(self.options.disabled_passes)
        if tuned:
            out["tuning"] = {"tuner": "MetaSchedule", "trials_per_task": self.options.tune_trials or None,
                             "budget_s": self.options.tune_budget_s}
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


























