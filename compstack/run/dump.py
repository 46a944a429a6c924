"""``compstack dump`` and dump specs: the IR at every stage and after every pass.

A dump runs as a worker job (``Job.kind == "dump"``, :mod:`compstack.run.tasks.dump`) like every other job, so a stack
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
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.errors import UserError
from compstack.core.procs import run_tempdir
from compstack.ops._registry import origins_for
from compstack.run.executors import Executor, Limits, open_executor
from compstack.run.jobs import Job, JobOutcome, pack_sets
from compstack.run.tasks.dump import stage_of as _stage_of

__all__ = ["DumpResult", "check_stages", "dump", "parse_spec", "resolve_text", "stage_list"]


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
         limits: Limits = Limits(), executor: str | Executor = "") -> DumpResult:
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
        executor: where the job runs (:func:`compstack.run.executors.open_executor`;
            default ``process``).

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
                  target_ref=registry.ref(target),
                  inputs_path=str(inputs), workdir=str(work / "job"), options=dict(options or {}),
                  cache_dir=str(cache_dir) if cache_dir else None, stages_dir=str(folder), run=False,
                  kind="dump", only_stages=list(stages) if stages else None, passes=passes,
                  source=source.spec, source_framework=source.framework,
                  op_origins=origins_for(source.model))
        runner, owned = open_executor(executor)
        try:
            outcome = runner.run(job, limits)
        finally:
            if owned:
                runner.close()
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
