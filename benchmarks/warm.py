"""Cold vs warm wall time of ``compstack compare`` (issue 12, part 7: warm <= 10 % of cold).

Cold: an empty store (a fresh ``XDG_CACHE_HOME``; ``COMPSTACK_CACHE_DIR`` unset), so the
zoo export and every compile run. Warm: the same command again on that store, so every
artifact (and XLA's / Inductor's own compilation caches under ``jax-cache/`` and
``inductor-cache/``) is read back. Each is one ``python -m compstack.cli compare ... --json``
timed around the whole process (``time.perf_counter``), like ``time`` would.

Then the same pair with ``--no-latency`` on another empty store: what the store and the
daemon leave of a warm run when no latency is measured.

Then, per target, warm again with that target alone (``--targets T``) to break the warm
time down: ``wall`` (the whole command), ``compile`` (the row's ``compile_s``: lower +
compile measured in the worker; for a row read from compstack's artifact cache it is the
original compile's time, so it is not counted in the sum), ``latency`` (the timed loop:
``runs x mean``, plus the warm-up runs at the median) and ``rest`` (worker start, imports,
model load, reference run, result, exit: wall minus the other two).

The latency protocol's own minimum (:class:`compstack.core.latency.LatencyConfig`:
``min_time_s`` of timed runs per target, or ``min_runs`` runs if that is longer, plus the
warm-up) is the floor no cache can remove; the output says how much of the warm time it is.

The executor is whatever ``compare`` uses by default for several targets: the daemon
(:mod:`compstack.run.daemon`), whose workers stay alive between the two commands; the cold
run starts it (a fresh ``XDG_CACHE_HOME`` is a new environment, so a new daemon). The
per-target breakdown runs on that same daemon (``COMPSTACK_EXECUTOR=daemon``: a one-target
compare would otherwise take a fresh process). ``--executor process`` measures the fresh
process per job instead. The daemon is stopped at the end.

Usage: python benchmarks/warm.py [--model zoo:bert] [--targets ort-cpu,...] [--no-breakdown]
       [--executor daemon|process|pool]
Numbers are measured on the machine it runs on; nothing is hard-coded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGETS = "ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu"


def compare(model: str, targets: str, env: dict[str, str], cwd: Path,
            *extra: str) -> tuple[float, list[dict[str, Any]]]:
    """Run ``compare --json`` once (plus ``extra`` flags); returns (wall seconds, result rows).

    Raises:
        SystemExit: the command failed (its stderr tail is printed).
    """
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "compstack.cli", "compare", model, "--targets", targets, "--json",
                           "--db", str(cwd / "results.sqlite"), *extra],
                          capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):  # 1: a row mismatched or failed; still timed
        sys.exit(f"compare {targets} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)
    return wall, data.get("results", data if isinstance(data, list) else [])


def protocol_floor_s(row: dict[str, Any]) -> float:
    """The latency protocol's own minimum for one row, seconds: ``warmup`` runs plus
    ``max(min_time_s, min_runs x median)`` of timed runs (LatencyConfig defaults)."""
    from compstack.core.latency import LatencyConfig

    cfg = LatencyConfig()
    lat = row.get("latency_ms") or row.get("latency") or {}
    med = (lat.get("median") or 0.0) / 1e3
    return cfg.warmup * med + max(cfg.min_time_s, cfg.min_runs * med) if lat else 0.0


def loop_s(row: dict[str, Any]) -> float:
    """Seconds the row's latency loop took: timed runs x mean, plus warm-up at the median."""
    from compstack.core.latency import LatencyConfig

    lat = row.get("latency_ms") or row.get("latency") or {}
    if not lat:
        return 0.0
    return (lat["runs"] * lat["mean"] + LatencyConfig().warmup * lat["median"]) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:bert")
    ap.add_argument("--targets", default=TARGETS)
    ap.add_argument("--no-breakdown", action="store_true", help="skip the per-target warm runs")
    ap.add_argument("--executor", default="daemon", choices=["daemon", "process", "pool"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="compstack-warm-") as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("COMPSTACK_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
        env["XDG_CACHE_HOME"] = str(root / "xdg")
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
        env["COMPSTACK_EXECUTOR"] = args.executor
        bare = {**env, "XDG_CACHE_HOME": str(root / "xdg-bare")}  # a store (and daemon) of its own
        try:
            measure(args, env, root)
            bare_cold, _ = compare(args.model, args.targets, bare, root, "--no-latency")
            bare_warm, _ = compare(args.model, args.targets, bare, root, "--no-latency")
            print(f"without the latency protocol (--no-latency, another empty store): cold {bare_cold:.1f} s   "
                  f"warm {bare_warm:.1f} s   warm/cold {bare_warm / bare_cold:.3f}")
        finally:
            for e in (env, bare):
                subprocess.run([sys.executable, "-m", "compstack.cli", "daemon", "stop", "--current"], env=e,
                               capture_output=True)


def measure(args: argparse.Namespace, env: dict[str, str], root: Path) -> None:
    """Cold, warm, the protocol floor and (unless ``--no-breakdown``) the per-target warm runs."""
    cold, cold_rows = compare(args.model, args.targets, env, root)
    warm, warm_rows = compare(args.model, args.targets, env, root)
    print(f"model {args.model}, targets {args.targets}, executor {args.executor}, loadavg "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for label, rows in (("cold", cold_rows), ("warm", warm_rows)):
        print(f"  {label} rows: " + ", ".join(f"{r['target']}={r['status']}{' (cached)' if r.get('cached') else ''}"
                                             for r in rows))
    print(f"cold {cold:.1f} s   warm {warm:.1f} s   warm/cold {warm / cold:.3f}   (goal <= 0.10)")
    floor = sum(protocol_floor_s(r) for r in warm_rows)
    loops = sum(loop_s(r) for r in warm_rows)
    print(f"latency protocol in the warm run: loops {loops:.1f} s ({loops / warm:.0%} of warm); its own minimum "
          f"{floor:.1f} s ({floor / warm:.0%} of warm; {floor / cold:.3f} of cold)")
    print(f"warm above the protocol's minimum: {warm - floor:.1f} s = {(warm - floor) / cold:.3f} of cold; "
          f"above the loops as run: {warm - loops:.1f} s = {(warm - loops) / cold:.3f} of cold")
    if args.no_breakdown:
        return
    print(f"{'target':<16}{'wall s':>8}{'compile s':>11}{'latency s':>11}{'rest s':>8}  cached")
    for name in args.targets.split(","):
        wall, rows = compare(args.model, name, env, root)
        row = next((r for r in rows if r["target"] == name), {})
        comp = row.get("compile_s") or 0.0
        counted = 0.0 if row.get("cached") else comp
        lat = loop_s(row)
        print(f"{name:<16}{wall:>8.1f}{comp:>11.2f}{lat:>11.2f}{wall - counted - lat:>8.1f}  "
              f"{bool(row.get('cached'))} {row.get('status', '?')}")


if __name__ == "__main__":
    main()
