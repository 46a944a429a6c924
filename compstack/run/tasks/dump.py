"""Task ``dump``: every requested stage's text, and per-pass IR, written into
``Job.stages_dir`` (the parent side is :func:`compstack.run.dump.dump`; the folder layout
is described there). Stage texts are kept in the store (kind ``stages``, keyed like
artifacts; every entry verified on read) and copied back from there when present.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable

from compstack.run.jobs import Job, JobOutcome, write_stages

__all__ = ["MODEL_TASK", "records_stages", "run", "stage_of"]


#: The worker loads the job's model and source before building the target
#: (:func:`compstack.run.jobs.load_job_model`) and passes the model to :func:`run`.
MODEL_TASK = True


def records_stages(job: Job) -> bool:
    """A dump always records stages (its target is built with ``record_stages``)."""
    return True


def run(job: Job, target: Any, outcome: JobOutcome, stage: Callable[[str], None], avail: Any,
        model: Any = None) -> None:
    """Worker body of a dump job (see the module docstring); ``model`` is the job's
    ``onnx_ir.Model``, loaded by the worker. A stack's exception propagates to
    :func:`compstack.run.worker.execute`, which makes it the outcome."""
    from compstack.core.store import Store, cache_key

    folder = Path(job.stages_dir or ".")
    folder.mkdir(parents=True, exist_ok=True)
    wanted = list(job.only_stages) if job.only_stages else list(target.stage_names)
    # flags, not options: they include the chosen path (native/translated) where a stack has two
    key = cache_key(job.fingerprint, job.target, target.flags(), outcome.versions)
    store = Store(job.cache_dir) if job.cache_dir else None
    cached = f"{job.target}/{key}"
    if store is not None and not job.passes and _copy_cached(store, cached, folder, wanted):
        outcome.stages, outcome.cached = wanted, True
        return
    stage("lower")
    lowered = target.lower(model)
    outcome.lower_s = lowered.lower_s
    pre = [s for s in wanted if s in lowered.stage_names() and s not in target.compiled_stages]
    outcome.stages = write_stages(lowered, folder, [], only=pre)
    if job.passes:
        stage("passes")
        records = lowered.passes(job.passes)
        if records is None:
            outcome.extra["notes"] = [f"{job.target} has no pass-level view; stages only"]
        else:
            _write_passes(records, getattr(lowered, "timings", None), folder / "passes",
                          target.stage_suffix.get(target.stage_names[0], ".txt"), folder, outcome.stages)
    if any(s not in outcome.stages for s in wanted):
        stage("compile")
        compiled = lowered.compile()
        outcome.compile_s = compiled.compile_s
        outcome.stages = write_stages(lowered, folder, outcome.stages, compiled, only=wanted)
    if store is not None:
        note = _store_cached(store, cached, folder, outcome.stages)
        if note:
            outcome.cache_note = note


def _copy_cached(store: Any, key: str, folder: Path, wanted: list[str]) -> bool:
    """Copy the wanted stage texts from a verified store entry (kind ``stages``: its
    manifest's sizes and hashes, :meth:`compstack.core.store.Store.lookup`); a bad entry
    is deleted."""
    entry, _ = store.lookup("stages", key)
    if entry is None:
        return False
    files = {_stage_of(Path(name)): entry.folder / name for name in entry.meta["files"]}
    if not all(s in files for s in wanted):
        return False
    for s in wanted:
        shutil.copyfile(files[s], folder / files[s].name)
    return True


def _store_cached(store: Any, key: str, folder: Path, stages: list[str]) -> str:
    """Publish the stage texts of ``folder`` (plus the entry's verified older ones) as
    the store entry ``key`` of kind ``stages``: a new folder with a manifest, swapped in
    by rename (:meth:`compstack.core.store.Store.publish`).

    Returns:
        ``""``, or why the entry could not be written (a note; the dump itself is fine).
    """
    keep: dict[str, Path] = {}
    meta = store.verify("stages", key)
    if meta is not None:
        keep = {name: store.entry("stages", key) / name for name in meta.get("files", {})}
    keep.update({p.name: p for p in folder.glob("*-*") if p.is_file() and _stage_of(p) in stages})
    try:
        staging = store.staging("stages")
        try:
            for name, src in keep.items():
                shutil.copyfile(src, staging / name)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        store.publish(staging, "stages", key, sorted(staging.iterdir()),
                      {"stages": sorted(_stage_of(Path(n)) for n in keep)}, replace=True)
        return ""
    except OSError as exc:
        return f"stage texts not cached: {exc.strerror or exc}"


def _stage_of(path: Path) -> str:
    """``03-flow.mlir`` -> ``flow``."""
    stem = path.name.split("-", 1)[1] if "-" in path.name else path.name
    return stem.rsplit(".", 1)[0] if "." in stem else stem


def _safe(name: str) -> str:
    return re.sub(r"[^\w.\-]+", "_", name)[:80]


def _write_passes(records: list[Any], mlir_timings: list[tuple[str, float, int]] | None, out: Path,
                  suffix: str, stage_folder: Path, stages: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    first_stage = next((p.name for p in sorted(stage_folder.glob("00-*"))), None)
    last_by_scope: dict[str, str] = {}
    rows = []
    for r in records:
        text = r.ir_text()
        fname = None
        if text is not None:
            fname = f"{r.index:04d}-{_safe(r.name)}{suffix}"
            (out / fname).write_text(text)
        before = last_by_scope.get(r.scope) or (f"../{first_stage}" if first_stage else None)
        rows.append({"index": r.index, "name": r.name, "alias": r.alias, "scope": r.scope, "changed": r.changed,
                     "wall_s": r.wall_s, "file": fname, "before": before})
        if fname:
            last_by_scope[r.scope] = fname
    (out / "index.json").write_text(json.dumps(rows, indent=1))
    (out / "timing.json").write_text(json.dumps(_timing(records, mlir_timings), indent=1))


def _timing(records: list[Any], mlir_timings: list[tuple[str, float, int]] | None) -> list[dict[str, Any]]:
    """Wall time per pass name: summed over runs from the records, or MLIR's own list."""
    totals: dict[str, list[float]] = {}
    if mlir_timings:
        for name, secs, _ in mlir_timings:
            totals.setdefault(name, []).append(secs)
    else:
        for r in records:
            if r.wall_s is not None:
                totals.setdefault(r.name, []).append(r.wall_s)
    rows = [{"pass": k, "wall_s": sum(v), "runs": len(v) if not mlir_timings else None} for k, v in totals.items()]
    return sorted(rows, key=lambda row: -row["wall_s"])


# ---- parent side ----------------------------------------------------------------------


stage_of = _stage_of
