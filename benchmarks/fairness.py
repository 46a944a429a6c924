"""Fair CPU comparison: every CPU target at the same thread counts, TVM untuned and tuned.

For each model (default zoo:cnn and zoo:bert) and each thread count (default 1 and 2),
``compstack compare MODEL --targets <all CPU targets> --threads N --json`` runs once
(each target in its own worker, the latency protocol of :mod:`compstack.core.latency`), plus
``tvm-llvm`` with ``--option tvm-llvm:tune_trials=T`` (MetaSchedule, a small budget).
One cache is shared by all runs, so each artifact compiles once; the thread count is a
runtime setting and does not change an artifact.

Printed: one line per (model, target, threads) with the median and its 95 % CI (ms),
IQR/median, the threads observed busy during the timed loop, CPU s per wall s, and the
load average before the loop; then each target's speed-up from 1 to 2 threads
(median at 1 / median at 2) and whether it is significant (the two CIs do not overlap).
Nothing is hard-coded: the numbers are this machine's, now.

A tuned row also says its tuning time apart from its compile time (MetaSchedule runs
inside the compile; records found in the cache are reused: 0 trials, near-0 s of tuning).

Usage: python benchmarks/fairness.py [--models zoo:cnn,zoo:bert] [--threads 1,2] [--tune-trials 4]
       [--tune-models zoo:cnn] [--min-time 2] [--targets ort-cpu,...] [--json-out rows.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CPU_TARGETS = "ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu"


def _compare(model: str, targets: str, threads: int, extra: list[str], env: dict[str, str],
             min_time: float) -> list[dict[str, Any]]:
    """Rows of one ``compstack compare --json`` run (an error row when the command failed)."""
    argv = [sys.executable, "-m", "compstack.cli", "compare", model, "--targets", targets, "--threads", str(threads),
            "--json", "--min-time", str(min_time), *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        return [{"target": targets, "status": "command failed", "error": proc.stderr.strip()[-300:]}]
    return json.loads(proc.stdout)["results"]


def _line(model: str, label: str, threads: int, row: dict[str, Any]) -> str:
    lat = row.get("latency_ms") or {}
    if row.get("status") != "ok" or not lat:
        err = (row.get("error") or "").splitlines()[0][:140] if row.get("error") else ""
        return f"{model:<9} {label:<20} {threads:>2}  {row.get('status')}: {err}"
    th = row.get("flags", {}).get("threads", {})
    busy = th.get("busy_besides_caller") if th.get("caller_waits") else th.get("observed_busy")
    ci = lat.get("ci95") or [float("nan")] * 2
    return (f"{model:<9} {label:<20} {threads:>2}  {lat['median']:10.4f} [{ci[0]:.4f}, {ci[1]:.4f}]  "
            f"iqr/med {lat['iqr_rel']:6.1%}  busy {busy!s:>2}  cpu/wall {th.get('cpu_per_wall', float('nan')):4.2f}  "
            f"load {lat.get('load_before', float('nan')):5.2f}{'  UNSTABLE' if lat.get('unstable') else ''}"
            f"{_tuning(row)}")


def _tuning(row: dict[str, Any]) -> str:
    """For a tuned row: what MetaSchedule did, its tuning time apart from the compile
    time (both s; 0 s of tuning when the records were reused), else ""."""
    flags = row.get("flags", {})
    if not flags.get("tuned"):
        return ""
    t = flags.get("tuning", {})
    tune_s, compile_s = t.get("tune_s"), row.get("compile_s")
    times = (f"; tune {tune_s:.1f} s" if isinstance(tune_s, (int, float)) else "") + \
        (f", compile {compile_s:.1f} s" if isinstance(compile_s, (int, float)) else "")
    cached = "; artifact from the cache (tuned when first compiled)" if row.get("cached") else ""
    return f"  (tuned: {t.get('summary', '')}{times}{cached})"


def _speedups(results: dict[tuple[str, str, int], dict[str, Any]], lo: int, hi: int) -> list[str]:
    out = []
    for (model, label, threads), row in sorted(results.items()):
        if threads != lo or (model, label, hi) not in results:
            continue
        a, b = row.get("latency_ms") or {}, results[(model, label, hi)].get("latency_ms") or {}
        if not a.get("median") or not b.get("median"):
            out.append(f"{model:<9} {label:<20} speed-up {lo}->{hi} threads: -   (not timed at both)")
            continue
        ca, cb = a.get("ci95"), b.get("ci95")
        sig = ca and cb and (ca[1] < cb[0] or cb[1] < ca[0])
        out.append(f"{model:<9} {label:<20} speed-up {lo}->{hi} threads: x{a['median'] / b['median']:.3g}  "
                   f"({'significant' if sig else 'not significant: CIs overlap'})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="zoo:cnn,zoo:bert")
    ap.add_argument("--targets", default=CPU_TARGETS)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts; the first two give the speed-up")
    ap.add_argument("--tune-trials", type=int, default=4, help="MetaSchedule trials per task for tuned TVM (0: skip)")
    ap.add_argument("--tune-models", help="comma-separated models to tune TVM on (default: every model)")
    ap.add_argument("--json-out", help="also write every row (the compare --json rows, keyed by model, label, threads)")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds of timed runs per target")
    ap.add_argument("--tune-timeout", type=float, default=3600.0,
                    help="--timeout of the tuned TVM job, s (tuning runs inside it; 900 s is too short on 2 cores)")
    ap.add_argument("--cache-dir", help="compstack cache to use (default: a fresh temporary one)")
    args = ap.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory(prefix="compstack-fair-") as tmp:
        env = {**os.environ, "COMPSTACK_CACHE_DIR": args.cache_dir or str(Path(tmp) / "cache"),
               "COMPSTACK_DB": str(Path(tmp) / "db.sqlite")}
        print(f"# fairness: {args.models} x {args.targets} at --threads {args.threads}; {os.cpu_count()} CPUs; "
              f"load average now {os.getloadavg()[0]:.2f}", flush=True)
        print(f"# {'model':<7} {'target':<20} th  {'median ms':>10} [95% CI]            robust spread, "
              "busy threads, CPU s / wall s, load before", flush=True)
        results: dict[tuple[str, str, int], dict[str, Any]] = {}
        for model in args.models.split(","):
            for n in counts:
                for row in _compare(model, args.targets, n, [], env, args.min_time):
                    results[(model, row["target"], n)] = row
                    print(_line(model, row["target"], n, row), flush=True)
                tuned_here = args.tune_models is None or model in args.tune_models.split(",")
                if args.tune_trials > 0 and "tvm-llvm" in args.targets.split(",") and tuned_here:
                    label = f"tvm-llvm tuned({args.tune_trials})"
                    extra = ["--option", f"tvm-llvm:tune_trials={args.tune_trials}", "--timeout", str(args.tune_timeout)]
                    for row in _compare(model, "tvm-llvm", n, extra, env, args.min_time):
                        results[(model, label, n)] = row
                        print(_line(model, label, n, row), flush=True)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps([{"model": m, "label": lb, "threads": n, "row": r}
                                                       for (m, lb, n), r in results.items()], indent=1))
        if len(counts) >= 2:
            print(f"# speed-up {counts[0]} -> {counts[1]} threads (median ratio; significant = 95 % CIs apart)")
            for line in _speedups(results, counts[0], counts[1]):
                print(line, flush=True)


if __name__ == "__main__":
    main()
