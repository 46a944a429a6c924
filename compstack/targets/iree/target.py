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
Python API runs instead, in the worker process itself: a subprocess per model cost a
Python start and an importer load, 0.3 s a graph when fuzzing); errors from
``iree-compile`` then name the node. Locations and large constants are elided from the stage texts (constants are
replaced by a size and content hash); the files under ``COMPSTACK_SAVE_TEMPS`` keep
everything.

Recipe and traps: ``/work/shared/notes/STACKS.md`` section 5.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core import tools
from compstack.core.errors import UnavailableError
from compstack.targets.base import Availability, Compiled, Lowered, Target, TargetOptions
from compstack.targets.iree import import_onnx
from compstack.targets.iree.stages import _LAZY_PHASES, _IreeCompiled, _IreeLowered

__all__ = ["IreeLlvmCpuTarget", "IreeOptions"]  # the GPU targets: compstack.targets.iree.gpu

_FUNC = re.compile(r'func\.func @(?:"([^"]+)"|([\w$.\-]+))\(')


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
        tune: a budget (``90s``, ``5m``) for the flag search: each documented CPU flag set
            compiled and timed, the fastest kept (:mod:`compstack.targets.iree.tuning`).
    """

    target_cpu: str = "host"
    extra_flags: tuple[str, ...] = ()
    driver: str = "local-task"
    compile_timeout_s: float = 600.0
    keep_locations: bool = True
    tune: str = ""

    @property
    def tune_budget_s(self) -> float | None:
        """``tune`` in seconds; None: no search, or not a duration (see :meth:`validate`)."""
        from compstack.core.duration import parse_duration
        from compstack.core.errors import UserError

        try:
            return parse_duration(self.tune, "tune") if self.tune else None
        except UserError:
            return None

    def validate(self) -> str:
        if self.tune and self.tune_budget_s is None:
            return f"tune={self.tune}: expected a positive duration like 90s or 5m (the flag search's budget)"
        if self.compile_timeout_s <= 0:
            return f"compile_timeout_s={self.compile_timeout_s}: expected > 0"
        if self.driver not in ("local-task", "local-sync", "vulkan", "cuda", "hip"):
            return f"driver={self.driver}: expected local-task or local-sync (or a GPU driver)"
        return ""


class IreeLlvmCpuTarget(Target):
    """IREE, ``llvm-cpu`` HAL backend, run on the local CPU device."""

    name = "iree-llvm-cpu"
    custom_op_support = {"cpu": "yes: kernel object linked into an llvm-cpu dispatch (hal.executable.objects)",
                         "": "no: the op declares no CPU kernel"}
    stack = "iree"
    device = "cpu"
    description = "IREE, llvm-cpu backend, local-task runtime"
    Options: ClassVar[type[TargetOptions]] = IreeOptions
    #: File suffix of each stage's text when written to disk.
    stage_suffix: ClassVar[dict[str, str]] = {s: ".mlir" for s in ("torch-onnx", "input", *_LAZY_PHASES)}
    stage_names = ("torch-onnx", "input", *_LAZY_PHASES)
    #: ``iree-compile --iree-opt-level=O0`` (the whole flow's optimisation level).
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {"options": {"extra_flags": "--iree-opt-level=O0"}}
    #: IREE reassociates floating-point reductions by default on llvm-cpu
    #: (``iree-compile --help``: ``--iree-llvmcpu-reassociate-fp-reductions``, "Enables
    #: reassociation for FP reductions"); switched off, sums run in source order.
    precision_knobs: ClassVar[Mapping[str, Mapping[str, Mapping[str, str]]]] = {
        "fp-reduction reassociation": {"options": {"extra_flags": "--iree-llvmcpu-reassociate-fp-reductions=false"}}}

    options: IreeOptions

    #: a search over the documented CPU flag sets (default, O3, data tiling, ukernels), the fastest kept
    tuned_as = ({"tune": "{budget}s"}, ("iree-compile flag search within {budget} s: default, O3, O3 + data tiling, "
                                        "O3 + data tiling + ukernels (iree.dev), each compiled and timed, the "
                                        "fastest kept"))

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
                "tuning": self.tuning_flags()}

    def tuning_flags(self) -> dict[str, Any]:
        """``flags["tuning"]``: the flag search's budget (``tune=DURATION``), or why there is none."""
        if self.options.tune:
            return {"tuner": "flag search", "budget_s": self.options.tune_budget_s}
        return {"tuner": "none", "note": "IREE has no auto-tuner: llvm-cpu picks tile sizes and vector "
                "widths from the target CPU's features; tune=DURATION searches its flag sets"}

    def lower_impl(self, model: ir.Model) -> Lowered:
        from compstack.targets.iree import custom_ops

        scratch = tools.Scratch("iree")
        # Registered custom ops: placeholders now, dispatches of their linked C kernels below.
        marked, calls = custom_ops.mark(cir.inline_functions(model), self.name)
        onnx_path = cir.save(marked, scratch.path / "model.onnx")
        mlir = scratch.path / "model.mlir"
        if self.options.keep_locations:
            script = scratch.path / "import_onnx.py"
            shutil.copyfile(Path(import_onnx.__file__), script)
            _import_onnx([sys.executable, str(script), str(onnx_path), str(mlir)], scratch)
        else:
            argv: list[Any] = [tools.find_tool("iree-import-onnx"), onnx_path, "-o", mlir]
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


def _import_onnx(argv: list[str], scratch: Any) -> None:
    """Run :func:`compstack.targets.iree.import_onnx.main` in this process (``argv``: python,
    the script's copy, MODEL.onnx, OUT.mlir); the command is logged as a tool's would be.

    Raises:
        ToolError: the importer raised (its traceback's last lines as the tool's stderr, as
            when it ran as a subprocess).
    """
    import traceback

    from compstack.core.errors import ToolError

    tools.log_command(argv, scratch)
    try:
        import_onnx.main(argv[2], argv[3])
    except Exception as exc:  # noqa: BLE001 - the importer's failure is this stage's error
        raise ToolError(argv, 1, "".join(traceback.format_exception(exc))[-4000:],
                        scratch.path if scratch.kept else None) from None


def _dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return ""
