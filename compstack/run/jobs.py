"""Jobs: one (model, target) unit of work, as plain data, and what the tasks share.

A :class:`Job` holds only paths, names and numbers (JSON, never a pickle), so it can be
rebuilt in a worker process (``python -P -m compstack.run.worker JOB.json``, see
:mod:`compstack.run.worker`) or shipped to a cluster task (Polygraphy's
``Comparator.run(use_subprocess=True)`` pattern). ``Job.kind`` names the task
(:mod:`compstack.run.tasks`); :func:`compstack.run.worker.execute` runs it and turns a
stack's exception into data (:class:`JobOutcome`); the executors
(:mod:`compstack.run.executors`) decide where it runs.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from compstack.core.errors import CompstackError, ToolError
from compstack.core.sanitize import file_name

if TYPE_CHECKING:
    from compstack.targets.base import LowerRequest, Target

__all__ = ["Job", "JobOutcome", "STAGES", "load_job_model", "pack_sets", "unpack_sets", "write_stages"]

#: Stages in order. A failed job names the stage it failed in.
STAGES = ("import", "lower", "compile", "run", "latency", "compare")


@dataclass
class Job:
    """One (model, target) job.

    Attributes:
        model_path: canonical ONNX file of the model (common IR).
        fingerprint: :func:`compstack.core.ir.fingerprint` of it.
        target: target name; ``target_ref`` its ``module:Class``.
        options: the target's options as strings (``TargetOptions.from_strings``).
        inputs_path: ``.npz`` of the input sets (see :func:`pack_sets`).
        workdir: folder for this job's outputs, result and log.
        cache_dir: artifact cache root, or None for ``--no-cache``.
        latency: :class:`compstack.core.latency.LatencyConfig` fields, or None to skip timing.
        artifact_dir: also save the artifact here (``compstack lower -o``).
        stages_dir: write every stage's text here (``compstack lower -o``).
        run: run the compiled model (False for ``lower``).
        kind: ``compare`` (lower, compile, run, time), ``dump`` (stages and passes,
            see :mod:`compstack.run.dump`), ``kernels`` or ``profile`` (kernel map and
            per-kernel times, see :mod:`compstack.run.tasks.kernels`), ``conformance``,
            ``optest``, ``evaluate`` (explain's pieces, :mod:`compstack.run.tasks.evaluate`);
            see :mod:`compstack.run.tasks`.
        only_stages: with ``dump``, the stages to write (None: all).
        passes: with ``dump``, ``all`` or ``changed`` to also write per-pass dumps.
        source: the model spec (``zoo:bert``, ``/abs/file.py:build``) from which a
            worker rebuilds the framework program for a native path; empty for ONNX.
        source_framework: ``torch``/``jax`` when the model came from a framework.
        op_origins: where the model's user custom ops are declared (``module:NAME`` or
            ``file:/abs.py``), taken in the parent from what the user loaded (their
            ``file.py``, ``--load``), never from the model file: a model's metadata
            cannot make a worker import anything.
        canonical_path: the canonical common IR file when ``model_path`` is another form
            (the user's model as written, or upgraded with ``--opset``): translated
            XLA/Inductor paths fall back to it when their converters need it.
        threads: threads every stack is asked for (``--threads``; 0: each stack's own
            default); see :mod:`compstack.core.threads`.
        params: the task's own parameters, the JSON form of its ``Params`` dataclass
            (e.g. :class:`compstack.run.tasks.conformance.Params`); tasks without one
            leave it empty.
        env: environment variables added to the worker's (e.g. ``XLA_FLAGS``, which a
            stack reads when it is imported): the isolating executors start the worker
            with them (the pool keeps such workers to jobs with the same ``env``); the
            inline executor cannot apply them and ignores them.
        time_limit_s: the executor's wall-clock limit of the job (``Limits.timeout_s``),
            set by the isolating executors; the latency phase ends before it (None:
            no limit, the inline executor).
    """

    model_path: str
    fingerprint: str
    target: str
    target_ref: str
    inputs_path: str
    workdir: str
    options: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None
    latency: dict[str, Any] | None = None
    artifact_dir: str | None = None
    stages_dir: str | None = None
    run: bool = True
    kind: str = "compare"
    only_stages: list[str] | None = None
    passes: str = ""
    source: str = ""
    source_framework: str = ""
    op_origins: list[str] = field(default_factory=list)
    canonical_path: str = ""
    threads: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    time_limit_s: float | None = None
    tuning_budget_s: float = 0.0

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> "Job":
        return cls(**json.loads(Path(path).read_text()))

    @property
    def file_source(self) -> str:
        """``source`` when it is a user's file (``/abs/file.py:build``), else ``""``: code
        a worker imports that the user may edit between runs (zoo models are package code)."""
        return self.source if self.source and not self.source.startswith("zoo:") else ""

    @property
    def outputs_path(self) -> Path:
        return Path(self.workdir) / "outputs.npz"

    @property
    def result_path(self) -> Path:
        return Path(self.workdir) / "result.json"

    @property
    def progress_path(self) -> Path:
        return Path(self.workdir) / "progress"

    @property
    def tmp_path(self) -> Path:
        """The job's scratch root: the tools' scratch folders (:class:`compstack.core.tools.Scratch`:
        IREE's imported MLIR and ``.vmfb``, several times the model's weights) go under it,
        and it is removed when the job ends: by the worker, or by the executor of a worker
        that was killed (a worker leaves by ``os._exit``, so no finaliser would)."""
        return Path(self.workdir) / "tmp"

    def drop_tmp(self) -> None:
        """Remove :attr:`tmp_path` and what is in it."""
        import shutil

        shutil.rmtree(self.tmp_path, ignore_errors=True)

    @property
    def partial_path(self) -> Path:
        """What the worker had measured before its last phase (``partial.json``, the
        :class:`JobOutcome` JSON): a worker killed in that phase keeps those fields."""
        return Path(self.workdir) / "partial.json"

    def started_at(self) -> float | None:
        """Wall-clock time (``time.time()``) the worker began this job: the first line of
        its ``progress`` file (None when there is none, as under the inline executor)."""
        try:
            with open(self.progress_path) as f:
                return float(f.readline().split()[0])
        except (OSError, ValueError, IndexError):
            return None


@dataclass
class JobOutcome:
    """What a worker reports (JSON in ``result.json``).

    ``status`` is ``ok`` (ran; compared later), ``unsupported``, ``unavailable`` or
    ``failed``; the runner adds ``crashed``, ``timeout`` and ``oom``; comparison adds
    ``mismatch``. ``result`` is the task's typed result in JSON form (the task module's
    ``Result.to_json``), for the tasks that have one.
    """

    target: str
    status: str = "ok"
    stage: str = ""
    error: str = ""
    log: str = ""
    lower_s: float | None = None
    compile_s: float | None = None
    cached: bool = False
    cache_note: str = ""
    latency: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    unsupported_ops: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobOutcome":
        """Rebuild an outcome from its JSON form (:func:`outcome_to_json`).

        Raises:
            TypeError: a field that is not one of this class's.
        """
        return cls(**data)


_COUNT_KEY = "__sets__"


def pack_sets(sets: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Flatten input sets into npz keys ``"<k>::<name>"`` (plus the set count, so a
    model without inputs still has its empty sets)."""
    flat = {f"{k}::{name}": arr for k, s in enumerate(sets) for name, arr in s.items()}
    flat[_COUNT_KEY] = np.asarray(len(sets))
    return flat


