"""MetaSchedule tuning of the ``tvm-llvm`` target (``--option tvm-llvm:tune_trials=N``, or
``tune=5m`` for a budget in seconds).

The steps of TVM's ``relax.pipeline.static_shape_tuning_pipeline`` without weight
prepacking: ``DecomposeOpsForInference``, ``zero_pipeline`` (legalize, fuse), MetaSchedule
(``tune_relax``, what ``MetaScheduleTuneIRMod`` runs) into a JSON database under
``<cache root>/tvm-tuning/<key>/``, then ``MetaScheduleApplyDatabase``. A finished tuning
writes the store's manifest (``meta.json``: sizes and SHA-256 of both databases, kind
``tvm-tuning`` of :mod:`compstack.core.store`); a later compile of the same module only
applies the records, after they verify.

With ``tune=DURATION`` (``20s``, ``5m``) MetaSchedule tunes until the budget is spent
(setup apart: task extraction and the builder workers' start, ``setup_s``), and the job's
wall-clock limit grows by the budget (:func:`compstack.run.executors.tuning_limits`).
``tune_trials=N`` caps each task's trials, alone or with a budget. The row's
``flags["tuning"]`` holds ``tune_s`` (all of it, apart from ``compile_s``), ``setup_s``,
``search_s``, trials, and the tasks tuned and untuned, each untuned one with why, and the
tuning curve (``curve``: estimated latency against trials, :mod:`compstack.analysis.tuning_curve`)
with each task's trials and best time (``per_task``).

The tasks (one per fused PrimFunc) are tuned one at a time into the one database
(``tune_tasks`` of each task's ``TuneContext``), so that:

* a task whose tuning raises (a MetaSchedule ``ScheduleError`` on a block it cannot
  schedule) keeps TVM's default schedule and the others stay tuned; the row names it;
* under a budget (``tune``), the tasks go heaviest first (weight x FLOPs), each with an
  equal share of the time left, and a task scheduler that answers "no more tasks" once
  another round would overrun its share (:func:`_Deadline`; the first round always
  runs) ends its search; a task whose turn comes after the budget is spent keeps TVM's
  default schedule, and the row names it;
* one builder pool serves the whole tuning (:func:`_kept_builder`). TVM's
  ``LocalBuilder`` starts a fresh ``PopenPoolExecutor`` for every batch (to dodge a
  memory leak of long-lived workers), and each of its workers imports TVM and, at its
  first build, TVM's tensor intrinsics (:func:`_frames`: minutes): that was most of the
  tuning time. The kept pool recycles a worker after :data:`BUILDER_USES` builds
  instead. ``python benchmarks/tvm_tuning.py [--stock]`` measures the rate: zoo:cnn,
  60 s budget, 2 cores, load ~1.5: 29.6 trials/min of search (setup 17.7 s) against
  9.2 with TVM's LocalBuilder and the plain import (setup 69.1 s).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compstack.targets.relax.target import TvmLlvmTarget

__all__ = ["budget_s", "tune", "metaschedule_problem", "TUNE_BUILD_TIMEOUT_S", "TUNE_RUN_TIMEOUT_S"]


def budget_s(text: str) -> float | None:
    """A ``tune`` budget in seconds (``20s``, ``5m``, ``1h``, plain seconds:
    :func:`compstack.core.duration.parse_duration`); None when empty or not a duration."""
    from compstack.core.duration import parse_duration
    from compstack.core.errors import UserError

    try:
        return parse_duration(text, "tune") if text else None
    except UserError:
        return None


def _tuning_dir(mod: Any, target: TvmLlvmTarget) -> tuple[Path, bool, dict[str, Any] | None]:
    """``(folder, kept, meta)``: the MetaSchedule work folder for ``mod``, the store entry
    of kind ``tvm-tuning`` (``kept``; :class:`compstack.core.store.Store`), or a scratch
    folder when there is no cache (``--no-cache``). ``meta`` is the manifest of a
    finished tuning whose record files verify (sizes and SHA-256), else None: an
    unfinished or altered folder is emptied and tuned again."""
    import shutil
    import tempfile

    import tvm
    import tvm_ffi

    from compstack.core.store import Store, key

    if target.cache_root is None:
        return Path(tempfile.mkdtemp(prefix="compstack-tvm-tune-")), False, None
    k = key("tvm-tuning", {"mod": str(tvm_ffi.structural_hash(mod)), "target": target.target_dict(),
                           "trials": target.options.tune_trials, "budget_s": target.options.tune_budget_s,
                           "opt_level": target.options.opt_level},
            {"tvm": tvm.__version__}, digits=16)
    store = Store(target.cache_root)
    folder = store.entry("tvm-tuning", k)
    meta = store.verify("tvm-tuning", k)
    if meta is None and folder.exists():
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder, True, meta


def tune(mod: Any, tvm_target: Any, target: TvmLlvmTarget) -> tuple[Any, dict[str, Any]]:
    """The steps of ``relax.pipeline.static_shape_tuning_pipeline`` (without weight
    prepacking, which changes the VM's interface): tune with MetaSchedule unless the
    work folder holds finished, verified records for this module (its manifest), then apply
    the database. Returns the module and what was done (for ``flags["tuning"]``: tasks
    tuned and untuned, the error of each untuned one, trials, seconds).

    Raises:
        UnsupportedError: MetaSchedule cannot run with this TVM install.
    """

    import tvm
    from tvm.relax import transform
    from tvm.relax.pipeline import zero_pipeline

    folder, kept, meta = _tuning_dir(mod, target)
    reuse = meta is not None
    trials, budget = target.options.tune_trials, target.options.tune_budget_s
    what = f"tune={target.options.tune}" if budget is not None else f"tune_trials={trials}"
    problem = metaschedule_problem()
    if problem:
        from compstack.core.errors import UnsupportedError

        raise UnsupportedError(f"{target.name}: {what}: {problem}")
    run: dict[str, Any] = dict(meta.get("run", {})) if meta else {}
    with tvm_target, tvm.transform.PassContext(opt_level=target.options.opt_level):
        steps = [transform.DecomposeOpsForInference(), transform.CanonicalizeBindings(), zero_pipeline()]
        legal = tvm.transform.Sequential(steps)(mod)
        if not reuse:
            run = _run_metaschedule(legal, tvm_target, folder, trials, budget)
        tuned = transform.MetaScheduleApplyDatabase(str(folder))(legal)
    records = _count_lines(folder / "database_tuning_record.json")
    # every task MetaSchedule extracted: the database lists only those a trial reached (a
    # 60 s budget on zoo:bert: 5 workloads of 19 tasks), so count the run's own split
    tasks = (run["tasks_tuned"] + len(run.get("untuned", [])) if "tasks_tuned" in run
             else _count_lines(folder / "database_workload.json"))
    if kept and not reuse and records:
        from compstack.core.integrity import write_manifest

        # the folder is MetaSchedule's work folder (built in place, like the kernel
        # library): the manifest over its two databases, written last, publishes it
        write_manifest(folder, [folder / "database_tuning_record.json", folder / "database_workload.json"],
                       {"trials_per_task": trials, "budget_s": budget, "records": records, "tasks": tasks, "run": run})
    limit = (f"a {budget:g} s budget" + (f", at most {trials} trials per task" if trials else "") if budget is not None
             else f"{trials} trials per task")
    how = "reused the records of an earlier tuning (no trials run)" if reuse else f"tuned with {limit}"
    untuned = run.get("untuned", [])
    if untuned:
        how += f"; {len(untuned)} task(s) kept TVM's default schedule: " + "; ".join(
            f"{u['task']} ({u['why']})" for u in untuned[:3]) + (" ..." if len(untuned) > 3 else "")
    if not records:
        how += f"; no records: every candidate failed to build or run (logs in {folder / 'logs'})"
    return tuned, {"tuner": "MetaSchedule (tune_tasks per task + MetaScheduleApplyDatabase)",
                   "trials_per_task": trials or None, "budget_s": budget, "cost_model": _cost_model(),
                   "reused_records": reuse, "tasks": tasks, "records": records,
                   "tasks_tuned": run.get("tasks_tuned"), "tasks_untuned": len(untuned), "untuned": untuned,
                   "trials": run.get("trials"), "setup_s": run.get("setup_s"), "search_s": run.get("search_s"),
                   "curve": run.get("curve"), "per_task": run.get("per_task"),
                   "work_dir": str(folder) if kept else "(scratch folder, not kept: --no-cache)",
                   "summary": f"MetaSchedule, {how}; {tasks} tasks, {records} records"}


#: Serialises a tiny IRModule the way MetaSchedule does for every workload it tunes.
_JSON_PROBE = """
import tvm
from tvm import relax
from tvm.script import relax as R
bb = relax.BlockBuilder()
x = relax.Var("x", R.Tensor((4,), "float32"))
with bb.function("main", [x]):
    bb.emit_func_output(x)
tvm.ir.save_json(bb.get())
"""


def metaschedule_problem() -> str:
    """Why MetaSchedule cannot run with this TVM install ("" when it can).

    MetaSchedule serialises every workload with ``tvm.ir.save_json`` (its JSON
    database, and the builder's worker processes); where that crashes the whole worker
    would die mid-tuning, so it is probed once in a subprocess first.
    """
    import subprocess

    from compstack.core.procs import python_code_argv

    try:
        proc = subprocess.run(python_code_argv(_JSON_PROBE), capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "MetaSchedule probe (tvm.ir.save_json of a tiny module) hung for 120 s"
    if proc.returncode == 0:
        return ""
    where = "tvm::ffi::ToJSONGraph" if "ToJSONGraph" in proc.stderr else "tvm.ir.save_json"
    how = f"died by signal {-proc.returncode}" if proc.returncode < 0 else f"exited {proc.returncode}"
    versions = _tvm_versions()
    return (f"MetaSchedule cannot run with this TVM install ({versions}): serialising a module (tvm.ir.save_json, "
            f"which MetaSchedule does for every workload) {how} in {where}; apache-tvm 0.27.0.post1 serialises "
            "with apache-tvm-ffi 0.1.14.post0 (measured) but not 0.1.15.post2: pip install "
            "'apache-tvm-ffi==0.1.14.post0'")


def _tvm_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for dist in ("apache-tvm", "apache-tvm-ffi"):
        try:
            out.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            pass
    return ", ".join(out)


#: Seconds one MetaSchedule candidate may take to build / to run (TVM's 30 s default
#: expires on a loaded 2-core machine before a builder process has even imported TVM).
TUNE_BUILD_TIMEOUT_S = 600.0
TUNE_RUN_TIMEOUT_S = 300.0
#: Builds one kept builder worker does before it is replaced (TVM's LocalBuilder replaces
#: them after every batch, for a leak of long-lived workers).
BUILDER_USES = 64
#: Candidates per search round under a budget (TVM's default is 64): a round in flight
#: when a task's share runs out is finished, so this bounds the overshoot.
BUDGET_TRIALS_PER_ITER = 16
_NO_LIMIT = 1 << 30


def _run_metaschedule(mod: Any, tvm_target: Any, folder: Path, trials: int, budget_s: float | None) -> dict[str, Any]:
    """Tune every task of ``mod`` into the JSON database in ``folder`` (what
    ``MetaScheduleTuneIRMod``'s ``tune_relax`` does, one task at a time; see the module
    docstring), with at most ``trials`` per task (0: no limit) and within ``budget_s``
    seconds (None: no budget). Returns ``tasks_tuned``, ``untuned`` (``task``, ``why``),
    ``trials`` (measured candidates) and ``search_s``."""
    with _safe_path():
        return _tune_tasks(mod, tvm_target, folder, trials, budget_s)


def _safe_path() -> Any:
    """``PYTHONSAFEPATH=1`` while tuning: MetaSchedule's builder and runner workers are TVM's
    ``python -m tvm.exec.popen_worker``, which would put the current folder first on their
    import path (a ``tvm/`` folder there would run in them); compstack's own workers start
    with ``-P`` (:mod:`compstack.core.procs`), these inherit the variable (Python 3.11+)."""
    import contextlib
    import os

    @contextlib.contextmanager
    def scope() -> Any:
        saved = os.environ.get("PYTHONSAFEPATH")
        os.environ["PYTHONSAFEPATH"] = "1"
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("PYTHONSAFEPATH", None)
            else:
                os.environ["PYTHONSAFEPATH"] = saved

    return scope()


def _tune_tasks(mod: Any, tvm_target: Any, folder: Path, trials: int, budget_s: float | None) -> dict[str, Any]:
    import time

    from tvm.s_tir import meta_schedule as ms

    from compstack.analysis.tuning_curve import TaskTrials, curve, record_latencies_us

    t_setup = time.monotonic()
    _tensor_intrinsics()  # TuneContext imports it: minutes, else (see _frames)
    extracted = ms.relax_integration.extract_tasks(mod, tvm_target, params={})
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(extracted, str(folder))
    builder = _kept_builder()
    runner = ms.runner.LocalRunner(timeout_sec=TUNE_RUN_TIMEOUT_S,
                                   evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=50))
    builder.warm_up()
    t0 = time.monotonic()  # the budget is the search's: setup (task extraction, workers) is apart
    untuned: list[dict[str, str]] = []
    tuned, trials_of = 0, []  # trials_of: each task's measured candidates, for the tuning curve
    records = folder / "database_tuning_record.json"
    order = sorted(zip(contexts, weights), key=lambda cw: -cw[1] * _flops(cw[0].mod))  # heaviest first
    try:
        for i, (ctx, weight) in enumerate(order):
            name = str(ctx.task_name)
            scheduler: Any = "round-robin"
            cap, per_iter = trials or _NO_LIMIT, 64
            if budget_s is not None:
                left = budget_s - (time.monotonic() - t0)
                if left <= 0:
                    untuned.append({"task": name, "why": "the budget was spent before its turn (TVM's default "
                                                         "schedule; tasks go heaviest first)"})
                    trials_of.append(TaskTrials(name, weight, []))  # no trial: counted in the curve's tasks_left_out
                    continue
                # an equal share of what is left; its first round always runs
                per_iter, scheduler = BUDGET_TRIALS_PER_ITER, _Deadline(time.monotonic() + left / (len(order) - i))
            before = _count_lines(records)
            try:
                ms.tune.tune_tasks(tasks=[ctx], task_weights=[weight], work_dir=str(folder),
                                   max_trials_global=cap, max_trials_per_task=cap, num_trials_per_iter=per_iter,
                                   builder=builder, runner=runner, database="json", cost_model=_cost_model(),
                                   task_scheduler=scheduler)
                tuned += 1
            except Exception as exc:  # noqa: BLE001 - TVMError (ScheduleError, ...): this task stays untuned
                why = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:300]
                untuned.append({"task": name, "why": f"{type(exc).__name__}: {why}"})
            trials_of.append(TaskTrials(name, weight, record_latencies_us(records, before)))
    finally:
        builder.shutdown()
    return {"tasks_tuned": tuned, "untuned": untuned, "trials": _count_lines(records),
            "setup_s": round(t0 - t_setup, 3), "search_s": round(time.monotonic() - t0, 3),
            "curve": curve(trials_of), "per_task": [t.to_json() for t in trials_of]}


def _flops(mod: Any) -> float:
    """A task's FLOPs (``tvm.s_tir.analysis.estimate_tir_flops``; 1 when it cannot tell)."""
    try:
        from tvm.s_tir.analysis import estimate_tir_flops

        return float(estimate_tir_flops(mod)) or 1.0
    except Exception:  # noqa: BLE001 - an estimate only orders the tasks
        return 1.0


def _frames(context: int = 1) -> list[Any]:
    """``inspect.stack()`` without its ``inspect.getmodule`` scan: each frame's one line of
    code context read with ``linecache`` (what TVMScript's ``prim_func`` decorator uses:
    the frames, their locals and ``code_context``). ``inspect.stack`` resolves each
    frame's module by walking ``sys.modules`` (about 2,000 once TVM is imported) for every
    frame whose file is not a module (TVMScript's ``<ast>``), and ``tvm.s_tir.tensor_intrin``
    (imported by MetaSchedule's ``TuneContext``) decorates hundreds of PrimFuncs: measured
    146 s for that import alone at load 4 (``python3 -c "import tvm, time; ...; import
    tvm.s_tir.tensor_intrin"``), the largest part of a small model's tuning."""
    import inspect
    import linecache
    import sys

    out = []
    frame: Any = sys._getframe(1)
    while frame is not None:
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        line = linecache.getline(filename, lineno, frame.f_globals) if context > 0 else ""
        ctx = [line] if line else None
        out.append(inspect.FrameInfo(frame, filename, lineno, frame.f_code.co_name, ctx, 0 if ctx else None))
        frame = frame.f_back
    return out


def _tensor_intrinsics() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` with :func:`_frames` as ``inspect.stack`` (the
    stdlib function is put back at once; another thread calling it meanwhile gets the
    same frames, less the module scan)."""
    import inspect
    import sys

    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    saved = inspect.stack
    inspect.stack = _frames  # type: ignore[assignment]
    try:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    finally:
        inspect.stack = saved  # type: ignore[assignment]


def _kept_builder() -> Any:
    """A MetaSchedule builder whose worker pool lives for the whole tuning (see the module
    docstring); each build is TVM's own (``LocalBuilder``'s worker function with its
    default build and export)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
    from tvm.s_tir.meta_schedule.utils import cpu_count
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class KeptBuilder(PyBuilder):
        def __init__(self) -> None:
            super().__init__()
            # each worker's first build imports tvm.s_tir.tensor_intrin: the fast way (_frames)
            self.pool = PopenPoolExecutor(max_workers=cpu_count(logical=True), timeout=TUNE_BUILD_TIMEOUT_S,
                                          maximum_process_uses=BUILDER_USES, initializer=_tensor_intrinsics)

        def build(self, build_inputs: list[Any]) -> list[Any]:
            args = [(None, None, b.mod, b.target, _serialize_params(b.params)) for b in build_inputs]
            out = []
            for r in self.pool.map_with_error_catching(lambda a: _worker_func(*a), args):
                if r.status == StatusKind.COMPLETE:
                    out.append(BuilderResult(r.value, None))
                elif r.status == StatusKind.TIMEOUT:
                    out.append(BuilderResult(None, f"kept builder: timeout, killed after {TUNE_BUILD_TIMEOUT_S} s"))
                else:
                    out.append(BuilderResult(None, f"kept builder: an exception occurred\n{r.value}"))
            return out

        def warm_up(self) -> None:
            """Start every worker (each imports TVM and its tensor intrinsics) before the clock starts."""
            list(self.pool.map_with_error_catching(lambda _: None, range(cpu_count(logical=True))))

        def shutdown(self) -> None:
            self.pool.shutdown()

    return KeptBuilder()


def _deadline_scheduler_class() -> Any:
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler

    @derived_object
    class Deadline(PyTaskScheduler):
        """Round-robin over the tasks until ``deadline`` (``time.monotonic()``), then no more
        tasks: MetaSchedule's ``Tune`` loop joins the batch in flight and ends. The first
        round always runs; a later one only when a round as long as the last one ends
        before the deadline (a round is mostly fixed cost: the evolutionary search's
        population, then the builds)."""

        def __init__(self, deadline: float) -> None:
            super().__init__()
            self.deadline = deadline
            self.last = -1
            self.started: float | None = None

        def next_task_id(self) -> int:
            import time

            outer = self._outer()
            tasks = outer.tasks_
            for i in range(len(tasks)):
                outer.touch_task(i)  # joins a finished batch (the LocalRunner runs synchronously)
            now = time.monotonic()
            round_s = 0.0 if self.started is None else now - self.started
            if self.started is not None and now + round_s > self.deadline:
                return -1
            self.started = now
            for _ in range(len(tasks)):
                self.last = (self.last + 1) % len(tasks)
                if not tasks[self.last].is_terminated:
                    return self.last
            return -1

    return Deadline


def _Deadline(deadline: float) -> Any:  # noqa: N802 - builds the class on first use (TVM imported lazily)
    return _deadline_scheduler_class()(deadline)


def _cost_model() -> str:
    """MetaSchedule's XGBoost cost model when ``xgboost`` is installed (apache-tvm's
    ``meta-schedule`` extra), else its random one (fine for a small trial budget)."""
    import importlib.util

    return "xgb" if importlib.util.find_spec("xgboost") is not None else "random"


def _count_lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return 0
