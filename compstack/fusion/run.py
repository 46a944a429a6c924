"""Parent side of ``compstack fusion`` / ``compstack profile``: one isolated worker job per
target (:mod:`compstack.run.executors`, task :mod:`compstack.run.tasks.kernels`), as ``compstack compare`` does, so a stack
that crashes costs its own row only.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from compstack.analysis.kernels import KernelMap, KernelProfile
from compstack.core import ir as cir
from compstack.core.config import Settings
from compstack.core.inputs import input_sets, save_npz
from compstack.core.latency import LatencyConfig
from compstack.core.procs import run_tempdir
from compstack.ops._registry import origins_for
from compstack.run.executors import Executor, Limits, open_executor
from compstack.run.jobs import Job, JobOutcome, pack_sets
from compstack.run.tasks.kernels import Result as KernelsResult

__all__ = ["KernelsOptions", "TargetKernels", "collect"]


@dataclass
class KernelsOptions:
    """What a fusion/profile run needs besides the model.

    Attributes:
        targets: resolved target names.
        profile: also time each kernel (job kind ``profile``), else only map kernels.
        latency: the protocol for the end-to-end latency and the per-kernel profile.
        limits: per-job time and memory limits.
        seed: seed of generated inputs (the model's own example inputs win).
        target_options: ``{target: {option: value}}``.
        isolate: run jobs in worker processes (False: inline, for debugging).
        threads: threads per stack (None: :func:`compstack.core.threads.default_threads`;
            0: each stack's own default).
        executor: where the jobs run (:func:`compstack.run.executors.open_executor`).
    """

    targets: list[str]
    profile: bool = False
    latency: LatencyConfig = field(default_factory=LatencyConfig)
    limits: Limits = field(default_factory=Limits)
    seed: int = 0
    target_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    isolate: bool = True
    threads: int | None = None
    executor: str | Executor = ""


@dataclass
class TargetKernels:
    """One target's row: status of its job, its kernel map and profile when it got them.

    Attributes:
        target: the target name.
        status: the job's status (``ok``, ``unsupported``, ``failed``, ``crashed``...).
        stage: the stage it stopped in, when not ok.
        error: one line.
        kernels: the :class:`KernelMap`, or None.
        profile: the :class:`KernelProfile`, or None.
        notes: why a part is missing ("not available for this target") and other remarks.
        flags, versions, compile_s: as in ``compstack compare``.
    """

    target: str
    status: str
    stage: str = ""
    error: str = ""
    kernels: KernelMap | None = None
    profile: KernelProfile | None = None
    notes: list[str] = field(default_factory=list)
    flags: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    compile_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "status": self.status, "stage": self.stage, "error": self.error,
                "kernels": self.kernels.to_json() if self.kernels else None,
                "profile": self.profile.to_json() if self.profile else None, "notes": self.notes,
                "flags": self.flags, "versions": self.versions, "compile_s": self.compile_s}


def _ref_of(name: str) -> str:
    from compstack import targets as registry

    return registry.ref(name)


def _row(outcome: JobOutcome) -> TargetKernels:
    res = KernelsResult.from_json(outcome.result)
    row = TargetKernels(target=outcome.target, status=outcome.status, stage=outcome.stage, error=outcome.error,
                        flags=dict(outcome.flags), versions=dict(outcome.versions))
    if outcome.compile_s is not None:
        row.compile_s = (outcome.lower_s or 0.0) + outcome.compile_s
    if res.kernels:
        row.kernels = KernelMap.from_json(res.kernels)
    if res.profile:
        row.profile = KernelProfile.from_json(res.profile)
    row.notes = [n for n in (res.kernels_note, res.profile_note) if n]
    return row


def collect(source: cir.SourceModel, options: KernelsOptions, settings: Settings,
            on_start: Callable[[str], None] | None = None,
            on_done: Callable[[TargetKernels], None] | None = None) -> list[TargetKernels]:
    """Run a ``kernels`` (or ``profile``) job for each target of ``options``.

    Raises:
        UserError: unwritable cache folder.
    """
    from compstack.run.session import model_file

    model_path = model_file(source, settings.cache_dir)
    executor, owned = open_executor(options.executor, options.isolate, multi=len(options.targets) > 1)
    work = run_tempdir("compstack-kernels-")
    rows = []
    try:
        count = options.latency.input_sets if options.profile else 1
        sets = input_sets(cir.graph_inputs(source.model), count, options.seed, source.example_inputs or None,
                          source.val_ranges, {})
        inputs_path = work / "inputs.npz"
        save_npz(inputs_path, pack_sets(sets))
        from compstack.core.threads import requested_threads

        threads = requested_threads(options.threads)
        for name in options.targets:
            if on_start:
                on_start(name)
            job = Job(model_path=str(model_path), fingerprint=source.fingerprint, target=name,
                      target_ref=_ref_of(name), inputs_path=str(inputs_path), workdir=str(work / name),
                      options=dict(options.target_options.get(name, {})), cache_dir=str(settings.cache_dir),
                      latency=vars(options.latency), kind="profile" if options.profile else "kernels",
                      source=source.spec, source_framework=source.framework, threads=threads,
                      op_origins=origins_for(source.model))
            outcome = executor.run(job, options.limits)
            row = _row(outcome)
            rows.append(row)
            if on_done:
                on_done(row)
    finally:
        if owned:
            executor.close()
        shutil.rmtree(work, ignore_errors=True)
    return rows