def unpack_sets(flat: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Inverse of :func:`pack_sets`."""
    count = int(flat.get(_COUNT_KEY, 0))
    sets: list[dict[str, np.ndarray]] = [{} for _ in range(count)]
    for key, arr in flat.items():
        if key == _COUNT_KEY:
            continue
        k, _, name = key.partition("::")
        while len(sets) <= int(k):
            sets.append({})
        sets[int(k)][name] = arr
    return sets


def prepare_worker(cls: type) -> None:
    """Process-wide set-up of a worker that runs only ``cls``: block ``import torch``
    when the target does not need it and nothing imported it yet, so libraries that
    import torch opportunistically (``try: import torch except ImportError``) skip it."""
    if not getattr(cls, "needs_torch", True) and "torch" not in sys.modules:
        sys.modules["torch"] = None  # type: ignore[assignment]  # makes `import torch` raise ImportError


def load_target_class(ref: str) -> type[Target]:
    """The :class:`~compstack.targets.base.Target` subclass named by ``ref`` (``module:Class``).

    Raises:
        ImportError: the module does not import; AttributeError: it has no such class.
    """
    module, _, cls = ref.partition(":")
    return getattr(importlib.import_module(module), cls)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # TVM/IREE put the useful line last after a C++ backtrace; prefer an "Error" line.
    pick = next((ln for ln in lines if "Error" in ln or "error:" in ln), lines[0] if lines else "")
    return f"{type(exc).__name__}: {pick[:500]}"


def load_job_model(job: Job, cls: "type[Target]", options: Any, request: "LowerRequest") -> "tuple[Any, LowerRequest]":
    """The job's model for a model task, and ``request`` with the job's source in it, so
    the target can be built once, after both (:class:`compstack.targets.base.LowerRequest`).

    The model is the store entry checked against its manifest (:func:`_verify_model_file`),
    loaded with ``onnx_ir`` (external weights up to 1.5 GiB read inline), the user's custom
    ops it names loaded from ``job.op_origins``. The request gets input set 0 as
    ``example_inputs``, ``source_framework``, the model, the native program when ``cls``
    compiles the source's framework natively (:func:`_native_for`), and the canonical form's
    path when ``cls.reads_canonical`` (verified first).

    Args:
        job: the job.
        cls: the target class the job runs on.
        options: its parsed options (``cls.Options``).
        request: the request so far (threads, cache root, stages).

    Returns:
        ``(model, request)``: the ``onnx_ir.Model`` and the new request.

    Raises:
        CompstackError: the model's or the canonical form's store entry was altered after
            the parent checked it.
    """
    import dataclasses

    import onnx_ir as ir

    _verify_model_file(job)
    model = ir.load(job.model_path)
    if _external_bytes(model) <= 1.5 * 2**30:  # stacks that read the model from bytes need it inline
        ir.external_data.load_to_model(model)
    if job.op_origins:  # user custom ops the model uses, as the parent named them
        from compstack.ops._registry import load_origins

        load_origins(job.op_origins)
    sets = load_sets(job.inputs_path)
    examples = sets[0] if sets and sets[0] else None
    native, note = _native_for(job, cls, options, model, examples)
    canonical = ""
    if job.canonical_path and cls.reads_canonical:
        from compstack.core.integrity import check_manifest

        meta, problem = check_manifest(Path(job.canonical_path).parent)
        if meta is None:
            raise CompstackError(f"model store entry {Path(job.canonical_path).parent} failed verification "
                                 f"({problem}); not run")
        canonical = job.canonical_path
    return model, dataclasses.replace(request, example_inputs=examples, source_framework=job.source_framework,
                                      native=native, native_note=note, model=model, canonical_path=canonical)


def _verify_model_file(job: Job) -> None:
    """The model file must still be the store entry the parent published
    (:func:`compstack.run.session.model_file`: its manifest's sizes and hashes and the
    job's fingerprint, :func:`compstack.core.integrity.check_manifest`), or nothing is run.

    Raises:
        CompstackError: the entry was altered after the parent checked it.
    """
    from compstack.core.integrity import check_manifest

    folder = Path(job.model_path).parent
    meta, problem = check_manifest(folder)
    if meta is None or meta.get("fingerprint") != job.fingerprint:
        raise CompstackError(f"model store entry {folder} failed verification "
                             f"({problem or 'another fingerprint'}); not run")


def _tool_context(exc: BaseException, outcome: JobOutcome) -> None:
    """Put what reproduces and explains a stack's failure into ``outcome.extra``: the
    failing tool's command line (``command``; its files stay only under
    ``COMPSTACK_SAVE_TEMPS``, then ``temps`` names the folder) from the error or the
    error it was raised from, and the error's ``hint``."""
    from compstack.core.tools import format_command

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ToolError):
            outcome.extra["command"] = format_command(seen.argv)
            if seen.temps is not None:
                outcome.extra["temps"] = str(seen.temps)
            break
        seen = seen.__cause__
    hint = getattr(exc, "hint", "") or getattr(exc.__cause__, "hint", "")
    if hint:
        outcome.extra["hint"] = hint


