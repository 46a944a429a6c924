"""A short tuning budget against a long one (issue #26, part 2): is 5 minutes of MetaSchedule
enough, or do you need 30?

Runs ``compstack compare MODEL --targets tvm-llvm --json`` untuned and then once per budget
(``--option tvm-llvm:tune=B``), each tuned run in its own fresh store so nothing is reused,
and prints per run: the end-to-end median and p90 (ms), trials, trials per minute of search,
tasks tuned and untuned, and the tuning curve from the row (estimated latency against trials).
It ends with each budget's median over the longest budget's, the number the issue's goal is
stated in (5 minutes within 2x of what 30 minutes finds).

Usage: python benchmarks/tune_budgets.py [--model zoo:cnn] [--budgets 5m,30m] [--threads 0]
The machine's load is printed before and after each run; every number is measured by the run
it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def compare(model: str, threads: int, option: str | None) -> dict:
    """One ``compstack compare --json`` of tvm-llvm in a fresh store; its row and wall time."""
    with tempfile.TemporaryDirectory(prefix="cs-budget-") as tmp:
        env = {**os.environ, "COMPSTACK_CACHE_DIR": f"{tmp}/cache", "COMPSTACK_DB": f"{tmp}/db.sqlite"}
        argv = [sys.executable, "-m", "compstack.cli", "compare", model, "--targets", "tvm-llvm", "--threads",
                str(threads), "--json", "--timeout", "900"] + (["--option", option] if option else [])
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    row = next(r for r in json.loads(proc.stdout)["results"] if r["target"] == "tvm-llvm")
    return {**row, "wall_s": wall}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="zoo:cnn")
    p.add_argument("--budgets", default="5m,30m", help="comma-separated tune= budgets, shortest first")
    p.add_argument("--threads", type=int, default=0, help="--threads of each compare (0: the stack's default)")
    a = p.parse_args()
    print(f"{a.model} on tvm-llvm, {os.cpu_count()} CPU(s), --threads {a.threads}", flush=True)
    medians: dict[str, float] = {}
    for budget in ["default", *a.budgets.split(",")]:
        before = _load()
        row = compare(a.model, a.threads, None if budget == "default" else f"tvm-llvm:tune={budget}")
        lat = row.get("latency_ms") or {}
        print(f"\n{budget}: {row['status']} in {row['wall_s']:.0f} s (load {before} -> {_load()})", flush=True)
        if row["status"] != "ok":
            print(f"  {row.get('stage')}: {row.get('error')}")
            continue
        medians[budget] = lat["median"]
        print(f"  median {lat['median']:.4f} ms, p90 {lat['p90']:.4f} ms, {lat['runs']} runs, "
              f"compile {row.get('compile_s') or 0:.1f} s")
        tuning = row["flags"].get("tuning") or {}
        if tuning:
            search = tuning.get("search_s") or 0
            rate = tuning["trials"] / (search / 60) if search else 0
            print(f"  tuning: {tuning['trials']} trials in {search:.0f} s of search ({rate:.1f}/min), setup "
                  f"{tuning.get('setup_s') or 0:.0f} s, tasks tuned {tuning['tasks_tuned']}, "
                  f"untuned {tuning['tasks_untuned']}")
            for pt in (tuning.get("curve") or {}).get("points", []):
                print(f"    after {pt['trials']:5d} trials: estimated {pt['est_ms']:.4f} ms")
    longest = a.budgets.split(",")[-1]
    if longest in medians:
        print(f"\nmedian over the {longest} budget's ({medians[longest]:.4f} ms):")
        for budget, ms in medians.items():
            print(f"  {budget:8} x{ms / medians[longest]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
