"""The ``iree-llvm-cpu`` target: IREE with the ``llvm-cpu`` backend on the local device.

Lowering writes the model to ONNX, imports it to MLIR (torch dialect, ``onnx.*`` ops)
with IREE's ONNX importer, and runs ``iree-compile --compile-to=input`` at once, so an
op IREE cannot convert fails at ``lower`` as :class:`~compstack.core.errors.UnsupportedError`
(IREE reports the first such op only). Compiling resumes from that phase
(``--compile-from=input``) to a ``.vmfb`` with the host CPU's features
(``--iree-llvmcpu-target-cpu=host``, as IREE users do). Running uses ``iree.runtime``.

Stages, in pipeline order (``iree-compile`` phases; see ``iree-compile --help``,
``--compile-to``):

* ``torch-onnx``: the imported MLIR (``torch.operator "onnx.*"`` ops).
* ``input``: after input conversion (linalg/tensor/arith), computed at lower time.
* ``flow``, ``stream``, ``hal``, ``vm``: made on demand by
  ``iree-compile --compile-from=input --compile-to=<phase>``; ``flow`` holds one
  ``flow.executable`` per dispatch (the fusion groups).

By default the import keeps each ONNX node's name as its MLIR location
(``loc("node_name")``; ``iree-import-onnx`` has no option for that, so the importer's
Python API runs in a subprocess instead); errors from ``iree-compile`` then name the
node. Locations and large constants are elided from the stage texts (constants are
replaced by a size and content hash); the files under ``COMPSTACK_SAVE_TEMPS`` keep
everything.

Recipe and traps: ``/work/shared/notes/STACKS.md`` section 5.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from compstack.analysis.irtext._norm_mlir import elide_hex_constants, split_resources, strip_locations
from compstack.core import ir as cir
from compstack.core import tools
from compstack.core.errors import ToolError, UnavailableError, UnsupportedError, UserError
from compstack.core.inputs import contiguous
from compstack.targets.base import Availability, Compiled, Lowered, PassRecord, Target, TargetOptions

__all__ = ["IreeLlvmCpuTarget", "IreeOptions", "IreeGpuOptions", "IreeVulkanTarget", "IreeCudaTarget",
           "IreeRocmTarget"]

#: ``iree-compile --compile-to`` phases after ``input``, in pipeline order, offered as
#: lazy stages (``iree-compile --help``).
_LAZY_PHASES = ("abi", "preprocessing", "global-optimization", "dispatch-creation", "flow", "stream",
                "executable-sources", "executable-configurations", "executable-targets", "hal", "vm")

#: ``// -----// IR Dump After CSEPass: cse{opts} //----- //`` (``--mlir-print-ir-after-all``)
_DUMP_HEADER = re.compile(r"^// -----// IR Dump After (?P<name>\w+)(?:: (?P<arg>[\w.\-]+)(?:\{.*\})?)? //----- //$",
                          re.M)
#: First line of a dump: the op the pass ran on (``util.func public @main(...``, ``module {``).
_SCOPE = re.compile(r"^\s*(?P<op>[\w.]+)(?:\s+(?:public|private|nested))*(?:\s+(?P<sym>@[\w$.\-\"]+))?")
#: ``    0.0197 (  5.1%)  CanonicalizerPass`` in ``--mlir-timing-display=list`` output.
_TIMING_ROW = re.compile(r"^\s+(?P<s>\d+\.\d+) \(\s*[\d.]+%\)\s+(?P<name>.+?)\s*$", re.M)

#: Runs IREE's ONNX importer (as ``iree-import-onnx`` does) and prints the module *with*
#: locations (node names). Written into the scratch folder and run as a script, so
#: ``COMPSTACK_SAVE_TEMPS`` keeps a replayable command.
_IMPORT_SCRIPT = """\
# Written by compstack.targets.iree.target: python import_onnx.py MODEL.onnx OUT.mlir
import sys, onnx
from iree.compiler.extras import onnx_importer
from iree.compiler.ir import Context
src, dst = sys.argv[1], sys.argv[2]
model = onnx.load(src)
try:
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
except ValueError:
    pass
