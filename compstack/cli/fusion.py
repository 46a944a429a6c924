"""``compstack fusion`` and ``compstack profile``: kernels of each target mapped to the source
graph, and their per-kernel times; thin over :func:`compstack.api.kernels` / :func:`compstack.api.profile`."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from compstack.cli.common import check_writable_file, load_source, probe_dir, resolve_one, target_options
from compstack.cli.options import (
    KernelJobFlags,
    kernel_job_options,
    min_runs_option,
    min_time_option,
    target_option,
    targets_option,
    threads_option,
    warmup_option,
)
from compstack.core.errors import UserError

__all__ = ["BAD_STATUSES", "ProfileFlags", "fusion", "fusion_command", "profile", "profile_command"]

#: Job statuses that make the command exit 1 (as ``compare`` does).
BAD_STATUSES = ("failed", "crashed", "timeout", "oom")


@dataclass(frozen=True)
class ProfileFlags:
    """The flags of ``profile`` besides the kernel-job ones.

    Attributes:
        warmup, min_runs, min_time: the latency protocol (``min_time`` in seconds).
        threads: ``--threads`` (None: the physical cores).
        refresh_peak: measure the roofline peaks again.
        trace: Chrome trace-event JSON to write, or None.
    """

    warmup: int = 3
    min_runs: int = 20
    min_time: float = 1.0
    threads: int | None = None
    refresh_peak: bool = False
    trace: str | None = None


def _collect(source: Any, targets: list[str], profile: bool, job: KernelJobFlags, prof: ProfileFlags,
             topts: dict[str, dict[str, str]], quiet: bool) -> list[Any]:
    from compstack import api
    from compstack.cli.common import memory_limit
    from compstack.report.tables import Progress

    options = api.KernelsOptions(targets=targets, profile=profile,
                                 latency=api.LatencyConfig(warmup=prof.warmup, min_runs=prof.min_runs,
                                                           min_time_s=prof.min_time),
                                 limits=api.Limits(timeout_s=job.timeout, memory_mb=memory_limit(job.memory_limit)),
                                 target_options=topts, threads=prof.threads)
    with Progress(enabled=not quiet) as progress:
        import time

        t0 = [0.0]

        def start(name: str) -> None:
            t0[0] = time.monotonic()
            progress.status(f"{'profiling' if profile else 'mapping kernels of'} {name}")

        def done(row: Any) -> None:
            if db is not None:
                db.add_kernels(run_id, command, model, row)  # written the moment the row exists
            if not progress.quiet:
                progress.console.print(f"  {row.target:<16} {row.status} ({time.monotonic() - t0[0]:.1f} s)",
                                       highlight=False)

        from compstack.core.config import settings

        cfg = settings(cache_dir=job.cache_dir)
        db, run_id, command = _open_db(cfg), uuid.uuid4().hex[:12], "profile" if profile else "fusion"
        model = {"name": source.name, "fingerprint": source.fingerprint}
        started = time.time()
        if db is not None:
            _run_row(db, run_id, command, source.name, "running", started)
        status = "failed"
        try:
            run = api.profile if profile else api.kernels
            rows = run(source, targets, options=options, cache_dir=job.cache_dir, on_start=start, on_done=done)
            if job.trt_profile:
                from compstack.fusion.imported import tensorrt_row

                rows.append(tensorrt_row(source.model, job.trt_profile, job.trt_layer_info))
                if db is not None:
                    db.add_kernels(run_id, command, model, rows[-1])
            status = "done"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            if db is not None:
                _run_row(db, run_id, command, source.name, status, started)
                if db.warning:
                    print(f"compstack: {db.warning}", file=sys.stderr)
                db.close()
    return rows


def _open_db(cfg: Any) -> Any:
    """The results database, or None (with a one-line warning on stderr) when its folder
    cannot be made: the rows are then only in this command's output, as before the
    database held them."""
    from compstack.core.results import ResultsDB

    try:
        return ResultsDB(cfg.db, cfg.db_busy_timeout_s)
    except UserError as exc:
        print(f"compstack: warning: {exc}; rows are not recorded", file=sys.stderr)
        return None


def _run_row(db: Any, run_id: str, command: str, model_name: str, status: str, started: float) -> None:
    """The command's row in the ``runs`` table (``running``, then ``done``,
    ``interrupted`` or ``failed``)."""
    from compstack.core.results import Report

    report = Report(model={"name": model_name}, reference={}, run_id=run_id, started=started)
    db.run_status(report, status, command=command)


def _model_info(source: Any, index: Any) -> dict[str, Any]:
    return {"name": source.name, "fingerprint": source.fingerprint, "nodes": len(index.nodes),
            "compute_nodes": len(index.compute), "graph": source.model.graph.name or ""}


def fusion_command(source_loader: Callable[[], Any], targets: list[str], missed: bool, job: KernelJobFlags,
                   topts: dict[str, dict[str, str]]) -> int:
    """``compstack fusion``; returns the exit status.

    Raises:
        UserError: ``--missed`` with fewer than two targets (an imported TensorRT
            profile counts as one).
    """
    from compstack.analysis.fusion.analysis import compare_partitions, missed_fusions
    from compstack.analysis.fusion.report import print_missed, print_nodes, print_partitions, print_summary, to_json
    from compstack.analysis.kernels import GraphIndex

    as_json = job.as_json
    if missed and len(targets) + bool(job.trt_profile) < 2:
        raise UserError("--missed compares targets: give at least two (--targets a,b)")
    source = source_loader()
    rows = _collect(source, targets, False, job, ProfileFlags(), topts, as_json)
    index = GraphIndex(source.model)
    maps = {r.target: r.kernels for r in rows if r.kernels is not None}
    diff = compare_partitions(maps, index) if maps else None
    pairs = missed_fusions(maps, index) if missed else None
    if as_json:
        print(json.dumps(to_json(_model_info(source, index), rows, diff, pairs, None, None), indent=1))
    else:
        print_summary(rows, index, f"{source.name}: kernels and fusion")
        print_nodes(rows, index)
        if diff is not None and len(maps) > 1:
            print_partitions(diff)
        if pairs is not None:
            print_missed(pairs)
    return 1 if any(r.status in BAD_STATUSES for r in rows) else 0


def profile_command(source_loader: Callable[[], Any], targets: list[str], by_node: bool, explorer_dir: Path | None,
                    job: KernelJobFlags, prof: ProfileFlags, topts: dict[str, dict[str, str]]) -> int:
    """``compstack profile``; returns the exit status (1 also when ``--by-node`` found no
    per-kernel times at all)."""
    from compstack.analysis.fusion.analysis import by_node as node_times
    from compstack.analysis.fusion.explorer import export
    from compstack.analysis.fusion.report import print_by_node, print_profile, print_summary, to_json
    from compstack.analysis.fusion.roofline import machine_peak
    from compstack.analysis.kernels import GraphIndex
    from compstack.core.config import settings

    as_json = job.as_json
    source = source_loader()
    rows = _collect(source, targets, True, job, prof, topts, as_json)
    index = GraphIndex(source.model)
    profiled = [r for r in rows if r.profile is not None]
    peak = machine_peak(settings(cache_dir=job.cache_dir).cache_dir, refresh=prof.refresh_peak) \
        if profiled else None
    maps = {r.target: r.kernels for r in rows if r.kernels is not None}
    times = node_times(maps, {r.target: r.profile for r in profiled}, index) if (by_node or explorer_dir) else None
    written = export(explorer_dir, source.name, source.model.graph.name or "main_graph", rows, times or []) \
        if explorer_dir is not None else []
    if prof.trace:
        from compstack.report.trace import write_trace

        write_trace(Path(prof.trace), source.name, rows)
    if as_json:
        doc = to_json(_model_info(source, index), rows, None, None, times if by_node else None, peak)
        if written:
            doc["model_explorer_files"] = [str(p) for p in written]
        if prof.trace:
            doc["trace_file"] = prof.trace
        print(json.dumps(doc, indent=1, default=str))
    else:
        print_summary(rows, index, f"{source.name}: per-kernel time")
        for r in profiled:
            print_profile(r, peak)
        if by_node and times is not None:
            print_by_node(times, [r.target for r in profiled])
        for p in written:
            print(f"  wrote {p}")
        if prof.trace:
            print(f"  wrote {prof.trace} (Chrome trace-event JSON: open it in ui.perfetto.dev)")
    if by_node and not profiled:
        print("compstack: --by-node: no target produced per-kernel times (see each target's status)",
              file=sys.stderr)
        return 1
    return 1 if any(r.status in BAD_STATUSES for r in rows) else 0


def _kernel_flags(job: KernelJobFlags) -> dict[str, dict[str, str]]:
    """Check the TensorRT files and ``--option`` values; the parsed target options."""
    if job.trt_layer_info and not job.trt_profile:
        raise UserError("--trt-layer-info needs --trt-profile (the trtexec --exportProfile JSON)")
    if job.trt_profile:  # bad files fail before any target runs
        from compstack.targets.trt.profile import load_layer_info, load_profile

        load_profile(job.trt_profile, "--trt-profile")
        if job.trt_layer_info:
            load_layer_info(job.trt_layer_info, "--trt-layer-info")
    return target_options(job.target_opts)


@click.command(short_help="Kernels of each target mapped to the source graph; fusion groups compared.")
@click.argument("model")
@targets_option("Comma-separated targets or aliases (cpu, all).")
@click.option("--missed", is_flag=True, help="List producer->consumer pairs fused by one target and not another.")
@click.option("--by-node", is_flag=True, hidden=True)
@kernel_job_options
def fusion(model: str, targets_spec: str, missed: bool, by_node: bool, job_flags: KernelJobFlags) -> None:
    """Map every kernel/dispatch/fusion of each target back to MODEL's nodes: kernel counts,
    coverage, the kernel computing each node, and where the partitions differ.

    Exit status: 0 when every target's kernels were mapped (an unsupported or unavailable
    target too); 1 when a target failed, crashed, timed out or ran out of memory; 2 on bad
    input; 130 after Ctrl-C, 143 after SIGTERM.

    Examples:

        \b
        compstack fusion zoo:mlp --targets ort-cpu
        compstack fusion zoo:cnn --targets tvm-llvm,iree-llvm-cpu --missed
        compstack fusion zoo:bert --targets cpu --json
    """
    from compstack.api import resolve_targets

    if by_node:
        raise UserError("--by-node needs per-kernel times: use `compstack profile MODEL --by-node`")
    targets = resolve_targets(targets_spec)
    topts = _kernel_flags(job_flags)
    sys.exit(fusion_command(lambda: load_source(model, job_flags.cache_dir, job_flags.timeout, job_flags.memory_limit),
                            targets, missed, job_flags, topts))


@click.command(short_help="Per-kernel time from each stack's own profiler, mapped to the source graph.")
@click.argument("model")
@target_option(required=False, help="One target.", both=False)
@targets_option("Comma-separated targets or aliases (cpu, all) [default: cpu].", default=None, both=False)
@click.option("--by-node", is_flag=True, help="Each source node's share of the time on each target.")
@click.option("--export-model-explorer", "explorer_dir", type=click.Path(file_okay=False),
              help="Write Model Explorer node-data files (per-node time, kernel per target) to this folder.")
@warmup_option()
@min_runs_option("At least this many profiled runs...")
@min_time_option("...and enough for this many seconds at the measured latency (at most 200 runs).")
@click.option("--refresh-peak", is_flag=True, help="Measure this machine's roofline peaks again (else cached).")
@click.option("--trace", "trace", type=click.Path(dir_okay=False),
              help="Write a Chrome trace-event JSON (ui.perfetto.dev): per target one median run, kernels as slices.")
@threads_option()
@kernel_job_options
def profile(model: str, target: str | None, targets_spec: str | None, by_node: bool, explorer_dir: str | None,
            warmup: int, min_runs: int, min_time: float, refresh_peak: bool, trace: str | None,
            threads: int | None, job_flags: KernelJobFlags) -> None:
    """Time every kernel of MODEL on each target with the stack's own profiler (warm-up,
    repeats, median, CV), beside the end-to-end latency; roofline placement per kernel.

    Exit status: 0 when every target was profiled (an unsupported or unavailable target too); 1
    when a target failed, crashed, timed out or ran out of memory, or --by-node found no
    per-kernel time at all; 2 on bad input; 130 after Ctrl-C, 143 after SIGTERM.

    Examples:

        \b
        compstack profile zoo:bert --target iree-llvm-cpu
        compstack profile zoo:bert --targets all --by-node --json
        compstack profile zoo:cnn --targets cpu --trace trace.json
    """
    from compstack.api import resolve_targets

    if target and targets_spec:
        raise UserError("--target and --targets: give one of them")
    targets = [resolve_one(target)] if target else resolve_targets(targets_spec or "cpu")
    folder = probe_dir(Path(explorer_dir), f"--export-model-explorer {explorer_dir}: folder not writable") \
        if explorer_dir else None
    check_writable_file(trace, "--trace")
    topts = _kernel_flags(job_flags)
    prof = ProfileFlags(warmup=warmup, min_runs=min_runs, min_time=min_time, threads=threads,
                        refresh_peak=refresh_peak, trace=trace)
    sys.exit(profile_command(lambda: load_source(model, job_flags.cache_dir, job_flags.timeout,
                                                 job_flags.memory_limit),
                             targets, by_node, folder, job_flags, prof, topts))
