"""``compstack fuzz --executor ray``: the evaluations of generated graphs as Ray actor tasks.

Design (why actors): a stack's first compile in a fresh process costs seconds (imports,
LLVM, jit caches), a graph's evaluation tens of milliseconds to a second, so a fresh Ray
worker per evaluation (as sweeps do, :mod:`compstack.sweep._ray`) would spend most of
its time starting. Each of ``workers`` Ray actors (``num_cpus=1``) holds its own
:class:`compstack.explain.evaluate.Evaluator`, i.e. one long-lived, isolated worker
process per target, exactly as a local campaign does; each actor task is one graph on
every target (:func:`compstack.fuzz.oracles.evaluate_graph`: the crash, differential
and equivalence oracles). A stack crash or hang kills the Evaluator's worker process,
not the actor.

Same results as ``--executor local`` for the same seed: the driver generates every
graph, its reference values and its rewrite in index order (the campaign's random
streams are consumed there), at most two graphs are in flight per actor, and results are
absorbed (counted, deduplicated, reduced, bundled) strictly in index order. Reduction
(:func:`compstack.explain.explain`) runs on the driver. Only plain data crosses
processes: the model as ONNX bytes, arrays as ``.npz`` bytes read back with
``allow_pickle=False``, rows as dicts of strings and numbers.

Ray is started (or joined) with the hygiene of the sweep executor
(:class:`compstack.sweep._ray.RayExecutor`: session folder under the system temp
folder, no dashboard, no usage stats, no token auth for a local cluster, the current
folder not on the workers' ``sys.path``).
"""

from __future__ import annotations

import io
import os
import time
from typing import Any, Callable

import numpy as np
import onnx

__all__ = ["FuzzActor", "run_on_ray", "pack_arrays", "unpack_arrays"]

#: Graphs in flight per actor (one running, one queued behind it).
PER_ACTOR = 2


def pack_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    """Arrays as ``.npz`` bytes (``ml_dtypes`` arrays as bit views, :func:`compstack.core.inputs.encode_arrays`)."""
    from compstack.core.inputs import encode_arrays

    buf = io.BytesIO()
    np.savez(buf, **encode_arrays(dict(arrays)))  # type: ignore[arg-type]
    return buf.getvalue()


def unpack_arrays(data: bytes) -> dict[str, np.ndarray]:
    """Inverse of :func:`pack_arrays` (``allow_pickle=False``: no object arrays)."""
    from compstack.core.inputs import decode_arrays

    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return decode_arrays({k: z[k] for k in z.files})


class _Ref:
    """Reference values of a graph's outputs (``f64``, ``f32``: name -> array)."""

    def __init__(self, f64: dict[str, np.ndarray], f32: dict[str, np.ndarray]) -> None:
        self.f64, self.f32 = f64, f32


class FuzzActor:
    """A Ray actor: one Evaluator (one worker process per target), kept for the campaign.

    Args:
        timeout_s: limit of one evaluation, seconds.
        rtol, atol: tolerances of the differential verdict.
    """

    def __init__(self, timeout_s: float, rtol: float | None, atol: float | None) -> None:
        from compstack.explain.evaluate import Evaluator

        self.ev = Evaluator(timeout_s)
        self.rtol, self.atol = rtol, atol
        self._dtypes: dict[str, frozenset[str]] = {}

    def info(self, target: str) -> dict[str, Any]:
        """The target worker's ready message (starts it): ``available``, ``versions``..."""
        from compstack.explain.evaluate import Run

        info = self.ev.info(Run.of(target))
        return {"available": bool(info.get("available", False)), "reason": str(info.get("reason", "")),
                "versions": {str(k): str(v) for k, v in (info.get("versions") or {}).items()}}

    def _dtypes_of(self, target: str) -> frozenset[str]:
        from compstack.fuzz.oracles import target_dtypes

        if target not in self._dtypes:
            self._dtypes[target] = target_dtypes(target)
        return self._dtypes[target]

    def evaluate(self, job: dict[str, Any]) -> dict[str, Any]:
        """One graph on ``job["targets"]``: ``{"rows": evaluate_graph rows, "judge_s": s, "host": name}``.

        ``job``: ``model`` (ONNX bytes), ``feeds``, ``f64``, ``f32`` (``.npz`` bytes of the
        inputs and of the outputs' reference values), ``rewrite`` (None or ``[name, ONNX bytes]``).
        """
        import socket

        from compstack.fuzz.oracles import evaluate_graph

        model = onnx.load_from_string(job["model"])
        feeds = unpack_arrays(job["feeds"])
        ref = _Ref(unpack_arrays(job["f64"]), unpack_arrays(job["f32"]))
        rw = (job["rewrite"][0], onnx.load_from_string(job["rewrite"][1])) if job["rewrite"] else None
        own: dict[str, float] = {"judge": 0.0}
        rows = evaluate_graph(self.ev, self._dtypes_of, model, feeds, ref, rw, job["targets"], self.rtol, self.atol,
                              own)
        return {"rows": rows, "judge_s": own["judge"], "host": socket.gethostname()}

    def close(self) -> None:
        """Stop the Evaluator's worker processes."""
        self.ev.close()


