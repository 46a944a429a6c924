"""Targets and their staged objects: ``Target.lower() -> Lowered``, ``Lowered.compile() -> Compiled``.

The shape follows JAX's ``jit(f).lower(...).compile()`` (``jax/_src/stages.py``): each
stage is an object you can print (``as_text(stage)``), save and pass on. The base
classes do the state checks, timing and input validation; a stack's module writes only
the ``*_impl`` hooks (the pattern of Polygraphy's ``BaseRunner``).

A target is one compiler stack on one device, named ``STACK-DEVICE`` (``tvm-llvm``,
``iree-llvm-cpu``). Stacks are imported inside the hooks only, never at module import.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from compstack.core.errors import UnsupportedError, UserError
from compstack.targets.request import LowerRequest, RequestView

if TYPE_CHECKING:
    from compstack.analysis.kernels import KernelMap, KernelProfile, ProfileSamples
    from compstack.core.latency import LatencyConfig

__all__ = ["Availability", "Target", "TargetOptions", "LowerRequest", "Lowered", "Compiled", "PassRecord",
           "PASS_MODES", "PROFILE_MAX_RUNS"]

#: Most profiled runs :meth:`Compiled.profile` does (profiler traces grow with each run).
PROFILE_MAX_RUNS = 200


@dataclass(frozen=True)
class Availability:
    """Whether a target can be used here.

    Attributes:
        ok: True when it can lower and compile on this machine.
        reason: when not ok, what is missing and what to do (``pip install ...``).
        versions: versions of the packages/tools it uses (``{"onnxruntime": "1.32.0"}``).
        runs: True when compiled artifacts can also run here (False: the device is
            absent; the target still lowers and writes its artifact).
        run_reason: when not ``runs``, why (``no Vulkan device``).
    """

    ok: bool
    reason: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    runs: bool = True
    run_reason: str = ""


@dataclass(frozen=True)
class TargetOptions:
    """Options common to every target; each target subclasses this (frozen).

    The fields are the single source for the Python API, the CLI's ``--option KEY=VALUE``
    and the report's ``flags``.
    """

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON-able data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_strings(cls, items: Mapping[str, str], owner: str = "") -> "TargetOptions":
        """Parse ``{"opt_level": "3"}`` into a typed, validated instance.

        Args:
            items: option name -> value as given on the command line.
            owner: the target's name, for error messages.

        Raises:
            UserError: unknown option name, a value of the wrong type, or a value
                :meth:`validate` rejects; the message names the flag.
        """
        prefix = f"--option {owner + ':' if owner else ''}"
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, raw in items.items():
            if key not in fields:
                valid = ", ".join(sorted(fields)) or "none"
                raise UserError(f"{prefix}{key}: unknown option (valid: {valid})")
            default = getattr(cls(), key)
            try:
                if isinstance(default, bool):
                    if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                        raise ValueError(raw)
                    kwargs[key] = raw.lower() in ("1", "true", "yes")
                elif isinstance(default, int):
                    kwargs[key] = int(raw)
                    if not -2**31 <= kwargs[key] < 2**31:  # every stack takes these as C ints
                        raise UserError(f"{prefix}{key}={raw}: out of range (a 32-bit integer)")
                elif isinstance(default, float):
                    kwargs[key] = float(raw)
                    if not math.isfinite(kwargs[key]):
                        raise UserError(f"{prefix}{key}={raw}: expected a finite number")
                elif isinstance(default, tuple):
                    kwargs[key] = tuple(s for s in raw.split(",") if s)
                else:
                    kwargs[key] = raw
            except ValueError:
                raise UserError(f"{prefix}{key}={raw}: expected {type(default).__name__}") from None
        options = cls(**kwargs)
        problem = options.validate()
        if problem:
            raise UserError(f"{prefix}{problem}")
        return options

    def validate(self) -> str:
        """Hook: ``""`` when the values are valid, else ``"key=value: why"``."""
        return ""

    def key(self) -> str:
        """A short stable hash of the options (part of the artifact-cache key)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


#: The numpy dtypes every target is expected to take; ``ml_dtypes`` types (bfloat16,
#: float8, int4) and strings are opt-in per target.
PLAIN_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                          "float16", "float32", "float64"})

#: ``Lowered.passes(mode)``: ``all`` keeps the IR after every pass, ``changed`` only
#: after passes that changed it (MLIR's ``--mlir-print-ir-after-change``).
PASS_MODES = ("all", "changed")


