"""Throughput of ``compstack fuzz``: graphs per minute across the CPU stacks.

    python benchmarks/fuzz_throughput.py                                  # the five CPU stacks, 3 minutes
    python benchmarks/fuzz_throughput.py --targets ort-cpu,tvm-llvm --time 60 --max-nodes 8

Runs a campaign without reduction (every graph on every target, plus the equivalence
rewrite on half of them, as ``compstack fuzz`` does by default) through the explain
Evaluator's long-lived workers, then prints graphs/minute, the evaluations per target,
the time per target and stage (import, lower, compile, run, measured from the worker's
progress messages) and compstack's own time (generation with its reference run,
judging). Stack start-up (the first ``import`` of each worker) is inside the budget.
Goal (issue #16): >= 20 graphs/minute across the five CPU stacks on a 2-core machine.

    python benchmarks/fuzz_throughput.py --executor ray --workers 1,2 --time 150

runs the same seeded campaign locally and then on a local Ray cluster with each number of
Ray workers (actors, :mod:`compstack.fuzz.ray_exec`), each for ``--time`` seconds
(Ray's start-up inside the budget, as the stacks' is), and prints graphs/minute per run,
the speed-up over local, and a projection for N nodes: N times the best measured
per-node rate, capped by the driver (which generates every graph and its reference and
absorbs every result, one at a time: its measured seconds per graph bound the campaign).
The projection assumes nodes like this one, each running its own workers, and no
reduction (``--no-reduce``); it is arithmetic on these measurements, not a measurement.
"""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", default="ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu")
    p.add_argument("--time", type=float, default=180.0, help="budget, seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-nodes", type=int, default=6)
    p.add_argument("--equivalence", type=float, default=0.5)
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="ray: a local run, then one Ray run per --workers count")
    p.add_argument("--workers", default="1,2", help="Ray worker counts to measure (with --executor ray)")
    p.add_argument("--nodes", default="1,2,4,8,16", help="node counts to project for (with --executor ray)")
    a = p.parse_args()

    targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    if a.executor == "ray":
        return ray_scaling(a, targets)
    r = measure(a, targets)
    report(r, targets)
    return 0


def measure(a: argparse.Namespace, targets: list[str], executor: str = "local", workers: int | None = None) -> dict:
    """One campaign without reduction; its record."""
    from compstack.fuzz.campaign import CampaignOptions, run_campaign

    return run_campaign(CampaignOptions(targets, a.seed, a.time, None, a.max_nodes, reduce=False,
                                        equivalence=a.equivalence, executor=executor, workers=workers))


def ray_scaling(a: argparse.Namespace, targets: list[str]) -> int:
    """Local, then Ray with each worker count: graphs/minute, speed-up, projection."""
    import os

    runs = [("local", None, measure(a, targets))]
    for w in [int(x) for x in a.workers.split(",") if x.strip()]:
        runs.append((f"ray x{w}", w, measure(a, targets, "ray", w)))
    base = runs[0][2]["graphs_per_min"]
    load = os.getloadavg()
    print(f"fuzz throughput on {os.cpu_count()} CPU(s), load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, "
          f"{len(targets)} targets ({', '.join(targets)}), {a.time:g} s per run, seed {a.seed}")
    print(f"  {'run':10s} {'graphs':>6s} {'seconds':>8s} {'graphs/min':>10s} {'vs local':>8s} "
          f"{'driver s/graph':>14s}")
    driver = []
    for name, _w, r in runs:
        own = r["own_seconds"]
        busy = r["executor"].get("driver_s", own.get("generate", 0.0) + own.get("judge", 0.0))
        per = busy / max(r["graphs"], 1)  # ray: measured busy time of the driver; local: generate + judge
        if "driver_s" in r["executor"]:
            driver.append(per)
        print(f"  {name:10s} {r['graphs']:6d} {r['seconds']:8.0f} {r['graphs_per_min']:10.1f} "
              f"{r['graphs_per_min'] / max(base, 1e-9):7.2f}x {per:14.3f}")
    best = max(runs[1:], key=lambda x: x[2]["graphs_per_min"]) if len(runs) > 1 else runs[0]
    node_rate = best[2]["graphs_per_min"]
    cap = 60.0 / max(max(driver, default=0.0), 1e-9)
    print(f"  projection (not measured): N nodes like this one x {node_rate:.1f} graphs/min (best per-node run, "
          f"{best[0]}), capped at {cap:.0f} graphs/min by the driver's measured busy seconds per graph")
    for n in [int(x) for x in a.nodes.split(",") if x.strip()]:
        print(f"    {n:3d} node(s): {min(n * node_rate, cap):8.1f} graphs/min")
    return 0


def report(r: dict, targets: list[str]) -> None:
    """The one-run printout: graphs/minute, evaluations and seconds per target and stage."""
    print(f"{r['graphs']} graphs in {r['seconds']:.0f} s on {len(targets)} targets: "
          f"{r['graphs_per_min']:.1f} graphs/min ({r['graphs'] * len(targets) / max(r['seconds'], 1e-9) * 60:.0f} "
          f"graph-target evaluations/min, rewrites not counted)")
    for t in targets:
        secs = r["stage_seconds"].get(t, {})
        n = sum(v for k, v in r["outcomes"].get(t, {}).items())
        print(f"  {t:15s} {n:4d} evaluations  " + "  ".join(f"{k} {v:6.1f}s" for k, v in secs.items())
              + f"  total {sum(secs.values()):6.1f}s")
    own = r["own_seconds"]
    print("  compstack      " + "  ".join(f"{k} {v:.1f}s" for k, v in own.items()))
    print(f"  unique findings seen (unreduced): {len(r['findings'])}")


if __name__ == "__main__":
    sys.exit(main())
