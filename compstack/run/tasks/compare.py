"""Task ``compare`` (also ``lower -o``): lower → compile (or the cached artifact) → run →
latency in the worker; the comparison against the reference happens in the parent
(:mod:`compstack.run.session`). Results: the ``JobOutcome`` fields (``lower_s``,
``compile_s``, ``latency``, ``cached``...), the outputs in ``job.outputs_path``.

A long-lived worker (the pool and daemon executors) keeps its last :data:`REUSE_KEEP`
compiled programs of targets that have no artifact in the store (XLA and Inductor:
``cacheable`` False) in memory, keyed by what the artifact cache keys on (model
fingerprint, target, options, versions) plus threads and the model source: a later job
with the same key runs that program without loading the model, rebuilding the framework
program or compiling again (``cached`` true, ``cache_note`` says so, ``compile_s`` the
original compile's). Targets with an artifact in the store load it, verified, on every
job instead. Only when the job may use a cache (not ``--no-cache``), writes no stages or
artifact, and the target does not say ``reusable = False`` (the framework targets, whose
every run starts the framework's process).
"""

from __future__ import annotations

import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compstack.core.errors import UnavailableError, UnsupportedError, UserError
from compstack.run.jobs import (
    Job,
    JobOutcome,
    _first_line,
    _pending_stage,
    load_sets,
    record_thread_use,
    write_stages,
)

__all__ = ["MODEL_TASK", "REUSE_KEEP", "has_kept", "records_stages", "run"]

_load_sets = load_sets
#: Compiled programs a worker keeps for later jobs (see the module docstring).
REUSE_KEEP = 2
_REUSE: OrderedDict[str, tuple[Any, dict[str, Any]]] = OrderedDict()


def _reuse_key(job: Job, cls: Any, options: Any, versions: dict[str, str]) -> str | None:
    """The in-memory key of ``job``'s compiled program on target class ``cls`` with
    ``options``, or None when it may not be kept (see the module docstring)."""
    from compstack.core.store import cache_key

    if not (job.cache_dir and job.run and job.stages_dir is None and job.artifact_dir is None
            and not cls.cacheable and getattr(cls, "reusable", True)):
        return None
    return cache_key(job.fingerprint, job.target, {**options.to_dict(), "__threads": str(job.threads),
                                                   "__source": job.source, "__ops": ",".join(job.op_origins)},
                     versions)


def has_kept(job: Job, cls: Any, options: Any, versions: dict[str, str]) -> bool:
    """Whether this worker keeps a compiled program for ``job``: then the worker loads no
    model and rebuilds no framework program (:func:`run` gets ``model=None``)."""
    key = _reuse_key(job, cls, options, versions)
    return key is not None and key in _REUSE


def _reused(key: str | None, outcome: JobOutcome) -> Any:
    """The kept program for ``key`` (None when there is none), with the first job's flags,
    times and tuning on ``outcome``."""
    if key is None or key not in _REUSE:
        return None
    _REUSE.move_to_end(key)
    compiled, first = _REUSE[key]
    threads = outcome.flags.get("threads")
    outcome.flags = {**first["flags"], "threads": threads}
    outcome.lower_s, outcome.compile_s = first["lower_s"], first["compile_s"]
    outcome.cached = True
    outcome.cache_note = "compiled program kept in memory by this long-lived worker (compiled once, run again)"
    return compiled


def _keep(key: str | None, compiled: Any, outcome: JobOutcome) -> None:
    if key is None:
        return
    flags = {k: v for k, v in outcome.flags.items() if k != "threads"}
    _REUSE[key] = (compiled, {"flags": flags, "lower_s": outcome.lower_s, "compile_s": outcome.compile_s})
    while len(_REUSE) > REUSE_KEEP:
        _REUSE.popitem(last=False)


#: The worker loads the job's model and source before building the target
#: (:func:`compstack.run.jobs.load_job_model`) and passes the model to :func:`run`.
MODEL_TASK = True


def records_stages(job: Job) -> bool:
    """Whether the target is built with ``record_stages`` (``lower -o`` writes stages)."""
    return bool(job.stages_dir)


