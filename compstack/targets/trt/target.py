"""The ``tensorrt`` target: NVIDIA TensorRT, building an engine from the ONNX graph.

Pipeline (TensorRT Python API, "The Python API" chapter of the TensorRT developer
guide, https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/python-api-docs.html):
``trt.Builder`` -> ``builder.create_network()`` -> ``trt.OnnxParser(network, logger).parse``
-> ``builder.create_builder_config()`` (``profiling_verbosity = DETAILED``) ->
``builder.build_serialized_network`` -> ``trt.Runtime(logger).deserialize_cuda_engine``.

Stages: ``onnx`` (the graph handed to the parser) and ``layers`` (after compile: the
engine inspector's JSON, ``engine.create_engine_inspector().get_engine_information(
trt.LayerInformationFormat.JSON)``, "Engine Inspector" section of the developer guide,
https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/engine-tools.html).
The artifact is the serialized engine, ``model.engine``.

Execution uses the name-based I/O API of TensorRT >= 8.5 (``engine.num_io_tensors``,
``engine.get_tensor_name``, ``context.set_tensor_address``, ``context.execute_async_v3``).
Device buffers are **torch** CUDA tensors (``torch.empty(..., device="cuda")``,
``Tensor.data_ptr()``, ``torch.cuda.current_stream().cuda_stream``): torch is already a
compstack dependency, so no extra CUDA binding (cuda-python, cupy) is needed. Per-layer
times come from a ``trt.IProfiler`` subclass set as ``context.profiler``
(:meth:`_TrtCompiled.layer_times`).

Only static input shapes are supported (no optimization profiles). Nothing here imports
``tensorrt`` or ``torch`` at module import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core.errors import UnsupportedError
from compstack.core.inputs import contiguous
from compstack.targets.base import Availability, Compiled, Lowered, Target, TargetOptions

__all__ = ["NOT_INSTALLED", "TensorRTTarget", "TrtOptions"]

#: The availability reason when ``import tensorrt`` fails.
NOT_INSTALLED = ("TensorRT is not installed: its PyPI packages download the real wheel from NVIDIA's server "
                 "(pip install tensorrt on a machine that can reach it) and it needs an NVIDIA GPU")

_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class TrtOptions(TargetOptions):
    """TensorRT builder options.

    Attributes:
        precision: ``fp32`` (TF32 disabled), ``tf32`` (TensorRT's default), ``fp16`` or
            ``bf16`` (the builder flag that lets TensorRT pick that precision per layer).
        workspace_mib: workspace memory-pool limit in MiB; 0 keeps TensorRT's default.
        opt_level: builder optimization level 0-5 (``config.builder_optimization_level``);
            -1 keeps TensorRT's default (3).
    """

    precision: str = "tf32"
    workspace_mib: int = 0
    opt_level: int = -1

    def validate(self) -> str:
        if self.precision not in _PRECISIONS:
            return f"precision={self.precision}: expected one of {', '.join(_PRECISIONS)}"
        if self.workspace_mib < 0:
            return f"workspace_mib={self.workspace_mib}: expected >= 0"
        if not -1 <= self.opt_level <= 5:
            return f"opt_level={self.opt_level}: expected -1 (default) or 0..5"
        return ""


def _trt() -> Any:
    import tensorrt as trt

    return trt


def _logger(trt: Any) -> Any:
    return trt.Logger(trt.Logger.ERROR)


class TensorRTTarget(Target):
    """NVIDIA TensorRT on a CUDA GPU (ONNX parser, engine built for the local GPU)."""

    name = "tensorrt"
    custom_op_support = {"cuda": "no here: plugin source in csrc/tensorrt, built by CMake where TensorRT's headers "
                                 "(NvInfer.h) are found"}
    stack = "tensorrt"
    device = "cuda"
    description = "NVIDIA TensorRT engine (ONNX parser), CUDA"
    Options = TrtOptions
    options: TrtOptions
    stage_names = ("onnx", "layers")
    compiled_stages = ("layers",)
    stage_suffix = {"layers": ".json"}
    needs_torch = True

    @classmethod
    def availability(cls) -> Availability:
        try:
            trt = _trt()
        except Exception:  # noqa: BLE001 - ImportError, or a stub package failing at import
            return Availability(False, NOT_INSTALLED)
        versions = {"tensorrt": str(getattr(trt, "__version__", "?"))}
        try:
            import torch
        except ImportError:
            return Availability(False, "TensorRT's target needs torch for CUDA buffers: pip install torch",
                                versions)
        versions["torch"] = torch.__version__
        if not torch.cuda.is_available():
            return Availability(False, "TensorRT needs an NVIDIA GPU: torch sees no CUDA device "
                                "(or this torch build has no CUDA)", versions)
        return Availability(True, versions=versions)

    def flags(self) -> dict[str, Any]:
        return {"precision": self.options.precision, "workspace_mib": self.options.workspace_mib,
                "builder_optimization_level": self.options.opt_level,
                "profiling_verbosity": "DETAILED"}

    def lower_impl(self, model: ir.Model) -> Lowered:
        dynamic = [i.name for i in cir.graph_inputs(model) if not i.is_static]
        if dynamic:
            raise UnsupportedError(f"{self.name}: inputs with dynamic dims need an optimization profile, "
                                   f"which this target does not build: {', '.join(dynamic)}")
        return _TrtLowered(self, model)

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        return _TrtCompiled.from_bytes(self, model, (folder / "model.engine").read_bytes())


class _TrtLowered(Lowered):
    def __init__(self, target: TensorRTTarget, model: ir.Model) -> None:
        super().__init__(target, model, {"onnx": lambda: cir.to_text(model)})

    def compile_impl(self) -> Compiled:
        trt = _trt()
        opts: TrtOptions = self.target.options  # type: ignore[assignment]
        logger = _logger(trt)
        builder = trt.Builder(logger)
        # TensorRT 10 networks are always explicit-batch (the flag is deprecated/ignored);
        # TensorRT 8 needs it set.
        flag = getattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
        network = builder.create_network(0 if flag is None else 1 << int(flag))
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(cir.to_proto(self.model).SerializeToString()):
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            raise RuntimeError("TensorRT ONNX parser: " + "; ".join(errors or ["parse failed"]))
        config = builder.create_builder_config()
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        if opts.workspace_mib:
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, opts.workspace_mib << 20)
        if opts.opt_level >= 0:
            config.builder_optimization_level = opts.opt_level
        if opts.precision == "fp32":
            config.clear_flag(trt.BuilderFlag.TF32)
        elif opts.precision == "fp16":
            config.set_flag(trt.BuilderFlag.FP16)
        elif opts.precision == "bf16":
            config.set_flag(trt.BuilderFlag.BF16)
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise RuntimeError("TensorRT: build_serialized_network returned None (see the builder log)")
        compiled = _TrtCompiled.from_bytes(self.target, self.model, bytes(serialized))
        self.add_stage("layers", compiled.stages["layers"])
        return compiled


def _layer_info(engine: Any) -> str:
    trt = _trt()
    inspector = engine.create_engine_inspector()
    return inspector.get_engine_information(trt.LayerInformationFormat.JSON)


def _torch_dtype(trt: Any, dtype: Any) -> Any:
    import torch

    return getattr(torch, np.dtype(trt.nptype(dtype)).name)


class _TrtCompiled(Compiled):
    artifact_files = ("model.engine",)
    _runtime: Any = None  # set by load(): keeps the TensorRT runtime alive as long as the engine

    def __init__(self, target: Target, model: ir.Model, plan: bytes, engine: Any) -> None:
        super().__init__(target, model)
        self.plan = plan
        self.engine = engine
        self.context = engine.create_execution_context()
        self.stages["layers"] = lambda: _layer_info(engine)

    @classmethod
    def from_bytes(cls, target: Target, model: ir.Model, plan: bytes) -> "_TrtCompiled":
        trt = _trt()
        runtime = trt.Runtime(_logger(trt))
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise RuntimeError("TensorRT: deserialize_cuda_engine failed (engine built by another "
                               "TensorRT version or for another GPU?)")
        compiled = cls(target, model, plan, engine)
        compiled._runtime = runtime  # keep the runtime alive as long as the engine
        return compiled

    def _buffers(self, inputs: list[np.ndarray]) -> tuple[dict[str, Any], list[Any]]:
        """Device tensors by I/O name (inputs copied in), and the outputs in graph order."""
        import torch

        trt = _trt()
        engine, context = self.engine, self.context
        feeds = dict(zip(self.input_names, inputs))
        tensors: dict[str, Any] = {}
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                host = contiguous(feeds[name])
                context.set_input_shape(name, tuple(host.shape))
                tensors[name] = torch.from_numpy(host).to("cuda")
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
                shape = tuple(context.get_tensor_shape(name))
                tensors[name] = torch.empty(shape, dtype=_torch_dtype(trt, engine.get_tensor_dtype(name)),
                                            device="cuda")
        for name, t in tensors.items():
            context.set_tensor_address(name, t.data_ptr())
        return tensors, [tensors[n] for n in self.output_names]

    def _launch(self) -> None:
        import torch

        stream = torch.cuda.current_stream()
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT: execute_async_v3 failed")
        stream.synchronize()

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        _, outs = self._buffers(inputs)
        self._launch()
        return [o.cpu().numpy() for o in outs]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        tensors, _ = self._buffers(inputs)
        launch = self._launch

        def once() -> Any:
            launch()
            return tensors

        return once

    def layer_times(self, inputs: list[np.ndarray], runs: int = 10) -> dict[str, float]:
        """Average time per engine layer in ms over ``runs`` runs, from ``trt.IProfiler``.

        TensorRT calls ``IProfiler.report_layer_time(layer_name, ms)`` for every layer
        after each synchronous-completed enqueue when ``context.profiler`` is set
        (Python API docs, ``tensorrt.IProfiler``).
        """
        trt = _trt()
        totals: dict[str, float] = {}

        class _Profiler(trt.IProfiler):  # type: ignore[misc, name-defined]
            def __init__(self) -> None:
                trt.IProfiler.__init__(self)

            def report_layer_time(self, layer_name: str, ms: float) -> None:
                totals[layer_name] = totals.get(layer_name, 0.0) + ms

        self._buffers(inputs)
        self.context.profiler = _Profiler()
        try:
            for _ in range(max(1, runs)):
                self._launch()
        finally:
            try:
                self.context.profiler = None
            except TypeError:  # some bindings refuse None; the profiler then stays set
                pass
        return {k: v / max(1, runs) for k, v in totals.items()}

    def save_impl(self, folder: Path) -> None:
        (folder / "model.engine").write_bytes(self.plan)
