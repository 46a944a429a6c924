"""Explain a disagreement: judge, localise (bisect), reduce, attribute.

:class:`Explainer` holds the model, its inputs, the reference values of every tensor
(:mod:`compstack.explain.graph`), the property to keep (:mod:`compstack.explain.keep`)
and an :class:`~compstack.explain.evaluate.Evaluator` (long-lived workers per target).

* :meth:`Explainer.check` evaluates one piece of the model on the property's targets and
  says whether the property holds on it.
* :meth:`Explainer.bisect` finds the first divergent node by binary search over
  prefixes of the topological order (each prefix compiled with its frontier as outputs,
  never every tensor), ⌈log₂ n⌉ + 2 compiles; then runs that node alone on the
  reference's inputs: wrong alone is an op bug, right alone is an interaction with the
  rest of the graph (fusion, layout, an optimisation across nodes).
* :meth:`Explainer.reduce` is delta debugging (ddmin, Zeller & Hildebrandt, "Simplifying
  and Isolating Failure-Inducing Input", TSE 2002) over the nodes, starting from the
  divergent node's backward cone; removed producers become graph inputs fed with the
  reference's values, so what remains receives what it received in the original model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import onnx

from compstack.analysis.verdict import Verdict, judge
from compstack.explain import graph as _graph
from compstack.explain.evaluate import EvalResult, Evaluator, Run
from compstack.explain.graph import Piece, ReferenceValues, describe, feeds_for, node_inputs, piece, prefix_frontier
from compstack.explain.keep import Clause, error_class

__all__ = ["Check", "Explainer", "BisectResult", "ReduceResult", "Simplified", "simplify"]


@dataclass
class Check:
    """One evaluation of the property on a piece.

    Attributes:
        holds: the property holds (the piece still shows the discrepancy).
        results: per target, the evaluation.
        verdicts: per target, per output, the verdict against the reference.
        why: one line: which clause held or failed, and on which output.
    """

    holds: bool
    results: dict[str, EvalResult] = field(default_factory=dict)
    verdicts: dict[str, dict[str, Verdict]] = field(default_factory=dict)
    why: str = ""


@dataclass
class BisectResult:
    """The first divergent node.

    Attributes:
        node: :func:`compstack.explain.graph.describe` of it, or None when the whole
            model does not show the property.
        alone: the property holds with the node run alone on reference inputs.
        kind: ``op`` (wrong alone) or ``interaction`` (right alone, wrong in context).
        compiles: evaluations used; ``bound`` is ⌈log₂ n⌉ + 2.
        steps: ``(prefix end, holds)`` in order.
        bad_outputs: the frontier tensors that diverged at the found cut.
    """

    node: dict[str, Any] | None
    alone: bool = False
    kind: str = ""
    compiles: int = 0
    bound: int = 0
    steps: list[tuple[int, bool]] = field(default_factory=list)
    bad_outputs: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class ReduceResult:
    """A reduced model that keeps the property.

    Attributes:
        piece: the reduced piece (its ``model`` is valid ONNX).
        nodes_before, nodes_after: node counts.
        compiles: evaluations used.
        seconds: wall time.
        complete: False when the time budget ran out before ddmin finished (the piece
            is still a valid, smaller model that keeps the property).
    """

    piece: Piece
    nodes_before: int
    nodes_after: int
    compiles: int
    seconds: float
    complete: bool = True
    check: Check | None = None


class Explainer:
    """Explain one model's disagreement on some targets.

    Args:
        proto: the model.
        feeds: its inputs (graph input name -> array).
        clauses: the property to keep (:func:`compstack.explain.keep.parse_keep`).
        target_options: ``{target: {option: value}}`` for the compile runs.
        evaluator: where pieces run.
        rtol, atol: the tolerance of the verdict.
        deadline: ``time.monotonic()`` value after which reduction stops.

    Raises:
        Exception: the reference evaluator cannot run the model.
    """

    def __init__(self, proto: onnx.ModelProto, feeds: dict[str, np.ndarray], clauses: Sequence[Clause],
                 evaluator: Evaluator, target_options: dict[str, dict[str, str]] | None = None,
                 rtol: float | None = None, atol: float | None = None, deadline: float = math.inf,
                 ref: ReferenceValues | None = None) -> None:
        from compstack.explain.graph import reference_values, topo_check

        topo_check(proto)
        self.proto = proto
        self.feeds = dict(feeds)
        self.clauses = list(clauses)
        self.evaluator = evaluator
        self.target_options = target_options or {}
        self.rtol, self.atol = rtol, atol
        self.deadline = deadline
        self.ref = ref if ref is not None else reference_values(proto, self.feeds)
        self.failure: dict[str, tuple[str, str, str]] = {}  # target -> (status, stage, error class) kept
        #: every target of the explanation (``--targets``); pieces run only on the
        #: property's, the bundle on all of them.
        self.all_targets: list[str] = self.targets()

    # ---- one piece ---------------------------------------------------------------------

    def run_for(self, target: str) -> Run:
        return Run.of(target, self.target_options.get(target))

    def targets(self) -> list[str]:
        return list(dict.fromkeys(t for c in self.clauses for t in c.targets()))

    def _floor(self, p: Piece, prefix: bool) -> dict[str, np.ndarray]:
        """float32 values of the piece's outputs: from the full float32 run for a prefix
        (the same computation), else from running the piece itself in float32."""
        if prefix:
            return {o: self.ref.f32[o] for o in p.outputs}
        from compstack.explain.graph import _run

        try:
            got = _run(p.model, feeds_for(p, self.ref))
        except Exception:  # noqa: BLE001 - no floor: judge by the tolerance alone
            return {o: self.ref.f64[o] for o in p.outputs}
        return {o: got[o] for o in p.outputs}

    def judge_outputs(self, outs: dict[str, np.ndarray], p: Piece, f32: dict[str, np.ndarray],
                      against: dict[str, np.ndarray] | None = None) -> dict[str, Verdict]:
        """Verdict per output of ``p`` (against the float64 reference, or ``against``)."""
        verdicts = {}
        for o in p.outputs:
            if o not in outs:
                verdicts[o] = Verdict("shape", detail="output missing")
                continue
            ref64 = self.ref.f64[o] if against is None else against[o]
            verdicts[o] = judge(outs[o], ref64, f32[o] if against is None else self._peer_floor(o, ref64, f32),
                                self.rtol, self.atol)
        return verdicts

    def _peer_floor(self, o: str, peer: np.ndarray, f32: dict[str, np.ndarray]) -> np.ndarray:
        # A!=B: B's output is the reference; the floor is float32's own error, moved onto B.
        f64 = np.asarray(self.ref.f64[o])
        if f64.dtype.kind != "f":
            return peer
        return np.asarray(peer, dtype=np.float64) + (np.asarray(f32[o], dtype=np.float64) - f64)

    def check(self, p: Piece, prefix: bool = False) -> Check:
        """Evaluate the property on piece ``p`` (see the class docstring)."""
        feeds = feeds_for(p, self.ref)
        results = {t: self.evaluator.run(self.run_for(t), p.model, feeds) for t in self.targets()}
        f32 = self._floor(p, prefix)
        verdicts = {t: self.judge_outputs(r.outputs, p, f32) for t, r in results.items() if r.status == "ok"}
        holds, why = True, []
        for c in self.clauses:
            ok, line = self._clause(c, p, results, verdicts, f32)
            holds = holds and ok
            why.append(line)
        return Check(holds, results, verdicts, "; ".join(why))

    def _clause(self, c: Clause, p: Piece, results: dict[str, EvalResult], verdicts: dict[str, dict[str, Verdict]],
                f32: dict[str, np.ndarray]) -> tuple[bool, str]:
        left = results[c.left]
        if c.left in self.failure:  # keep the failure seen on the whole model
            status, stage, kind = self.failure[c.left]  # the same failure: a different error is another bug
            same = left.status == status and left.stage == stage and error_class(left.error) == kind
            return (same if c.op == "!=" else not same), f"{c.left} {left.status} at {left.stage or '-'}"
        if left.status in ("unsupported", "unavailable"):  # not a discrepancy, and nothing to compare
            return False, f"{c.left} {left.status}: {left.error[:120]}"
        if left.status != "ok":
            return c.op == "!=", f"{c.left} {left.status} at {left.stage}: {left.error[:120]}"
        if c.right == "ref":
            bad = [o for o, v in verdicts[c.left].items() if v.bad]
        else:
            right = results[c.right]
            if right.status != "ok":
                return c.op == "!=", f"{c.right} {right.status} at {right.stage}"
            peer = self.judge_outputs(left.outputs, p, f32, against=right.outputs)
            bad = [o for o, v in peer.items() if v.bad]
        differs = bool(bad)
        line = f"{c}: {'holds' if differs == (c.op == '!=') else 'does not hold'}"
        if bad:
            v = (verdicts.get(c.left) or {}).get(bad[0])
            line += f" (output {bad[0]}{': ' + v.detail if v and v.detail else ''})"
        return differs == (c.op == "!="), line

    # ---- bisect ------------------------------------------------------------------------

    def whole(self) -> Check:
        """The property on the whole model; records failures to keep (see :mod:`keep`)."""
        outs = [o.name for o in self.proto.graph.output]
        p = piece(self.proto, range(len(self.proto.graph.node)), self.ref, outputs=outs)
        chk = self.check(p, prefix=True)
        for c in self.clauses:
            r = chk.results[c.left]
            if c.op == "!=" and c.right == "ref" and r.status in ("failed", "crashed", "timeout"):
                self.failure[c.left] = (r.status, r.stage, error_class(r.error))
        return chk

    def bisect(self, on_step: Callable[[int, bool], None] | None = None) -> BisectResult:
        """Find the first node after which the property holds (see the module docstring)."""
        t0 = time.perf_counter()
        start = self.evaluator.compiles
        n = len(self.proto.graph.node)
        whole = self.whole()
        bound = math.ceil(math.log2(max(n, 2))) + 2
        if not whole.holds:
            return BisectResult(None, compiles=self.evaluator.compiles - start, bound=bound,
                                seconds=time.perf_counter() - t0)
        lo, hi = -1, n - 1  # prefix ending at lo: does not hold (empty); at hi: holds
        steps: list[tuple[int, bool]] = [(n - 1, True)]
        last = whole
        while hi - lo > 1:
            mid = (lo + hi) // 2
            frontier = prefix_frontier(self.proto, mid)
            if not frontier:  # nothing live after this cut (a dead end): move on
                lo = mid
                continue
            chk = self.check(piece(self.proto, range(mid + 1), self.ref, outputs=frontier), prefix=True)
            steps.append((mid, chk.holds))
            if on_step:
                on_step(mid, chk.holds)
            if chk.holds:
                hi, last = mid, chk
            else:
                lo = mid
        node = describe(self.proto, hi)
        bad = sorted({o for vs in last.verdicts.values() for o, v in vs.items() if v.bad})
        alone = self.check(piece(self.proto, [hi], self.ref))
        return BisectResult(node, alone.holds, "op" if alone.holds else "interaction",
                            self.evaluator.compiles - start, bound, steps, bad, time.perf_counter() - t0)

    # ---- reduce ------------------------------------------------------------------------

    def cone(self, index: int) -> list[int]:
        """Node ``index`` and every node it (transitively) reads from."""
        nodes = list(self.proto.graph.node)
        producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
        todo, seen = [index], set()
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            todo.extend(producer[x] for x in node_inputs(nodes[i]) if x in producer)
        return sorted(seen)

    def reduce(self, start: Sequence[int] | None = None, must: Sequence[int] = ()) -> ReduceResult:
        """ddmin over the nodes ``start`` (default: all), always keeping ``must``.

        Returns the smallest piece found that keeps the property; stops at the deadline
        (``complete`` is then False).
        """
        t0 = time.perf_counter()
        c0 = self.evaluator.compiles
        nodes = sorted(set(start if start is not None else range(len(self.proto.graph.node))))
        must = sorted(set(must))
        free = [i for i in nodes if i not in must]
        cache: dict[tuple[int, ...], Check] = {}

        def test(keep: Sequence[int]) -> bool:
            key = tuple(sorted(set(keep) | set(must)))
            if not key:
                return False
            if key not in cache:
                cache[key] = self.check(piece(self.proto, key, self.ref))
            return cache[key].holds

        complete = True
        best = free
        if must and test([]):
            best = []
        elif not test(free):
            best = free  # the start set itself does not keep the property: nothing to reduce
        else:
            granularity = 2
            while len(best) >= 2:
                if time.monotonic() > self.deadline:
                    complete = False
                    break
                chunks = _split(best, granularity)
                reduced = False
                for chunk in chunks:  # a chunk alone
                    if test(chunk):
                        best, granularity, reduced = chunk, 2, True
                        break
                if not reduced:
                    for chunk in chunks:  # a complement
                        rest = [i for i in best if i not in chunk]
                        if test(rest):
                            best, granularity, reduced = rest, max(granularity - 1, 2), True
                            break
                if not reduced:
                    if granularity >= len(best):
                        break
                    granularity = min(granularity * 2, len(best))
            if len(best) == 1 and must and test([]):
                best = []
        keep = sorted(set(best) | set(must))
        final = piece(self.proto, keep, self.ref)
        return ReduceResult(final, len(nodes), len(keep), self.evaluator.compiles - c0, time.perf_counter() - t0,
                            complete, cache.get(tuple(keep)))


@dataclass
class Simplified:
    """The reduced model after the second reduction pass (attributes, input values).

    Attributes:
        model: the simplified model (valid ONNX; it still keeps the property).
        feeds: its inputs.
        steps: what was changed, one line each (``Conv: attribute strides dropped``).
        compiles: evaluations used.
    """

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    steps: list[str] = field(default_factory=list)
    compiles: int = 0


def _valid(model: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception:  # noqa: BLE001 - an invalid candidate is simply not taken
        return False
    return True


def simplify(explainer: Explainer, p: Piece) -> Simplified:
    """Second ddmin pass on the reduced piece (after the nodes): drop each optional
    attribute (the op then uses its documented default), shrink the input shapes (see
    :func:`shrink_shapes`), and replace each float input by all-ones, then all-zeros; keep a
    change when the model stays valid and the property still holds (judged against the
    reference of the *changed* model). One compile per candidate, stopped at the
    explainer's deadline.
    """
    import copy

    from onnx import defs

    c0 = explainer.evaluator.compiles
    model, feeds = copy.deepcopy(p.model), feeds_for(p, explainer.ref)
    steps: list[str] = []

    def holds(m: onnx.ModelProto, f: dict[str, np.ndarray]) -> bool:
        if time.monotonic() > explainer.deadline or not _valid(m):
            return False
        try:
            sub = Explainer(m, f, explainer.clauses, explainer.evaluator, explainer.target_options,
                            explainer.rtol, explainer.atol)
        except Exception:  # noqa: BLE001 - the reference cannot run the candidate: not taken
            return False
        sub.ref.symbolic_inputs = _graph.symbolic_inputs_of(m) if explainer.ref.symbolic_inputs else {}
        return sub.whole().holds

    opsets = {o.domain: o.version for o in model.opset_import}
    for i, node in enumerate(model.graph.node):
        try:
            schema = defs.get_schema(node.op_type, opsets.get(node.domain, opsets.get("", 1)), node.domain)
        except Exception:  # noqa: BLE001 - a custom op has no ONNX schema
            continue
        for attr in list(node.attribute):
            spec = schema.attributes.get(attr.name)
            if spec is None or spec.required:
                continue
            trial = copy.deepcopy(model)
            kept = [a for a in trial.graph.node[i].attribute if a.name != attr.name]
            del trial.graph.node[i].attribute[:]
            trial.graph.node[i].attribute.extend(kept)
            if holds(trial, feeds):
                model = trial
                steps.append(f"{node.name or node.op_type}: attribute {attr.name} dropped (the op's default)")
    model, feeds, shrunk = shrink_shapes(model, feeds, holds)
    steps += shrunk
    for name in list(feeds):
        arr = feeds[name]
        if arr.dtype.kind != "f" or arr.size == 0:
            continue
        for label, value in (("ones", np.ones_like(arr)), ("zeros", np.zeros_like(arr))):
            trial_feeds = {**feeds, name: value}
            if holds(model, trial_feeds):
                feeds = trial_feeds
                steps.append(f"input {name}: all {label}")
                break
    return Simplified(model, feeds, steps, explainer.evaluator.compiles - c0)


def with_input_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]],
                      initializers: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs named in ``shapes`` declare those shapes (a
    dim declared symbolic, ``dim_param``, stays symbolic) and whose initializers named in ``initializers`` hold those arrays; the
    inferred ``value_info`` is dropped and the outputs' dims become symbolic (same rank),
    so ONNX shape inference (run by the validity check) derives them again.
    """
    import copy

    from onnx import numpy_helper

    out = copy.deepcopy(model)
    for vi in out.graph.input:
        if vi.name in shapes:  # a symbolic dim stays symbolic: the model checked is the model kept
            vi.CopyFrom(_graph.symbolic_like(vi, shapes[vi.name]))
    for i, init in enumerate(out.graph.initializer):
        if initializers and init.name in initializers:
            out.graph.initializer[i].CopyFrom(numpy_helper.from_array(initializers[init.name], init.name))
    del out.graph.value_info[:]
    for vi in out.graph.output:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            for i, d in enumerate(vi.type.tensor_type.shape.dim):
                d.Clear()
                d.dim_param = f"{vi.name}_dim{i}"  # same rank; shape inference fills the sizes
    return out


