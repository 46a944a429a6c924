"""How far back compstack's adapter of a stack works: each release of a range, on real models
(issue #25, part 1: the lines of ``compstack.targets.releases.SUPPORTED``).

    python benchmarks/release_support.py --target iree-llvm-cpu --range 3.0.0..3.13.0
    python benchmarks/release_support.py --target tvm-llvm --range .. --models zoo:mlp
    python benchmarks/release_support.py --target openvino-cpu --last 4

For each release it runs ``compstack compare MODEL --targets TARGET@RELEASE --no-latency
--json`` per model in one store (``--store``, default a temporary folder, so every env is
built once), and prints one line per release and model: the row's status, stage and first
error line, the release the row says it ran, and the wall time (the first model of a release
includes building its env). A release whose env cannot be built prints that reason. It ends
with the oldest release from which every newer one in the range passed every model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def _releases(target: str, spec: str | None, last: int | None) -> list[str]:
    from compstack.core.envs import registry_releases
    from compstack.explain.versions import pick_range
    from compstack.targets.releases import RELEASES

    listed = registry_releases(RELEASES[target].package)
    return listed[-last:] if last else pick_range(listed, spec or "..")


def _row(store: str, model: str, spec: str, timeout: float) -> tuple[dict, float]:
    env = {**os.environ, "COMPSTACK_CACHE_DIR": store, "COMPSTACK_DB": os.path.join(store, "db.sqlite")}
    argv = [sys.executable, "-m", "compstack.cli", "compare", model, "--targets", spec, "--no-latency", "--json",
            "--timeout", str(timeout)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    try:
        rows = json.loads(proc.stdout)["results"]
        return next(r for r in rows if r["target"] == spec), wall
    except (ValueError, KeyError, StopIteration):
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return {"status": "error", "stage": "cli", "error": lines[-1] if lines else f"exit {proc.returncode}"}, wall


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--range", dest="spec", help="FIRST..LAST of the registry's releases (default: all)")
    p.add_argument("--last", type=int, help="the newest N releases instead of --range")
    p.add_argument("--models", default="zoo:mlp,zoo:cnn")
    p.add_argument("--store", help="store folder (default: a temporary one, removed at the end)")
    p.add_argument("--timeout", type=float, default=900.0)
    a = p.parse_args()
    releases = _releases(a.target, a.spec, a.last)
    models = a.models.split(",")
    print(f"{a.target}: {len(releases)} release(s) {releases[0]} .. {releases[-1]}; models {', '.join(models)}",
          flush=True)
    tmp = None if a.store else tempfile.TemporaryDirectory(prefix="cs-releases-")
    store = a.store or tmp.name  # type: ignore[union-attr]
    passed: dict[str, bool] = {}
    for v in releases:
        ok = True
        for model in models:
            row, wall = _row(store, model, f"{a.target}@{v}", a.timeout)
            ran = (row.get("versions") or {})
            good = row["status"] in ("ok", "imprecise")
            ok = ok and good
            err = (row.get("error") or "").splitlines()
            why = "" if good else f" at {row.get('stage') or '?'}: {err[0][:160] if err else ''}"
            print(f"  {v:12} {model:10} {row['status']}{why} (ran {ran or '?'}; {wall:.0f} s)", flush=True)
            if row["status"] in ("unavailable", "error"):
                break  # the env did not build: the next models would say the same
        passed[v] = ok
    newest_bad = [v for v in releases if not passed[v]]
    since = releases[releases.index(newest_bad[-1]) + 1:] if newest_bad else releases
    print(f"\nevery model passes on {since[0]} .. {since[-1]} ({len(since)} of {len(releases)} releases)"
          if since else "\nthe newest release fails: no supported range", flush=True)
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
