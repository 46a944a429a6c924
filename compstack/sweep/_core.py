"""The sweep: models x targets through the jobs of :mod:`compstack.run.session`, in two phases.

Phase 1 runs every (model, target) job and each model's reference with latency off, as
many at a time as the executor has slots. Models are prepared (imported, exported, their
inputs written) one at a time, in the driver, whenever a slot would otherwise go idle: the
next model's export runs while the jobs of the ones before it do. Phase 2 measures latency of each job that came
out ``ok``, **one job at a time per node** (locally: one at a time), so no compstack job
runs beside a measurement. A row is written to the results database as soon as it is
final: a row that is not ``ok`` after phase 1 at once, an ``ok`` row after its latency
(or at once with ``--no-latency``); rows still waiting for latency when the sweep is
interrupted are written with ``latency_error`` saying so.

The pieces are :func:`compstack.run.session.compare`'s (input sets, the stacks' model file,
reference choice, the comparison of outputs, the row); only the scheduling differs.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from compstack import targets as registry
from compstack.analysis.opstats import op_stats
from compstack.core.config import Settings
from compstack.core.errors import UserError
from compstack.core.inputs import input_sets_for, save_npz
from compstack.core.procs import run_tempdir
from compstack.core.results import Report, Result, ResultsDB
from compstack.run import session as S
from compstack.run.faults import set_fault
from compstack.run.jobs import Job, JobOutcome, pack_sets
from compstack.run.oracle_cache import OracleCache, inputs_digest
from compstack.run.refchoice import fall_back, reference_note
from compstack.run.runner import Limits
from compstack.sweep import _warm
from compstack.sweep._rowstore import DETERMINISTIC, Reuse, RowStore

__all__ = ["DETERMINISTIC", "Executor", "JobKey", "Sweep", "SweepOptions", "run_sweep"]

#: (model index, target name; ``""`` for the model's reference).
JobKey = tuple[int, str]


class Executor(Protocol):
    """Runs jobs; :class:`compstack.sweep.LocalExecutor` and :class:`compstack.sweep.RayExecutor`."""

    name: str

    def run(self, jobs: list[tuple[JobKey, Job]], limits: Limits, exclusive: bool,
            on_start: Callable[..., None], on_done: Callable[..., None],
            more: Callable[[], list[tuple[JobKey, Job]] | None] | None = None) -> None:
        """Run every job, calling ``on_done`` (in this thread) as each ends; ``exclusive``:
        one job at a time per node (latency). ``more``, called in this thread when a slot
        would go idle, returns the next jobs (``None``: no more). ``on_start(key, at)`` and
        ``on_done(key, outcome, at)``: ``at`` is when the job started or ended
        (``time.monotonic()``; this thread hears late while ``more`` prepares a model), or
        left out for now. Outputs must be at ``job.outputs_path``."""

    def describe(self) -> dict[str, Any]:
        """What ran the jobs (nodes, slots), for the report."""

    def close(self) -> None:
        """Release the executor (a Ray cluster it started)."""


@dataclass
class SweepOptions:
    """A sweep's settings.

    Attributes:
        models: expanded model specs (:func:`compstack.sweep.expand_models`).
        compare: the per-model options (targets, inputs, tolerances, latency, limits).
        baseline: the target latency ratios and speedups are taken against (default:
            the registry's ``baseline`` target).
        resume: skip jobs the database already has (see :data:`DETERMINISTIC`).
        cache_max_bytes: after each model's last row, prune the store's models, zoo
            exports and artifacts, least recently used first, to at most this many bytes
            (``--cache-max-size``; None: no bound). A real tier's store is several times
            its weights per stack (the whole tier: over 150 GB).
        cache_results: read and write judged rows in the store (``--no-cache-results``:
            run every job; :mod:`compstack.sweep._rowstore`).
    """

    models: list[str]
    compare: S.CompareOptions
    baseline: str = field(default_factory=lambda: registry.role_target("baseline")[0])
    resume: bool = False
    cache_max_bytes: int | None = None
    cache_results: bool = True


@dataclass
class _Model:
    """One model of the sweep, prepared in the driver."""

    index: int
    spec: str
    report: Report
    work: Path
    stack: S.StackModel | None = None
    source: Any = None
    common: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    ref: tuple[str, dict[str, str]] = ("reference", {})
    ref_outputs: Any = None
    ref_note: str = ""
    ref_done: bool = False
    left: int = 0  # target jobs whose row is not made yet: at 0 the reference outputs are let go
    feeds: dict[str, Any] = field(default_factory=dict)  # input set 0 (the compared one), for the oracle
    oracle: Any = None  # the float64 reference's CheckedOracle (noise floor, UB rules, second opinion)
    waiting: dict[str, JobOutcome] = field(default_factory=dict)  # target outcomes waiting for the reference
    cache: Any = None  # the oracle's store entries (compstack.run.oracle_cache.OracleCache)
    row_keys: dict[str, str | None] = field(default_factory=dict)  # target -> its stored row's key
    digest: str = ""  # SHA-256 of input set 0, the one the rows judge (the latency sets are not)


@dataclass
class Sweep:
    """A finished (or interrupted) sweep: its id, the rows by model, and how it ran."""

    sweep_id: str
    models: list[dict[str, Any]]
    targets: list[str]
    baseline: str
    rows: dict[tuple[str, str], Result]
    executor: dict[str, Any]
    wall_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    jobs_run: int = 0
    resumed: int = 0
    stored: int = 0
    job_times: dict[str, float] = field(default_factory=dict)
    references: dict[str, dict[str, Any]] = field(default_factory=dict)  # spec -> the report's ``reference``
    warnings: list[str] = field(default_factory=list)
    status: str = "done"


def _new_id() -> str:
    return "sw-" + uuid.uuid4().hex[:10]


class _Runner:
    """Holds the sweep's state while the executor calls back."""

    def __init__(self, options: SweepOptions, settings: Settings, executor: Executor,
                 progress: Any = None) -> None:
        self.o, self.cfg, self.ex, self.progress = options, settings, executor, progress
        self.copts = options.compare
        self.sweep_id = _new_id()
        self.db = ResultsDB(settings.db, settings.db_busy_timeout_s)
        self.work = run_tempdir("compstack-sweep-")
        self.models: list[_Model] = []
        self.rows: dict[tuple[str, str], Result] = {}
        self.pending_latency: dict[JobKey, tuple[Result, Job]] = {}
        self.jobs_run = 0
        self.resumed = self.stored = 0
        self.pruned = 0
        self.job_times: dict[str, float] = {}
        self._started: dict[JobKey, float] = {}
        from compstack.core.threads import default_threads

        c = self.copts
        rows = RowStore(settings.cache_dir if c.cache and options.cache_results else None, {
            "rtol": c.rtol, "atol": c.atol, "threads": default_threads() if c.threads is None else c.threads,
            "memory_mb": c.limits.memory_mb, "tuned": dict(c.tuned), "budget_s": c.tuned_budget_s})
        self.reuse = Reuse(self.db, options.resume, c.targets, rows)

    # ---- preparation ---------------------------------------------------------------
    def prepare(self, spec: str, index: int) -> _Model:
        """Import the model, write its stack model and inputs; a model that does not
        import becomes ``failed`` rows at ``import``."""
        work = self.work / f"m{index}"
        work.mkdir()
        report = Report(model={"name": spec, "fingerprint": ""}, reference={})
        m = _Model(index, spec, report, work)
        try:
            from compstack.frontends.sources import resolve_model

            source = resolve_model(spec, cache_dir=self.cfg.cache_dir, partial=True)
        except UserError as exc:
            report.model["import_error"] = str(exc)
            report.model["import_stage"] = getattr(exc, "stage", "import")  # torch.export, onnx-export, build
            report.model["import_status"] = getattr(exc, "status", "failed")  # crashed/timeout: a lost export worker
            return m
        m.source = source
        sets, origin = input_sets_for(source, self.copts)
        stats = op_stats(source.model)
        folder = self.cfg.cache_dir if self.copts.cache else work
        m.stack = S.stack_model_file(source, folder, self.copts.opset)
        canonical = S.model_file(source, folder)
        m.ref = S._pick_reference(source, self.copts.reference)
        report.model = {"name": spec, "spec": spec, "source_name": source.name, "fingerprint": source.fingerprint,
                        "nodes": stats.nodes,
                        "params": stats.params, "flops": stats.flops, "origin": source.origin,
                        "stack_form": m.stack.form, "stack_opset": m.stack.opset,
                        **({"import_error": source.import_error} if source.import_error else {})}
        report.reference = S._reference_info(source, *m.ref)
        report.inputs = {"seed": self.copts.seed, "sets": len(sets), "source": origin}
        m.expected = {str(v.name): v.dtype.numpy() for v in source.model.graph.outputs if v.dtype is not None}
        inputs_path = work / "inputs.npz"
        save_npz(inputs_path, pack_sets(sets))
        m.feeds, m.digest = dict(sets[0]), inputs_digest(sets[:1])
        m.common = S.job_fields(m.stack, canonical, inputs_path, self.cfg, self.copts, source)
        m.cache = OracleCache.for_model(self.cfg.cache_dir if self.copts.cache else None, m.stack.fingerprint, sets,
                                        *m.ref, source.model, m.common["op_origins"])
        return m

    def job(self, m: _Model, name: str, opts: Mapping[str, str], latency: bool, tag: str = "") -> Job:
        lat = vars(self.copts.latency) if latency and self.copts.latency else None
        return Job(target=name, target_ref=S._ref_of(name), workdir=str(m.work / (tag or name or "ref")),
                   options=dict(opts), latency=lat, **m.common)

    # ---- results -------------------------------------------------------------------
    def record(self, m: _Model, result: Result, resumed_from: int | None = None) -> None:
        """Write a final row now (tagged with the sweep) and show it."""
        self.rows[(m.spec, result.target)] = result
        m.report.results.append(result)
        opts = self.copts.target_options.get(result.target, {})
        self.db.add(m.report, result, self.sweep_id, dict(opts), resumed_from)
        if self.progress is not None:
            self.progress.done(m.spec, result)

    def run_now(self, m: _Model, name: str, opts: Mapping[str, str], latency: bool, tag: str = "",
                **over: Any) -> JobOutcome:
        """One job of model ``m`` run at once in its own worker process, outside the
        executor's slots: the oracle's float64 second opinion and a translated path's eager
        check (compare's ``run``), needed only for a row beyond tolerance."""
        from compstack.run.executors import ProcessExecutor

        return S.run_one(ProcessExecutor(), m.common, m.work, self.copts, name, opts, latency, tag, **over)

    def finish_target(self, m: _Model, name: str, outcome: JobOutcome) -> None:
        """Turn a phase-1 outcome into a row once the reference is known: judged as compare
        judges (the float64 reference's noise floor and checks; a translated path's eager
        check for its mismatch)."""
        from compstack.run.executors import ProcessExecutor

        no_latency = replace(self.copts, latency=None)
        opts = self.copts.target_options.get(name, {})
        eager = (ProcessExecutor(), S._eager_job(name, opts, m.work, m.common))
        result = S._to_result(outcome, m.ref_outputs, m.expected, no_latency, m.ref_note, eager, m.oracle)
        if result.flags.get("path") != "native" and m.stack is not None:
            result.flags = {**m.stack.flags(), **result.flags}
            S._hint_opset(result, m.stack)
        m.left -= 1
        if m.left <= 0:  # every target compared: a real model's float64 outputs are large (GPT-2 logits 51 MB),
            m.ref_outputs, m.oracle = None, None  # and the oracle's float32/float64 intermediates larger
            self.bound_store()
        if result.status in DETERMINISTIC and not m.ref_note:  # judged by the model's own reference
            self.reuse.rows.put(m.row_keys.get(name), result, self.sweep_id)
        self.later(m, name, opts, result)

    def later(self, m: _Model, name: str, opts: Mapping[str, str], result: Result) -> None:
        """Record a judged row now, or, when it is ``ok`` and latency is on, after its timing."""
        if result.status == "ok" and self.copts.latency is not None:
            self.pending_latency[(m.index, name)] = (result, self.job(m, name, opts, True, tag=f"{name}.latency"))
            return
        self.record(m, result)

    def bound_store(self) -> None:
        """``--cache-max-size``: prune the store's per-model kinds to the bound (LRU): compiled
        artifacts and oracle entries first, then model exports (stored rows are never pruned)."""
        if self.o.cache_max_bytes is None:
            return
        from compstack.core.store import open_store

        live = [Path(f).resolve() for m in self.models if m.left > 0 or not m.ref_done  # a model still in flight
                for f in (m.common.get("model_path"), m.common.get("canonical_path")) if f]
        gone = bound(open_store(self.cfg.cache_dir), self.o.cache_max_bytes,
                     lambda e: any(f.is_relative_to(e.path.resolve()) for f in live))
        self.pruned += len(gone)
        if gone and self.progress is not None:
            self.progress.note(f"--cache-max-size: pruned {len(gone)} store entries "
                                 f"({sum(g.bytes for g in gone) / 1e6:,.0f} MB)")

    def on_start(self, key: JobKey, at: float | None = None) -> None:
        """A job started at ``at`` (``time.monotonic()``; default now: this thread may hear late)."""
        self._started[key] = time.monotonic() if at is None else at
        if self.progress is not None:
            self.progress.started(key, self.models[key[0]].spec if isinstance(key, tuple) else "", at)

    def on_done(self, key: JobKey, outcome: JobOutcome, at: float | None = None) -> None:
        """Phase 1: a job ended (at ``at``, as :meth:`on_start`)."""
        self._timing(key, outcome, at=at)
        m = self.models[key[0]]
        S._keep_numerics_of_latency_fault(outcome)
        job_dir = m.work / (key[1] or "ref")
        outcome.extra["outputs"] = S._load_outputs(_dir_job(job_dir)) if outcome.status == "ok" else None
        if key[1] == "":
            self._reference_done(m, outcome)
        elif not m.ref_done:
            m.waiting[key[1]] = outcome
        else:
            self.finish_target(m, key[1], outcome)

    def _timing(self, key: JobKey, outcome: JobOutcome, phase: str = "run", at: float | None = None) -> None:
        self.jobs_run += 1
        t0, end = self._started.pop(key, None), time.monotonic() if at is None else at
        if t0 is not None:
            self.job_times[f"{self.models[key[0]].spec}|{key[1] or 'reference'}|{phase}"] = end - t0
        if self.progress is not None:
            self.progress.finished(key, outcome.status)

    def _reference_done(self, m: _Model, outcome: JobOutcome) -> None:
        name, opts = m.ref
        if m.cache is not None:
            m.cache.keep_reference(outcome)
        if outcome.status != "ok" and m.stack is not None:  # as compare falls back
            outcome, m.ref_note = fall_back(lambda n, o: self.run_now(m, n, o, False, ".reference"), name, outcome,
                                            m.report)
        if outcome.status == "ok":
            from compstack.run.oracle import checked_oracle

            m.ref_outputs = outcome.extra["outputs"]
            if m.stack is not None:
                run = lambda *a, **k: self.run_now(m, *a, **k)  # noqa: E731 - compare's run(target, opts, latency, ...)
                m.oracle = checked_oracle(m.report, m.ref_outputs, run, m.stack.path, m.feeds, m.work / "oracle",
                                          S._store_model, m.cache)
        else:
            m.ref_note = m.report.reference["error"] = m.ref_note or reference_note(name, outcome)
        m.feeds = {}  # the oracle keeps its own copy
        m.ref_done = True
        for target, waiting in list(m.waiting.items()):
            self.finish_target(m, target, waiting)
        m.waiting.clear()

    def on_latency(self, key: JobKey, outcome: JobOutcome, at: float | None = None) -> None:
        """Phase 2: a latency job ended; the row keeps phase 1's numerics."""
        self._timing(key, outcome, "latency", at)
        result, _ = self.pending_latency.pop(key)
        if outcome.status == "ok" and not outcome.extra.get("latency_error"):
            result.latency_ms = outcome.latency
            lat = outcome.latency or {}
            if lat.get("noisy"):
                result.notes.append(f"latency CV {lat['cv']:.1%} > 2.5 %: noisy measurement")
            from compstack.core.latency import oversubscription_note

            if oversubscription_note(lat, outcome.flags.get("threads")):
                result.notes.append(oversubscription_note(lat, outcome.flags.get("threads")))
        else:
            why = outcome.extra.get("latency_error") or f"{outcome.status} in {outcome.stage}: {outcome.error}"
            result.latency_error = why
            result.notes.append(f"latency failed (outputs were compared): {why}")
        self.record(self.models[key[0]], result)

    def flush_pending(self, why: str) -> None:
        """Write rows still waiting for latency (the sweep was interrupted)."""
        for (idx, _), (result, _) in list(self.pending_latency.items()):
            result.latency_error = why
            self.record(self.models[idx], result)
        self.pending_latency.clear()


def _dir_job(folder: Path) -> Any:
    class _J:  # only outputs_path is read
        outputs_path = folder / "outputs.npz"

    return _J()


def bound(store: Any, cap: int, keep: Callable[[Any], bool]) -> list[Any]:
    """Prune ``store`` (a :class:`compstack.core.store.Store`) until its per-model kinds hold at
    most ``cap`` bytes, never an entry ``keep`` says is in use: compiled artifacts and oracle
    entries first (LRU), then canonical models and zoo exports (LRU). A later sweep reads its
    stored rows without artifacts or oracle entries, but needs each model's export to find them,
    and an export costs a torch.export (minutes for a large model) where an artifact costs a
    compile. Stored rows are never pruned. Returns the entries deleted."""
    gone: list[Any] = []
    for first, then in ((("artifacts", "oracle"), ("models", "zoo")), (("models", "zoo"), ("artifacts", "oracle"))):
        rest = sum(e.bytes for k in then for e in store.entries(k))
        gone += store.prune(max_bytes=max(0, cap - rest), kinds=first, keep=keep)
    return gone


def run_sweep(options: SweepOptions, settings: Settings, executor: Executor, progress: Any = None) -> Sweep:
    """Run the sweep (see the module docstring) and return it; every row is already in
    the database, tagged with the sweep's id, and the ``sweeps`` table has its entry.

    Raises:
        UserError: bad input found while preparing (inputs that do not fit a model,
            an unwritable cache or database).
    """
    r = _Runner(options, settings, executor, progress)
    t0 = time.monotonic()
    sweep = Sweep(r.sweep_id, [], list(options.compare.targets), options.baseline, r.rows, {})
    entry = {"sweep_id": r.sweep_id, "started": time.time(), "status": "running", "executor": executor.name,
             "models_json": json.dumps(options.models), "targets_json": json.dumps(options.compare.targets),
             "baseline": options.baseline}
    r.db.sweep_status(entry)
    try:
        plan = _plan(r, options)
        prepare_s = 0.0

        def more() -> list[tuple[JobKey, Job]] | None:
            """The next model's jobs, prepared now (its export, while earlier jobs run)."""
            nonlocal prepare_s
            t = time.monotonic()
            new = next(plan, None)
            prepare_s += time.monotonic() - t
            if new is not None and progress is not None:
                progress.more(len(new), f"jobs ({r.resumed} resumed, {r.stored} stored)")
            return new

        if progress is not None:
            progress.begin(0, 0)
        t1 = time.monotonic()
        executor.run([], options.compare.limits, False, r.on_start, r.on_done, more)
        sweep.phases["prepare_s"] = prepare_s  # overlapped with phase 1's jobs
        sweep.phases["run_s"] = time.monotonic() - t1
        lat_jobs = [(key, job) for key, (_, job) in r.pending_latency.items()]
        if progress is not None and lat_jobs:
            progress.more(len(lat_jobs), "latency")
        if options.compare.latency is not None:  # --no-latency: there is no second phase
            t2 = time.monotonic()
            executor.run(lat_jobs, options.compare.limits, True, r.on_start, r.on_latency)
            sweep.phases["latency_s"] = time.monotonic() - t2
    except KeyboardInterrupt:
        sweep.status = "interrupted"
        raise
    except BaseException:
        sweep.status = "failed"
        raise
    finally:
        r.flush_pending(f"not measured: sweep {sweep.status}")
        for m in r.models:
            r.db.run_status(m.report, sweep.status, command=f"sweep {r.sweep_id}")
        sweep.wall_s = time.monotonic() - t0
        sweep.models = [m.report.model for m in r.models]
        sweep.references = {m.spec: dict(m.report.reference) for m in r.models}
        sweep.executor = executor.describe()
        sweep.jobs_run, sweep.resumed, sweep.stored, sweep.job_times = r.jobs_run, r.resumed, r.stored, r.job_times
        sweep.warnings = [w for w in {r.db.warning} if w]
        from compstack.sweep._matrix import summarize

        entry.update(ended=time.time(), status=sweep.status,
                     summary_json=json.dumps(summarize(sweep), default=str))
        r.db.sweep_status(entry)
        r.db.close()
        shutil.rmtree(r.work, ignore_errors=True)
    return sweep


def _plan(r: _Runner, options: SweepOptions) -> Iterator[list[tuple[JobKey, Job]]]:
    """Prepare the models one at a time, yielding each one's phase-1 jobs (its reference
    first); rows reused by ``--resume`` and rows of a model that did not import are
    written as the model is prepared (its list is then empty or short)."""
    for index, spec in enumerate(options.models):
        if _warm.skip_import(r, spec, index):  # every row resumed or stored: the model is not imported
            continue
        if r.progress is not None:
            r.progress.status(f"importing {spec} ({index + 1} of {len(options.models)})")
        m = r.prepare(spec, index)
        r.models.append(m)
        r.db.run_status(m.report, "running", command=f"sweep {r.sweep_id}")
        mine: list[tuple[JobKey, Job]] = []
        for name in options.compare.targets:
            opts = options.compare.target_options.get(name, {})
            if m.source is None:
                r.record(m, set_fault(Result(target=name, status=m.report.model.get("import_status", "failed"),
                                             error=m.report.model["import_error"],
                                             stage=m.report.model.get("import_stage", "import"))))
                continue
            earlier = r.reuse.earlier(m.report.model.get("fingerprint", ""), name, opts, m.ref[0])
            if earlier is not None:
                r.resumed += 1
                r.record(m, earlier[0], resumed_from=earlier[1])
                continue
            stored, m.row_keys[name] = r.reuse.stored(m.stack, m.digest, m.common, name, opts, m.ref)
            if stored is not None:
                r.stored += 1
                r.later(m, name, opts, stored)
                continue
            early = S._needs_common_ir(m.source, name, opts)
            if early is not None:
                r.record(m, early)
                continue
            mine.append(((index, name), r.job(m, name, opts, latency=False)))
        _warm.remember(r, m)
        m.source, m.left = None, len(mine)  # the model is on disk now; one at a time in memory (the real tier)
        if not mine and m.report.model.get("fingerprint"):
            m.report.reference["ran"] = False  # every row was resumed or read from the store
        hit = m.cache.arrays("reference") if mine and m.cache is not None else None
        if hit is not None:  # an earlier run's reference outputs (compstack.run.oracle_cache)
            m.report.reference["cached"] = True
            r._reference_done(m, JobOutcome(m.ref[0], cached=True, extra={"outputs": hit, "stored": True}))
            yield mine
            continue
        yield [((index, ""), r.job(m, m.ref[0], m.ref[1], latency=False, tag="ref")), *mine] if mine else []
