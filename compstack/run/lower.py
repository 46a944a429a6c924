"""``compstack lower``: lower and compile one model for one target into a folder.

The folder receives the artifact (``model.vmfb``, ``model.so``, ``optimized.onnx``...),
``stages/NN-<stage>.<ext>`` with the IR at every stage, and ``manifest.json``: target,
device, flags, stack versions, model fingerprint, the inputs' names, shapes and dtypes,
and, where the stack has one, the command line of its own tool that runs the artifact.
When lowering or compiling fails, the manifest still lists the stages written
(``stages``), names the stage that failed (``failed_stage``: an IR stage, or ``compile``),
and carries the stack's error and log tail, the failing tool's command line (``command``)
and a hint where compstack knows one.
The job runs in a worker process like every other job.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Mapping

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.config import settings
from compstack.core.errors import UserError
from compstack.core.inputs import input_sets, save_npz
from compstack.core.outdir import claim_dir
from compstack.core.procs import run_tempdir
from compstack.ops._registry import origins_for
from compstack.run.jobs import Job, pack_sets
from compstack.run.runner import Limits, run_isolated
from compstack.run.session import model_file, stack_model_file

__all__ = ["lower_to_folder"]


def lower_to_folder(source: cir.SourceModel, target: str, out: Path, options: Mapping[str, str],
                    kw: Mapping[str, Any]) -> dict[str, Any]:
    """Lower + compile ``source`` for ``target`` into ``out``; returns the manifest.

    Args:
        source: the imported model.
        target: a registered target name.
        out: a writable folder.
        options: the target's options as strings.
        kw: CLI values used here: ``cache_dir``, ``timeout``, ``memory_limit``, ``seed``,
            ``opset`` (upgrade the model the stack gets; default: as written).

    Returns:
        The manifest (also written to ``out/manifest.json``), with ``status``,
        ``stage`` and ``error`` of the job.

    Raises:
        UserError: ``out`` (or the temporary folder) ran out of space or refused a write.
    """
    claimed = claim_dir(out, "lower")  # removes only what an earlier lower recorded (core.outdir)
    cfg = settings(cache_dir=kw.get("cache_dir"))
    cls = registry.get(target)
    model_inputs = cir.graph_inputs(source.model)
    static = all(i.is_static for i in model_inputs) or source.example_inputs
    sets = input_sets(model_inputs, 1, kw.get("seed", 0), source.example_inputs or None,
                      source.val_ranges) if static else []
    work = run_tempdir("compstack-lower-")
    try:
        inputs_path = work / "inputs.npz"
        save_npz(inputs_path, pack_sets(sets))
        stack = stack_model_file(source, cfg.cache_dir, kw.get("opset"))
        canonical = model_file(source, cfg.cache_dir)
        job = Job(model_path=str(stack.path), fingerprint=stack.fingerprint,
                  canonical_path=str(canonical) if canonical != stack.path else "",
                  target=target, target_ref=registry.ref(target),
                  inputs_path=str(inputs_path), workdir=str(work / "job"), options=dict(options),
                  cache_dir=None, latency=None, artifact_dir=str(out), stages_dir=str(out / "stages"), run=False,
                  source=source.spec, source_framework=source.framework,
                  op_origins=origins_for(source.model))
        outcome = run_isolated(job, Limits(timeout_s=kw.get("timeout", 900), memory_mb=kw.get("memory_limit", 0)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    manifest = {
        "target": target, "device": cls.device, "stack": cls.stack,
        "status": outcome.status, "stage": outcome.stage, "error": outcome.error,
        "model": {"name": source.name, "fingerprint": source.fingerprint},
        "inputs": [{"name": i.name, "dtype": str(i.dtype), "shape": list(i.shape)} for i in model_inputs],
        "outputs": [{"name": v.name, "dtype": str(v.dtype.numpy()) if v.dtype else None,
                     "shape": [d if isinstance(d, int) else str(d) for d in v.shape] if v.shape is not None else None}
                    for v in source.model.graph.outputs],
        "flags": {**stack.flags(), **outcome.flags}, "versions": outcome.versions,
        "lower_s": outcome.lower_s, "compile_s": outcome.compile_s,
        "artifacts": [str(Path(a).relative_to(out)) if Path(a).is_relative_to(out) else a
                      for a in outcome.artifacts],
        "stages": outcome.stages,
        "failed_stage": outcome.extra.get("failed_stage", ""),
        "command": outcome.extra.get("command", ""),
        "temps": outcome.extra.get("temps", ""),
        "hint": outcome.extra.get("hint", ""),
        "log": outcome.log if outcome.status != "ok" else "",
        "run_command": outcome.extra.get("run_command", ""),
        "runs_here": outcome.extra.get("runs_here"),
        "run_reason": outcome.extra.get("run_reason", ""),
    }
    _check_disk(outcome, out)
    try:
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    except OSError as exc:
        raise UserError(f"-o {out}: cannot write manifest.json ({exc.strerror or exc})") from None
    return claimed.done(manifest)


#: A job's error that says the disk refused a write: no space, file too large, quota,
#: read-only file system. That is the user's folder, not the stack, failing.
_DISK_ERRORS = re.compile(r"\[Errno (28|27|30|122)\] ([^:'\]]+)")


def _check_disk(outcome: Any, out: Path) -> None:
    """Raise UserError when the job failed because a write was refused by the disk.

    Raises:
        UserError: ``-o OUT: <why> while writing the artifact``.
    """
    m = _DISK_ERRORS.search(outcome.error or "") if outcome.status == "failed" else None
    if m:
        raise UserError(f"-o {out}: {m.group(2).strip()} while {outcome.target} wrote the artifact and stages "
                        "(or its temporary files)")
