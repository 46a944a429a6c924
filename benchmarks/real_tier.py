"""The zoo's real tier on the CPU stacks, numerics only (issue #23 part 6): wall time cold and
warm, and per stack the compile time, peak memory, pass rate and where failures happened.

Runs ``compstack sweep MODELS --targets TARGETS --no-latency --resume --db DB`` as a
subprocess (its progress lines go to this terminal), then reads every row of that sweep back
from the results database and prints, per target:

* rows, ``ok`` (numerics agree with the reference), the non-ok rows by ``status@stage`` and by
  ``fault`` (stack / compstack / undefined / unknown);
* compile time (``compile_s``: the stack's lower + compile, seconds) over the rows that have
  one: median, geometric mean, max;
* the worker's peak resident memory (``peak_rss_compile_mb``, ``peak_rss_run_mb``: the
  kernel's high-water mark of the job's process, MiB): median and max.

Cold means an empty cache folder (every model built and exported, every artifact compiled);
warm runs the same sweep again on that cache with a new database (nothing resumed): every
row the cold run judged is read back from the store (``stored``,
:mod:`compstack.sweep._rowstore`), and a model whose rows are all stored is not imported
(:mod:`compstack.sweep._warm`), so the warm run needs none of the exports a cap pruned. A second warm run with ``--no-cache-results`` runs every
job again on the stored exports, reference outputs and artifacts (XLA, Inductor and
TorchScript's native path trace and compile again). ``--resume`` makes a killed cold run go
on where it stopped: run the same command again with the same ``--work`` folder; the cold
figure is then also given summed over every sweep the cold database holds (each records its
own start and end, an interrupted one too), so a run resumed after a kill still has its total,
and the warm runs are set against that total (a part's own record leaves out the command's
start, which the warm runs' wall time includes: the ratio errs high). Job seconds are then
summed over the parts that recorded them. ``--no-rerun`` skips the ``--no-cache-results``
run (under a cap it exports the tier again, a large fraction of cold).

Usage:
    python3 benchmarks/real_tier.py                                 # the whole tier x every CPU stack
    python3 benchmarks/real_tier.py --models resnet18,distilbert --targets ort-cpu,openvino-cpu
    python3 benchmarks/real_tier.py --work DIR --no-warm             # resume a killed cold run in DIR
    python3 benchmarks/real_tier.py --cache-max-size 30G --no-warm   # the whole tier on a small disk
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any


def _sweep(models: list[str], targets: str, cache: Path, db: Path, timeout: float,
           cap: str = "", extra: tuple[str, ...] = ()) -> tuple[float, int, str, dict[str, float], int]:
    """Run the sweep; returns (wall seconds, exit status, sweep id, job seconds per target
    and ``reference``: the sweep summary's ``job_s``, rows read from the store)."""
    argv = [sys.executable, "-m", "compstack.cli", "sweep", *models, "--targets", targets, "--no-latency",
            "--resume", "--db", str(db), "--timeout", str(timeout), "--json",
            *(["--cache-max-size", cap] if cap else []), *extra]
    env = {**os.environ, "COMPSTACK_CACHE_DIR": str(cache)}
    t0 = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=env)  # stderr: the progress lines
    wall = time.monotonic() - t0
    try:
        summary = json.loads(proc.stdout)
        sweep_id, job_s, stored = summary["sweep_id"], summary.get("job_s", {}), int(summary.get("stored", 0))
    except (ValueError, KeyError):
        sweep_id, job_s, stored = "", {}, 0
    return wall, proc.returncode, sweep_id, job_s, stored


