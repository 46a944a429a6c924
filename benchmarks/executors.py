"""Per-job overhead of each executor: jobs per second for a trivial job.

The job is a ``compare`` job (lower, compile, run; no latency loop, no artifact cache) of
the ``reference`` target (``onnx.reference``) on a one-node model (``Relu`` of a 1x4
float32 input), so nearly all of a job's time is the executor's: process start, imports,
job and result files. For each executor (``inline``, ``process``, ``pool``, ``daemon``) it
runs one warm-up job (the pool's worker start, the daemon's server and worker start; the
inline executor's first imports) and then ``--jobs`` jobs one after another, and prints
the wall time, jobs/s and ms per job; the first-job column gives the start-up. The daemon
runs in a socket folder of its own (``XDG_RUNTIME_DIR`` in the temporary folder) and is
stopped at the end.

Usage: python benchmarks/executors.py [--jobs 20] [--target reference] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _one_node_model() -> Any:
    import onnx_ir as ir
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))


def measure(executor_name: str, n: int, target: str, tmp: Path) -> dict[str, Any]:
    """Run 1 + ``n`` trivial jobs on a new executor; returns its timings (seconds)."""
    from compstack import targets as registry
    from compstack.core import ir as cir
    from compstack.core.inputs import input_sets, save_npz
    from compstack.run.executors import Limits, make_executor
    from compstack.run.jobs import Job, pack_sets
    from compstack.run.session import model_file

    model = _one_node_model()
    source = cir.SourceModel(name="relu", model=model)
    path = model_file(source, tmp / "cache")
    inputs = save_npz(tmp / "inputs.npz", pack_sets(input_sets(cir.graph_inputs(model), 1, 0)))
    ref = next(e.ref for e in registry.entries() if e.name == target)

    def job(i: int) -> Job:
        return Job(model_path=str(path), fingerprint=source.fingerprint, target=target, target_ref=ref,
                   inputs_path=str(inputs), workdir=str(tmp / executor_name / str(i)), threads=1)

    limits = Limits(timeout_s=300)
    with make_executor(executor_name) as ex:
        t0 = time.perf_counter()
        first = ex.run(job(0), limits)
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        statuses = [ex.run(job(i + 1), limits).status for i in range(n)]
        wall = time.perf_counter() - t0
    if first.status != "ok" or set(statuses) != {"ok"}:
        raise SystemExit(f"{executor_name}: jobs did not succeed: {first.status} {first.error} {statuses}")
    return {"executor": executor_name, "jobs": n, "first_job_s": round(first_s, 3), "wall_s": round(wall, 3),
            "jobs_per_s": round(n / wall, 2), "ms_per_job": round(1000 * wall / n, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--target", default="reference")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    import os

    with tempfile.TemporaryDirectory(prefix="cs-ex-") as tmp:
        os.environ["XDG_RUNTIME_DIR"] = tmp  # this benchmark's own daemon
        try:
            for name in ("inline", "process", "pool", "daemon"):
                rows.append(measure(name, args.jobs, args.target, Path(tmp)))
        finally:
            from compstack.run.daemon import stop_daemons

            stop_daemons()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"trivial job: {args.target} on a one-node model (Relu 1x4), {args.jobs} jobs after one warm-up job")
    print(f"{'executor':<9} {'jobs/s':>8} {'ms/job':>8} {'first job s':>12}")
    for r in rows:
        print(f"{r['executor']:<9} {r['jobs_per_s']:>8.2f} {r['ms_per_job']:>8.1f} {r['first_job_s']:>12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
