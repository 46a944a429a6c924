"""The comparison: one model, a reference, several targets, each job isolated.

:func:`compare` writes the model once (canonical ONNX under the cache folder), makes
the input sets, runs the reference, then each target in its own worker process
(:mod:`compstack.runner`), compares outputs (:mod:`compstack.compare`) and writes each
result to the database as soon as it is known. A stack that crashes, hangs or runs out
of memory costs its own row only.

Reference choice: the ``reference`` target (``onnx.reference`` in float64) when the
model is small enough (at most :data:`FLOAT64_MAX_FLOPS` FLOPs and
:data:`FLOAT64_MAX_PARAMS` parameters), else ``ort-cpu`` in float32; the report names
which one was used, and falls back to ``ort-cpu`` when the float64 evaluator fails.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from compstack import ir as cir
from compstack import targets as registry
from compstack.compare import compare_outputs
from compstack.config import Settings
from compstack.errors import UserError
from compstack.inputs import check_feeds, input_sets, save_npz
from compstack.jobs import Job, JobOutcome, pack_sets
from compstack.latency import LatencyConfig
from compstack.passes.opstats import op_stats
from compstack.results import Report, Result, ResultsDB
from compstack.runner import Limits, run_inline, run_isolated

__all__ = ["CompareOptions", "compare", "model_file", "FLOAT64_MAX_FLOPS", "FLOAT64_MAX_PARAMS"]

#: Largest model (FLOPs of MatMul/Gemm/Conv) the float64 reference evaluator is used for.
FLOAT64_MAX_FLOPS = 20e9
#: Largest model (parameters) the float64 reference evaluator is used for.
FLOAT64_MAX_PARAMS = 200e6


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
        threads: threads every stack is asked for (None: :func:`compstack.threads.default_threads`,
            the physical cores; 0: each stack's own default); see :mod:`compstack.threads`.
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
    threads: int | None = None


def model_file(source: cir.SourceModel, cache_dir: Path) -> Path:
    """The canonical ONNX file of ``source`` under ``<cache_dir>/models/`` (written once)."""
    fp = source.fingerprint
    path = cache_dir / "models" / f"{fp}.onnx"
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            from compstack.ops._registry import stamp_origins

            stamp_origins(source.model)  # workers import the model's user custom-op declarations
            cir.save(source.model, tmp)
            os.replace(tmp, path)
        except (OSError, UserError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UserError(f"cache folder {cache_dir}: not writable ({why}); set --cache-dir or "
                            "COMPSTACK_CACHE_DIR") from None
    return path


def _pick_reference(source: cir.SourceModel, choice: str) -> tuple[str, dict[str, str]]:
    if choice == "reference":
        return "reference", {"precision": "float64", "outputs": "float64"}
    if choice != "auto":
        return choice, {}
    stats = op_stats(source.model)
    if stats.flops <= FLOAT64_MAX_FLOPS and stats.params <= FLOAT64_MAX_PARAMS:
        return "reference", {"precision": "float64", "outputs": "float64"}
    return "ort-cpu", {}


def _ref_of(name: str) -> str:
    return next(e.ref for e in registry.entries() if e.name == name)


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
        on_result: called with each :class:`~compstack.results.Result` as it is known.
        save_inputs: write input set 0 (the compared one) to this ``.npz``.
        save_outputs: write the reference's and every target's outputs to this ``.npz``
            (keys ``<target>::<output>``).

    Returns:
        The :class:`~compstack.results.Report`; its rows are already in the database.

    Raises:
        UserError: bad inputs (wrong names, dtypes or shapes), unwritable database.
    """
    sets, origin = _make_input_sets(source, options)
    if save_inputs is not None:
        save_npz(save_inputs, sets[0])
    stats = op_stats(source.model)
    db = ResultsDB(settings.db)
    work = Path(tempfile.mkdtemp(prefix="compstack-run-"))
    try:
        model_path = model_file(source, settings.cache_dir if options.cache else work)
    except UserError:
        db.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    ref_name, ref_opts = _pick_reference(source, options.reference)
    report = Report(
        model={"name": source.name, "fingerprint": source.fingerprint, "nodes": stats.nodes,
               "params": stats.params, "flops": stats.flops, "origin": source.origin,
               "opset": source.model.opset_imports.get("", 0)},
        reference={"target": ref_name, **({"precision": ref_opts["precision"]} if ref_opts else {})},
        inputs={"seed": options.seed, "sets": len(sets), "source": origin,
                "arrays": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in sets[0].items()}},
    )
    expected = {v.name: v.dtype.numpy() for v in source.model.graph.outputs if v.dtype is not None}
    saved: dict[str, np.ndarray] = {}
    try:
        inputs_path = work / "inputs.npz"
        save_npz(inputs_path, pack_sets(sets))
        from compstack.threads import default_threads

        common = dict(model_path=str(model_path), fingerprint=source.fingerprint, inputs_path=str(inputs_path),
                      cache_dir=str(settings.cache_dir) if options.cache else None, source=source.spec,
                      source_framework=source.framework,
                      threads=default_threads() if options.threads is None else options.threads)

        def run(name: str, opts: Mapping[str, str], latency: bool) -> JobOutcome:
            job = Job(target=name, target_ref=_ref_of(name), workdir=str(work / name), options=dict(opts),
                      latency=vars(options.latency) if latency and options.latency else None, **common)
            outcome = run_isolated(job, options.limits) if options.isolate else run_inline(job)
            outcome.extra["outputs"] = _load_outputs(job) if outcome.status == "ok" else None
            return outcome

        ref_outputs, ref_note = _run_reference(run, ref_name, ref_opts, report, on_start)
        if ref_outputs is not None:
            saved.update({f"{report.reference['target']}::{k}": v for k, v in ref_outputs.items()})
        for name in options.targets:
            if on_start:
                on_start(name)
            opts = options.target_options.get(name, {})
            outcome = run(name, opts, latency=True)
            result = _to_result(outcome, ref_outputs, expected, options, ref_note)
            outs = outcome.extra.get("outputs")
            if outs:
                saved.update({f"{name}::{k}": v for k, v in outs.items()})
            report.results.append(result)
            db.add(report, result)
            if on_result:
                on_result(result)
    finally:
        db.close()
        shutil.rmtree(work, ignore_errors=True)
    if save_outputs is not None:
        save_npz(save_outputs, saved)
    report.arrays = saved
    return report