info = onnx_importer.ModelInfo(model)
module = info.create_module(context=Context()).operation
onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
module.verify()
with open(dst, "w") as f:
    f.write(module.get_asm(assume_verified=True, enable_debug_info=True))
"""

_ILLEGAL_OP = re.compile(
    r"""(?:loc\("(?P<node>[^"]*)"\):\s*)?failed to legalize operation 'torch\.operator'"""
    r""".*?name = "onnx\.(?P<op>[\w.]+)\"""")
_FUNC = re.compile(r'func\.func @(?:"([^"]+)"|([\w$.\-]+))\(')

_IREE_DTYPES = {
    "float32": "f32", "float16": "f16", "float64": "f64", "bfloat16": "bf16", "bool": "i1",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "ui8", "uint16": "ui16", "uint32": "ui32", "uint64": "ui64",
}


@dataclass(frozen=True)
class IreeOptions(TargetOptions):
    """Options of the ``iree-llvm-cpu`` target.

    Attributes:
        target_cpu: ``--iree-llvmcpu-target-cpu`` (``host``: this machine's CPU and
            features; or an LLVM CPU name such as ``znver4``).
        extra_flags: more ``iree-compile`` flags, appended last.
        driver: the ``iree.runtime`` driver/device (``local-task``: multi-threaded;
            ``local-sync``: the calling thread only).
        compile_timeout_s: limit for each ``iree-compile``/import run, in seconds.
        keep_locations: import with ONNX node names as MLIR locations (else plain
            ``iree-import-onnx``, which drops them).
    """

    target_cpu: str = "host"
    extra_flags: tuple[str, ...] = ()
    driver: str = "local-task"
    compile_timeout_s: float = 600.0
    keep_locations: bool = True

    def validate(self) -> str:
        if self.compile_timeout_s <= 0:
            return f"compile_timeout_s={self.compile_timeout_s}: expected > 0"
        if self.driver not in ("local-task", "local-sync", "vulkan", "cuda", "hip"):
            return f"driver={self.driver}: expected local-task or local-sync (or a GPU driver)"
        return ""