def _job(case: Any, ref: Any, rw: tuple[str, onnx.ModelProto] | None, targets: list[str]) -> dict[str, Any]:
    outs = [o.name for o in case.model.graph.output]
    return {"model": case.model.SerializeToString(), "feeds": pack_arrays(case.feeds),
            "f64": pack_arrays({o: np.asarray(ref.f64[o]) for o in outs}),
            "f32": pack_arrays({o: np.asarray(ref.f32[o]) for o in outs}),
            "rewrite": [rw[0], rw[1].SerializeToString()] if rw is not None else None, "targets": list(targets)}


def run_on_ray(c: Any, opts: Any, deadline: float, progress: Callable[[bool], None]) -> None:
    """Run the campaign ``c`` (a :class:`compstack.fuzz.campaign._Campaign`) until
    ``deadline`` (``time.monotonic()``) or ``opts.max_graphs``, evaluating on Ray actors.

    Raises:
        UserError: Ray is not installed or cannot start / reach the cluster (one line).
    """
    from compstack.sweep._ray import RayExecutor

    ex = RayExecutor(address=opts.ray_address, num_cpus=opts.workers or None, sweep_id=f"fuzz-{os.getpid()}")
    ray = ex.ray
    try:
        cpus = int(sum(n.get("Resources", {}).get("CPU", 0) for n in ray.nodes() if n.get("Alive")))
        n = max(1, opts.workers or cpus or 1)
        actor_cls = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(FuzzActor)
        actors = [actor_cls.remote(opts.timeout_s, opts.rtol, opts.atol) for _ in range(n)]
        infos: dict[str, Any] = {}
        refs = {(i, t): a.info.remote(t) for i, a in enumerate(actors) for t in opts.targets}  # start all in parallel
        for (i, t), ref in refs.items():
            got = ray.get(ref)
            if i == 0:
                infos[t] = got
        active = c.start(lambda t: infos[t])
        c.executor.update(workers=n, cluster_cpus=cpus, address=opts.ray_address or "local")
        c.say(f"ray: {n} actor(s) on {len(ray.nodes())} node(s), {cpus} CPU(s)")
        flying: dict[Any, tuple[int, Any]] = {}   # object ref -> (index, actor)
        load = {id(a): 0 for a in actors}
        planned: dict[int, tuple[Any, Any, Any]] = {}
        results: dict[int, dict[str, Any]] = {}
        hosts: dict[str, int] = {}
        i = nxt = 0
        busy = 0.0  # the driver's own seconds: planning, packing, absorbing (not waiting)
        while active:
            more = time.monotonic() < deadline and (opts.max_graphs is None or i < opts.max_graphs)
            while more and len(flying) < PER_ACTOR * len(actors):
                actor = min(actors, key=lambda a: load[id(a)])
                t0 = time.perf_counter()
                case, ref, rw = c.plan(i)
                planned[i] = (case, ref, rw)
                flying[actor.evaluate.remote(_job(case, ref, rw, active))] = (i, actor)
                busy += time.perf_counter() - t0
                load[id(actor)] += 1
                i += 1
                more = time.monotonic() < deadline and (opts.max_graphs is None or i < opts.max_graphs)
            if not flying and nxt >= i:
                break
            ready, _ = ray.wait(list(flying), num_returns=1, timeout=1.0)
            for r in ready:
                idx, actor = flying.pop(r)
                load[id(actor)] -= 1
                try:
                    results[idx] = ray.get(r)
                except Exception as exc:  # noqa: BLE001 - the actor died: count it, not a stack finding
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                    c.say(f"ray: graph {idx} lost ({type(exc).__name__}: {first}); actor replaced")
                    results[idx] = {"rows": [{"target": t, "key": "ray-lost", "stage": "", "error": first,
                                              "stage_seconds": {}, "rewrite": None} for t in active],
                                    "judge_s": 0.0, "host": "?"}
                    actors[actors.index(actor)] = fresh = actor_cls.remote(opts.timeout_s, opts.rtol, opts.atol)
                    load[id(fresh)] = load.pop(id(actor), 0)
            while nxt in results:  # in index order: the same dedup and numbering as locally
                t0 = time.perf_counter()
                res = results.pop(nxt)
                case, ref, rw = planned.pop(nxt)
                c.own["judge"] += res["judge_s"]
                hosts[res["host"]] = hosts.get(res["host"], 0) + 1
                c.absorb(case, ref, rw, res["rows"])
                busy += time.perf_counter() - t0
                nxt += 1
                progress(opts.max_graphs is not None and nxt == opts.max_graphs)
        c.executor["hosts"] = hosts
        c.executor["driver_s"] = busy
        for a in actors:
            try:
                ray.get(a.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
    finally:
        ex.close()
