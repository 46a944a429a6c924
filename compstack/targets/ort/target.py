"""The ``ort-cpu`` target: ONNX Runtime with the CPU execution provider.

Stages: ``onnx`` (the graph handed to ORT) and ``optimized`` (the graph after ORT's
graph optimizer at the chosen level, written by ``SessionOptions.optimized_model_filepath``;
fused nodes such as ``com.microsoft:FusedConv`` are visible there). The artifact is that
optimized model, which a later session loads with graph optimization disabled; for a
model past 1 GiB it is ``optimized.onnx`` with its weights in ``optimized.onnx.data``
(:mod:`compstack.targets.ort.large`: protobuf's 2 GiB limit). Reference: ONNX Runtime docs, "Graph optimizations".
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import numpy as np
import onnx
import onnx_ir as ir

from compstack.core import ir as cir
from compstack.targets.base import PLAIN_DTYPES, Availability, Compiled, Lowered, Target, TargetOptions
from compstack.targets.ort.errors import unsupported_ops

__all__ = ["OrtCpuTarget", "OrtCudaTarget", "OrtOptions"]

_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
           "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


@dataclass(frozen=True)
class OrtOptions(TargetOptions):
    """ONNX Runtime session options.

    Attributes:
        opt_level: graph optimization level: ``disable``, ``basic``, ``extended``
            or ``all`` (ORT's own default, as its users get it).
        intra_op_threads: threads per op; 0 lets ORT choose (one per core).
        disabled_optimizers: graph transformers or rewrite rules not to apply
            (``InferenceSession(disabled_optimizers=...)``), e.g. ``ConvActivationFusion``.
    """

    opt_level: str = "all"
    intra_op_threads: int = 0
    disabled_optimizers: tuple[str, ...] = ()

    def validate(self) -> str:
        if self.opt_level not in _LEVELS:
            return f"opt_level={self.opt_level}: expected one of {', '.join(_LEVELS)}"
        if self.intra_op_threads < 0:
            return f"intra_op_threads={self.intra_op_threads}: expected >= 0"
        return ""


def _disabled(opts: OrtOptions) -> dict[str, Any]:
    return {"disabled_optimizers": list(opts.disabled_optimizers)} if opts.disabled_optimizers else {}


#: ORT's verbose log line for each graph transformer run (graph_transformer.cc).
_APPLIED = re.compile(r"GraphTransformer (\S+) modified: 1 ")


def applied_transformers(ort: Any, proto: onnx.ModelProto, opts: OrtOptions, providers: list[str]) -> list[str]:
    """The graph transformers that changed ``proto``, in the order ORT applied them, read
    from ORT's own verbose log (``GraphTransformer NAME modified: 1``) while a session is
    created; the C++ logger writes to the process's stderr, which is captured here."""
    import os

    so = _session_options(ort, opts)
    so.log_severity_level = 0
    so.log_verbosity_level = 1
    with tempfile.TemporaryFile() as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            ort.InferenceSession(proto.SerializeToString(), so, providers=providers, **_disabled(opts))
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = log.read().decode(errors="replace")
    return list(dict.fromkeys(_APPLIED.findall(text)))


def _session_options(ort: Any, opts: OrtOptions, level: str | None = None, threads: int = 0) -> Any:
    """Session options; ``threads`` (``--threads``) is used unless the target's own
    ``intra_op_threads`` option is set (an explicit per-target option wins); with it the
    inter-op pool is pinned to 1 thread (ORT's sequential executor does not use it)."""
    so = ort.SessionOptions()
    key = level or opts.opt_level
    if key not in _LEVELS:
        from compstack.core.errors import UserError

        raise UserError(f"--option opt_level={key}: expected one of {', '.join(_LEVELS)}")
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[key])
    so.intra_op_num_threads = opts.intra_op_threads or threads
    if threads:
        so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return so