def run(job: Job, target: Any, outcome: JobOutcome, stage: Callable[[str], None], avail: Any,
        model: Any = None) -> None:
    """lower → compile (or the cached artifact, or the program this worker kept) → run →
    latency; ``lower -o`` writes stages and the artifact instead of running. ``model`` is
    the job's ``onnx_ir.Model``, loaded by the worker (None when :func:`has_kept`). A
    stack's exception propagates to
    :func:`compstack.run.worker.execute`, which makes it the outcome; the outputs of
    input set 0 go to ``job.outputs_path`` (``.npz``, :func:`compstack.core.inputs.encode_arrays`)."""
    from compstack.core import peakmem

    peakmem.reset_hwm()  # a pool worker's earlier jobs are not this row's peak
    kids = peakmem.children_peak_mb()
    reuse = _reuse_key(job, type(target), target.options, outcome.versions)
    compiled = _reused(reuse, outcome)
    inputs = _load_sets(job.inputs_path)
    _check_dtypes(target, inputs[0] if inputs else {})
    if compiled is None:
        compiled = _compile(job, target, model, outcome, stage)
        _keep(reuse, compiled, outcome)
    child = peakmem.children_peak_mb()
    outcome.extra["peak_rss_compile_mb"] = round(max(peakmem.hwm_mb(), child if child > kids else 0.0), 1)
    _write_partial(job, outcome)  # a worker lost from here on keeps compile_s and this peak
    if job.artifact_dir:
        outcome.artifacts = [str(p) for p in compiled.save(Path(job.artifact_dir))]
    if getattr(compiled, "run_command", None):
        outcome.extra["run_command"] = compiled.run_command
    if not job.run:
        return
    _run_and_time(job, target, compiled, inputs, outcome, stage, avail)


def _compile(job: Job, target: Any, model: Any, outcome: JobOutcome, stage: Callable[[str], None]) -> Any:
    """The job's compiled program for ``model`` (loaded by the worker): the cached
    artifact, or lower → compile (publishing the artifact)."""
    from compstack.core.store import ArtifactCache, cache_key

    cacheable = job.cache_dir and target.cacheable and target.native is None
    cache = ArtifactCache(Path(job.cache_dir) / "artifacts") if cacheable and job.cache_dir else None
    key = cache_key(job.fingerprint, job.target, target.options.to_dict(), outcome.versions)
    compiled = None
    if cache is not None and job.stages_dir is None:
        compiled = _from_cache(cache, target, key, model, outcome)
    if compiled is None:
        stage("lower")
        lowered = target.lower(model)
        outcome.lower_s = lowered.lower_s
        if job.stages_dir:
            _write_all(lowered, Path(job.stages_dir), outcome)
        stage("compile")
        try:
            compiled = lowered.compile()
        except Exception:
            outcome.extra["failed_stage"] = "compile"
            raise
        outcome.compile_s = compiled.compile_s
        _record_tuning(outcome, compiled)
        if job.stages_dir:
            _write_all(lowered, Path(job.stages_dir), outcome, compiled)
        if cache is not None:
            _to_cache(cache, target, key, compiled, job, outcome)
    return compiled


def _run_and_time(job: Job, target: Any, compiled: Any, inputs: list[dict[str, np.ndarray]], outcome: JobOutcome,
                  stage: Callable[[str], None], avail: Any) -> None:
    """Run input set 0 (outputs to ``job.outputs_path``), then the latency protocol."""
    from compstack.core import peakmem
    from compstack.core.latency import LatencyConfig, measure

    stage("run")
    if not avail.runs:
        raise UnavailableError(f"compiled; cannot run here: {avail.run_reason}")
    resets = peakmem.reset_hwm()
    t0 = time.perf_counter()
    outputs = compiled.run(inputs[0])
    first_run_s = time.perf_counter() - t0
    from compstack.core.inputs import encode_arrays

    np.savez(job.outputs_path, **encode_arrays(outputs))  # type: ignore[arg-type]  # numpy stubs: ** may bind allow_pickle
    _run_peak(outcome, resets)
    _write_partial(job, outcome)
    if job.latency is not None and not getattr(target, "measures_latency", True):
        outcome.extra.setdefault("notes", []).append(
            "no latency: each run starts the framework's own process (seconds of import, not the model's time)")
    elif job.latency is not None:
        stage("latency")
        try:
            calls = [compiled.prepare(s) for s in inputs]
            outcome.latency = measure(calls, LatencyConfig(**job.latency), _deadline(job), first_run_s).to_dict()
            record_thread_use(outcome, outcome.latency)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - the stack failed while timing: the outputs above still count
            outcome.extra["latency_error"] = _first_line(exc)
            outcome.log = traceback.format_exc()
        _run_peak(outcome, resets)


#: Seconds (at least) of the job's limit kept free after the latency phase, for writing
#: the result; also at least :data:`DEADLINE_MARGIN_SHARE` of the limit, at most a quarter of it.
DEADLINE_MARGIN_S = 10.0
DEADLINE_MARGIN_SHARE = 0.05


