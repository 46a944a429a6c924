"""The comparison: one model, a reference, several targets, each job isolated.

:func:`compare` writes the model once (canonical ONNX under the cache folder), makes
the input sets, runs the reference, then each target in its own worker process
(:mod:`compstack.run.executors`), judges outputs (:func:`compstack.run.oracle.judge_row`: the one
verdict, with the oracle's float32 floor, UB rules and cross-check) and writes each
result to the database as soon as it is known. A stack that crashes, hangs or runs out
of memory costs its own row only.

Reference choice: the ``reference`` target (``onnx.reference`` in float64) when the
model is small enough (at most :data:`FLOAT64_MAX_FLOPS` FLOPs and
:data:`FLOAT64_MAX_PARAMS` parameters), else the registry's ``large-reference`` (the
translated program run eagerly in float64, :mod:`compstack.run.stackref`), or ``ort-cpu``
in float32 without torch; the report names which one was used, and falls back to
``ort-cpu`` in float32 when the chosen reference fails.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from compstack import targets as registry
from compstack.analysis.opstats import op_stats
from compstack.core import ir as cir
from compstack.core.config import Settings
from compstack.core.errors import UserError
from compstack.core.inputs import input_sets_for, save_npz
from compstack.core.integrity import check_manifest
from compstack.core.latency import LatencyConfig
from compstack.core.procs import run_tempdir
from compstack.core.results import Report, Result, ResultsDB
from compstack.ops._registry import origins_for
from compstack.run.executors import LOST as _LOST
from compstack.run.executors import Executor, Limits, open_executor
from compstack.run.jobs import Job, JobOutcome, pack_sets
from compstack.run.oracle import CheckedOracle, checked_oracle, judge_row
from compstack.run.oracle_cache import OracleCache
from compstack.run.refchoice import EAGER_FLOAT64, FLOAT64_MAX_FLOPS, FLOAT64_MAX_PARAMS, check_reference
from compstack.run.refchoice import pick_reference as _pick_reference
from compstack.run.refchoice import reference_info as _reference_info
from compstack.run.refchoice import run_reference as _run_reference
from compstack.run.tuned import attach_default, default_row

__all__ = ["CompareOptions", "check_reference", "EAGER_FLOAT64", "StackModel", "compare", "job_fields", "model_file",
           "run_one", "stack_model_file",
           "FLOAT64_MAX_FLOPS", "FLOAT64_MAX_PARAMS"]


@dataclass
class CompareOptions:
    """Everything a comparison needs besides the model.

    Attributes:
        targets: target names (already resolved, see :func:`compstack.targets.resolve`).
        seed: seed of generated inputs.
        inputs: user-given arrays for input set 0 (``--inputs FILE.npz``), or None.
        val_ranges: ``--val-range`` per input.
        shapes: ``--input-shape`` per input.
        rtol, atol: tolerance overrides (None = per-dtype defaults).
        latency: the latency protocol, or None to skip timing.
        limits: per-job time and memory limits.
        cache: use the artifact cache.
        reference: ``auto``, ``reference`` (float64) or a target name.
        target_options: ``{target: {option: value}}`` from ``--option``.
        isolate: run jobs in worker processes (default); False runs them inline.
        opset: upgrade the model the stacks get to this ai.onnx opset (``--opset``);
            None gives them the model as written (see :func:`stack_model_file`).
        threads: threads every stack is asked for (None: :func:`compstack.core.threads.default_threads`,
            the physical cores; 0: each stack's own default); see :mod:`compstack.core.threads`.
        tuned, tuned_budget_s: ``--tuned`` per target (rows' ``flags.tuned_as``) and ``--budget``, s.
        defaults: with ``--tuned``, the targets that also run as they come, each with the
            user's own options (:func:`compstack.run.tuned.default_runs`); their tuned rows
            carry that run (:func:`compstack.run.tuned.attach_default`).
        executor: where the jobs run (:func:`compstack.run.executors.open_executor`): an
            executor name (``inline``, ``process``, ``pool``), an :class:`Executor` the
            caller keeps (a sweep reuses one pool), or ``""``: ``process``, or ``inline``
            without ``isolate``.
    """

    targets: list[str]
    seed: int = 0
    inputs: Mapping[str, np.ndarray] | None = None
    val_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    rtol: float | None = None
    atol: float | None = None
    latency: LatencyConfig | None = field(default_factory=LatencyConfig)
    limits: Limits = field(default_factory=Limits)
    cache: bool = True
    reference: str = "auto"
    target_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    isolate: bool = True
    opset: int | None = None
    threads: int | None = None
    tuned: Mapping[str, str] = field(default_factory=dict)
    tuned_budget_s: float = 0.0
    defaults: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    executor: str | Executor = ""


def model_file(source: cir.SourceModel, cache_dir: Path) -> Path:
    """The canonical ONNX file of ``source``: ``<cache_dir>/models/<fingerprint>/model.onnx``
    (see :func:`_store_model`).

    Raises:
        UserError: the cache folder cannot be written.
    """
    return _store_model(source.model, source.fingerprint, cache_dir)


@dataclass(frozen=True)
class StackModel:
    """The model file the stacks receive, and which form it is.

    Attributes:
        path: the ONNX file.
        fingerprint: :func:`compstack.core.ir.fingerprint` of it (the artifact-cache key).
        form: ``as-written`` (the user's ONNX model unchanged), ``canonical`` (a graph
            compstack's frontend made: torch, JAX, zoo) or ``opset N`` (upgraded on
            request, ``--opset N``).
        opset: its ai.onnx opset.
    """

    path: Path
    fingerprint: str
    form: str
    opset: int

    def flags(self) -> dict[str, Any]:
        """The row flags naming the form (``model_form``, ``model_opset``)."""
        return {"model_form": self.form, "model_opset": self.opset}


def stack_model_file(source: cir.SourceModel, cache_dir: Path, opset: int | None = None) -> StackModel:
    """The model every stack gets, written once under ``<cache_dir>/models/``.

    By default that is the model as the user wrote it (:attr:`SourceModel.as_written`:
    its opset, node names and structure), or the canonical form when a frontend made
    the graph; the canonical form (:func:`model_file`) serves compstack's own analysis
    and the translated XLA/Inductor paths. ``opset`` upgrades the stacks' model to that
    ai.onnx opset with the ONNX version converter (``--opset N``); nothing else changes.

    Raises:
        UserError: ``opset`` is below the model's own (only upgrades are offered), the
            version converter rejects the model, or the folder is not writable.
    """
    base = source.as_written if source.as_written is not None else source.model
    form = "as-written" if source.as_written is not None else "canonical"
    if base is source.model and opset is None:
        return StackModel(model_file(source, cache_dir), source.fingerprint, form, _opset_of(base))
    model = base
    if opset is not None:
        have = _opset_of(base)
        if opset < have:
            raise UserError(f"--opset {opset}: the model has opset {have}; --opset only upgrades")
        if opset > have:
            model = cir.as_written(cir.upgrade_opset(cir.to_proto(base), opset, source.name))
            form = f"opset {opset}"
    fp = cir.fingerprint(model)
    return StackModel(_store_model(model, fp, cache_dir, ".stacks"), fp, form, _opset_of(model))


def _opset_of(model: Any) -> int:
    return int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0)))


def _store_model(model: Any, fp: str, cache_dir: Path, kind: str = "") -> Path:
    """The store entry of ``model`` (fingerprint ``fp``): ``<cache_dir>/models/<fp><kind>/model.onnx``
    (kind ``models`` of :class:`compstack.core.store.Store`).

    The entry is a folder published atomically with a manifest (size and SHA-256 of
    each file, and the fingerprint); an existing entry is verified before it is used,
    and a bad one (truncated, altered, malformed ``meta.json``, another model's
    fingerprint) is replaced. Workers check the same manifest before they load the
    file (:func:`compstack.run.jobs._verify_model_file`).

    Raises:
        UserError: the cache folder is not writable.
    """
    from compstack.core.store import Store

    store, key = Store(cache_dir), f"{fp}{kind}"
    entry, _ = store.lookup("models", key)
    if entry is not None and entry.meta.get("fingerprint") == fp:
        return entry.folder / "model.onnx"
    store.evict("models", key)
    try:
        staging = store.staging("models")
        try:
            cir.save(model, staging / "model.onnx", external_data=cir.prefers_external_data(model) or None,
                     data_name="model.onnx.data")  # large weights streamed, not copied in memory
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        folder = store.publish(staging, "models", key, sorted(staging.iterdir()), {"fingerprint": fp})
        if check_manifest(folder)[0] is None:  # not a concurrent writer's good entry
            raise OSError(f"{folder}: entry failed verification after publish")
    except (OSError, UserError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cache folder {cache_dir}: not writable ({why}); set --cache-dir or "
                        "COMPSTACK_CACHE_DIR") from None
    return folder / "model.onnx"


def _hint_opset(result: Result, stack: StackModel) -> None:
    """A row that did not run the user's older-opset model says how to try the upgraded one."""
    if result.status in ("unsupported", "failed") and result.flags.get("model_form") == "as-written" \
            and stack.opset < cir.DEFAULT_OPSET:
        result.notes.append(f"the stack got the model as written (opset {stack.opset}); --opset "
                            f"{cir.DEFAULT_OPSET} compares it upgraded by the ONNX version converter")


def _needs_common_ir(source: cir.SourceModel, name: str, opts: Mapping[str, str]) -> Result | None:
    """The row of a target that needs the common IR when the source has none: ``unsupported``
    at ``import`` with the converter's reason; None when the target runs the source natively."""
    if not source.import_error:
        return None
    cls = registry.get(name)
    if getattr(cls, "native_framework", "") == source.framework and opts.get("path", "auto") != "translated":
        return None
    return Result(target=name, status="unsupported", stage="import", error=source.import_error,
                  notes=[(f"{name} needs the common IR (ONNX), which could not be built; only a native "
                          f"{source.framework} path runs this model")])


def _ref_of(name: str) -> str:
    return registry.ref(name)


def compare(
    source: cir.SourceModel,
    options: CompareOptions,
    settings: Settings,
    on_start: Callable[[str], None] | None = None,
    on_result: Callable[[Result], None] | None = None,
    save_outputs: Path | None = None,
    save_inputs: Path | None = None,
) -> Report:
    """Compare ``options.targets`` on ``source``.

    Args:
        source: the imported model.
        options: see :class:`CompareOptions`.
        settings: cache folder and database.
        on_start: called with a target name before its job starts (progress display).
        on_result: called with each :class:`~compstack.core.results.Result` as it is known.
        save_inputs: write input set 0 (the compared one) to this ``.npz``.
        save_outputs: write the reference's and every target's outputs to this ``.npz``
            (keys ``<target>::<output>``).

    Returns:
        The :class:`~compstack.core.results.Report`; its rows are already in the database.

    Raises:
        UserError: bad inputs (wrong names, dtypes or shapes), unwritable database.
    """
    sets, origin = input_sets_for(source, options)
    if save_inputs is not None:
        save_npz(save_inputs, sets[0])
    stats = op_stats(source.model)
    db = ResultsDB(settings.db, settings.db_busy_timeout_s)
    work = run_tempdir("compstack-run-")
    try:
        stack = stack_model_file(source, (folder := settings.cache_dir if options.cache else work), options.opset)
        canonical = model_file(source, folder)
    except UserError:
        db.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    ref_name, ref_opts = _pick_reference(source, options.reference)
    try:
        executor, owned = open_executor(options.executor, options.isolate, multi=len(options.targets) > 1)
    except ValueError as exc:
        db.close()
        shutil.rmtree(work, ignore_errors=True)
        raise UserError(str(exc)) from None
    report = Report(
        model={"name": source.name, "fingerprint": source.fingerprint, "nodes": stats.nodes,
               "params": stats.params, "flops": stats.flops, "origin": source.origin,
               "opset": source.model.opset_imports.get("", 0), "stack_form": stack.form,
               "stack_opset": stack.opset, **({"import_error": source.import_error} if source.import_error else {})},
        reference=_reference_info(source, ref_name, ref_opts),
        inputs={"seed": options.seed, "sets": len(sets), "source": origin,
                "arrays": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in sets[0].items()}},
    )
    expected = {v.name or "": v.dtype.numpy() for v in source.model.graph.outputs if v.dtype is not None}
    saved: dict[str, np.ndarray] = {}
    db.run_status(report, "running")
    status = "failed"
    try:
        save_npz(inputs_path := work / "inputs.npz", pack_sets(sets))
        common = job_fields(stack, canonical, inputs_path, settings, options, source)

        def run(name: str, opts: Mapping[str, str], latency: bool, tag: str = "", **over: Any) -> JobOutcome:
            return run_one(executor, common, work, options, name, opts, latency, tag, **over)

        cache = OracleCache.for_model(settings.cache_dir if options.cache else None, stack.fingerprint, sets,
                                      ref_name, ref_opts, source.model, common["op_origins"])
        ref_outputs, ref_note = _run_reference(run, ref_name, ref_opts, report, on_start, cache)
        oracle = checked_oracle(report, ref_outputs, run, stack.path, sets[0], work, _store_model, cache)
        saved.update(_reference_arrays(report, ref_outputs, source))
        for name in options.targets:
            if on_start:
                on_start(name)
            opts = options.target_options.get(name, {})
            result = _needs_common_ir(source, name, opts)
            if result is None:
                outcome, base = run(name, opts, latency=True), default_row(run, name, options, ref_outputs, expected,
                                                                           oracle)  # --tuned: also as it comes
                result = _to_result(outcome, ref_outputs, expected, options, ref_note,
                                    (executor, _eager_job(name, opts, work, common)), oracle, base)
                if result.flags.get("path") != "native":  # a native path compiles the program, not a model form
                    result.flags = {**stack.flags(), **result.flags}  # a translated path may say it ran the canonical
                    _hint_opset(result, stack)
                saved.update({f"{name}::{k}": v for k, v in (outcome.extra.get("outputs") or {}).items()})
            report.results.append(result)
            db.add(report, result)
            if on_result:
                on_result(result)
        status = "done"
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (the CLI turns it into KeyboardInterrupt)
        status = "interrupted"
        raise
    finally:
        db.run_status(report, status)
        db.close()
        if owned:
            executor.close()
        shutil.rmtree(work, ignore_errors=True)
    if save_outputs is not None:
        save_npz(save_outputs, saved)
    report.arrays = saved
    return report


def _reference_arrays(report: Report, ref: Mapping[str, np.ndarray] | None,
                      source: cir.SourceModel) -> dict[str, np.ndarray]:
    """The reference's outputs for ``--save-outputs``, keyed ``<reference>::<output>`` (a JAX
    source's float64 native run as ``xla-cpu@x64``, not the xla-cpu row's key)."""
    key = report.reference.get("target", "reference") + ("@x64" if source.import_error else "")
    return {f"{key}::{k}": v for k, v in (ref or {}).items()}


def job_fields(stack: StackModel, canonical: Path, inputs_path: Path, settings: Settings, options: CompareOptions,
               source: cir.SourceModel) -> dict[str, Any]:
    """The :class:`~compstack.run.jobs.Job` fields every target's job of one model shares,
    for ``compare`` and ``sweep`` alike (one code path: the same model files, cache and
    ``threads``, :func:`compstack.core.threads.requested_threads`)."""
    from compstack.core.threads import requested_threads

    return dict(model_path=str(stack.path), fingerprint=stack.fingerprint, inputs_path=str(inputs_path),
                canonical_path=str(canonical) if canonical != stack.path else "",
                cache_dir=str(settings.cache_dir) if options.cache else None, source=source.spec,
                source_framework=source.framework, op_origins=origins_for(source.model),
                threads=requested_threads(options.threads), tuning_budget_s=options.tuned_budget_s)


def _keep_numerics_of_latency_fault(outcome: JobOutcome) -> None:
    """A worker lost while timing (crash, hang, memory) had already run and written its
    outputs: the row keeps them, to be compared, and says how latency failed
    (``extra["latency_error"]``); the status becomes the numerics verdict."""
    if outcome.status in _LOST and outcome.stage == "latency":
        outcome.extra["latency_error"] = f"{outcome.status}: {outcome.error}"
        outcome.status, outcome.stage, outcome.error = "ok", "", ""


def _load_outputs(job: Job) -> dict[str, np.ndarray] | None:
    if not job.outputs_path.exists():
        return None
    from compstack.core.inputs import decode_arrays

    with np.load(job.outputs_path, allow_pickle=False) as data:
        return decode_arrays({k: data[k] for k in data.files})


def _eager_job(name: str, opts: Mapping[str, str], work: Path, common: Mapping[str, Any]) -> Job:
    """The ``evaluate`` job (mode ``eager``) that runs a translated path's program eagerly,
    for the fault of its mismatch (:func:`compstack.run.faults.eager_check`)."""
    return Job(target=name, target_ref=_ref_of(name), workdir=str(work / f"{name}.eager"), options=dict(opts),
               kind="evaluate", params={"mode": "eager", "request": "run"}, **common)


def run_one(executor: Executor, common: Mapping[str, Any], work: Path, options: CompareOptions, name: str,
            opts: Mapping[str, str], latency: bool, tag: str = "", **over: Any) -> JobOutcome:
    """One job of a comparison (``common``: :func:`job_fields`) for target ``name`` with
    ``opts``, run through ``executor`` under ``options.limits`` in ``work/<name><tag>``
    (``over`` replaces job fields); its outputs in ``extra["outputs"]`` when ok.
    ``latency``: measure with ``options.latency``."""
    job = Job(**{**common, "target": name, "target_ref": _ref_of(name), "workdir": str(work / (name + tag)),
                 "options": dict(opts), "latency": vars(options.latency) if latency and options.latency else None,
                 **over})
    outcome = executor.run(job, options.limits)
    _keep_numerics_of_latency_fault(outcome)
    outcome.extra["outputs"] = _load_outputs(job) if outcome.status == "ok" else None
    return outcome


def _to_result(outcome: JobOutcome, ref: Mapping[str, np.ndarray] | None, expected: Mapping[str, Any],
               options: CompareOptions, ref_note: str, eager: tuple[Executor, Job] | None = None,
               oracle: CheckedOracle | None = None, default: Result | None = None) -> Result:
    """The row of ``outcome``: numerics against ``ref``, notes, peak memory and fault
    (:func:`compstack.run.faults.finish_row`; ``eager`` is the executor and the eager
    ``evaluate`` job of a translated path, run only for its mismatch; ``default``: the
    default run of a ``--tuned`` row, :func:`compstack.run.tuned.attach_default`)."""
    from compstack.run.faults import eager_check, finish_row

    check = None if eager is None else (
        lambda: eager_check(eager[0], eager[1], options.limits, ref, expected, options.rtol, options.atol,
                            oracle))
    return attach_default(finish_row(_numerics_row(outcome, ref, expected, options, ref_note, oracle), outcome,
                                     check, ref_note if ref is None else ""), default, options)


def _numerics_row(outcome: JobOutcome, ref: Mapping[str, np.ndarray] | None, expected: Mapping[str, Any],
                  options: CompareOptions, ref_note: str, oracle: CheckedOracle | None = None) -> Result:
    from compstack.run.rownotes import latency_notes
    from compstack.run.tuned import mark_tuned

    compile_s = None
    if outcome.compile_s is not None:
        compile_s = (outcome.lower_s or 0.0) + outcome.compile_s
    notes = [n for n in (outcome.cache_note, *outcome.extra.get("notes", [])) if n]
    result = Result(target=outcome.target, status=outcome.status, stage=outcome.stage, error=outcome.error,
                    compile_s=compile_s, latency_ms=outcome.latency, versions=outcome.versions,
                    flags=outcome.flags, cached=outcome.cached, unsupported_ops=outcome.unsupported_ops,
                    notes=notes, log=outcome.log)
    latency_error = outcome.extra.get("latency_error", "")
    if latency_error:
        result.latency_error = latency_error
        result.notes.append(f"latency failed (outputs were compared): {latency_error}")
    result.notes.extend(latency_notes(outcome.latency, outcome.flags.get("threads"), options.latency))
    mark_tuned(result, options.tuned)
    if outcome.status != "ok":
        return result
    actual = outcome.extra.get("outputs") or {}
    if ref is None:
        result.status, result.stage = "failed", "compare"
        result.error = f"no reference outputs ({ref_note})"
        return result
    judge_row(result, actual, ref, expected, options.rtol, options.atol, oracle)
    if ref_note and outcome.target == registry.role_target("reference")[0]:
        result.notes.append(f"this stack stood in as the reference ({ref_note[:160]}): its row compares its "
                            "outputs with themselves and says nothing about its numerics")
    return result

