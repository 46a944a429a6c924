"""``compstack dump`` and dump specs: the IR at every stage and after every pass.

A dump runs as a worker job (``Job.kind == "dump"``) like every other job, so a stack
that crashes while lowering costs that dump only. The worker writes into a folder:

* ``NN-<stage><suffix>``: each requested stage (NN = its position in the target's
  pipeline, see ``Target.stage_names``);
* with ``passes="all"`` / ``"changed"``: ``passes/NNNN-<pass><suffix>`` with the IR after
  each pass (``changed``: only passes that changed it), ``passes/index.json`` (one row
  per pass: name, alias, scope, changed, wall_s, file, and the file holding the IR
  before it) and ``passes/timing.json`` (wall time per pass, from the stack's own
  instrumentation: TVM pass instruments, MLIR's ``--mlir-timing``).

Stage texts are also kept in the cache folder (``<cache>/stages/<target>/<key>/``), keyed
like artifacts, so a second dump or diff of the same model and target lowers nothing.

A dump spec ``MODEL@TARGET:STAGE`` (or ``MODEL@TARGET:pass:NAME-`` / ``pass:NAME+`` for
the IR before/after the first run of pass NAME) names such a text anywhere a file is
accepted (:func:`resolve_text`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.errors import UserError
from compstack.core.integrity import check_manifest, write_manifest
from compstack.core.procs import run_tempdir
from compstack.ops._registry import origins_for
from compstack.run.jobs import Job, JobOutcome, pack_sets, write_stages
from compstack.run.runner import Limits, run_isolated

__all__ = ["DumpResult", "check_stages", "dump", "parse_spec", "resolve_text", "run_dump", "stage_list"]


@dataclass
class DumpResult:
    """What a dump wrote.

    Attributes:
        outcome: the worker's outcome (status ``ok`` or the stack's failure).
        folder: where the files are.
        stages: stage name -> file.
        passes: rows of ``passes/index.json`` (empty without pass dumps).
        timing: ``[{"pass", "wall_s", "runs"}]`` sorted by wall time, largest first.
    """

    outcome: JobOutcome
    folder: Path
    stages: dict[str, Path] = field(default_factory=dict)
    passes: list[dict[str, Any]] = field(default_factory=list)
    timing: list[dict[str, Any]] = field(default_factory=list)


def stage_list(target: str) -> list[str]:
    """The stage names of ``target``, in pipeline order.

    Raises:
        UserError: unknown target.
    """
    return list(registry.get(target).stage_names)


def check_stages(target: str, stages: Sequence[str] | None) -> None:
    """Raise :class:`UserError` listing the valid stages when one of ``stages`` is unknown."""
    valid = stage_list(target)
    for s in stages or ():
        if s not in valid:
            raise UserError(f"{target}: unknown stage '{s}' (valid: {', '.join(valid)})")


# ---- worker side ----------------------------------------------------------------------


def run_dump(job: Job, target: Any, model: Any, outcome: JobOutcome, stage: Callable[[str], None]) -> None:
    """Worker body of a dump job (called by :func:`compstack.run.jobs.execute`)."""
    from compstack.core.store import cache_key

    folder = Path(job.stages_dir or ".")
    folder.mkdir(parents=True, exist_ok=True)
    wanted = list(job.only_stages) if job.only_stages else list(target.stage_names)
    # flags, not options: they include the chosen path (native/translated) where a stack has two
    key = cache_key(job.fingerprint, job.target, target.flags(), outcome.versions)
    cached = Path(job.cache_dir) / "stages" / job.target / key if job.cache_dir else None
    if cached is not None and not job.passes and _copy_cached(cached, folder, wanted):
        outcome.stages, outcome.cached = wanted, True
        return
    stage("lower")
    target.record_stages = True
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
    if cached is not None:
        note = _store_cached(cached, folder, outcome.stages)
        if note:
            outcome.cache_note = note


def _copy_cached(cached: Path, folder: Path, wanted: list[str]) -> bool:
    """Copy the wanted stage texts from a verified cache entry (its manifest's sizes and
    hashes, :func:`compstack.core.integrity.check_manifest`); a bad entry is deleted."""
    if not cached.is_dir():
        return False
    meta, _ = check_manifest(cached)
    if meta is None:
        shutil.rmtree(cached, ignore_errors=True)
        return False
    files = {_stage_of(Path(name)): cached / name for name in meta["files"]}
    if not all(s in files for s in wanted):
        return False
    for s in wanted:
        shutil.copyfile(files[s], folder / files[s].name)
    return True


def _store_cached(cached: Path, folder: Path, stages: list[str]) -> str:
    """Publish the stage texts of ``folder`` (plus the entry's verified older ones) as
    the cache entry ``cached``: a new folder with a manifest, swapped in by rename.

    Returns:
        ``""``, or why the entry could not be written (a note; the dump itself is fine).
    """
    keep: dict[str, Path] = {}
    if cached.is_dir():
        meta, _ = check_manifest(cached)
        keep = {name: cached / name for name in (meta or {}).get("files", {})}
    keep.update({p.name: p for p in folder.glob("*-*") if p.is_file() and _stage_of(p) in stages})
    staging: Path | None = None
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=cached.parent))
        for name, src in keep.items():
            shutil.copyfile(src, staging / name)
        write_manifest(staging, sorted(staging.iterdir()), {"stages": sorted(_stage_of(Path(n)) for n in keep)})
        old = cached.with_name(f".old-{cached.name}-{os.getpid()}")
        if cached.exists():
            os.rename(cached, old)
        os.rename(staging, cached)
        shutil.rmtree(old, ignore_errors=True)
        return ""
    except OSError as exc:
        return f"stage texts not cached: {exc.strerror or exc}"
    finally:
        if staging is not None and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


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


def _example_sets(source: cir.SourceModel) -> list[dict]:
    """One input set when the shapes are static (stacks that trace with real tensors
    need it), else none."""
    from compstack.core.inputs import input_sets

    model_inputs = cir.graph_inputs(source.model)
    if not (all(i.is_static for i in model_inputs) or source.example_inputs):
        return []
    return input_sets(model_inputs, 1, 0, source.example_inputs or None, source.val_ranges)


def dump(source: cir.SourceModel, target: str, folder: Path, *, stages: Sequence[str] | None = None,
         passes: str = "", options: Mapping[str, str] | None = None, cache_dir: Path | None = None,
         limits: Limits = Limits()) -> DumpResult:
    """Dump the stages (and optionally the per-pass IR) of ``source`` on ``target``.

    Args:
        source: the imported model.
        target: a registered target name.
        folder: where to write (created).
        stages: the stages to write (None: every stage of the target).
        passes: ``""``, ``"all"`` or ``"changed"``.
        options: the target's options as strings.
        cache_dir: the cache folder (stage texts are reused from it), or None.
        limits: the worker's time and memory limits.

    Returns:
        A :class:`DumpResult`; its ``outcome.status`` says whether the stack succeeded.

    Raises:
        UserError: unknown target or stage (listing the valid ones), unknown pass mode.
    """
    from compstack.core.inputs import save_npz
    from compstack.run.session import model_file, stack_model_file
    from compstack.targets.base import PASS_MODES

    check_stages(target, stages)
    if passes and passes not in PASS_MODES:
        raise UserError(f"unknown pass mode '{passes}' (valid: {', '.join(PASS_MODES)})")
    folder.mkdir(parents=True, exist_ok=True)
    work = run_tempdir("compstack-dump-")
    try:
        inputs = save_npz(work / "inputs.npz", pack_sets(_example_sets(source)))
        mcache = cache_dir or work
        stack = stack_model_file(source, mcache)  # the model as the user wrote it (#13 item 18)
        canonical = model_file(source, mcache)
        job = Job(model_path=str(stack.path), fingerprint=stack.fingerprint, target=target,
                  canonical_path=str(canonical) if canonical != stack.path else "",
                  target_ref=next(e.ref for e in registry.entries() if e.name == target),
                  inputs_path=str(inputs), workdir=str(work / "job"), options=dict(options or {}),
                  cache_dir=str(cache_dir) if cache_dir else None, stages_dir=str(folder), run=False,
                  kind="dump", only_stages=list(stages) if stages else None, passes=passes,
                  source=source.spec, source_framework=source.framework,
                  op_origins=origins_for(source.model))
        outcome = run_isolated(job, limits)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = DumpResult(outcome, folder)
    for p in sorted(folder.glob("*-*")):
        if p.is_file() and _stage_of(p) in outcome.stages:
            result.stages[_stage_of(p)] = p
    index = folder / "passes" / "index.json"
    if passes and index.exists():
        result.passes = json.loads(index.read_text())
        result.timing = json.loads((folder / "passes" / "timing.json").read_text())
    return result


def parse_spec(spec: str) -> tuple[str, str, str] | None:
    """Split ``MODEL@TARGET:STAGE`` into its parts, or None when ``spec`` is not one.

    The model part may itself hold ``:`` (``zoo:cnn``, ``file.py:build``); the last
    ``@`` separates it from ``TARGET:STAGE``, and the first ``:`` after that separates
    the target from the stage (which may be ``pass:NAME-`` / ``pass:NAME+``).
    """
    model, at, rest = spec.rpartition("@")
    if not at or not model:
        return None
    target, colon, stage = rest.partition(":")
    if not colon or not target or not stage:
        raise UserError(f"{spec}: a dump spec is MODEL@TARGET:STAGE (e.g. zoo:cnn@iree-llvm-cpu:flow)")
    return model, target, stage


def resolve_text(spec: str, cache_dir: Path | None, limits: Limits = Limits()) -> tuple[str, str]:
    """The text named by ``spec``: a file's contents, or a dump spec's stage/pass IR.

    Returns:
        ``(text, label)`` where ``label`` names the source (file path or spec).

    Raises:
        UserError: missing, non-regular or binary file, bad spec, unknown
            target/stage/pass, or the stack failed to produce the stage (its error line).
    """
    p = Path(spec)
    if p.is_file():
        return _read_dump(p, spec), spec
    if p.exists():
        raise UserError(f"{spec}: not a regular file (a folder, FIFO or device); give an IR dump")
    parts = parse_spec(spec)
    if parts is None:
        raise UserError(f"{spec}: no such file, and not a dump spec MODEL@TARGET:STAGE")
    model_spec, target, stage = parts
    registry.get(target)
    from compstack.frontends.sources import resolve_model

    source = resolve_model(model_spec, cache_dir=cache_dir, timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)
    tmp = run_tempdir("compstack-spec-")
    try:
        if stage.startswith("pass:"):
            return _pass_text(source, target, stage[5:], tmp, cache_dir, limits), spec
        res = dump(source, target, tmp, stages=[stage], cache_dir=cache_dir, limits=limits)
        _check_ok(res, spec)
        return res.stages[stage].read_text(), spec
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_dump(p: Path, spec: str) -> str:
    """An IR dump's text.

    Raises:
        UserError: unreadable, or binary (a NUL byte, or not UTF-8 in its first 64 KiB):
            an artifact or bytecode, not a text dump.
    """
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UserError(f"{spec}: cannot read: {exc.strerror or exc}") from None
    head = data[:65536]
    try:
        head.decode("utf-8")
        binary = b"\0" in head
    except UnicodeDecodeError as exc:
        binary = exc.start < len(head) - 4  # a character cut at the 64 KiB boundary is fine
    if binary:
        raise UserError(f"{spec}: a binary file, not a text IR dump (diff takes .txt/.mlir/.py dumps "
                        "or MODEL@TARGET:STAGE)")
    return data.decode("utf-8", errors="replace")


def _check_ok(res: DumpResult, spec: str) -> None:
    if res.outcome.status != "ok":
        raise UserError(f"{spec}: {res.outcome.target} {res.outcome.status} in {res.outcome.stage}: "
                        f"{res.outcome.error.splitlines()[0] if res.outcome.error else ''}")


def _pass_text(source: cir.SourceModel, target: str, which: str, tmp: Path, cache_dir: Path | None,
               limits: Limits) -> str:
    if not which or which[-1] not in "+-":
        raise UserError(f"pass:{which}: end the pass name with - (IR before it) or + (IR after it)")
    name, side = which[:-1], which[-1]
    res = dump(source, target, tmp, stages=[stage_list(target)[0]], passes="all", cache_dir=cache_dir,
               limits=limits)
    _check_ok(res, f"{target}:pass:{which}")
    if not res.passes:
        raise UserError(f"{target} has no per-pass dumps")
    row = next((r for r in res.passes if name in (r["name"], r["alias"]) or r["alias"] == f"{name}Pass"), None)
    if row is None:
        names = sorted({r["name"] for r in res.passes})
        raise UserError(f"{target}: no pass named '{name}' ran (passes: {', '.join(names[:40])}"
                        f"{', ...' if len(names) > 40 else ''})")
    rel = row["file"] if side == "+" else row["before"]
    if rel is None:
        raise UserError(f"{target}: no IR kept {'after' if side == '+' else 'before'} pass '{name}'")
    return (tmp / "passes" / rel).read_text()