class IreeLlvmCpuTarget(Target):
    """IREE, ``llvm-cpu`` HAL backend, run on the local CPU device."""

    name = "iree-llvm-cpu"
    stack = "iree"
    device = "cpu"
    description = "IREE, llvm-cpu backend, local-task runtime"
    Options: ClassVar[type[TargetOptions]] = IreeOptions
    #: File suffix of each stage's text when written to disk.
    stage_suffix: ClassVar[dict[str, str]] = {s: ".mlir" for s in ("torch-onnx", "input", *_LAZY_PHASES)}
    stage_names = ("torch-onnx", "input", *_LAZY_PHASES)
    #: ``iree-compile --iree-opt-level=O0`` (the whole flow's optimisation level).
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {"options": {"extra_flags": "--iree-opt-level=O0"}}

    options: IreeOptions

    ops_note: ClassVar[str] = ("IREE's ONNX import (torch-mlir's TorchOnnxToTorch patterns) has no queryable op "
                               "list; `compstack conformance --targets iree-llvm-cpu` measures per-op support")

    @classmethod
    def availability(cls) -> Availability:
        """Whether the IREE compiler (with its ONNX importer) and runtime are installed."""
        import importlib.util

        versions = {d: _dist_version(d) for d in ("iree-base-compiler", "iree-base-runtime")}
        versions = {k: v for k, v in versions.items() if v}
        if importlib.util.find_spec("iree.compiler") is None:
            return Availability(False, "IREE compiler missing; pip install iree-base-compiler", versions)
        if importlib.util.find_spec("iree.compiler.extras.onnx_importer") is None:
            return Availability(False, "this IREE compiler has no ONNX importer (needs torch support)", versions)
        try:
            tools.find_tool("iree-compile")
            import iree.runtime as rt
        except UnavailableError as exc:
            return Availability(False, str(exc), versions)
        except ImportError as exc:
            return Availability(False, f"iree.runtime does not import ({exc}); pip install iree-base-runtime",
                                versions)
        if "local-task" not in rt.query_available_drivers():
            return Availability(False, "this iree.runtime has no local-task driver", versions)
        return Availability(True, versions=versions)

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """IREE's ``local-task`` driver runs dispatches on a task topology of worker threads
        (the calling thread only waits); ``--task_topology_max_group_count=n`` caps the
        workers, parsed with ``iree.runtime.flags.parse_flags`` before any device exists.
        ``local-sync`` always runs on the calling thread (1 thread, whatever ``n``)."""
        import iree.runtime as rt

        rt.flags.parse_flags(f"--task_topology_max_group_count={n}")
        return {"knob": f"iree.runtime flag --task_topology_max_group_count={n}", "honoured": True,
                "caller_waits": True}

    def runtime_driver(self) -> str:
        """The ``iree.runtime`` driver that runs this target's artifacts."""
        return self.options.driver

    def compile_flags(self) -> list[str]:
        """The ``iree-compile`` flags (no input, output or phase flags)."""
        return ["--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                f"--iree-llvmcpu-target-cpu={self.options.target_cpu}",
                *self.options.extra_flags]

    def tool_hint(self, stderr: str) -> str:
        """What to change when ``iree-compile`` failed with ``stderr`` (empty: no known fix)."""
        return ""

    def flags(self) -> dict[str, Any]:
        """The full ``iree-compile`` flag list, importer and runtime driver."""
        return {"iree-compile": self.compile_flags(),
                "import": "onnx_importer (node names as locations)" if self.options.keep_locations
                else "iree-import-onnx",
                "driver": self.runtime_driver(),
                "compile_timeout_s": self.options.compile_timeout_s,
                "tuning": {"tuner": "none", "note": "IREE has no auto-tuner here: llvm-cpu picks tile sizes and "
                           "vector widths from the target CPU's features (--iree-llvmcpu-target-cpu)"}}

    def lower_impl(self, model: ir.Model) -> Lowered:
        from compstack.targets.iree import custom_ops

        scratch = tools.Scratch("iree")
        # Registered custom ops: placeholders now, dispatches of their linked C kernels below.
        marked, calls = custom_ops.mark(cir.inline_functions(model), self.name)
        onnx_path = cir.save(marked, scratch.path / "model.onnx")
        mlir = scratch.path / "model.mlir"
        if self.options.keep_locations:
            script = scratch.path / "import_onnx.py"
            script.write_text(_IMPORT_SCRIPT)
            argv: list[Any] = [sys.executable, script, onnx_path, mlir]
        else:
            argv = [tools.find_tool("iree-import-onnx"), onnx_path, "-o", mlir]
        tools.run_tool(argv, timeout=self.options.compile_timeout_s, temps=scratch)
        custom_ops.rewrite(mlir, calls, "llvm-cpu" in " ".join(self.compile_flags()), self.name)
        text = mlir.read_text()
        found = _FUNC.search(text)
        function = (found.group(1) or found.group(2)) if found else None
        lowered = _IreeLowered(self, model, scratch, function)
        lowered.run_phase("input", start=mlir, output=scratch.path / "input.mlir", debuginfo=True)
        return lowered

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        """Load ``folder/model.vmfb``; the entry function is detected from its exports.

        Raises:
            FileNotFoundError: no ``model.vmfb`` there.
            RuntimeError: the runtime rejects the module, or it has no single entry point.
        """
        path = folder / "model.vmfb"
        compiled = _IreeCompiled(self, model, path.read_bytes(), None)
        compiled.set_module_path(path.resolve())
        return compiled


def _dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