def _rows(db: Path, sweep_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        cur = conn.execute("SELECT target, status, stage, fault, compile_s, peak_rss_compile_mb, peak_rss_run_mb "
                           "FROM results WHERE sweep_id = ? AND target != 'reference'", (sweep_id,))
        return [dict(r) for r in cur.fetchall()]


def _cold_sweeps(db: Path) -> list[dict[str, Any]]:
    """Every sweep the cold database holds, oldest first: one per invocation of the cold run
    (a killed run resumed with the same ``--work`` adds one). ``wall_s`` is ``ended - started``
    of the sweep's own record (an interrupted sweep records its end too); a sweep killed before
    it could (SIGKILL, a lost machine) ends, here, at its last row (``"end": "last row"``)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT sweep_id, started, ended, status, summary_json FROM sweeps "
                            "ORDER BY started").fetchall()
        last = dict(conn.execute("SELECT sweep_id, MAX(created) FROM results GROUP BY sweep_id").fetchall())
    out = []
    for i, s, e, st, summary in rows:
        end, how = (e, "recorded") if e else (last.get(i), "last row")
        try:  # a part killed before it wrote its summary has no job seconds
            job_s = json.loads(summary).get("job_s") if summary else None
        except ValueError:
            job_s = None
        out.append({"sweep_id": i, "status": st, "end": how, "wall_s": (end - s) if s and end else None,
                    "job_s": job_s if isinstance(job_s, dict) else None})
    return out


def _geo(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-target figures of the sweep's rows (see the module docstring)."""
    out = []
    for target in sorted({r["target"] for r in rows}):
        mine = [r for r in rows if r["target"] == target]
        comp = [r["compile_s"] for r in mine if r["compile_s"]]
        mem_c = [r["peak_rss_compile_mb"] for r in mine if r["peak_rss_compile_mb"]]
        mem_r = [r["peak_rss_run_mb"] for r in mine if r["peak_rss_run_mb"]]
        bad = Counter(f"{r['status']}@{r['stage']}" for r in mine if r["status"] not in ("ok", "imprecise"))
        out.append({"target": target, "rows": len(mine),
                    "ok": sum(r["status"] in ("ok", "imprecise") for r in mine),
                    "compile_median_s": statistics.median(comp) if comp else None,
                    "compile_geomean_s": _geo(comp) if comp else None, "compile_max_s": max(comp, default=None),
                    "rss_compile_median_mb": statistics.median(mem_c) if mem_c else None,
                    "rss_compile_max_mb": max(mem_c, default=None),
                    "rss_run_max_mb": max(mem_r, default=None),
                    "failures": dict(bad.most_common()),
                    "faults": dict(Counter(r["fault"] for r in mine if r["fault"]).most_common())})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="", help="comma-separated real-tier names (default: the whole tier)")
    ap.add_argument("--targets", default="cpu")
    ap.add_argument("--work", default="", help="folder for the cache and the databases (default: a new temp folder)")
    ap.add_argument("--timeout", type=float, default=900.0, help="per job, seconds (the sweep's --timeout)")
    ap.add_argument("--no-warm", action="store_true", help="skip the warm run")
    ap.add_argument("--no-rerun", action="store_true",
                    help="skip the second warm run (--no-cache-results), which exports and compiles again")
    ap.add_argument("--cache-max-size", default="", metavar="SIZE",
                    help="bound the store (sweep --cache-max-size): the whole tier's store is over 150 GB; "
                         "a warm run reads the stored rows without re-exporting (the model records, "
                         "compstack.sweep._warm); warm with --no-cache-results re-exports and recompiles what "
                         "was pruned")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from compstack.frontends import zoo

    names = [n.strip() for n in args.models.split(",") if n.strip()] or zoo.names(tier="real")
    models = [f"zoo:{n}" for n in names]
    import tempfile

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="compstack-real-tier-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    print(f"real tier: {len(models)} models x {args.targets}; work folder {work}", file=sys.stderr, flush=True)
    cold_s, cold_rc, cold_id, cold_jobs, _ = _sweep(models, args.targets, cache, work / "cold.sqlite", args.timeout,
                                                    args.cache_max_size)
    result: dict[str, Any] = {"models": len(models), "targets": args.targets, "cold_s": cold_s,
                              "cold_exit": cold_rc, "load_after_cold": os.getloadavg(), "cpus": os.cpu_count(),
                              "cold_job_s": cold_jobs}
    if cold_id:
        result["per_target"] = summarize(_rows(work / "cold.sqlite", cold_id))
    if (work / "cold.sqlite").exists():  # a cold run killed and resumed: its parts, and their sum
        result["cold_sweeps"] = _cold_sweeps(work / "cold.sqlite")
        result["cold_total_s"] = sum(p["wall_s"] or 0.0 for p in result["cold_sweeps"])
        if len(result["cold_sweeps"]) > 1:  # job seconds over every part that recorded them, not the last alone
            summed: dict[str, float] = {}
            for part in result["cold_sweeps"]:
                for k, v in (part["job_s"] or {}).items():
                    summed[k] = summed.get(k, 0.0) + float(v)
            result["cold_job_s"] = summed
            result["cold_job_s_parts"] = sum(p["job_s"] is not None for p in result["cold_sweeps"])
    # the cold figure a warm run is set against: a resumed cold run's sum over its parts, not its last part
    cold_ref = result["cold_total_s"] if len(result.get("cold_sweeps", [])) > 1 else cold_s
    result["cold_ref_s"] = cold_ref
    if not args.no_warm:
        warm_db = work / f"warm-{int(time.time())}.sqlite"
        result["warm_s"], result["warm_exit"], _, result["warm_job_s"], result["warm_stored"] = _sweep(
            models, args.targets, cache, warm_db, args.timeout, args.cache_max_size)
        result["warm_over_cold"] = result["warm_s"] / cold_ref if cold_ref else None
    if not args.no_warm and not args.no_rerun:
        rerun_db = work / f"warm-rerun-{int(time.time())}.sqlite"
        result["rerun_s"], result["rerun_exit"], _, result["rerun_job_s"], _ = _sweep(
            models, args.targets, cache, rerun_db, args.timeout, args.cache_max_size, ("--no-cache-results",))
        result["rerun_over_cold"] = result["rerun_s"] / cold_ref if cold_ref else None
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"\n{len(models)} models x {args.targets}, --no-latency, {os.cpu_count()} CPUs")
    parts = result.get("cold_sweeps", [])
    if len(parts) > 1:
        print(f"cold, over {len(parts)} sweeps in {work / 'cold.sqlite'} (resumed {len(parts) - 1} "
              f"time(s)): {result['cold_total_s']:.1f} s in all; " +
              ", ".join(f"{p['sweep_id']} {p['status']} {_fmt(p['wall_s'], '.1f')} s" for p in parts))
    print(f"cold: {cold_s:.1f} s (exit {cold_rc})" + (
        f"; warm: {result['warm_s']:.1f} s (x{result['warm_over_cold']:.3f} of cold's {cold_ref:.1f} s, "
        f"{result['warm_stored']} rows read from the store)" if "warm_s" in result else "") + (
        f"; warm with --no-cache-results: {result['rerun_s']:.1f} s (x{result['rerun_over_cold']:.2f} of cold)"
        if "rerun_s" in result else ""))
    if result.get("cold_job_s"):
        over = (f", cold over {result['cold_job_s_parts']} of {len(parts)} parts"
                if "cold_job_s_parts" in result else "")
        print(f"\njob seconds (worker wall time, summed over the models{over}) | cold | warm | "
              "warm --no-cache-results")
        for k, v in result["cold_job_s"].items():
            warm = _fmt(result["warm_job_s"].get(k, 0.0) if "warm_s" in result else None, ".1f")
            rerun = _fmt(result["rerun_job_s"].get(k, 0.0) if "rerun_s" in result else None, ".1f")
            print(f"  {k:<18} {v:8.1f} {warm:>8} {rerun:>8}")
    print("\n| target | ok/rows | compile median s | geomean s | max s | peak RSS compile median/max MiB "
          "| run max MiB | non-ok by status@stage | faults |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in result.get("per_target", []):
        fails = ", ".join(f"{k} {v}" for k, v in t["failures"].items()) or "-"
        faults = ", ".join(f"{k} {v}" for k, v in t["faults"].items()) or "-"
        print(f"| {t['target']} | {t['ok']}/{t['rows']} | {_fmt(t['compile_median_s'])} | "
              f"{_fmt(t['compile_geomean_s'])} | {_fmt(t['compile_max_s'])} | "
              f"{_fmt(t['rss_compile_median_mb'], '.0f')}/{_fmt(t['rss_compile_max_mb'], '.0f')} | "
              f"{_fmt(t['rss_run_max_mb'], '.0f')} | {fails} | {faults} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