def _deadline(job: Job) -> float | None:
    """``time.monotonic()`` value the latency phase must end by: the job's start (its
    progress file) plus ``job.time_limit_s``, less a margin; None without a limit."""
    if not job.time_limit_s:
        return None
    started = job.started_at() or time.time()
    # never more than a quarter of a short limit (a 10 s --timeout keeps 7.5 s to measure)
    margin = min(max(DEADLINE_MARGIN_S, DEADLINE_MARGIN_SHARE * job.time_limit_s), job.time_limit_s / 4)
    return time.monotonic() + (started + job.time_limit_s - margin - time.time())


def _run_peak(outcome: JobOutcome, resets: bool) -> None:
    """The run phase's peak RSS (MiB) since the reset before it; None where the mark
    could not be reset (it would include the compile)."""
    from compstack.core import peakmem

    outcome.extra["peak_rss_run_mb"] = round(peakmem.hwm_mb(), 1) if resets else None


def _write_partial(job: Job, outcome: JobOutcome) -> None:
    """What is measured so far, for the executor to keep should the worker be lost in
    the latency phase (:attr:`Job.partial_path`); a folder that cannot be written
    loses only that safeguard."""
    from compstack.core.integrity import atomic_write
    from compstack.run.jobs import outcome_to_json

    try:
        atomic_write(job.partial_path, outcome_to_json(outcome))
    except OSError:
        pass


def _record_tuning(outcome: JobOutcome, compiled: Any) -> None:
    """Auto-tuning done inside the compile (``Compiled.tuning``): its time apart from
    the compile time, in ``flags["tuning"]``."""
    tuning = getattr(compiled, "tuning", None)
    if tuning:
        tuning = dict(tuning)
        outcome.flags.update(tuning.pop("row_flags", {}))  # what the search changed in the row's own flags
        outcome.flags["tuning"] = {**outcome.flags.get("tuning", {}), **tuning, "tune_s": compiled.tune_s}
        if "records" in tuning:  # tuning that produced no records applied nothing
            outcome.flags["tuned"] = tuning["records"] > 0


def _check_dtypes(target: Any, arrays: dict[str, np.ndarray]) -> None:
    """An input dtype the target does not take (``Target.supported_dtypes``) makes the
    row ``unsupported``, naming the input, rather than a crash inside the stack."""
    for name, arr in arrays.items():
        dtype = "object" if arr.dtype == object else arr.dtype.name
        if dtype not in target.supported_dtypes:
            raise UnsupportedError(f"{target.name}: input '{name}' is {dtype}, which this target does not take")


def _from_cache(cache: Any, target: Any, key: str, model: Any, outcome: JobOutcome) -> Any:
    entry, note = cache.lookup(target.name, key)
    outcome.cache_note = note
    if entry is None:
        return None
    try:
        compiled = target.load_compiled(entry.folder, model)
    except Exception as exc:  # noqa: BLE001 - an unloadable entry is rebuilt
        cache.evict(target.name, key)
        outcome.cache_note = f"cache entry {entry.folder} did not load ({_first_line(exc)}); rebuilt"
        return None
    outcome.cached = True
    outcome.compile_s = entry.meta.get("compile_s")
    outcome.lower_s = entry.meta.get("lower_s")
    if entry.meta.get("tuning"):
        outcome.flags["tuning"] = {**entry.meta["tuning"], "from_cache": True}
    return compiled


def _to_cache(cache: Any, target: Any, key: str, compiled: Any, job: Job, outcome: JobOutcome) -> None:
    """Publish the artifact; a store that cannot be written (full disk, read-only
    folder) is a note on the row, never its status: the compile itself succeeded."""
    try:
        staging = cache.staging(target.name)
    except OSError as exc:
        outcome.cache_note = f"artifact not cached: {exc.strerror or exc}"
        return
    try:
        files = compiled.save(staging)
        cache.publish(staging, target.name, key, files,
                      {"target": target.name, "fingerprint": job.fingerprint, "compile_s": compiled.compile_s,
                       "lower_s": outcome.lower_s,  # a cached row's compile time is lower + compile, as the first
                       "flags": target.flags(),
                       "tuning": {**getattr(compiled, "tuning", {}), "tune_s": compiled.tune_s}
                       if getattr(compiled, "tuning", None) else None})
    except OSError as exc:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        outcome.cache_note = f"artifact not cached: {exc.strerror or exc}"


def _write_all(lowered: Any, folder: Path, outcome: JobOutcome, compiled: Any = None) -> None:
    """:func:`write_stages` into ``outcome.stages``; a stage whose text fails (IREE makes
    each phase on demand) is named in ``outcome.extra["failed_stage"]``, and the stages
    written before it stay listed."""
    try:
        write_stages(lowered, folder, outcome.stages, compiled)
    except Exception:
        outcome.extra["failed_stage"] = _pending_stage(lowered, outcome.stages, compiled)
        raise
