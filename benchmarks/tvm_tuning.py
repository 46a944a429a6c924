"""MetaSchedule trial rate of the ``tvm-llvm`` target (issue #26, part 2).

Tunes one model's tasks with compstack's tuning run (:mod:`compstack.targets.relax.tuning`)
for a budget, in this process, and prints the setup time (task extraction and the builder
workers' start), the search time, the trials measured, trials per minute of search and of
the whole run, and each task's best measured time.

``--stock`` measures the same run the way TVM's own ``LocalBuilder`` does it (a new worker
pool for every batch of candidates, each worker importing TVM's tensor intrinsics with
``inspect.stack()``): the rate before compstack's kept builder and scan-free import.

Usage: python benchmarks/tvm_tuning.py [--model zoo:cnn] [--budget 120] [--stock]
Numbers are measured on the machine it runs on (with its load, printed); nothing is hard-coded.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="zoo:cnn")
    parser.add_argument("--budget", type=float, default=120.0, help="tuning budget, seconds")
    parser.add_argument("--stock", action="store_true", help="TVM's LocalBuilder and intrinsics import")
    args = parser.parse_args()

    import tvm
    from tvm.relax import transform
    from tvm.relax.pipeline import zero_pipeline

    from compstack.frontends.sources import resolve_model
    from compstack.targets.relax import tuning
    from compstack.targets.relax.target import TvmLlvmTarget, TvmOptions

    if args.stock:
        from tvm.s_tir import meta_schedule as ms

        def stock() -> object:  # TVM's LocalBuilder (a new pool per batch), with the run's two calls
            builder = ms.builder.LocalBuilder(timeout_sec=tuning.TUNE_BUILD_TIMEOUT_S)
            builder.warm_up = builder.shutdown = lambda: None
            return builder

        tuning._kept_builder = stock  # noqa: SLF001
        tuning._tensor_intrinsics = lambda: None  # noqa: SLF001

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    source = resolve_model(args.model)
    target = TvmLlvmTarget(TvmOptions(tune=f"{args.budget:g}s"))
    lowered = target.lower(source.model)
    tvm_target = lowered._tvm_target()  # noqa: SLF001
    with tvm_target, tvm.transform.PassContext(opt_level=3):
        legal = tvm.transform.Sequential([transform.DecomposeOpsForInference(), transform.CanonicalizeBindings(),
                                          zero_pipeline()])(lowered.mod)
        with tempfile.TemporaryDirectory() as tmp:
            run = tuning._run_metaschedule(legal, tvm_target, Path(tmp), 0, args.budget)  # noqa: SLF001
            best = _best(Path(tmp))
    wall = time.perf_counter() - t0
    search_min = run["search_s"] / 60
    print(f"model {args.model}, budget {args.budget:g} s, builder {'stock LocalBuilder' if args.stock else 'kept'}, "
          f"{os.cpu_count()} CPUs, load {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(f"  setup {run['setup_s']:.1f} s, search {run['search_s']:.1f} s, whole run {wall:.1f} s")
    print(f"  {run['trials']} trials: {run['trials'] / search_min:.1f} trials/min of search, "
          f"{run['trials'] / (wall / 60):.1f} trials/min of the whole run")
    print(f"  tasks tuned {run['tasks_tuned']}, untuned {len(run['untuned'])}: "
          + "; ".join(f"{u['task']} ({u['why'][:60]})" for u in run["untuned"]))
    for name, us in best.items():
        print(f"    {name}: best {us:.1f} us")
    print(json.dumps({"run": run, "wall_s": wall, "best_us": best}))


def _best(folder: Path) -> dict[str, float]:
    """Each workload's best measured mean (µs) from MetaSchedule's JSON records."""
    best: dict[str, float] = {}
    for line in (folder / "database_tuning_record.json").read_text().splitlines():
        wid, rec = json.loads(line)
        secs = [s for s in (rec[1] or []) if s is not None]
        if secs:
            us = sum(secs) / len(secs) * 1e6
            key = f"workload {wid}"
            best[key] = min(best.get(key, us), us)
    return best


if __name__ == "__main__":
    main()
