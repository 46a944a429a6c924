"""Harness overhead per CPU target, and cold vs warm wall time of a comparison.

For each target: compstack's median latency (``compstack compare --json``, the real path:
worker process, prepared call, the latency protocol) divided by the median of a bare loop
written against the stack's own API only (``InferenceSession.run``, a Relax
``VirtualMachine`` call, an ``iree.runtime`` function call) over the *same* compiled
artifact (read from compstack's cache) and the same input set 0, with the same warm-up
and run count. XLA and Inductor have no cached artifact: their bare loops rebuild the
program the row ran (XLA: compstack's JAX translation of the model under a plain
``jax.jit``; Inductor: the zoo's ``nn.Module`` under ``torch.compile``) and time
``block_until_ready`` / the module call. Both sides run at each stack's default thread
count (``--threads 0``), or both at ``--threads N`` by the stack's own knob (the worker's
thread environment and the target's ``apply_threads``; ORT's session options). Each side runs in ``--repeats`` separate processes and the median of
their medians is compared; the best-process ratio (fastest process of each side) is
printed too, since a runtime's per-process mode is not the harness's doing. Goal: <= 1.03.

Then the wall time of ``compstack compare zoo:bert`` with an empty cache (cold: zoo export
+ every compile) and again (warm: everything from the cache). Goal: warm <= 10 % of cold.

``--in-process`` (XLA and Inductor) builds compstack's prepared call in the bare loop's
process and times both in alternating rounds, which leaves out process-to-process modes.

Usage: python benchmarks/overhead.py [--models zoo:mlp,zoo:cnn] [--targets ...] [--threads N] [--in-process]
       [--skip-cold-warm]
Prints one line per (model, target) and one line for cold/warm. Numbers are measured on
the machine it runs on; nothing is hard-coded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compstack.core.threads import thread_env

BARE = r'''
import json, sys, time, statistics
import numpy as np
target, folder, inputs_path, names_json, warmup, runs, min_time, spec, threads = sys.argv[1:10]
names = json.loads(names_json)
threads = int(threads)
if threads > 0:  # the stack's own knob, as compstack's worker applies it (not compstack's timed call)
    from compstack import targets as registry
    registry.get(target).apply_threads(threads)
feeds = dict(np.load(inputs_path))
arrays = [feeds[n] for n in names]
if target == "ort-cpu":
    import onnxruntime as ort
    so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if threads > 0:
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    s = ort.InferenceSession(folder + "/optimized.onnx", so, providers=["CPUExecutionProvider"])
    call = lambda: s.run(None, feeds)
elif target == "tvm-llvm":
    import tvm
    from tvm import relax
    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(folder + "/model.so"), dev)
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    main = vm["main"]
    def call():
        main(*args); dev.sync()
elif target == "iree-llvm-cpu":
    import iree.runtime as rt
    config = rt.Config("local-task")
    ctx = rt.SystemContext(config=config)
    vmm = rt.VmModule.copy_buffer(ctx.instance, open(folder + "/model.vmfb", "rb").read())
    ctx.add_vm_module(vmm)
    mod = ctx.modules[vmm.name]
    fname = next(f for f in vmm.function_names if "$" not in f and not f.startswith("__"))
    fn = mod[fname]
    args = [rt.asdevicearray(config.device, np.ascontiguousarray(a)) for a in arrays]
    call = lambda: fn(*args)
elif target == "xla-cpu":
    # the translated path's program (zoo models are PyTorch): compstack's JAX translation,
    # then a bare jax.jit loop, as an XLA user would time it
    import jax
    import onnx_ir as ir
    from compstack.targets.common.twopath import canonical_for_translation
    from compstack.translate.jax import to_jax
    with jax.enable_x64(True):
        prog = to_jax(canonical_for_translation(ir.load(folder)))
        dev = jax.devices("cpu")[0]
        params = {k: jax.device_put(v, dev) for k, v in prog.params.items()}
        args = [jax.device_put(a, dev) for a in arrays]
        fn = jax.jit(prog.fn)
        jax.block_until_ready(fn(params, *args))
    def call():
        with jax.enable_x64(True):
            jax.block_until_ready(fn(params, *args))
elif target == "inductor-cpu":
    # the native path: the zoo's nn.Module under torch.compile(backend="inductor")
    import torch
    from compstack.frontends.sources import load_native
    native = load_native(spec, names)
    module = native.fn.eval()
    a, kw = native.pack([torch.from_numpy(np.array(x)) for x in arrays])
    m = torch.compile(module, backend="inductor", fullgraph=True, dynamic=False)
    def call():
        with torch.no_grad():
            m(*a, **kw)
else:
    raise SystemExit(f"no bare loop for {target}")
'''

#: The bare loop's timing: warm-up, then at least ``runs`` calls and ``min_time`` seconds.
BARE_TIME = r'''
for _ in range(int(warmup)):
    call()
samples, total, clock = [], 0, time.perf_counter_ns
while len(samples) < int(runs) or total < float(min_time) * 1e9:
    t0 = clock(); call(); dt = clock() - t0
    samples.append(dt); total += dt
print(json.dumps({"median_ms": statistics.median(samples) / 1e6, "runs": len(samples)}))
'''

#: ``--in-process`` (xla-cpu, inductor-cpu): compstack's own prepared call
#: (``Target.lower().compile().prepare()``, what the worker times) built in the bare
#: loop's process, then both timed in alternating rounds of ``min_time / 10`` s, in a
#: shuffled order per round, with the collector off on both sides. Same process, same
#: program build, same machine load: what is left is the per-call cost of the harness.
IN_PROCESS_TIME = r'''
import gc, random
from compstack import targets as registry
from compstack.core import ir as cir
from compstack.frontends.native import align_torch_weights
from compstack.frontends.sources import load_native
from compstack.targets.base import LowerRequest
model = cir.load(folder)
cls = registry.get(target)
native = None
if target == "inductor-cpu":
    native = load_native(spec, names)
    align_torch_weights(native, model)
t = cls(cls.Options(), LowerRequest(example_inputs=feeds, native=native))
ours = t.lower(model).compile().prepare(feeds)
sides = {"compstack": ours, "bare": call}
for f in sides.values():
    for _ in range(int(warmup)):
        f()
rounds = {k: [] for k in sides}
clock, rng = time.perf_counter_ns, random.Random(0)
gc.disable()
for _ in range(max(10, int(runs) // 100)):
    order = list(sides.items()); rng.shuffle(order)
    for k, f in order:
        s, total = [], 0
        while total < float(min_time) * 1e8:
            t0 = clock(); f(); dt = clock() - t0
            s.append(dt); total += dt
        rounds[k].append(statistics.median(s) / 1e6)
gc.enable()
print(json.dumps({k: statistics.median(v) for k, v in rounds.items()} | {"rounds": len(rounds["bare"])}))
'''


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compstack.cli", *args], capture_output=True, text=True,
                          env=env, check=False)


def overhead(model: str, target: str, work: Path, env: dict[str, str], min_time: float, repeats: int,
             threads: int = 0) -> str:
    """One line: median over ``repeats`` processes of each side's median, and their ratio.

    Each side runs in ``repeats`` fresh processes because some runtimes (IREE's
    local-task pool on 2 cores) settle into a fast or a slow mode per process.
    """
    inputs = work / "inputs.npz"
    ours: list[float] = []
    bare: list[float] = []
    runs = 0
    for _ in range(repeats):
        # --threads 0: every stack at its own default thread count, as the bare loop runs it;
        # N > 0: both sides at N by the stack's own knob (thread_env + apply_threads)
        proc = _cli("compare", model, "--targets", target, "--json", "--save-inputs", str(inputs), "--threads", str(threads),
                    "--min-runs", "200", "--min-time", str(min_time), "--warmup", "20", env=env)
        if proc.returncode != 0:
            return f"{model:<10} {target:<14} compstack failed: {proc.stderr.strip()[-200:]}"
        data = json.loads(proc.stdout)
        row = data["results"][0]
        if row["status"] != "ok":
            return f"{model:<10} {target:<14} {row['status']}: {row['error'][:150]}"
        ours.append(row["latency_ms"]["median"])
        runs = row["latency_ms"]["runs"]
        folder = _cache_folder(Path(env["COMPSTACK_CACHE_DIR"]), target, data["model"]["fingerprint"])
        if target in _NO_ARTIFACT and row["flags"].get("path") != _NO_ARTIFACT[target]:
            return f"{model:<10} {target:<14} ran the {row['flags'].get('path')} path; the bare loop is " \
                   f"the {_NO_ARTIFACT[target]} one"
        names = list(data["inputs"]["arrays"])
        b = subprocess.run([sys.executable, "-c", BARE + BARE_TIME, target, str(folder), str(inputs), json.dumps(names),
                            "20", str(runs), str(min_time), model, str(threads)], capture_output=True, text=True,
                           env={**env, **thread_env(threads)})
        if b.returncode != 0:
            return f"{model:<10} {target:<14} bare loop failed: {b.stderr.strip()[-300:]}"
        bare.append(json.loads(b.stdout)["median_ms"])
    c, m = statistics.median(ours), statistics.median(bare)
    return (f"{model:<10} {target:<14} compstack median {c:9.4f} ms | bare loop median {m:9.4f} ms | "
            f"ratio {c / m:.3f} | best-process ratio {min(ours) / min(bare):.3f}   "
            f"(per process: compstack {_ms(ours)}; bare {_ms(bare)}; ~{runs} runs each)")


def in_process(model: str, target: str, work: Path, env: dict[str, str], min_time: float, threads: int) -> str:
    """One line: compstack's prepared call and the bare loop timed in one process,
    interleaved (:data:`IN_PROCESS_TIME`); xla-cpu and inductor-cpu only (the targets
    whose bare loop rebuilds the program in-process anyway)."""
    inputs = work / "inputs.npz"
    proc = _cli("compare", model, "--targets", target, "--json", "--save-inputs", str(inputs), "--threads", str(threads),
                "--no-latency", env=env)
    if proc.returncode != 0:
        return f"{model:<10} {target:<14} compstack failed: {proc.stderr.strip()[-200:]}"
    data = json.loads(proc.stdout)
    folder = _cache_folder(Path(env["COMPSTACK_CACHE_DIR"]), target, data["model"]["fingerprint"])
    b = subprocess.run([sys.executable, "-c", BARE + IN_PROCESS_TIME, target, str(folder), str(inputs),
                        json.dumps(list(data["inputs"]["arrays"])), "20", "1000", str(min_time), model, str(threads)],
                       capture_output=True, text=True, env={**env, **thread_env(threads)})
    if b.returncode != 0:
        return f"{model:<10} {target:<14} in-process loop failed: {b.stderr.strip()[-300:]}"
    r = json.loads(b.stdout)
    return (f"{model:<10} {target:<14} in one process: compstack's prepared call {r['compstack'] * 1e3:9.2f} us | "
            f"bare loop {r['bare'] * 1e3:9.2f} us | ratio {r['compstack'] / r['bare']:.3f}   "
            f"(median of {r['rounds']} interleaved round medians)")


def _ms(values: list[float]) -> str:
    return ", ".join(f"{v:.4f}" for v in values)


#: Targets without a compstack artifact (they compile every run), and the path their bare
#: loop rebuilds: XLA the translated program (from the canonical model file), Inductor
#: the zoo's native PyTorch module.
_NO_ARTIFACT = {"xla-cpu": "translated", "inductor-cpu": "native"}


def _cache_folder(cache: Path, target: str, fingerprint: str) -> Path:
    """The artifact folder of ``target`` (for XLA and Inductor: the canonical model file,
    ``<cache>/models/<fingerprint>/model.onnx`` as :func:`compstack.run.session._store_model`
    writes it)."""
    if target in _NO_ARTIFACT:
        return cache / "models" / fingerprint / "model.onnx"
    for meta in (cache / "artifacts" / target).glob("*/meta.json"):
        if json.loads(meta.read_text()).get("fingerprint") == fingerprint:
            return meta.parent
    raise SystemExit(f"no cache entry for {target} {fingerprint}")


def cold_warm(model: str, targets: str, env: dict[str, str]) -> str:
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        proc = _cli("compare", model, "--targets", targets, "--json", env=env)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            return f"cold/warm {model}: failed: {proc.stderr.strip()[-200:]}"
        statuses = {r["target"]: r["status"] for r in json.loads(proc.stdout)["results"]}
    return (f"compare {model} --targets {targets}: cold {times[0]:.1f} s, warm {times[1]:.1f} s, "
            f"warm/cold {times[1] / times[0]:.1%}  (statuses {statuses})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="zoo:mlp,zoo:cnn")
    ap.add_argument("--targets", default="ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds of timed runs per side")
    ap.add_argument("--repeats", type=int, default=3, help="processes per side; the median is used")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads on both sides, by each stack's own knob (0: each stack's default). On a loaded "
                         "2-core machine Inductor's default OpenMP team makes runs take tens of ms instead of "
                         "tens of us on either side, so the ratio then measures the scheduler, not the harness: use 1")
    ap.add_argument("--in-process", action="store_true",
                    help="xla-cpu/inductor-cpu: time compstack's prepared call and the bare loop in one process, "
                         "interleaved (the harness's per-call cost alone), instead of separate processes")
    ap.add_argument("--cold-warm-model", default="zoo:bert")
    ap.add_argument("--skip-cold-warm", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="compstack-bench-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "COMPSTACK_CACHE_DIR": str(work / "cache"), "COMPSTACK_DB": str(work / "db.sqlite")}
        print(f"# harness overhead (goal: ratio <= 1.03), {os.cpu_count()} cores, --threads {args.threads}, "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        for model in args.models.split(","):
            for target in args.targets.split(","):
                if args.in_process:
                    if target in _NO_ARTIFACT:
                        print(in_process(model, target, work, env, args.min_time, args.threads), flush=True)
                    continue
                print(overhead(model, target, work, env, args.min_time, args.repeats, args.threads), flush=True)
        if not args.skip_cold_warm:
            env2 = {**env, "COMPSTACK_CACHE_DIR": str(work / "cache2")}
            print("# cold vs warm (goal: warm <= 10 % of cold)", flush=True)
            print(cold_warm(args.cold_warm_model, args.targets, env2), flush=True)


if __name__ == "__main__":
    main()