@dataclass
class PassRecord:
    """One pass of a stack's pipeline, as the stack's own instrumentation saw it.

    Attributes:
        index: position in the pipeline run (0-based; nested pipelines flattened).
        name: the pass name in the stack's terms (``FuseOps``,
            ``iree-flow-form-dispatch-regions``).
        wall_s: the pass's wall time in seconds, when the stack measured it.
        changed: whether the pass changed the IR (None when unknown).
        scope: what the dump covers (``module``, or an op such as ``util.func @main``).
        text: the IR after the pass (str, or a callable producing it), or None when the
            mode did not keep it.
        alias: another name of the same pass (MLIR: the pass class, ``CSEPass``).
    """

    index: int
    name: str
    wall_s: float | None = None
    changed: bool | None = None
    scope: str = "module"
    text: str | Callable[[], str] | None = None
    alias: str = ""

    def ir_text(self) -> str | None:
        """The IR after the pass, computed now if it was kept lazily."""
        if callable(self.text):
            self.text = self.text()
        return self.text


class Target(RequestView):
    """One compiler stack on one device.

    Subclasses set the class attributes and implement :meth:`availability`,
    :meth:`lower_impl`, and the hooks of their :class:`Lowered` / :class:`Compiled`.
    What the job gives besides options comes in the :class:`LowerRequest` at
    construction, read through read-only attributes (:class:`RequestView`).

    Attributes:
        name: the target name (``tvm-llvm``).
        stack: the stack (``tvm``).
        device: the device kind (``cpu``, ``cuda``, ``vulkan``).
        Options: the frozen options dataclass of this target.
        stage_names: every stage this target can show, in pipeline order (before and
            after compilation); per-pass dumps come from :meth:`Lowered.passes`.
    """

    name: ClassVar[str] = ""
    stack: ClassVar[str] = ""
    device: ClassVar[str] = "cpu"
    description: ClassVar[str] = ""
    Options: ClassVar[type[TargetOptions]] = TargetOptions
    stage_names: ClassVar[tuple[str, ...]] = ()
    #: Stages that exist only after :meth:`Lowered.compile`.
    compiled_stages: ClassVar[tuple[str, ...]] = ()
    #: File suffix of each stage's text when written to disk (default ``.txt``).
    stage_suffix: ClassVar[dict[str, str]] = {}
    #: numpy dtype names the target takes as inputs/outputs (``object``: strings).
    supported_dtypes: ClassVar[frozenset[str]] = PLAIN_DTYPES
    #: Whether the stack needs torch in its worker. When False, a worker blocks ``import torch``
    #: (:func:`compstack.run.jobs.prepare_worker`): tvm_ffi imports it eagerly, ~1.7 s a process.
    needs_torch: ClassVar[bool] = False
    #: The framework this stack compiles natively (``jax``: XLA, ``torch``: Inductor); "": ONNX.
    native_framework: ClassVar[str] = ""
    #: Whether the target reads :attr:`LowerRequest.canonical_path` (the worker then verifies it).
    reads_canonical: ClassVar[bool] = False
    #: Whether compiled artifacts go to compstack's artifact cache (False for stacks with their
    #: own compile cache and no reloadable artifact, e.g. Inductor).
    cacheable: ClassVar[bool] = True
    #: How to run this stack with its optimiser switched off, for ``compstack explain``'s
    #: attribution (stack vs its optimiser): ``{"options": {...}, "env": {...}}`` — target
    #: options (``--option`` strings) and worker environment variables. Empty: no such switch.
    optimizations_off: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    #: Precision knobs ``compstack explain`` tries when a result differs: knob name ->
    #: ``{"options": {...}, "env": {...}}`` (as :attr:`optimizations_off`), each a switch to
    #: stricter floating-point arithmetic than the stack's default (no reassociation, no
    #: FMA contraction, no fast-math, no TF32). A knob that makes the result agree is
    #: reported as "differs because of KNOB", not as a bug. Empty: none declared.
    precision_knobs: ClassVar[Mapping[str, Mapping[str, Mapping[str, str]]]] = {}
    #: ``--tuned`` (:mod:`compstack.run.tuned`): (options, meaning), ``{budget}`` = its seconds; ``({}, "")``: why not
    tuned_as: ClassVar[tuple[Mapping[str, str], str]] = ({}, "")
    untuned_reason: ClassVar[str] = "compstack knows no tuning step or performance option of this stack"
    #: The option that switches passes off by name (a comma-separated list), where the
    #: stack has one; with :meth:`applied_passes` it lets ``compstack explain`` name the
    #: pass behind a discrepancy. Empty: no pass-level switch.
    pass_option: ClassVar[str] = ""
    #: ``compstack ops list``: how this target runs a registered custom op. Keys are the
    #: kernel kinds an op may declare (``cpu``, ``cuda``), tried in order; ``""`` is the
    #: line when the op declares none of them. Each line starts ``yes``, ``no`` or
    #: ``untested`` and says how or why. Empty: the target is not listed.
    custom_op_support: ClassVar[Mapping[str, str]] = {}
    #: Python modules the custom-op binding needs (module -> the ``no: ...`` line shown
    #: instead of the ``yes`` line when it is not installed).
    custom_op_needs: ClassVar[Mapping[str, str]] = {}

    def applied_passes(self, model: ir.Model) -> list[str] | None:
        """The passes that changed ``model``, by the names :attr:`pass_option` takes, from
        the stack's own record; None when the stack has no pass-level view."""
        return None

    def __init__(self, options: TargetOptions | None = None, request: LowerRequest | None = None) -> None:
        """Build the target with its ``options`` (default: all defaults) and the job's
        ``request`` (:class:`LowerRequest`, read through ``self.native``, ``self.threads``...;
        default: an empty one). Raises TypeError for an object of the wrong class."""
        self.options = options if options is not None else self.Options()
        if not isinstance(self.options, self.Options):
            raise TypeError(f"{self.name}: options must be {self.Options.__name__}")
        self._request = request if request is not None else LowerRequest()
        if not isinstance(self._request, LowerRequest):
            raise TypeError(f"{self.name}: request must be LowerRequest, not {type(request).__name__}")

    @classmethod
    def apply_threads(cls, n: int) -> dict[str, Any]:
        """Make this process's stack use ``n`` threads (``n >= 1``), by the stack's own knob.

        Called in the worker before the stack is imported or initialised (before
        :meth:`availability`); the environment of :func:`compstack.core.threads.thread_env`
        is already set. The default knows no knob.

        Returns:
            ``{"knob": what was set, "honoured": whether the stack is known to obey it,
            "note": why not / caveats}`` for the row's ``flags["threads"]``.
        """
        return {"knob": "none", "honoured": False,
                "note": f"{cls.name}: no thread-count knob known; the stack ran with its own default"}

    # ---- what every target says -------------------------------------------------
    @classmethod
    def availability(cls) -> Availability:
        """Whether this target works here, why not, and the versions it uses."""
        raise NotImplementedError

    def flags(self) -> dict[str, Any]:
        """How the stack is invoked (compiler flags, pipeline, providers), for the report."""
        return self.options.to_dict()

    #: Where :meth:`supported_ops` comes from, or why there is no list.
    ops_note: ClassVar[str] = "this stack has no queryable op list"

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        """The ONNX ops this stack takes (``Op``, ``domain::Op``), sorted, as the stack
        itself lists them (see :attr:`ops_note`); None when it has no such list."""
        return None

    def unsupported_ops(self, model: ir.Model) -> list[str]:
        """Every op of ``model`` this stack is known not to take: ``Op`` for the default
        ai.onnx domain, ``domain::Op`` for others.

        The default knows none; stacks with an op table override it.
        """
        return []

    # ---- staged pipeline ----------------------------------------------------------
    def lower(self, model: ir.Model) -> "Lowered":
        """Import ``model`` into the stack and lower it to the stack's IR.

        Raises:
            UnsupportedError: listing every unsupported op at once.
            Exception: whatever the stack raises (reported as a ``lower`` failure).
        """
        missing = self.unsupported_ops(model)
        if missing:
            raise UnsupportedError(f"{self.name}: unsupported ops: {', '.join(missing)}", missing)
        t0 = time.perf_counter()
        lowered = self.lower_impl(model)
        lowered.lower_s = time.perf_counter() - t0
        return lowered

    def lower_impl(self, model: ir.Model) -> "Lowered":
        """Hook: build the :class:`Lowered` for ``model``."""
        raise NotImplementedError

    def load_compiled(self, folder: Path, model: ir.Model) -> "Compiled":
        """Rebuild a :class:`Compiled` from the files :meth:`Compiled.save` wrote.

        Raises:
            Exception: when the artifact cannot be loaded (the cache then rebuilds it).
        """
        raise NotImplementedError