class OrtCpuTarget(Target):
    """ONNX Runtime, ``CPUExecutionProvider``."""

    #: Execution providers, in ORT's priority order.
    providers: ClassVar[tuple[str, ...]] = ("CPUExecutionProvider",)

    name = "ort-cpu"
    custom_op_support = {"cpu": "yes: onnxruntime-extensions Python op calling the C kernel",
                         "": "no: the op declares no CPU kernel"}
    custom_op_needs = {"onnxruntime_extensions": "no: pip install onnxruntime-extensions (the onnxruntime wheel ships no C headers)"}  # noqa: E501
    stack = "onnxruntime"
    device = "cpu"
    description = "ONNX Runtime, CPU execution provider"
    Options = OrtOptions
    options: OrtOptions
    stage_names = ("onnx", "optimized")
    compiled_stages = ("optimized",)
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {"options": {"opt_level": "disable"}}  # ORT_DISABLE_ALL
    tuned_as = ({"opt_level": "all"}, "ORT_ENABLE_ALL graph optimizations (ORT's default; no search step on CPU)")
    #: The option that disables passes by name (see :meth:`applied_passes`).
    pass_option: ClassVar[str] = "disabled_optimizers"

    def applied_passes(self, model: ir.Model) -> list[str]:
        """The graph transformers that changed ``model`` (:func:`applied_transformers`)."""
        import onnxruntime as ort

        from compstack.targets.ort import custom_ops

        proto = custom_ops.prepare(cir.to_proto(model))
        return applied_transformers(ort, proto, self.options, list(self.providers))
    #: ORT's numpy binding takes strings but rejects ml_dtypes arrays (bfloat16, float8, int4).
    supported_dtypes = PLAIN_DTYPES | {"object"}

    ops_note: ClassVar[str] = ("ONNX Runtime's registered kernels for the execution provider "
                               "(onnxruntime.capi.onnxruntime_pybind11_state.get_all_opkernel_def)")

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        from onnxruntime.capi import onnxruntime_pybind11_state as state

        from compstack.translate import op_key

        return sorted({op_key(d.domain, d.op_name) for d in state.get_all_opkernel_def()
                       if d.provider in cls.providers})

    @classmethod
    def availability(cls) -> Availability:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            return Availability(False, f"onnxruntime does not import ({exc}); pip install onnxruntime")
        if "CPUExecutionProvider" not in ort.get_available_providers():
            return Availability(False, "this onnxruntime build has no CPUExecutionProvider")
        return Availability(True, versions={"onnxruntime": ort.__version__})

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """ORT's knob is per session: ``intra_op_num_threads=n`` (the calling thread plus
        ``n - 1`` pool threads), ``inter_op_num_threads=1``."""
        return {"knob": f"SessionOptions.intra_op_num_threads={n}, inter_op_num_threads=1", "honoured": True}

    def flags(self) -> dict[str, Any]:
        out = {"providers": list(self.providers), "graph_optimization_level": _LEVELS[self.options.opt_level],
               "intra_op_num_threads": self.options.intra_op_threads or self.threads,
               "tuning": {"tuner": "none", "note": "ORT does not tune: its graph optimizer fuses, then fixed "
                          "MLAS kernels run"}}
        if self.options.disabled_optimizers:
            out["disabled_optimizers"] = list(self.options.disabled_optimizers)
        return out

    def lower_impl(self, model: ir.Model) -> Lowered:
        from compstack.targets.ort import compat, custom_ops

        proto = compat.fit_ir_version(custom_ops.prepare(cir.to_proto(model)))  # + PyOps; IR this ORT reads
        return _OrtLowered(self, model, proto)

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        import onnxruntime as ort

        from compstack.targets.ort import custom_ops

        path = folder / "optimized.onnx"
        so = _session_options(ort, self.options, level="disable", threads=self.threads)
        custom_ops.add_to_session(so, path.read_bytes())
        sess = ort.InferenceSession(str(path), so, providers=list(self.providers))  # finds optimized.onnx.data
        return _OrtCompiled(self, model, sess, path.read_bytes(), folder)