def _display(text: str) -> str:
    """Stage text for people and diffs: locations dropped, hex constants of 128 bytes
    or more elided as ``"0x...<N bytes #H>"`` (the MLIR normaliser's own steps)."""
    main, resources = split_resources(text)
    main, resources = elide_hex_constants(strip_locations(main), resources, 127, by_bytes=True)
    return main + resources


def _unsupported(exc: ToolError, target: str) -> UnsupportedError | None:
    """An UnsupportedError when ``iree-compile`` failed on an ``onnx.*`` op it cannot convert."""
    hits = [m for m in _ILLEGAL_OP.finditer(exc.stderr_tail)]
    if not hits:
        return None
    ops = sorted({m.group("op") for m in hits})
    nodes = sorted({m.group("node") for m in hits if m.group("node")})
    where = f" (node {', '.join(nodes)})" if nodes else ""
    return UnsupportedError(f"{target}: unsupported ops: {', '.join(ops)}{where}; "
                            "iree-compile reports the first one only", ops)


class _IreeLowered(Lowered):
    target: IreeLlvmCpuTarget

    def __init__(self, target: IreeLlvmCpuTarget, model: ir.Model, scratch: tools.Scratch,
                 function: str | None) -> None:
        self.scratch = scratch
        self.function = function
        stages: dict[str, str | Callable[[], str]] = {
            "torch-onnx": lambda: _display((scratch.path / "model.mlir").read_text()),
            "input": lambda: _display((scratch.path / "input.mlir").read_text()),
        }
        for phase in _LAZY_PHASES:
            stages[phase] = self._lazy(phase)
        super().__init__(target, model, stages)

    def _lazy(self, phase: str) -> Callable[[], str]:
        def text() -> str:
            out = self.scratch.path / f"{phase}.mlir"
            self.run_phase(phase, start=self.scratch.path / "input.mlir", output=out)
            return _display(out.read_text())

        return text

    def run_phase(self, phase: str | None, *, start: Path, output: Path, debuginfo: bool = False) -> None:
        """Run ``iree-compile`` from ``start`` up to ``phase`` (None: the whole way to a vmfb).

        Raises:
            UnsupportedError: an ``onnx.*`` op has no conversion in IREE.
            ToolError: any other ``iree-compile`` failure (ToolTimeoutError past the limit).
        """
        argv: list[Any] = [tools.find_tool("iree-compile"), start, *self.target.compile_flags()]
        if start.name != "model.mlir":
            argv.append("--compile-from=input")
        if phase is not None:
            argv.append(f"--compile-to={phase}")
        if debuginfo:
            argv.append("--mlir-print-debuginfo")
        argv += ["-o", output]
        try:
            tools.run_tool(argv, timeout=self.target.options.compile_timeout_s, temps=self.scratch)
        except ToolError as exc:
            exc.hint = self.target.tool_hint(exc.stderr_tail)
            unsupported = _unsupported(exc, self.target.name)
            if unsupported is not None:
                raise unsupported from exc
            raise

    def passes_impl(self, mode: str) -> list[PassRecord]:
        """Compile from ``input`` to a vmfb with MLIR's own instrumentation:
        ``--mlir-print-ir-after-all`` (plus ``--mlir-print-ir-after-change`` for
        ``changed``), ``--mlir-disable-threading``, and ``--mlir-timing`` with the list
        display. Dumps are scoped to the op the pass ran on (``scope``); timings are
        MLIR's per-pass totals (``self.timings``), since MLIR reports them per pass
        name, not per run.
        """
        argv: list[Any] = [tools.find_tool("iree-compile"), self.scratch.path / "input.mlir",
                           *self.target.compile_flags(), "--compile-from=input", "--mlir-print-ir-after-all",
                           "--mlir-disable-threading", "--mlir-timing", "--mlir-timing-display=list"]
        if mode == "changed":
            argv.append("--mlir-print-ir-after-change")
        argv += ["-o", self.scratch.path / "passes.vmfb"]
        done = tools.run_tool(argv, timeout=self.target.options.compile_timeout_s, temps=self.scratch)
        err = done.stderr.decode(errors="replace") if isinstance(done.stderr, bytes) else done.stderr
        self.timings = _mlir_timings(err)
        return _mlir_dumps(err, changed=True if mode == "changed" else None)

    def compile_impl(self) -> Compiled:
        vmfb = self.scratch.path / "model.vmfb"
        self.run_phase(None, start=self.scratch.path / "input.mlir", output=vmfb)
        return _IreeCompiled(self.target, self.model, vmfb.read_bytes(), self.function)