class Lowered:
    """A model in the stack's own IR, before code generation.

    Stages are named and ordered (e.g. IREE ``input``, ``flow``, ``vm``); each maps to
    its text or to a zero-argument callable producing it (computed once, on demand).
    """

    def __init__(self, target: Target, model: ir.Model, stages: Mapping[str, str | Callable[[], str]]) -> None:
        self.target = target
        self.model = model
        self._stages: dict[str, str | Callable[[], str]] = dict(stages)
        self.lower_s: float = 0.0

    def stage_names(self) -> list[str]:
        """The stage names available before compilation, in pipeline order."""
        return list(self._stages)

    def as_text(self, stage: str | None = None) -> str:
        """The text of one stage (default: the last one).

        Raises:
            UserError: unknown stage; the message lists the valid ones.
        """
        return _stage_text(self._stages, stage, self.target.name)

    def add_stage(self, name: str, text: str | Callable[[], str]) -> None:
        """Record one more stage (used by compile hooks that see later IR)."""
        self._stages[name] = text

    def compile(self) -> "Compiled":
        """Generate code. Raises whatever the stack raises (a ``compile`` failure)."""
        t0 = time.perf_counter()
        compiled = self.compile_impl()
        compiled.compile_s = time.perf_counter() - t0 - compiled.tune_s
        return compiled

    def compile_impl(self) -> "Compiled":
        """Hook: produce the :class:`Compiled`."""
        raise NotImplementedError

    def compile_with_kernels(self) -> "Compiled":
        """Compile so that :meth:`Compiled.kernels` can answer: a stack that needs extra
        records for it (Inductor's provenance tracking) overrides this. The compiled
        object keeps this :class:`Lowered` as ``lowered`` (its scratch files, marks).
        """
        compiled = self.compile()
        if getattr(compiled, "lowered", None) is None:
            compiled.lowered = self  # type: ignore[attr-defined]
        return compiled

    def passes(self, mode: str = "all") -> list[PassRecord] | None:
        """Run the stack's pipeline with its own pass instrumentation.

        Args:
            mode: ``all`` (IR after every pass) or ``changed`` (only after passes that
                changed it); see :data:`PASS_MODES`.

        Returns:
            One :class:`PassRecord` per pass, in order, with wall times where the
            stack measures them; None when the stack has no pass-level view.

        Raises:
            UserError: unknown mode.
        """
        if mode not in PASS_MODES:
            raise UserError(f"unknown pass mode '{mode}' (valid: {', '.join(PASS_MODES)})")
        try:
            return self.passes_impl(mode)
        except NotImplementedError:
            return None

    def passes_impl(self, mode: str) -> list[PassRecord]:
        raise NotImplementedError

    def cost_analysis(self) -> dict[str, float] | None:
        """The stack's own cost estimate (FLOPs, bytes) or None when it has none."""
        try:
            return self.cost_analysis_impl()
        except NotImplementedError:
            return None

    def cost_analysis_impl(self) -> dict[str, float]:
        raise NotImplementedError


