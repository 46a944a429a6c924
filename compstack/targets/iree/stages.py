"""The ``iree-llvm-cpu`` target's staged objects: the lowered module (its ``iree-compile``
phases as stages, per-pass dumps) and the compiled ``.vmfb`` run by ``iree.runtime``;
the target itself is in :mod:`compstack.targets.iree.target`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import onnx_ir as ir

from compstack.analysis.irtext._norm_mlir import (
    elide_hex_constants,
    split_resources,
    strip_locations,
)
from compstack.core import ir as cir
from compstack.core import tools
from compstack.core.errors import ToolError, UnsupportedError, UserError
from compstack.core.inputs import contiguous

if TYPE_CHECKING:
    from compstack.targets.iree.target import IreeLlvmCpuTarget
from compstack.targets.base import Compiled, Lowered, PassRecord

_ILLEGAL_OP = re.compile(
    r"""(?:loc\("(?P<node>[^"]*)"\):\s*)?failed to legalize operation 'torch\.operator'"""
    r""".*?name = "onnx\.(?P<op>[\w.]+)\"""")

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

_IREE_DTYPES = {
    "float32": "f32", "float16": "f16", "float64": "f64", "bfloat16": "bf16", "bool": "i1",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "ui8", "uint16": "ui16", "uint32": "ui32", "uint64": "ui64",
}

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
        #: The flag search's kept flags (``tune=DURATION``), added to every later ``iree-compile``.
        self.kept_flags: tuple[str, ...] = ()
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

    def run_phase(self, phase: str | None, *, start: Path, output: Path, debuginfo: bool = False,
                  flags: Sequence[str] = ()) -> None:
        """Run ``iree-compile`` from ``start`` up to ``phase`` (None: the whole way to a vmfb),
        with ``flags`` after the target's own (the flag search's candidates).

        Raises:
            UnsupportedError: an ``onnx.*`` op has no conversion in IREE.
            ToolError: any other ``iree-compile`` failure (ToolTimeoutError past the limit).
        """
        argv: list[Any] = [tools.find_tool("iree-compile"), start, *self.target.compile_flags(), *self.kept_flags,
                           *flags]
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
                           *self.target.compile_flags(), *self.kept_flags, "--compile-from=input",
                           "--mlir-print-ir-after-all",
                           "--mlir-disable-threading", "--mlir-timing", "--mlir-timing-display=list"]
        if mode == "changed":
            argv.append("--mlir-print-ir-after-change")
        argv += ["-o", self.scratch.path / "passes.vmfb"]
        done = tools.run_tool(argv, timeout=self.target.options.compile_timeout_s, temps=self.scratch)
        err = done.stderr.decode(errors="replace") if isinstance(done.stderr, bytes) else done.stderr
        self.timings = _mlir_timings(err)
        return _mlir_dumps(err, changed=True if mode == "changed" else None)

    def compile_impl(self) -> Compiled:
        budget = getattr(self.target.options, "tune_budget_s", None)  # llvm-cpu only; GPU options have no tune
        if budget is not None:  # tune=DURATION: the flag search (compstack.targets.iree.tuning)
            from compstack.targets.iree.tuning import search

            compiled, record, tune_s = search(self, budget)
            compiled.tuning, compiled.tune_s = record, tune_s
            return compiled
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
        #: What the flag search did (``tune=DURATION``), for ``flags["tuning"]``; None when untuned.
        self.tuning: dict[str, Any] | None = None
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