def _pending_stage(lowered: Any, done: Sequence[str], compiled: Any = None) -> str:
    """The stage :func:`write_stages` was producing when it failed: the first not in ``done``."""
    names = [*lowered.stage_names(), *(compiled.stages if compiled is not None else [])]
    return next((n for n in names if n not in done), "")


def _external_bytes(model: Any) -> int:
    """Bytes of the main graph's initializers stored as external data."""
    import onnx_ir as ir

    return sum(v.const_value.nbytes for v in model.graph.initializers.values()
               if isinstance(v.const_value, ir.ExternalTensor))


def _apply_threads(cls: type[Target], n: int) -> dict[str, Any]:
    """The stack's thread knob for ``n`` threads (see :meth:`compstack.targets.base.Target.apply_threads`),
    as the row's ``flags["threads"]``; ``n == 0`` leaves every stack at its own default."""
    if n <= 0:
        return {"requested": None, "knob": "the stack's own default (no --threads)"}
    try:
        info = dict(cls.apply_threads(n))
    except ImportError as exc:  # the stack is missing: availability() says so next
        info = {"knob": "none", "honoured": False, "note": f"not applied: {exc}"}
    return {"requested": n, **info}


def record_thread_use(outcome: JobOutcome, latency: dict[str, Any] | None) -> None:
    """Put the threads observed during the timed loop beside the requested ones in
    ``outcome.flags["threads"]`` (``observed_busy``, ``cpu_per_wall``...), and a note when
    they do not fit the request: more busy threads than asked for (for a stack whose
    knob says ``caller_waits``, not counting the thread that submits and waits), or
    more CPU per wall second than the threads could use."""
    use = (latency or {}).get("threads")
    info = outcome.flags.setdefault("threads", {"requested": None})
    if not use:
        info["observed_busy"] = None
        return
    info.update(observed_busy=use["busy"], busy_besides_caller=use["busy_besides_caller"],
                cpu_per_wall=round(use["cpu_per_wall"], 3), caller_cpu_per_wall=round(use["caller_cpu_per_wall"], 3),
                alive=use["alive"])
    n = info.get("requested")
    if not n:
        return
    waits = bool(info.get("caller_waits"))
    busy = use["busy_besides_caller"] if waits else use["busy"]
    if hasattr(os, "sched_getaffinity"):
        info["cpus_allowed"] = len(os.sched_getaffinity(0))
    # clock-tick granularity (10 ms) over a >= 0.5 s loop: allow 10 % + 0.05 CPU
    cpu_ok = use["cpu_per_wall"] <= (n + waits) * 1.1 + 0.05
    if info.get("bound") == "cpus":  # the knob caps CPUs (affinity), not threads: XLA
        busy = min(busy, info.get("cpus_allowed", busy))
        fits = cpu_ok and info.get("cpus_allowed", n) <= n
    else:
        fits = busy <= n and cpu_ok
    info["consistent"] = fits
    if not fits:
        outcome.extra.setdefault("notes", []).append(
            f"asked for {n} thread(s) but {busy} computed during the timed loop ({use['cpu_per_wall']:.2f} CPU s "
            f"per wall s): the stack did not obey {info.get('knob')}")
    elif waits and use["caller_cpu_per_wall"] >= 0.05:
        outcome.extra.setdefault("notes", []).append(
            f"besides its {n} worker thread(s), the calling thread used {use['caller_cpu_per_wall']:.2f} CPU s per "
            "wall s submitting and waiting")