def _stage_text(stages: dict[str, str | Callable[[], str]], stage: str | None, target: str) -> str:
    if not stages:
        raise UserError(f"{target}: no stages recorded")
    if stage is None:
        stage = list(stages)[-1]
    if stage not in stages:
        raise UserError(f"{target}: unknown stage '{stage}' (valid: {', '.join(stages)})")
    value = stages[stage]
    if callable(value):
        value = value()
        stages[stage] = value
    return value


class Compiled:
    """An executable artifact of one stack for one model.

    Subclasses implement :meth:`run_impl`, :meth:`prepare_impl` and :meth:`save_impl`.

    Attributes:
        compile_s: wall time of the compile, in seconds (0 when loaded from cache), without
            auto-tuning.
        tune_s: wall time of auto-tuning inside the compile, in seconds (0: none ran).
        stages: text stages only known after compilation (e.g. generated code).
    """

    #: File names (relative to the save folder) of the artifact, main file first.
    artifact_files: tuple[str, ...] = ()

    def __init__(self, target: Target, model: ir.Model) -> None:
        self.target = target
        self.model = model
        self.compile_s = 0.0
        self.tune_s = 0.0
        self.stages: dict[str, str | Callable[[], str]] = {}
        # onnx_ir types Value.name as ``str | None``; a value read from ONNX always has one
        self.input_names = [v.name or "" for v in model.graph.inputs if not v.is_initializer()]
        self.output_names = [v.name or "" for v in model.graph.outputs]

    def as_text(self, stage: str | None = None) -> str:
        """Text of a post-compile stage (see :meth:`Lowered.as_text`)."""
        return _stage_text(self.stages, stage, self.target.name)

    def _check_inputs(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        missing = [n for n in self.input_names if n not in inputs]
        if missing:
            raise UserError(f"missing input(s): {', '.join(missing)}")
        return [np.asarray(inputs[n]) for n in self.input_names]

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once and return the outputs by name, as host numpy arrays."""
        outs = self.run_impl(self._check_inputs(inputs))
        if len(outs) != len(self.output_names):
            raise RuntimeError(f"{self.target.name}: got {len(outs)} outputs, expected {len(self.output_names)}")
        return {n: np.asarray(o) for n, o in zip(self.output_names, outs)}

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Hook: inputs in graph order -> outputs in graph order (host arrays)."""
        raise NotImplementedError

    def prepare(self, inputs: Mapping[str, np.ndarray]) -> Callable[[], Any]:
        """A zero-argument callable that runs the model once on ``inputs`` and waits
        for the result, with inputs already placed on the device: what a bare loop
        over the stack's own API would time. Used by :mod:`compstack.core.latency`.
        """
        return self.prepare_impl(self._check_inputs(inputs))

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        return lambda: self.run_impl(inputs)

    def save(self, folder: Path) -> list[Path]:
        """Write the artifact into ``folder``; returns the files written."""
        folder.mkdir(parents=True, exist_ok=True)
        self.save_impl(folder)
        return [folder / f for f in self.artifact_files]

    def save_impl(self, folder: Path) -> None:
        raise NotImplementedError

    # ---- kernels and per-kernel time (compstack.analysis.kernels) ---------------------------
    def kernels(self) -> "KernelMap | None":
        """Every kernel/dispatch/fusion this artifact runs, with the IR nodes each covers
        (:class:`compstack.analysis.kernels.KernelMap`); None when the stack has no such view
        ("not available for this target"). Needs a fresh compile
        (:meth:`Lowered.compile_with_kernels`), not a cached artifact.
        """
        try:
            return self.kernels_impl()
        except NotImplementedError:
            return None

    def kernels_impl(self) -> "KernelMap":
        raise NotImplementedError

    def profile(self, inputs: Sequence[Mapping[str, np.ndarray]], config: "LatencyConfig | None" = None,
                kernel_map: "KernelMap | None" = None) -> "KernelProfile | None":
        """Per-kernel times from the stack's own profiler, beside the end-to-end latency.

        The protocol is :mod:`compstack.core.latency`'s: ``config.warmup`` untimed runs, then
        at least ``config.min_runs`` profiled runs and enough for ``config.min_time_s``
        at the measured latency (at most :data:`PROFILE_MAX_RUNS`), input sets rotated;
        each kernel's median, p10, p90 and CV over the runs. The end-to-end latency is
        measured first, with the profiler off.

        Args:
            inputs: the input sets (name -> array), rotated.
            config: the latency protocol (default :class:`compstack.core.latency.LatencyConfig`).
            kernel_map: this artifact's :meth:`kernels`, to order the result.

        Returns:
            A :class:`compstack.analysis.kernels.KernelProfile`, or None when the stack has no
            per-kernel profiler here.
        """
        from compstack.analysis.kernels import make_profile
        from compstack.core.latency import LatencyConfig, measure

        config = config or LatencyConfig()
        arrays = [self._check_inputs(s) for s in inputs]
        e2e = measure([self.prepare(s) for s in inputs], config)
        want = math.ceil(config.min_time_s * 1e3 / e2e.median) if e2e.median > 0 else config.min_runs
        runs = max(1, min(max(config.min_runs, want), PROFILE_MAX_RUNS, config.max_runs))
        try:
            samples = self.profile_impl(arrays, config.warmup, runs)
        except NotImplementedError:
            return None
        order = [k.id for k in kernel_map.kernels] if kernel_map is not None else ()
        return make_profile(self.target.name, samples, e2e.to_dict(), config.warmup, order)

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> "ProfileSamples":
        """Hook: run ``warmup`` untimed then ``runs`` profiled runs (input sets rotated)
        and return each kernel's time per run (:class:`compstack.analysis.kernels.ProfileSamples`)."""
        raise NotImplementedError
