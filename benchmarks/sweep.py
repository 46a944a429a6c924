"""Sweep throughput: the local executor vs Ray on this machine, and a projection to N nodes.

Runs the same sweep (``--models`` x ``--targets``, default the zoo models x the 5 CPU
targets ort-cpu, tvm-llvm, iree-llvm-cpu, xla-cpu, inductor-cpu) twice, each from an empty
cache folder so both executors export the zoo models (the prepare time) and compile
everything (phase 2 then reads phase 1's artifacts, as a real sweep does; XLA and
Inductor compile again): once with :class:`LocalExecutor`, once with :class:`RayExecutor`
on a local Ray cluster of the same CPU count. For each it
prints the wall time (prepare, phase 1 compile/run, phase 2 latency), jobs/s, and the
scheduling overhead per job: for Ray, each task's round trip (submit to result in the
driver) minus the time ``run_isolated`` took inside the task (a fresh Ray worker, the
object-store transfers); a bare no-op Ray task (``max_calls=1``) round trip too. Local
dispatch is a thread handing the job to ``run_isolated`` (the worker's start is part of
the job in both).

Projection: the local run's measured per-job times are scheduled greedily (longest
first) on N nodes of ``--slots-per-node`` slots for phase 1 and one slot per node for
phase 2, plus the measured Ray overhead per job; the critical path (the longest single
job) is the floor. It is a projection from one machine's numbers, not a measurement on
N nodes: transfers of large models and per-node artifact caches are not modelled.

Usage: python benchmarks/sweep.py [--models zoo:mlp,zoo:cnn] [--targets ...] [--jobs 2] [--json]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CPU5 = "ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu"


def _run(kind: str, models: list[str], targets: list[str], jobs: int, cache: Path, db: Path) -> dict[str, Any]:
    from compstack.core.config import Settings
    from compstack.core.latency import LatencyConfig
    from compstack.run.runner import Limits
    from compstack.run.session import CompareOptions
    from compstack.sweep import (
        LocalExecutor,
        RayExecutor,
        SweepOptions,
        run_sweep,
        summarize,
    )

    t0 = time.monotonic()
    ex = LocalExecutor(jobs) if kind == "local" else RayExecutor(num_cpus=jobs)
    start_s = time.monotonic() - t0
    opts = CompareOptions(targets=targets, limits=Limits(timeout_s=900),
                          latency=LatencyConfig(warmup=2, min_runs=10, min_time_s=0.2))
    try:
        sweep = run_sweep(SweepOptions(models, opts, targets[0]), Settings(cache, db), ex)
        described = ex.describe()
        overheads = list(getattr(ex, "round_trips", []))
        noop = _noop_round_trip(ex) if kind == "ray" else None
    finally:
        ex.close()
    s = summarize(sweep)
    return {"executor": kind, "start_s": start_s, "wall_s": sweep.wall_s, "phases": sweep.phases,
            "jobs": sweep.jobs_run, "jobs_per_s": sweep.jobs_run / max(sweep.phases.get("run_s", 0) +
                                                                      sweep.phases.get("latency_s", 0), 1e-9),
            "overhead_ms_median": statistics.median(overheads) * 1e3 if overheads else None,
            "overhead_ms_max": max(overheads) * 1e3 if overheads else None,
            "noop_task_ms": noop, "job_times": sweep.job_times, "described": described,
            "statuses": {f"{m}|{t}": c["status"] for m, cells in s["matrix"].items() for t, c in cells.items()}}


def _noop_round_trip(ex: Any, n: int = 5) -> float:
    """Median ms of a no-op Ray task with ``max_calls=1`` (a fresh worker each), one at a time."""
    ray = ex.ray
    f = ray.remote(max_calls=1)(_noop)
    times = []
    for _ in range(n):
        t = time.monotonic()
        ray.get(f.remote())
        times.append(time.monotonic() - t)
    return statistics.median(times) * 1e3


def _noop() -> int:
    return 0


def _makespan(times: list[float], slots: int) -> float:
    """Greedy longest-first schedule of ``times`` on ``slots`` identical slots."""
    heap = [0.0] * max(1, slots)
    for t in sorted(times, reverse=True):
        heapq.heappush(heap, heapq.heappop(heap) + t)
    return max(heap)


def project(job_times: dict[str, float], nodes: int, slots_per_node: int, overhead_s: float) -> dict[str, float]:
    """Projected phase-1 + phase-2 wall on ``nodes`` nodes (see the module docstring)."""
    lat = [t + overhead_s for k, t in job_times.items() if k.endswith("|latency")]
    p1 = [t + overhead_s for k, t in job_times.items() if not k.endswith("|latency")]
    return {"phase1_s": max(_makespan(p1, nodes * slots_per_node), max(p1, default=0.0)),
            "phase2_s": _makespan(lat, nodes), "critical_path_s": max(p1 + lat, default=0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="zoo:*", help="comma-separated model specs (default: every zoo model)")
    ap.add_argument("--targets", default=CPU5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="slots of both executors")
    ap.add_argument("--slots-per-node", type=int, default=8, help="slots per node in the projection")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from compstack import targets as registry
    from compstack.sweep import expand_models

    models = expand_models(args.models.split(","))
    targets = registry.resolve(args.targets)
    with tempfile.TemporaryDirectory(prefix="compstack-bench-sweep-") as tmp:
        runs = []
        for kind in ("local", "ray"):  # each from an empty cache: zoo exports (prepare) and every compile
            cache = Path(tmp) / f"{kind}-cache"
            runs.append(_run(kind, models, targets, args.jobs, cache, Path(tmp) / f"{kind}.sqlite"))
    local, ray = runs
    over_s = (ray["overhead_ms_median"] or 0.0) / 1e3
    proj = {n: project(local["job_times"], n, args.slots_per_node, over_s) for n in (1, 2, 4, 8, 16)}
    same = local["statuses"] == ray["statuses"]
    out = {"models": models, "targets": targets, "jobs": args.jobs, "runs": runs, "projection": proj,
           "same_statuses": same}
    if args.json:
        print(json.dumps(out, indent=1, default=str))
        return
    print(f"sweep benchmark: {len(models)} models x {len(targets)} targets, {args.jobs} slots, empty cache each")
    for r in runs:
        ph = r["phases"]
        om = f"{r['overhead_ms_median']:.0f} ms median (max {r['overhead_ms_max']:.0f})" \
            if r["overhead_ms_median"] is not None else "~0 (a thread calls run_isolated)"
        print(f"  {r['executor']:<5} wall {r['wall_s']:7.1f} s (start {r['start_s']:.1f}, prepare "
              f"{ph.get('prepare_s', 0):.1f}, phase 1 {ph.get('run_s', 0):.1f}, latency {ph.get('latency_s', 0):.1f}); "
              f"{r['jobs']} jobs, {r['jobs_per_s']:.3f} jobs/s; scheduling overhead per job: {om}"
              + (f"; no-op task round trip {r['noop_task_ms']:.0f} ms" if r["noop_task_ms"] else ""))
    print(f"  same statuses local vs Ray: {same}")
    print(f"  projected on N nodes x {args.slots_per_node} slots (from the local per-job times + "
          f"{over_s * 1e3:.0f} ms Ray overhead per job; a projection, not a measurement):")
    for n, p in proj.items():
        print(f"    N={n:<3} phase 1 {p['phase1_s']:7.1f} s + latency {p['phase2_s']:6.1f} s = "
              f"{p['phase1_s'] + p['phase2_s']:7.1f} s (critical path: longest job {p['critical_path_s']:.1f} s)")
    slow = sorted(local["job_times"].items(), key=lambda kv: -kv[1])[:5]
    print("  longest jobs (local): " + ", ".join(f"{k} {v:.1f} s" for k, v in slow))


if __name__ == "__main__":
    sys.exit(main())
