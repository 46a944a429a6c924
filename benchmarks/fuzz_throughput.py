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
    a = p.parse_args()

    from compstack.fuzz.campaign import CampaignOptions, run_campaign

    targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    r = run_campaign(CampaignOptions(targets, a.seed, a.time, None, a.max_nodes, reduce=False,
                                     equivalence=a.equivalence))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
