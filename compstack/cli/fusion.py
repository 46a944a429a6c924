"""The bodies of ``compstack fusion`` and ``compstack profile`` (the CLI parses flags and
calls :func:`fusion_command` / :func:`profile_command`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

from compstack.core.errors import UserError

__all__ = ["fusion_command", "profile_command", "BAD_STATUSES"]

#: Job statuses that make the command exit 1 (as ``compare`` does).
BAD_STATUSES = ("failed", "crashed", "timeout", "oom")


def _collect(source: Any, targets: list[str], profile: bool, kw: dict[str, Any], quiet: bool) -> list[Any]:
    from compstack.core.config import settings
    from compstack.core.latency import LatencyConfig
    from compstack.fusion.run import KernelsOptions, collect
    from compstack.report.tables import Progress
    from compstack.run.runner import Limits

    options = KernelsOptions(targets=targets, profile=profile,
                             latency=LatencyConfig(warmup=kw.get("warmup", 3), min_runs=kw.get("min_runs", 20),
                                                   min_time_s=kw.get("min_time", 1.0)),
                             limits=Limits(timeout_s=kw["timeout"], memory_mb=kw["memory_limit"]),
                             target_options=kw["target_options"], threads=kw.get("threads"))
    with Progress(enabled=not quiet) as progress:
        import time

        t0 = [0.0]

        def start(name: str) -> None:
            t0[0] = time.monotonic()
            progress.status(f"{'profiling' if profile else 'mapping kernels of'} {name}")

        def done(row: Any) -> None:
            if not progress.quiet:
                progress.console.print(f"  {row.target:<16} {row.status} ({time.monotonic() - t0[0]:.1f} s)",
                                       highlight=False)

        rows = collect(source, options, settings(cache_dir=kw["cache_dir"]), on_start=start, on_done=done)
    if kw.get("trt_profile"):
        from compstack.fusion.imported import tensorrt_row

        rows.append(tensorrt_row(source.model, kw["trt_profile"], kw.get("trt_layer_info")))
    return rows


def _model_info(source: Any, index: Any) -> dict[str, Any]:
    return {"name": source.name, "fingerprint": source.fingerprint, "nodes": len(index.nodes),
            "compute_nodes": len(index.compute), "graph": source.model.graph.name or ""}


def fusion_command(source_loader: Callable[[], Any], targets: list[str], missed: bool, as_json: bool,
                   kw: dict[str, Any]) -> int:
    """``compstack fusion``; returns the exit status.

    Raises:
        UserError: ``--missed`` with fewer than two targets (an imported TensorRT
            profile counts as one).
    """
    from compstack.analysis.fusion.analysis import compare_partitions, missed_fusions
    from compstack.analysis.fusion.report import print_missed, print_nodes, print_partitions, print_summary, to_json
    from compstack.analysis.kernels import GraphIndex

    if missed and len(targets) + bool(kw.get("trt_profile")) < 2:
        raise UserError("--missed compares targets: give at least two (--targets a,b)")
    source = source_loader()
    rows = _collect(source, targets, False, kw, as_json)
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


def profile_command(source_loader: Callable[[], Any], targets: list[str], by_node: bool, as_json: bool,
                    explorer_dir: Path | None, kw: dict[str, Any]) -> int:
    """``compstack profile``; returns the exit status (1 also when ``--by-node`` found no
    per-kernel times at all)."""
    from compstack.analysis.fusion.analysis import by_node as node_times
    from compstack.analysis.fusion.explorer import export
    from compstack.analysis.fusion.report import print_by_node, print_profile, print_summary, to_json
    from compstack.analysis.fusion.roofline import machine_peak
    from compstack.analysis.kernels import GraphIndex
    from compstack.core.config import settings

    source = source_loader()
    rows = _collect(source, targets, True, kw, as_json)
    index = GraphIndex(source.model)
    profiled = [r for r in rows if r.profile is not None]
    peak = machine_peak(settings(cache_dir=kw["cache_dir"]).cache_dir, refresh=kw.get("refresh_peak", False)) \
        if profiled else None
    maps = {r.target: r.kernels for r in rows if r.kernels is not None}
    times = node_times(maps, {r.target: r.profile for r in profiled}, index) if (by_node or explorer_dir) else None
    written = export(explorer_dir, source.name, source.model.graph.name or "main_graph", rows, times or []) \
        if explorer_dir is not None else []
    if kw.get("trace"):
        from compstack.report.trace import write_trace

        write_trace(Path(kw["trace"]), source.name, rows)
    if as_json:
        doc = to_json(_model_info(source, index), rows, None, None, times if by_node else None, peak)
        if written:
            doc["model_explorer_files"] = [str(p) for p in written]
        if kw.get("trace"):
            doc["trace_file"] = kw["trace"]
        print(json.dumps(doc, indent=1, default=str))
    else:
        print_summary(rows, index, f"{source.name}: per-kernel time")
        for r in profiled:
            print_profile(r, peak)
        if by_node and times is not None:
            print_by_node(times, [r.target for r in profiled])
        for p in written:
            print(f"  wrote {p}")
        if kw.get("trace"):
            print(f"  wrote {kw['trace']} (Chrome trace-event JSON: open it in ui.perfetto.dev)")
    if by_node and not profiled:
        print("compstack: --by-node: no target produced per-kernel times (see each target's status)",
              file=sys.stderr)
        return 1
    return 1 if any(r.status in BAD_STATUSES for r in rows) else 0