class _OrtLowered(Lowered):
    target: OrtCpuTarget

    def __init__(self, target: OrtCpuTarget, model: ir.Model, proto: onnx.ModelProto) -> None:
        super().__init__(target, model, {"onnx": lambda: cir.to_text(model)})
        self.proto = proto
        self._optimized: bytes | None = None

    def _optimize(self, tmp: Path) -> tuple[Any, bytes]:
        import onnxruntime as ort

        from compstack.targets.ort import custom_ops, large

        so = _session_options(ort, opts := self.target.options, threads=self.target.threads)
        so.optimized_model_filepath = str(tmp / "optimized.onnx")
        custom_ops.add_to_session(so, self.proto)
        sess = ort.InferenceSession(large.session_model(self.proto, tmp, so), so,
                                    providers=list(self.target.providers), **_disabled(opts))
        return sess, (tmp / "optimized.onnx").read_bytes()

    def compile_impl(self) -> Compiled:
        tmp = tempfile.TemporaryDirectory(prefix="compstack-ort-")  # holds a large model's optimized.onnx.data
        try:
            sess, data = self._optimize(Path(tmp.name))
        except Exception as exc:
            tmp.cleanup()
            unsupported = unsupported_ops(str(exc), self.target.name)
            if unsupported is not None:
                raise unsupported from exc
            raise
        compiled = _OrtCompiled(self.target, self.model, sess, data, Path(tmp.name), tmp)
        if compiled.data is None:  # a model under the limit: its artifact is all in `data`
            tmp.cleanup()
        self.add_stage("optimized", compiled.stages["optimized"])
        return compiled


def _optimized_text(data: bytes) -> str:
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    return cir.to_text(ir.serde.deserialize_model(proto))


class _OrtCompiled(Compiled):
    artifact_files: tuple[str, ...] = ("optimized.onnx",)

    def __init__(self, target: Target, model: ir.Model, session: Any, optimized: bytes, folder: Path,
                 tmp: Any = None) -> None:
        from compstack.targets.ort.large import DATA

        super().__init__(target, model)
        self.session, self.optimized, self._tmp = session, optimized, tmp  # tmp: removed with this artifact
        self.data = folder / DATA if (folder / DATA).exists() else None  # a large model's initializers
        self.artifact_files = ("optimized.onnx", DATA) if self.data else ("optimized.onnx",)
        self.stages["optimized"] = lambda: _optimized_text(optimized)

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return self.session.run(None, dict(zip(self.input_names, inputs)))

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        feeds = dict(zip(self.input_names, inputs))
        run = self.session.run
        return lambda: run(None, feeds)

    def save_impl(self, folder: Path) -> None:
        (folder / "optimized.onnx").write_bytes(self.optimized)
        if self.data is not None and self.data != folder / self.data.name:
            shutil.copyfile(self.data, folder / self.data.name)

    def kernels_impl(self) -> Any:
        from compstack.targets.ort.kernels import kernel_map

        return kernel_map(self)

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets.ort.kernels import profile

        return profile(self, inputs, warmup, runs)


class OrtCudaTarget(OrtCpuTarget):
    """ONNX Runtime with the ``CUDAExecutionProvider`` (CPU fallback for ops it lacks).

    Needs the GPU build of ONNX Runtime (``onnxruntime-gpu``, which replaces the CPU
    wheel and is never installed by default) and an NVIDIA GPU with its driver.
    """

    name = "ort-cuda"
    custom_op_support = {"": "untested (no GPU here): the Python op would run on ORT's CPU execution provider"}
    device = "cuda"
    description = "ONNX Runtime, CUDA execution provider"
    providers = ("CUDAExecutionProvider", "CPUExecutionProvider")

    @classmethod
    def availability(cls) -> Availability:
        base = super().availability()
        if not base.ok:
            return base
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return Availability(False, "this onnxruntime has no CUDAExecutionProvider: pip install onnxruntime-gpu "
                                "(replaces onnxruntime) on a machine with an NVIDIA GPU", base.versions)
        return Availability(True, versions=base.versions)
