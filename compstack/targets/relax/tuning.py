"""MetaSchedule tuning of the ``tvm-llvm`` target (``--option tvm-llvm:tune_trials=N``).

The steps of TVM's ``relax.pipeline.static_shape_tuning_pipeline`` without weight
prepacking: ``DecomposeOpsForInference``, ``zero_pipeline`` (legalize, fuse), MetaSchedule
(``tune_relax``, what ``MetaScheduleTuneIRMod`` runs) into a JSON database under
``<cache root>/tvm-tuning/<key>/``, then ``MetaScheduleApplyDatabase``. A finished tuning
writes the store's manifest (``meta.json``: sizes and SHA-256 of both databases, kind
``tvm-tuning`` of :mod:`compstack.core.store`); a later compile of the same module only
applies the records, after they verify.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compstack.targets.relax.target import TvmLlvmTarget

__all__ = ["tune", "metaschedule_problem", "TUNE_BUILD_TIMEOUT_S", "TUNE_RUN_TIMEOUT_S"]


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
                           "trials": target.options.tune_trials, "opt_level": target.options.opt_level},
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
    the database. Returns the module and what was done (for ``flags["tuning"]``)."""

    import tvm
    from tvm.relax import transform
    from tvm.relax.pipeline import zero_pipeline

    folder, kept, meta = _tuning_dir(mod, target)
    reuse = meta is not None
    problem = metaschedule_problem()
    if problem:
        from compstack.core.errors import UnsupportedError

        raise UnsupportedError(f"{target.name}: tune_trials={target.options.tune_trials}: {problem}")
    trials = target.options.tune_trials
    with tvm_target, tvm.transform.PassContext(opt_level=target.options.opt_level):
        steps = [transform.DecomposeOpsForInference(), transform.CanonicalizeBindings(), zero_pipeline()]
        legal = tvm.transform.Sequential(steps)(mod)
        if not reuse:
            _run_metaschedule(legal, tvm_target, folder, trials)
        tuned = transform.MetaScheduleApplyDatabase(str(folder))(legal)
    records = _count_lines(folder / "database_tuning_record.json")
    tasks = _count_lines(folder / "database_workload.json")
    if kept and not reuse and records:
        from compstack.core.integrity import write_manifest

        # the folder is MetaSchedule's work folder (built in place, like the kernel
        # library): the manifest over its two databases, written last, publishes it
        write_manifest(folder, [folder / "database_tuning_record.json", folder / "database_workload.json"],
                       {"trials_per_task": trials, "records": records, "tasks": tasks})
    how = "reused the records of an earlier tuning (no trials run)" if reuse else f"tuned {trials} trials per task"
    if not records:
        how += f"; no records: every candidate failed to build or run (logs in {folder / 'logs'})"
    return tuned, {"tuner": "MetaSchedule (MetaScheduleTuneIRMod + MetaScheduleApplyDatabase)",
                   "trials_per_task": trials, "cost_model": _cost_model(), "reused_records": reuse, "tasks": tasks, "records": records,
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
    import sys

    try:
        proc = subprocess.run([sys.executable, "-c", _JSON_PROBE], capture_output=True, text=True, timeout=120)
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


def _run_metaschedule(mod: Any, tvm_target: Any, folder: Path, trials: int) -> None:
    """What ``relax.transform.MetaScheduleTuneIRMod`` does (``tune_relax`` into a JSON
    database in ``folder``), with ``trials`` per task (the global budget no limit) and
    builder/runner time limits that survive a loaded machine."""
    from tvm.s_tir import meta_schedule as ms

    ms.relax_integration.tune_relax(
        mod, params={}, target=tvm_target, work_dir=str(folder), max_trials_global=trials * 100_000,
        max_trials_per_task=trials, cost_model=_cost_model(), builder=ms.builder.LocalBuilder(timeout_sec=TUNE_BUILD_TIMEOUT_S),
        runner=ms.runner.LocalRunner(timeout_sec=TUNE_RUN_TIMEOUT_S,
                                     evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1,
                                                                                min_repeat_ms=50)))


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