def load_sets(path: str) -> list[dict[str, np.ndarray]]:
    """The input sets of a job (:func:`pack_sets` form), as a list of ``{name: array}``."""
    # compstack wrote this file itself (string inputs are object arrays, hence pickle)
    from compstack.core.inputs import decode_arrays

    with np.load(path, allow_pickle=False) as data:  # strings travel as unicode arrays (encode_arrays)
        return unpack_sets(decode_arrays({k: data[k] for k in data.files}))



_load_sets = load_sets


def _native_for(job: Job, cls: Any, options: Any, model: Any,
                examples: dict[str, np.ndarray] | None) -> tuple[Any, str]:
    """``(native program or None, note)``: the rebuilt framework program when ``cls``
    compiles the source's framework natively (and the rebuild is the imported program),
    and what the row's ``native_note`` says about it (``""``: nothing)."""
    wanted = getattr(cls, "native_framework", "")
    if not wanted or not job.source or job.source_framework != wanted:
        return None, ""
    if getattr(options, "path", "auto") == "translated":
        return None, ""
    from compstack.frontends.native import align_torch_weights
    from compstack.frontends.sources import jax_rebuild_differs, load_native

    names = [v.name for v in model.graph.inputs if not v.is_initializer()]
    if "torch" in sys.modules and sys.modules["torch"] is None:
        del sys.modules["torch"]  # prepare_worker's block: the user's file may import torch itself
    native = load_native(job.source, names)
    if native is None:
        return None, ""
    # build() ran again here: make sure the program is the one that was imported.
    note = ""
    if native.framework == "torch":
        replaced = align_torch_weights(native, model)
        if replaced:
            note = (f"the rebuilt module's weights differed from the imported model's in {replaced} "
                    "tensor(s) (build() is not seeded); they were loaded from the model")
    elif native.framework == "jax" and examples is not None and \
            jax_rebuild_differs(job.source, native, [examples[n] for n in names]):
        return None, ("build() gives a different JAX program each time (unseeded weights?), so the native "
                      "program cannot match the imported model: the translated path ran instead")
    return native, note


