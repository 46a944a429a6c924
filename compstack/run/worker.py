"""The one worker entry point: ``python -P -m compstack.run.worker JOB.json`` runs one job;
``python -P -m compstack.run.worker --serve SPEC.json`` serves many (the pool executor).

:func:`execute` runs a :class:`~compstack.run.jobs.Job` in this process: the ``import``
stage (target class, thread knob, availability, options; for a model task the model and
its source, :func:`compstack.run.jobs.load_job_model`; then the target, built once from
its options and a :class:`~compstack.targets.base.LowerRequest`), then the job's task (:mod:`compstack.run.tasks`, by ``Job.kind``). A stack's exception
becomes the outcome's status (``unsupported``, ``unavailable``, ``timeout`` for a
compiler tool that hung, ``failed``); compstack's own bugs propagate.

Results are written by one writer, :func:`write_result` (``result.json`` beside the job,
:func:`compstack.core.integrity.atomic_write`: a reader sees no file or the whole one).
Progress (one ``<time> <stage>`` line per stage) goes to ``progress`` beside it, which is
how the parent names the stage of a worker it had to kill.

Serve mode speaks the line protocol of :class:`compstack.run.pool.WorkerProcess` on a
private pipe (whatever the stacks print goes to stderr): ``{"ready": true, "versions",
"available", "reason"}`` once the target class is imported, then for each job-file path
read from stdin, ``{"progress": STAGE}`` lines and ``{"result": RESULT_PATH}``. The spec
is ``{"target_ref": "module:Class"}``: one worker serves one target.

A worker leaves with :func:`os._exit` once its result is written and its streams are
flushed: interpreter shutdown (module finalisers, the stacks' thread pools) costs up to
1.3 s for Inductor and produces nothing (issue #12, part 7).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from compstack.core.errors import CompstackError, ToolTimeoutError, UnavailableError, UnsupportedError, UserError
from compstack.core.procs import kill_escaped
from compstack.core.tools import scratch_root
from compstack.run.jobs import (
    Job,
    JobOutcome,
    _apply_threads,
    _first_line,
    _tool_context,
    load_job_model,
    load_target_class,
    outcome_to_json,
    prepare_worker,
)

__all__ = ["execute", "write_result", "current_job_file", "main"]

_AVAIL: dict[type, Any] = {}
_CURRENT: list[Path] = []


def current_job_file() -> Path | None:
    """The job file this worker process is running now (None outside a worker job)."""
    return _CURRENT[-1] if _CURRENT else None


def _availability(cls: Any) -> Any:
    """``cls.availability()``, asked once per process (a pool worker serves many jobs)."""
    if cls not in _AVAIL:
        _AVAIL[cls] = cls.availability()
    return _AVAIL[cls]


def _no(job: Job) -> bool:
    return False


def execute(job: Job, progress: Callable[[str], None] | None = None) -> JobOutcome:
    """Run one job in this process (see the module docstring).

    Args:
        job: the job.
        progress: called with each stage's name as it starts.

    Returns:
        The :class:`JobOutcome`; ``stage`` is empty when the job finished.

    Raises:
        UserError: a bad option or input (the caller turns it into the row).
        ValueError: an unknown ``job.kind``.
    """
    import traceback

    from compstack.run.tasks import task

    body = task(job.kind)
    outcome = JobOutcome(target=job.target)

    def stage(name: str) -> None:
        outcome.stage = name
        if progress:
            progress(name)

    try:
        stage("import")
        cls = load_target_class(job.target_ref)
        threads = _apply_threads(cls, job.threads)
        avail = _availability(cls)
        outcome.versions = dict(avail.versions)
        if not avail.ok:
            raise UnavailableError(avail.reason)
        if "@" in job.target:  # a release's worker: its env's stack, checked here
            from compstack.run.releases import check_version

            check_version(job.target, outcome.versions)
        outcome.extra["runs_here"] = avail.runs
        if not avail.runs:
            outcome.extra["run_reason"] = avail.run_reason
        from compstack.targets.base import LowerRequest  # loaded with the target class

        options = cls.Options.from_strings(job.options, owner=job.target)
        outcome.flags = {"threads": threads}
        if threads.get("requested") and not threads.get("honoured"):
            outcome.extra.setdefault("notes", []).append(
                f"--threads {threads['requested']} not applied: {threads.get('note') or 'no knob'}")
        request = LowerRequest(threads=max(job.threads, 0), cache_root=Path(job.cache_dir) if job.cache_dir else None,
                               record_stages=bool(getattr(body, "records_stages", _no)(job)))
        kept = getattr(body, "has_kept", None)  # a long-lived worker kept this job's compiled program
        if kept is not None and kept(job, cls, options, outcome.versions):
            body.run(job, cls(options, request), outcome, stage, avail, model=None)
        else:
            model, target = _model_and_target(job, body, cls, options, request, outcome, threads)
            if model is not None:
                body.run(job, target, outcome, stage, avail, model=model)
            else:
                body.run(job, target, outcome, stage, avail)
        outcome.stage = ""
    except UnsupportedError as exc:
        outcome.status, outcome.error, outcome.unsupported_ops = "unsupported", str(exc), exc.ops
        _tool_context(exc, outcome)
    except UnavailableError as exc:
        outcome.status, outcome.error = "unavailable", str(exc)
    except UserError:
        raise
    except ToolTimeoutError as exc:  # a compiler tool hung and was killed: the row times out
        outcome.status, outcome.error, outcome.log = "timeout", str(exc), exc.stderr_tail
        _tool_context(exc, outcome)
    except CompstackError as exc:  # ToolError and friends: the stack failed
        outcome.status, outcome.error = "failed", str(exc)
        outcome.log = getattr(exc, "stderr_tail", "") or traceback.format_exc()
        _tool_context(exc, outcome)
    except Exception as exc:  # noqa: BLE001 - a stack's own exception is data here
        outcome.status, outcome.error, outcome.log = "failed", _first_line(exc), traceback.format_exc()
    return outcome


def _model_and_target(job: Job, body: Any, cls: Any, options: Any, request: Any, outcome: JobOutcome,
                      threads: dict[str, Any]) -> tuple[Any, Any]:
    """For a model task (``MODEL_TASK``), the job's model and source loaded first
    (:func:`compstack.run.jobs.load_job_model`), then the target built once from the
    completed request; ``outcome.flags`` from that target (keeping ``threads``). Returns
    ``(model or None, target)``."""
    model = None
    if getattr(body, "MODEL_TASK", False):
        try:
            model, request = load_job_model(job, cls, options, request)
        except Exception:  # the row still says how the stack would have been invoked
            outcome.flags = {**cls(options, request).flags(), "threads": threads}
            raise
    target = cls(options, request)
    outcome.flags = target.flags()
    if target.native_note:
        outcome.flags["native_note"] = target.native_note
    outcome.flags["threads"] = threads
    return model, target


def write_result(job: Job, outcome: JobOutcome) -> Path:
    """Write ``outcome`` as ``job.result_path`` (atomically); returns the path.

    Raises:
        OSError: the job folder is not writable.
    """
    from compstack.core.integrity import atomic_write

    atomic_write(job.result_path, outcome_to_json(outcome))  # a torn result.json is never seen
    return job.result_path


def run_job_file(path: Path, pipe: Any = None) -> Path:
    """Load the job at ``path``, run it, write its result; progress goes to the job's
    ``progress`` file and, in serve mode, to ``pipe``. Returns the result path."""
    job = Job.load(path)

    def progress(name: str) -> None:
        with open(job.progress_path, "a") as f:
            f.write(f"{time.time():.3f} {name}\n")
        if pipe is not None:
            pipe.write(json.dumps({"progress": name}) + "\n")

    _CURRENT.append(Path(path))
    scratch_root(job.tmp_path)
    try:
        try:
            outcome = execute(job, progress)
        except (UserError, ValueError) as exc:
            outcome = JobOutcome(target=job.target, status="failed", stage="import", error=str(exc))
        return write_result(job, outcome)
    finally:
        _CURRENT.pop()
        scratch_root(None)
        job.drop_tmp()  # a compiled program kept for later jobs holds its code in memory, not here
        kill_escaped()  # a subreaper's adopted escapees (setsid, double fork): they end with the job


def _serve(spec_path: Path) -> None:
    spec = json.loads(spec_path.read_text())
    proto = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol pipe
    os.dup2(2, 1)  # whatever the stacks print goes to stderr
    sys.stdout = sys.stderr
    ready: dict[str, Any] = {"ready": True, "versions": {}, "available": True, "reason": ""}
    try:
        cls = load_target_class(spec["target_ref"])
    except (ImportError, AttributeError, ValueError) as exc:  # each job reports it as its row
        ready["load_error"] = _first_line(exc)
    else:
        prepare_worker(cls)
        avail = _availability(cls)
        ready.update(versions=dict(avail.versions), available=avail.ok, reason=avail.reason)
    proto.write(json.dumps(ready) + "\n")
    for line in sys.stdin:
        name = line.strip()
        if name:
            proto.write(json.dumps({"result": str(run_job_file(Path(name), proto))}) + "\n")
    proto.flush()


def main(argv: list[str] | None = None) -> int:
    """Worker entry point (see the module docstring); never returns: leaves with
    :func:`os._exit` once everything is written."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--serve":
        _serve(Path(args[1]))
    else:
        job = Job.load(Path(args[0]))
        try:
            prepare_worker(load_target_class(job.target_ref))
        except (ImportError, AttributeError, ValueError):
            pass  # execute() reports a target that does not load
        run_job_file(Path(args[0]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.modules.setdefault("compstack.run.worker", sys.modules[__name__])  # one module, for current_job_file()
    main()