def _make_input_sets(source: cir.SourceModel, options: CompareOptions) -> tuple[list[dict[str, np.ndarray]], str]:
    """Input sets and where set 0 came from (``file``, ``model`` or ``generated``).

    ``--inputs`` wins; else the model's own example inputs, unless ``--val-range`` or
    ``--input-shape`` was given, which asks for generated inputs (the model's own value
    ranges still apply to the inputs the flags do not name).

    Raises:
        UserError: the arrays do not fit the model, a flag names no input, or the
            requested inputs do not fit in memory.
    """
    model_inputs = cir.graph_inputs(source.model)
    count = options.latency.input_sets if options.latency else 1
    ranges = {**source.val_ranges, **options.val_ranges}
    first, origin = None, "generated"
    if options.inputs is not None:
        if options.shapes:
            raise UserError("--input-shape has no effect with --inputs (the arrays fix the shapes)")
        check_feeds(model_inputs, options.inputs, "--inputs")
        extra = sorted(set(options.inputs) - {i.name for i in model_inputs})
        if extra:
            raise UserError(f"--inputs: array(s) {', '.join(extra)} match no model input "
                            f"(inputs: {', '.join(i.name for i in model_inputs)})")
        first, origin = options.inputs, "file"
    elif source.example_inputs and not options.val_ranges and not options.shapes:
        first, origin = source.example_inputs, "model"
    try:
        return input_sets(model_inputs, count, options.seed, first, ranges, options.shapes), origin
    except MemoryError:
        raise UserError("the requested input shapes do not fit in memory; check --input-shape") from None


def _load_outputs(job: Job) -> dict[str, np.ndarray] | None:
    if not job.outputs_path.exists():
        return None
    from compstack.inputs import decode_arrays

    with np.load(job.outputs_path, allow_pickle=False) as data:
        return decode_arrays({k: data[k] for k in data.files})


def _run_reference(run: Callable[..., JobOutcome], name: str, opts: Mapping[str, str], report: Report,
                   on_start: Callable[[str], None] | None) -> tuple[dict[str, np.ndarray] | None, str]:
    if on_start:
        on_start(f"reference ({name})")
    outcome = run(name, opts, latency=False)
    if outcome.status == "ok":
        return outcome.extra["outputs"], ""
    note = f"reference {name} {outcome.status} in {outcome.stage}: {outcome.error}"
    report.reference["error"] = note
    if name != "ort-cpu":
        fallback = run("ort-cpu", {}, latency=False)
        if fallback.status == "ok":
            report.reference.update({"target": "ort-cpu", "fallback_from": name})
            report.reference.pop("precision", None)
            return fallback.extra["outputs"], note
    return None, note


def _to_result(outcome: JobOutcome, ref: Mapping[str, np.ndarray] | None, expected: Mapping[str, Any],
               options: CompareOptions, ref_note: str) -> Result:
    compile_s = None
    if outcome.compile_s is not None:
        compile_s = (outcome.lower_s or 0.0) + outcome.compile_s
    notes = [n for n in (outcome.cache_note, *outcome.extra.get("notes", [])) if n]
    result = Result(target=outcome.target, status=outcome.status, stage=outcome.stage, error=outcome.error,
                    compile_s=compile_s, latency_ms=outcome.latency, versions=outcome.versions,
                    flags=outcome.flags, cached=outcome.cached, unsupported_ops=outcome.unsupported_ops,
                    notes=notes, log=outcome.log)
    lat = outcome.latency
    if lat and lat.get("noisy"):
        result.notes.append(f"latency CV {lat['cv']:.1%} > 2.5 %: noisy measurement (std/mean; p10-p90 shows "
                            "the spread without outliers)")
    if lat and lat.get("unstable"):
        result.notes.append(f"latency IQR/median {lat['iqr_rel']:.1%} > 5 %: unstable measurement (robust spread; "
                            "not one outlier)")
    if lat and lat.get("busy"):
        result.notes.append(f"machine busy: load average {lat['load_before']:.2f} before / "
                            f"{lat['load_after']:.2f} after the timed loop on {lat['cpus']} CPUs; "
                            "latency includes waiting for a CPU")
    if lat and options.latency and lat.get("runs", 0) < options.latency.min_runs:
        result.notes.append(f"latency from {lat['runs']} runs only: the {options.latency.max_time_s:g} s cap "
                            f"came before --min-runs {options.latency.min_runs}")
    if outcome.status != "ok":
        return result
    actual = outcome.extra.get("outputs") or {}
    if ref is None:
        result.status, result.stage = "failed", "compare"
        result.error = f"no reference outputs ({ref_note})"
        return result
    comps = compare_outputs(actual, ref, expected, options.rtol, options.atol)
    result.outputs = [c.to_dict() for c in comps]
    bad = [c for c in comps if not c.ok]
    if bad:
        result.status, result.stage = "mismatch", "compare"
        result.error = "; ".join(f"{c.name}: {c.reason} (max abs err {c.max_abs_err:.3g})" for c in bad[:3])
    return result