def write_stages(lowered: Any, folder: Path, done: list[str], compiled: Any = None,
                 only: Sequence[str] | None = None) -> list[str]:
    """Write every stage not in ``done`` (and in ``only`` when given) as
    ``NN-<stage><suffix>`` (NN = the stage's position); returns all names written.

    ``done`` is extended in place as each file is written, so it names every stage
    reached even when a later stage's text raises.
    """
    folder.mkdir(parents=True, exist_ok=True)
    names = done
    owners = [(lowered, lowered.stage_names())]
    if compiled is not None:
        owners.append((compiled, list(compiled.stages)))
    order = list(dict.fromkeys([*lowered.target.stage_names, *lowered.stage_names(),
                                *(compiled.stages if compiled is not None else [])]))
    for owner, stage_names in owners:
        for name in stage_names:
            if name in names or (only is not None and name not in only):
                continue
            text = owner.as_text(name)
            suffix = lowered.target.stage_suffix.get(name, ".txt")
            (folder / f"{order.index(name):02d}-{file_name(name)}{suffix}").write_text(text)  # a plugin's name
            names.append(name)
    return names


def _plain(x: Any) -> Any:
    """``x`` as plain JSON values, never copied: a stack's ``str`` subclass (TVM 0.25's
    ``tvm_ffi.core.String``) becomes a ``str``. ``dataclasses.asdict`` deep-copies, and a
    deep copy of a TVM 0.25 object drops a reference it never took (the worker segfaults)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    for t in (bool, int, float, str):
        if isinstance(x, t):
            return t(x)
    return x


def outcome_to_json(outcome: JobOutcome) -> str:
    """``outcome`` as JSON (values that JSON has no form for: ``str()``)."""
    return json.dumps({f: _plain(getattr(outcome, f)) for f in outcome.__dataclass_fields__}, default=str)