def _mlir_dumps(stderr: str, changed: bool | None) -> list[PassRecord]:
    """Split MLIR's ``--mlir-print-ir-after-all`` output into one record per dump.

    ``name`` is the pass argument (``iree-flow-form-dispatch-regions``), ``alias`` the
    pass class (``FormDispatchRegionsPass``), ``scope`` the op it ran on.
    """
    heads = list(_DUMP_HEADER.finditer(stderr))
    timing_at = stderr.find("===---")
    records = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else (timing_at if timing_at > m.end() else len(stderr))
        body = stderr[m.end():end].strip("\n") + "\n"
        first = next((ln for ln in body.splitlines() if ln.strip() and not ln.startswith("#")), "")
        sm = _SCOPE.match(first)
        scope = " ".join(x for x in (sm.group("op"), sm.group("sym")) if x) if sm else "module"
        records.append(PassRecord(i, m.group("arg") or m.group("name"), None, changed, scope, _display(body),
                                  alias=m.group("name")))
    return records


def _mlir_timings(stderr: str) -> list[tuple[str, float, int]]:
    """``(pass, wall_s, 0)`` rows of MLIR's timing list, pipelines and analyses left out."""
    start = stderr.find("Execution time report")
    rows = []
    for m in _TIMING_ROW.finditer(stderr, start if start >= 0 else len(stderr)):
        name = m.group("name")
        if name in ("root", "Total") or "Pipeline" in name or name.startswith("(A)") or "Adaptor" in name:
            continue
        rows.append((name, float(m.group("s")), 0))
    return rows


def _declared_sign(arr: np.ndarray, value: Any) -> np.ndarray:
    """Reinterpret an integer result in the signedness ONNX declares for the output.

    IREE's integers are signless and its runtime hands unsigned ONNX outputs back as
    signed arrays of the same width (uint8 -> int8); the bits are right, only the numpy
    dtype differs, so this is a view, not a conversion.
    """
    if value.dtype is None:
        return arr
    want = np.dtype(value.dtype.numpy())
    if arr.dtype != want and arr.dtype.kind in "iu" and want.kind in "iu" and arr.dtype.itemsize == want.itemsize:
        return arr.view(want)
    return arr


def _pick_function(names: Sequence[str], expected: str | None) -> str:
    """The synchronous entry point among a module's exports (not ``$async``, not ``__init``)."""
    entry = [n for n in names if "$" not in n and not n.startswith("__")]
    if expected in entry:
        return expected  # type: ignore[return-value]
    if len(entry) == 1:
        return entry[0]
    for name in ("main_graph", "main"):
        if name in entry:
            return name
    raise RuntimeError(f"cannot tell the entry function among {', '.join(names)}")


def _input_flag(value: cir.ModelInput) -> str:
    """``--input=`` for ``iree-run-module``: zeros of the static shape, else a ``.npy`` file."""
    dtype = _IREE_DTYPES.get(np.dtype(value.dtype).name)
    if not value.is_static or dtype is None:
        return f"--input=@{value.name}.npy"
    dims = "x".join(str(d) for d in value.shape)
    return f"--input={dims + 'x' if dims else ''}{dtype}=0"