def shrink_shapes(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                  holds: Callable[[onnx.ModelProto, dict[str, np.ndarray]], bool]) -> tuple[
                      onnx.ModelProto, dict[str, np.ndarray], list[str]]:
    """Delta debugging over tensor shapes: halve dimensions while the property holds.

    The tensors are the graph inputs and the float initializers of rank >= 1 (weights
    and constants that broadcast against the inputs must shrink with them). Each round
    tries, for every dimension size ``d > 1`` among them, to cut *every* axis of that size
    to ``d // 2`` at once (axes that broadcast together share a size), then each (tensor,
    axis) alone; a tensor's values are its leading slice along the axis, so the smaller
    model computes a sub-block of what the original did. A candidate is kept when
    :func:`_valid` accepts it (checker with shape inference, so a ``Reshape`` whose
    constant no longer fits is refused) and ``holds`` says the property still holds.
    Rounds repeat until nothing shrinks (ddmin's 1-minimality over the dimension sizes;
    Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", 2002).

    Args:
        model: the reduced model (its graph inputs are the keys of ``feeds``).
        feeds: input name -> array (any dtype; shapes as the model declares).
        holds: the property, evaluated on a candidate model and its inputs.

    Returns:
        The model, its inputs, and one line per tensor that changed
        (``input x: shape [4, 8] -> [1, 1]``, ``initializer w: ...``).
    """
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    inits = {n: a for n, a in inits.items() if a.ndim >= 1 and a.dtype.kind == "f" and n not in feeds}
    tensors = {**feeds, **inits}
    before = {n: tuple(a.shape) for n, a in tensors.items()}

    def cut(axes: list[tuple[str, int]], size: int) -> dict[str, np.ndarray]:
        out = dict(tensors)
        for name, ax in axes:
            index = [slice(None)] * out[name].ndim
            index[ax] = slice(0, size)
            out[name] = np.ascontiguousarray(out[name][tuple(index)])
        return out

    changed = True
    while changed:
        changed = False
        axes_of: dict[int, list[tuple[str, int]]] = {}
        for name, arr in tensors.items():
            for ax, d in enumerate(arr.shape):
                if d > 1:
                    axes_of.setdefault(d, []).append((name, ax))
        groups = [axes for _, axes in sorted(axes_of.items(), reverse=True)]
        groups += [[a] for axes in list(groups) if len(axes) > 1 for a in axes]
        for axes in groups:
            size = tensors[axes[0][0]].shape[axes[0][1]]
            if size <= 1 or any(tensors[n].shape[a] != size for n, a in axes):
                continue  # an earlier candidate of this round changed it
            trial = cut(axes, size // 2)
            candidate = with_input_shapes(model, {n: trial[n].shape for n in feeds},
                                          {n: trial[n] for n in inits})
            trial_feeds = {n: trial[n] for n in feeds}
            if holds(candidate, trial_feeds):
                model, tensors, changed = candidate, trial, True
    steps = [f"{'input' if n in feeds else 'initializer'} {n}: shape {list(s)} -> {list(tensors[n].shape)}"
             for n, s in before.items() if tuple(tensors[n].shape) != s]
    return model, {n: tensors[n] for n in feeds}, steps

def _split(items: list[int], n: int) -> list[list[int]]:
    """``items`` in ``n`` contiguous chunks of near-equal size."""
    size, extra = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        j = i + size + (1 if k < extra else 0)
        if j > i:
            out.append(items[i:j])
        i = j
    return out
