"""Default vs ``--tuned``: each stack's median latency both ways, on the same model (issue #26).

Runs ``compstack compare MODEL --json`` twice per model, once as the stacks come and once with
``--tuned --budget B``, on the same targets, threads and latency protocol, and prints per
target: the default median, the tuned median, the speed-up of tuned over default, the compile
(and tuning) seconds of each, and what ``--tuned`` meant for that row (``flags.tuned_as``).
Each compare gets its own fresh store, so nothing tuned is reused from an earlier run.

Usage: python benchmarks/tuned.py [--models zoo:cnn,zoo:bert] [--targets ort-cpu,iree-llvm-cpu,openvino-cpu]
                                  [--budget 60s] [--threads 1]
The machine's load is printed with the numbers; every number is measured by the run it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def compare(model: str, targets: str, threads: int, extra: list[str]) -> dict[str, dict]:
    """One ``compstack compare --json`` in a fresh store; its rows by target."""
    with tempfile.TemporaryDirectory(prefix="cs-tuned-") as tmp:
        env = {**os.environ, "COMPSTACK_CACHE_DIR": f"{tmp}/cache", "COMPSTACK_DB": f"{tmp}/db.sqlite"}
        argv = [sys.executable, "-m", "compstack.cli", "compare", model, "--targets", targets, "--threads",
                str(threads), "--json", *extra]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return {r["target"]: r for r in json.loads(proc.stdout)["results"]}


def _ms(row: dict) -> float | None:
    lat = row.get("latency_ms") or {}
    return lat.get("median") if row.get("status") == "ok" else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="zoo:cnn,zoo:bert")
    p.add_argument("--targets", default="ort-cpu,iree-llvm-cpu,openvino-cpu,xla-cpu")
    p.add_argument("--budget", default="60s", help="--budget of the tuned run")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPU(s), "
          f"--threads {a.threads}, tuned with --budget {a.budget}")
    for model in a.models.split(","):
        base = compare(model, a.targets, a.threads, [])
        tuned = compare(model, a.targets, a.threads, ["--tuned", "--budget", a.budget])
        print(f"\n{model}")
        print(f"  {'target':15} {'default ms':>11} {'tuned ms':>10} {'speed-up':>9} {'compile s':>16}  tuned means")
        for t in base:
            d, u = _ms(base[t]), _ms(tuned.get(t, {}))
            up = f"x{d / u:.2f}" if d and u else "-"
            cs = f"{base[t].get('compile_s') or 0:.1f} / {(tuned.get(t) or {}).get('compile_s') or 0:.1f}"
            dm, um = (f"{x:.4f}" if x is not None else "-" for x in (d, u))
            print(f"  {t:15} {dm:>11} {um:>10} {up:>9} {cs:>16}  "
                  f"{(tuned.get(t) or {}).get('flags', {}).get('tuned_as', '-')}")
            for name, row in (("default", base[t]), ("tuned", tuned.get(t, {}))):
                if row.get("status") != "ok":
                    print(f"    {name}: {row.get('status')} at {row.get('stage')}: {str(row.get('error'))[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