class _IreeCompiled(Compiled):
    """A ``.vmfb`` loaded into an ``iree.runtime`` context on the chosen driver.

    Attributes:
        vmfb: the module bytes.
        function: the entry function that runs the model.
        run_command: the ``iree-run-module`` command line that runs this artifact
            with zero inputs (``.npy`` files for dynamic shapes); the module path is
            ``model.vmfb`` until the artifact is saved or loaded from a folder.
    """

    artifact_files = ("model.vmfb",)

    def __init__(self, target: IreeLlvmCpuTarget, model: ir.Model, vmfb: bytes, function: str | None) -> None:
        import iree.runtime as rt

        super().__init__(target, model)
        self.vmfb = vmfb
        self.driver = target.runtime_driver()
        # Reading the exports needs no device: a GPU artifact is checked here too.
        exports = rt.VmModule.copy_buffer(rt.VmInstance(), vmfb).function_names
        self.function = _pick_function(exports, function)
        self._loaded: tuple[Any, Any] | None = None
        self.run_command = ""
        self.set_module_path(Path("model.vmfb"))
        if self.driver in ("local-task", "local-sync"):
            self._runtime()  # the CPU is always there: load now, so errors show at compile

    def _runtime(self) -> tuple[Any, Any]:
        """``(config, entry function)`` on the target's driver, created on first use."""
        if self._loaded is None:
            import iree.runtime as rt

            _check_driver(self.driver)
            config = rt.Config(self.driver)
            vm_module = rt.VmModule.copy_buffer(config.vm_instance, self.vmfb)
            context = rt.SystemContext(config=config)
            context.add_vm_module(vm_module)
            self._context = context
            self._loaded = (config, context.modules[vm_module.name][self.function])
        return self._loaded

    def set_module_path(self, path: Path) -> None:
        """Rebuild :attr:`run_command` for the artifact at ``path``."""
        # The console script iree-base-runtime puts on PATH, as IREE's docs write it.
        argv = ["iree-run-module", f"--device={self.driver}", f"--module={path}", f"--function={self.function}"]
        argv += [_input_flag(v) for v in cir.graph_inputs(self.model)]
        self.run_command = tools.format_command(argv)

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        out = self._runtime()[1](*[contiguous(a) for a in inputs])
        items = out if isinstance(out, (list, tuple)) else [out]
        arrays = [np.asarray(o.to_host()) if hasattr(o, "to_host") else np.asarray(o) for o in items]
        return [_declared_sign(a, v) for a, v in zip(arrays, self.model.graph.outputs)]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        import iree.runtime as rt

        config, fn = self._runtime()
        args = [rt.asdevicearray(config.device, contiguous(a)) for a in inputs]
        # The synchronous entry point waits on its fence before returning.
        return lambda: fn(*args)

    def save_impl(self, folder: Path) -> None:
        path = folder / "model.vmfb"
        path.write_bytes(self.vmfb)
        self.set_module_path(path.resolve())

    def kernels_impl(self) -> Any:
        from compstack.targets.iree.kernels import kernel_map

        return kernel_map(self)

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets.iree.kernels import profile

        return profile(self, inputs, warmup, runs)


def _check_driver(driver: str) -> None:
    """Raise :class:`UserError` for a driver name ``iree.runtime`` does not know."""
    import iree.runtime as rt

    if driver not in rt.query_available_drivers():
        raise UserError(f"--option driver={driver}: not one of {', '.join(rt.query_available_drivers())}")


@dataclass(frozen=True)
class IreeGpuOptions(TargetOptions):
    """Options of IREE's GPU targets (``iree-vulkan``, ``iree-cuda``, ``iree-rocm``).

    Attributes:
        gpu_target: the GPU to compile for: ``--iree-cuda-target`` (``sm_80``,
            ``sm_90``), ``--iree-rocm-target`` (``gfx942``) or ``--iree-vulkan-target``
            (empty: IREE's generic Vulkan target); see ``iree-compile --help``.
        extra_flags: more ``iree-compile`` flags, appended last.
        compile_timeout_s: limit for each ``iree-compile``/import run, in seconds.
        keep_locations: import with ONNX node names as MLIR locations.
    """

    gpu_target: str = ""
    extra_flags: tuple[str, ...] = ()
    compile_timeout_s: float = 600.0
    keep_locations: bool = True

    def validate(self) -> str:
        if self.compile_timeout_s <= 0:
            return f"compile_timeout_s={self.compile_timeout_s}: expected > 0"
        return ""


