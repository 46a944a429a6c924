"""The ``openvino-cpu`` target: OpenVINO Runtime's CPU plugin.

OpenVINO reads the ONNX model with its ONNX frontend (``Core.read_model``) into an
``ov.Model`` (OpenVINO's own opset graph), then ``Core.compile_model(model, "CPU", config)``
runs the CPU plugin's transformations (constant folding, BatchNorm folding, fusion of
eltwise ops into convolutions and matmuls, Snippets subgraphs, layout reorders) and builds
the executable graph.

Stages: ``onnx`` (the graph handed to OpenVINO), ``ov-model`` (the ``ov.Model`` after the
ONNX frontend, one line per op), ``runtime`` (the executed graph,
``CompiledModel.get_runtime_model()``: each layer's type, implementation
(``primitiveType``), precisions and the source layers it runs, ``originalLayersNames``).
The artifact is ``CompiledModel.export_model()`` (``model.blob``), which
``Core.import_model`` loads without recompiling; the blob does not pin the inference
precision, so it is imported with the same config it was compiled with.

Precision: on CPUs with AVX512_BF16/AMX the plugin runs float32 models in bfloat16 by
default (``INFERENCE_PRECISION_HINT``); this target sets ``f32`` unless
``--option precision=bf16`` is given, so comparisons are against float32 arithmetic.
References: OpenVINO docs, "Inference Precision", "Query Device Properties",
"Model Caching / import_model".
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core import tools
from compstack.targets.base import (
    PLAIN_DTYPES,
    Availability,
    Compiled,
    Lowered,
    Target,
    TargetOptions,
)
from compstack.targets.openvino.errors import _first_line, _unsupported, ov_errors
from compstack.targets.openvino.ports import c_order, port_order
from compstack.targets.openvino.quiet import import_openvino

__all__ = ["OpenVinoCpuTarget", "OpenVinoOptions", "c_order", "core", "port_order"]

_PRECISIONS = ("f32", "bf16")
_HINTS = ("latency", "throughput")


@dataclass(frozen=True)
class OpenVinoOptions(TargetOptions):
    """OpenVINO CPU plugin options (``Core.compile_model`` config).

    Attributes:
        precision: ``INFERENCE_PRECISION_HINT``: ``f32`` (default here) or ``bf16``
            (the plugin's own default on CPUs with bfloat16 support; errors ~1e-2).
        num_threads: ``INFERENCE_NUM_THREADS``; 0 lets the plugin choose (one per core).
        performance_hint: ``PERFORMANCE_HINT``: ``latency`` (one stream, what a single
            request measures) or ``throughput`` (several streams).
    """

    precision: str = "f32"
    num_threads: int = 0
    performance_hint: str = "latency"

    def validate(self) -> str:
        if self.precision not in _PRECISIONS:
            return f"precision={self.precision}: expected one of {', '.join(_PRECISIONS)}"
        if self.num_threads < 0:
            return f"num_threads={self.num_threads}: expected >= 0"
        if self.performance_hint not in _HINTS:
            return f"performance_hint={self.performance_hint}: expected one of {', '.join(_HINTS)}"
        return ""

    def config(self) -> dict[str, str]:
        """The ``compile_model``/``import_model`` config these options stand for."""
        cfg = {"INFERENCE_PRECISION_HINT": self.precision, "PERFORMANCE_HINT": self.performance_hint.upper()}
        if self.num_threads:
            cfg["INFERENCE_NUM_THREADS"] = str(self.num_threads)
        return cfg


@functools.lru_cache(maxsize=1)
def core() -> Any:
    """The process's ``openvino.Core`` (one per process, as OpenVINO recommends)."""
    ov = import_openvino()

    return ov.Core()


class OpenVinoCpuTarget(Target):
    """OpenVINO Runtime, CPU plugin, ONNX frontend."""

    #: ``benchmark_app -hint latency``; also this target's default, so a tuned row is the default row
    tuned_as = ({"performance_hint": "latency"}, ("PERFORMANCE_HINT=LATENCY (benchmark_app -hint latency; also the "
                                                  "default here): OpenVINO sets streams and threads"))

    name = "openvino-cpu"
    custom_op_support = {"": "no: not wired; OpenVINO takes custom ops as C++ extensions (ov::op::Op subclass + "
                             "ONNX frontend ConversionExtension, loaded with Core.add_extension)"}
    stack = "openvino"
    device = "cpu"
    description = "OpenVINO Runtime, CPU plugin (ONNX frontend)"
    Options = OpenVinoOptions
    #: The user's options that lower precision (explain says "precision option you chose").
    precision_options = {"precision": ("bf16", "f16", "fp16")}
    stage_names = ("onnx", "ov-model", "runtime")
    compiled_stages = ("runtime",)
    #: The ONNX frontend takes the plain numpy dtypes; strings and ml_dtypes arrays are not wired.
    supported_dtypes = PLAIN_DTYPES
    options: OpenVinoOptions  # type: ignore[assignment]

    @classmethod
    def availability(cls) -> Availability:
        try:
            ov = import_openvino()
        except ImportError as exc:
            return Availability(False, f"openvino does not import ({exc}); pip install openvino")
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("openvino")
        except PackageNotFoundError:
            release = ov.__version__.split("-", 1)[0]
        versions = {"openvino": release, "openvino-build": ov.__version__}
        try:
            devices = core().available_devices
        except Exception as exc:  # noqa: BLE001 - any start-up failure means "not available here"
            return Availability(False, f"openvino's Core does not start ({_first_line(exc)})", versions)
        if "CPU" not in devices:
            return Availability(False, f"this openvino lists no CPU device (devices: {', '.join(devices) or 'none'})",
                                versions)
        return Availability(True, versions=versions)

    def flags(self) -> dict[str, Any]:
        return {"device": "CPU", "config": self.ov_config()}

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """OpenVINO's knob is per compiled model: ``INFERENCE_NUM_THREADS=n`` (unless the
        ``num_threads`` option is set: an explicit per-target option wins)."""
        return {"knob": f"INFERENCE_NUM_THREADS={n} (compile_model config)", "honoured": True}

    def ov_config(self) -> dict[str, str]:
        """The options' config plus ``--threads`` as ``INFERENCE_NUM_THREADS``."""
        cfg = self.options.config()
        if not self.options.num_threads and self.threads:
            cfg["INFERENCE_NUM_THREADS"] = str(self.threads)
        return cfg

    def lower_impl(self, model: ir.Model) -> Lowered:
        proto = cir.to_proto(model)
        scratch = None
        try:
            if cir.byte_size(proto) < 2**31 - 1:
                ov_model = core().read_model(proto.SerializeToString())
            else:  # past protobuf's 2 GiB (sd-unet): a file whose weights OpenVINO reads beside it
                del proto
                scratch = tools.Scratch("openvino")
                ov_model = core().read_model(str(cir.save(model, scratch.path / "model.onnx", external_data=True)))
        except Exception as exc:
            unsupported = _unsupported(str(exc), self.name, model)
            if unsupported is not None:
                raise unsupported from exc
            with ov_errors():
                raise
        lowered = _OvLowered(self, model, ov_model)
        lowered.scratch = scratch  # the weights' file lives as long as the lowered model (removed with it)
        return lowered

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        blob = (folder / "model.blob").read_bytes()
        with ov_errors():
            compiled_model = core().import_model(blob, "CPU", self.ov_config())
        out = _OvCompiled(self, model, compiled_model, blob)
        out.set_blob_path(folder / "model.blob")
        return out


class _OvLowered(Lowered):
    target: OpenVinoCpuTarget

    def __init__(self, target: OpenVinoCpuTarget, model: ir.Model, ov_model: Any) -> None:
        from compstack.targets.openvino.kernels import model_text

        super().__init__(target, model, {"onnx": lambda: cir.to_text(model),
                                         "ov-model": lambda: model_text(ov_model)})
        self.ov_model = ov_model
        self.scratch: tools.Scratch | None = None

    def compile_impl(self) -> Compiled:
        with ov_errors():
            compiled_model = core().compile_model(self.ov_model, "CPU", self.target.ov_config())
            blob = compiled_model.export_model().getvalue()
        compiled = _OvCompiled(self.target, self.model, compiled_model, blob)
        self.add_stage("runtime", compiled.stages["runtime"])
        return compiled


class _OvCompiled(Compiled):
    """A compiled OpenVINO model on the CPU plugin.

    Attributes:
        compiled_model: the ``openvino.CompiledModel``.
        blob: ``export_model()`` bytes, the artifact (``model.blob``).
        input_ports, output_ports: the compiled model's port index of each graph input
            and output (graph order); None for an input OpenVINO dropped (no output uses it).
        run_command: a command line that runs this artifact with zero inputs (the blob
            path is ``model.blob`` until it is saved or loaded from a folder).
    """

    artifact_files = ("model.blob",)
    target: OpenVinoCpuTarget

    def __init__(self, target: Target, model: ir.Model, compiled_model: Any, blob: bytes) -> None:
        from compstack.targets.openvino.kernels import runtime_text

        super().__init__(target, model)
        self.compiled_model = compiled_model
        self.blob = blob
        self.stages["runtime"] = lambda: runtime_text(compiled_model.get_runtime_model())
        self._request: Any = None
        graph = model.graph
        self.input_ports = port_order(compiled_model.inputs, [v for v in graph.inputs if not v.is_initializer()],
                                      allow_missing=True)
        self.output_ports = port_order(compiled_model.outputs, list(graph.outputs))
        self.run_command = ""
        self.set_blob_path(Path("model.blob"))

    def set_blob_path(self, path: Path) -> None:
        """Rebuild :attr:`run_command` for the blob at ``path``.

        The blob does not pin the precision (``import_model``'s config does), so the
        command passes this target's config. ``benchmark_app`` 2026.4 refuses any
        ``.blob`` ("Cannot set precision for a compiled model" even when none is set), so
        the command is a short Python one that imports the blob, zero-fills the inputs and
        runs it 100 times.
        """
        code = (f'import openvino as ov; r = ov.Core().import_model(open({json.dumps(str(path))}, "rb").read(), "CPU", '
                f'{json.dumps(self.target.ov_config())}).create_infer_request(); [t.data.fill(0) for t in r.input_tensors]; '
                '[r.infer() for _ in range(100)]; print(f"{r.latency:.4f} ms (last of 100 runs)")')
        self.run_command = tools.format_command(["python", "-c", code])

    def _feeds(self, inputs: list[np.ndarray]) -> dict[int, np.ndarray]:
        return {port: c_order(a) for port, a in zip(self.input_ports, inputs) if port is not None}

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if self._request is None:
            self._request = self.compiled_model.create_infer_request()
        with ov_errors():
            result = self._request.infer(self._feeds(inputs))
        return [np.array(result[i]) for i in self.output_ports]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        ov = import_openvino()

        request = self.compiled_model.create_infer_request()
        for port, a in zip(self.input_ports, inputs):
            if port is not None:
                request.set_input_tensor(port, ov.Tensor(c_order(a)))
        # A synchronous infer on tensors already set; outputs stay in OpenVINO's buffers.
        return lambda: request.infer(share_outputs=True)

    def save_impl(self, folder: Path) -> None:
        path = folder / "model.blob"
        path.write_bytes(self.blob)
        self.set_blob_path(path.resolve())

    def kernels_impl(self) -> Any:
        from compstack.targets.openvino.kernels import kernel_map

        return kernel_map(self)

    def profile(self, inputs: Any, config: Any = None, kernel_map: Any = None) -> Any:
        from compstack.targets.openvino.kernels import mark_means

        prof = super().profile(inputs, config, kernel_map)
        return mark_means(prof) if prof is not None else None

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets.openvino.kernels import profile

        return profile(self, inputs, warmup, runs)
