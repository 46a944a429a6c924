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
``Core.import_model`` loads without recompiling and ``benchmark_app -m model.blob`` runs.

Precision: on CPUs with AVX512_BF16/AMX the plugin runs float32 models in bfloat16 by
default (``INFERENCE_PRECISION_HINT``); this target sets ``f32`` unless
``--option precision=bf16`` is given, so comparisons are against float32 arithmetic.
References: OpenVINO docs, "Inference Precision", "Query Device Properties",
"Model Caching / import_model".
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np
import onnx_ir as ir

from compstack import ir as cir
from compstack import tools
from compstack.errors import UnsupportedError
from compstack.target import PLAIN_DTYPES, Availability, Compiled, Lowered, Target, TargetOptions

__all__ = ["OpenVinoCpuTarget", "OpenVinoOptions"]

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
    import openvino as ov

    return ov.Core()


class OpenVinoCpuTarget(Target):
    """OpenVINO Runtime, CPU plugin, ONNX frontend."""

    name = "openvino-cpu"
    stack = "openvino"
    device = "cpu"
    description = "OpenVINO Runtime, CPU plugin (ONNX frontend)"
    Options = OpenVinoOptions
    stage_names = ("onnx", "ov-model", "runtime")
    compiled_stages = ("runtime",)
    #: The ONNX frontend takes the plain numpy dtypes; strings and ml_dtypes arrays are not wired.
    supported_dtypes = PLAIN_DTYPES
    options: OpenVinoOptions  # type: ignore[assignment]

    @classmethod
    def availability(cls) -> Availability:
        try:
            import openvino as ov
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
        except Exception as exc:  # noqa: BLE001 - the plugin's reason is the answer
            return Availability(False, f"openvino's Core does not start ({_first_line(exc)})", versions)
        if "CPU" not in devices:
            return Availability(False, f"this openvino lists no CPU device (devices: {', '.join(devices) or 'none'})",
                                versions)
        return Availability(True, versions=versions)

    def flags(self) -> dict[str, Any]:
        return {"device": "CPU", "config": self.options.config()}

    def lower_impl(self, model: ir.Model) -> Lowered:
        proto = cir.to_proto(model)
        try:
            ov_model = core().read_model(proto.SerializeToString())
        except Exception as exc:
            unsupported = _unsupported(str(exc), self.name)
            if unsupported is not None:
                raise unsupported from exc
            raise
        return _OvLowered(self, model, ov_model)

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        blob = (folder / "model.blob").read_bytes()
        compiled_model = core().import_model(blob, "CPU", self.options.config())
        out = _OvCompiled(self, model, compiled_model, blob)
        out.set_blob_path(folder / "model.blob")
        return out


#: The ONNX frontend's messages for ops it has no conversion rule for.
_NO_RULE = re.compile(r"No conversion rule found for operations?:\s*(?P<ops>[^\n]+)")
_NOT_SUPPORTED = re.compile(r"OpenVINO does not support the following ONNX operations?:\s*(?P<ops>[^\n]+)")


def _unsupported(message: str, target: str) -> UnsupportedError | None:
    """An UnsupportedError when the ONNX frontend refused ops it cannot convert."""
    found: list[str] = []
    for pattern in (_NO_RULE, _NOT_SUPPORTED):
        for m in pattern.finditer(message):
            found += [op.strip().split("-")[0] for op in m.group("ops").split(",") if op.strip()]
    if not found:
        return None
    ops = sorted(set(found))
    return UnsupportedError(f"{target}: unsupported ops: {', '.join(ops)}", ops)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


class _OvLowered(Lowered):
    def __init__(self, target: OpenVinoCpuTarget, model: ir.Model, ov_model: Any) -> None:
        from compstack.targets._kernels_openvino import model_text

        super().__init__(target, model, {"onnx": lambda: cir.to_text(model),
                                         "ov-model": lambda: model_text(ov_model)})
        self.ov_model = ov_model

    def compile_impl(self) -> Compiled:
        opts: OpenVinoOptions = self.target.options  # type: ignore[assignment]
        compiled_model = core().compile_model(self.ov_model, "CPU", opts.config())
        blob = compiled_model.export_model().getvalue()
        compiled = _OvCompiled(self.target, self.model, compiled_model, blob)
        self.add_stage("runtime", compiled.stages["runtime"])
        return compiled


class _OvCompiled(Compiled):
    """A compiled OpenVINO model on the CPU plugin.

    Attributes:
        compiled_model: the ``openvino.CompiledModel``.
        blob: ``export_model()`` bytes, the artifact (``model.blob``).
        run_command: the ``benchmark_app`` command line that times this artifact (the
            blob path is ``model.blob`` until it is saved or loaded from a folder).
    """

    artifact_files = ("model.blob",)

    def __init__(self, target: Target, model: ir.Model, compiled_model: Any, blob: bytes) -> None:
        from compstack.targets._kernels_openvino import runtime_text

        super().__init__(target, model)
        self.compiled_model = compiled_model
        self.blob = blob
        self.stages["runtime"] = lambda: runtime_text(compiled_model.get_runtime_model())
        self._request: Any = None
        self._outputs = _output_order(compiled_model, self.output_names)
        self.run_command = ""
        self.set_blob_path(Path("model.blob"))

    def set_blob_path(self, path: Path) -> None:
        """Rebuild :attr:`run_command` for the blob at ``path``."""
        opts: OpenVinoOptions = self.target.options  # type: ignore[assignment]
        argv = ["benchmark_app", "-m", str(path), "-d", "CPU", "-hint", opts.performance_hint]
        self.run_command = tools.format_command(argv)

    def _feeds(self, inputs: list[np.ndarray]) -> dict[int, np.ndarray]:
        return {i: np.ascontiguousarray(a) for i, a in enumerate(inputs)}

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if self._request is None:
            self._request = self.compiled_model.create_infer_request()
        result = self._request.infer(self._feeds(inputs))
        return [np.array(result[i]) for i in self._outputs]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        import openvino as ov

        request = self.compiled_model.create_infer_request()
        for i, a in enumerate(inputs):
            request.set_input_tensor(i, ov.Tensor(np.ascontiguousarray(a)))
        # A synchronous infer on tensors already set; outputs stay in OpenVINO's buffers.
        return lambda: request.infer(share_outputs=True)

    def save_impl(self, folder: Path) -> None:
        path = folder / "model.blob"
        path.write_bytes(self.blob)
        self.set_blob_path(path.resolve())

    def kernels_impl(self) -> Any:
        from compstack.targets._kernels_openvino import kernel_map

        return kernel_map(self)

    def profile(self, inputs: Any, config: Any = None, kernel_map: Any = None) -> Any:
        from compstack.targets._kernels_openvino import mark_means

        prof = super().profile(inputs, config, kernel_map)
        return mark_means(prof) if prof is not None else None

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets._kernels_openvino import profile

        return profile(self, inputs, warmup, runs)


def _output_order(compiled_model: Any, names: list[str]) -> list[int]:
    """Index of each ONNX graph output among the compiled model's outputs (matched by
    tensor name, else by position)."""
    ports = [set(o.get_names()) for o in compiled_model.outputs]
    if len(ports) != len(names):
        raise RuntimeError(f"openvino-cpu: the compiled model has {len(ports)} outputs, the graph {len(names)}")
    order = []
    for pos, name in enumerate(names):
        hit = [i for i, p in enumerate(ports) if name in p]
        order.append(hit[0] if hit else pos)
    return order