class _IreeGpuTarget(IreeLlvmCpuTarget):
    """An IREE GPU backend: compiles without the GPU; runs where its driver finds one."""

    Options = IreeGpuOptions
    hal_device: ClassVar[str] = ""
    target_flag: ClassVar[str] = ""
    default_gpu: ClassVar[str] = ""
    driver: ClassVar[str] = ""
    options: IreeGpuOptions  # type: ignore[assignment]

    @classmethod
    def availability(cls) -> Availability:
        """Compiler as for ``iree-llvm-cpu``; ``runs`` when the runtime driver has a device."""
        base = super().availability()
        if not base.ok and "local-task" not in base.reason:
            return base
        runs, why = _device_present(cls.driver)
        return Availability(True, versions=base.versions, runs=runs, run_reason=why)

    def runtime_driver(self) -> str:
        return self.driver

    def compile_flags(self) -> list[str]:
        gpu = self.options.gpu_target or self.default_gpu
        return [f"--iree-hal-target-device={self.hal_device}",
                *([f"{self.target_flag}={gpu}"] if gpu else []), *self.options.extra_flags]


class IreeVulkanTarget(_IreeGpuTarget):
    """IREE, ``vulkan-spirv`` backend: the artifact holds SPIR-V; runs on a Vulkan device."""

    name = "iree-vulkan"
    device = "vulkan"
    description = "IREE, vulkan-spirv backend (SPIR-V), vulkan runtime driver"
    hal_device, target_flag, driver = "vulkan", "--iree-vulkan-target", "vulkan"

    def tool_hint(self, stderr: str) -> str:
        """IREE's generic Vulkan target (no ``gpu_target``) has no 64-bit integers: SPIR-V
        code generation then fails on ``i64`` vectors (zoo:bert: ``vector.insert_strided_slice``
        on ``vector<2xi64>``); a concrete GPU target enables ``Int64`` (``ampere`` compiles
        zoo:bert, measured with IREE 3.13)."""
        if not self.options.gpu_target and re.search(r"\bi64\b|xi64>", stderr):
            return (f"IREE's generic Vulkan target has no int64; compile for your GPU, e.g. "
                    f"--option {self.name}:gpu_target=ampere (NVIDIA; rdna3 for AMD, valhall4 for Arm Mali, adreno: "
                    "see iree-compile --help, --iree-vulkan-target)")
        return ""


class IreeCudaTarget(_IreeGpuTarget):
    """IREE, ``cuda`` backend: the artifact holds PTX; runs on an NVIDIA GPU."""

    name = "iree-cuda"
    device = "cuda"
    description = "IREE, cuda backend (PTX), cuda runtime driver"
    hal_device, target_flag, default_gpu, driver = "cuda", "--iree-cuda-target", "sm_80", "cuda"


class IreeRocmTarget(_IreeGpuTarget):
    """IREE, ``rocm`` backend (HIP runtime): the artifact holds AMDGPU code objects."""

    name = "iree-rocm"
    device = "rocm"
    description = "IREE, rocm backend (AMDGPU), hip runtime driver"
    hal_device, target_flag, default_gpu, driver = "hip", "--iree-rocm-target", "gfx942", "hip"


def _device_present(driver: str) -> tuple[bool, str]:
    """Whether ``iree.runtime`` can create ``driver`` and it lists a device, and why not."""
    try:
        import iree.runtime as rt

        if driver not in rt.query_available_drivers():
            return False, f"this iree.runtime has no {driver} driver"
        devices = rt.get_driver(driver).query_available_devices()
    except Exception as exc:  # noqa: BLE001 - the runtime's reason is the answer
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return False, f"no {driver} device here ({first[-160:]})"
    if not devices:
        return False, f"the {driver} driver lists no device"
    return True, ""
