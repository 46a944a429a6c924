"""The oracles of one fuzz graph (:mod:`compstack.fuzz.campaign`): each target run through
explain's warm workers and judged against the float64 reference with the noise-floor verdict
(differential oracle), its failures by stage (crash oracle), a verdict shared by every stack
turned into ``reference-suspect``, and the graph's equivalent rewrite run on each target that
was right. Plain data in and out, so a Ray actor runs the same code (:mod:`compstack.fuzz.ray_exec`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Sequence

import numpy as np
import onnx

__all__ = ["FINDING_KEYS", "UNSUPPORTED_HINTS", "evaluate_graph", "evaluate_one", "reference_suspect", "target_dtypes"]

#: An error containing one of these is a missing feature of the stack, not a bug.
UNSUPPORTED_HINTS = ("NOT_IMPLEMENTED", "not implemented", "Could not find an implementation", "unsupported",
                     "not supported", "NotImplementedError", "no conversion", "No converter", "is not supported",
                     "Unsupported")


def _unsupported(error: str) -> bool:
    return any(h in error for h in UNSUPPORTED_HINTS)


def target_dtypes(target: str) -> frozenset[str]:
    """The dtype names ``target`` takes as inputs and gives back (``supported_dtypes``)."""
    from compstack import targets as registry

    return frozenset(getattr(registry.get(target), "supported_dtypes", ()))


def evaluate_one(ev: Any, dtypes_of: Callable[[str], frozenset[str]], model: onnx.ModelProto,
                 feeds: dict[str, np.ndarray], ref: Any, target: str, rtol: float | None, atol: float | None,
                 own: dict[str, float] | None = None) -> tuple[str, str, str, Any]:
    """Run ``model`` on ``target`` through the Evaluator ``ev`` and judge every output
    against ``ref`` (``ref.f64``/``ref.f32``: output name -> array) with the noise-floor
    verdict; ``own["judge"]`` gets the seconds spent judging.

    Returns:
        ``(key, stage, error, EvalResult or None)``: key ``ok``/``imprecise``, a bad
        verdict kind (``wrong``, ``nan``, ``shape``; stage ``compare``), ``unsupported-dtype``
        (not run), ``unsupported`` (an error saying a feature is missing) or the
        evaluation's status (``failed``, ``crashed``, ``timeout``...).
    """
    from compstack.analysis.verdict import judge
    from compstack.explain.evaluate import Run

    io = {np.asarray(a).dtype.name for a in feeds.values()} | {
        np.asarray(ref.f32[o.name]).dtype.name for o in model.graph.output}
    missing = sorted(io - dtypes_of(target))
    if missing:  # what the harness cannot feed or read back (as the conformance suite does)
        return "unsupported-dtype", "import", f"dtype {', '.join(missing)} not taken by this target", None
    res = ev.run(Run.of(target), model, feeds)
    if res.status != "ok":
        st = "unsupported" if res.status == "failed" and _unsupported(res.error) else res.status
        return st, res.stage, res.error, res
    t0 = time.perf_counter()
    vs: list[tuple[str, Any]] = []
    for o in model.graph.output:
        if o.name not in res.outputs:
            vs.append((o.name, None))
            continue
        vs.append((o.name, judge(res.outputs[o.name], ref.f64[o.name], ref.f32[o.name], rtol, atol)))
    if own is not None:
        own["judge"] = own.get("judge", 0.0) + time.perf_counter() - t0
    bad = [(o, v) for o, v in vs if v is None or v.bad]
    if bad:
        o, v = bad[0]
        return (v.kind if v is not None else "shape"), "compare", \
            (f"output {o}: " + (v.detail if v is not None else "missing")), res
    kinds = {v.kind for _, v in vs}
    return ("imprecise" if "imprecise" in kinds else "ok"), "", "", res


def evaluate_graph(ev: Any, dtypes_of: Callable[[str], frozenset[str]], model: onnx.ModelProto,
                   feeds: dict[str, np.ndarray], ref: Any, rw: tuple[str, onnx.ModelProto] | None,
                   targets: Sequence[str], rtol: float | None, atol: float | None,
                   own: dict[str, float] | None = None, parallel: int = 1) -> list[dict[str, Any]]:
    """Every oracle on one generated graph, as plain data (what a Ray actor sends back).

    Runs ``model`` on each of ``targets`` (:func:`evaluate_one`); a differential verdict
    shared by every target that ran becomes ``reference-suspect`` (:func:`reference_suspect`);
    the rewrite ``rw`` (name, model) runs on each target whose original was ``ok`` or
    ``imprecise``, against its own reference values. ``parallel`` > 1 runs that many
    targets at once, each in its own warm worker (threads here only wait on the workers'
    pipes); the rows are the same as one at a time, in ``targets`` order.

    Returns:
        One dict per target, in ``targets`` order: ``target``, ``key``, ``stage``,
        ``error``, ``stage_seconds`` (seconds per stage) and ``rewrite`` (None, or a dict
        with ``key``, ``stage``, ``error``).
    """
    from compstack.explain.graph import reference_values

    lock = threading.Lock()
    rref: list[Any] = []  # the rewrite's reference values, computed once, by the first target that needs them
    mine: dict[str, float] = {}  # each thread adds its judge seconds here under the lock

    def one(t: str) -> tuple[tuple[str, str, str, Any], dict[str, Any] | None]:
        spent: dict[str, float] = {}
        first = evaluate_one(ev, dtypes_of, model, feeds, ref, t, rtol, atol, spent)
        second = None
        if rw is not None and first[0] in ("ok", "imprecise"):  # the rewrite's turn does not depend on the others
            with lock:
                if not rref:
                    rref.append(reference_values(rw[1], feeds))
            k2, st2, err2, _ = evaluate_one(ev, dtypes_of, rw[1], feeds, rref[0], t, rtol, atol, spent)
            second = {"key": k2, "stage": st2, "error": err2}
        with lock:
            for k, v in spent.items():
                mine[k] = mine.get(k, 0.0) + v
        return first, second

    if parallel > 1 and len(targets) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(parallel, len(targets)), thread_name_prefix="fuzz-eval") as pool:
            results = dict(zip(targets, pool.map(one, targets)))
    else:
        results = {t: one(t) for t in targets}
    if own is not None:
        for k, v in mine.items():
            own[k] = own.get(k, 0.0) + v
    suspect = reference_suspect({t: r[0] for t, r in results.items()})
    rows = []
    for t in targets:
        (key, stage, err, res), second = results[t]
        if key in _DIFFERENTIAL and suspect:
            key = "reference-suspect"
        rows.append({"target": t, "key": key, "stage": stage, "error": err,
                     "stage_seconds": dict(res.stage_seconds) if res is not None else {}, "rewrite": second})
    return rows


_DIFFERENTIAL = ("wrong", "nan", "shape")
#: Keys that are findings (crash oracle and differential oracle).
FINDING_KEYS = ("failed", "crashed", "timeout", "wrong", "nan", "shape")


def reference_suspect(done: dict[str, tuple[str, str, str, Any]]) -> bool:
    """True when two or more targets ran, every one that ran disagrees with the reference,
    and they agree with each other (same shapes, close values): then the reference
    evaluator is the likelier culprit (it has bugs too: see ``families.lpnorm``), and no
    stack is blamed."""
    ran = [r for k, _, _, r in done.values() if r is not None and r.status == "ok"]
    if len(ran) < 2 or any(k not in _DIFFERENTIAL for k, _, _, r in done.values() if r is not None and r.status == "ok"):
        return False
    first = ran[0].outputs
    for other in ran[1:]:
        for name, a in first.items():
            b = other.outputs.get(name)
            if b is None or np.shape(a) != np.shape(b):
                return False
            x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
            if not np.allclose(x, y, rtol=1e-2, atol=1e-3, equal_nan=True):
                return False
    return True
