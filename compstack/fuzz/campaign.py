"""A fuzz campaign: generate, evaluate on every target, judge, dedup, reduce, bundle, record.

For each generated graph (:mod:`compstack.fuzz.generate`) and each target, through the
long-lived workers of :class:`compstack.explain.evaluate.Evaluator`:

* **crash oracle**: an evaluation that ends ``failed``, ``crashed`` or ``timeout`` is a
  finding at its stage (``import``, ``lower``, ``compile``, ``run``); ``unsupported``,
  ``unavailable`` and errors that say an op or dtype is not implemented are outcomes,
  not findings;
* **differential oracle**: each output against the float64 reference with the float32
  noise floor (:func:`compstack.analysis.verdict.judge`); ``wrong``, ``nan`` and
  ``shape`` are findings (stage ``compare``);
* **equivalence oracle**: a semantically equal rewrite (:mod:`compstack.fuzz.rewrite`)
  run on the same target must be judged as well as the original; a rewrite that turns
  a right result wrong (or makes it fail) is a finding of kind ``equivalence``.

When every target that ran (two or more) disagrees with the reference the same way,
the reference evaluator is suspected instead (outcome ``reference-suspect``, no finding).

A finding whose pre-signature (target, stage, kind, the graph's op set, error) was seen
is a repeat. Otherwise :func:`compstack.explain.explain` reduces and bundles it into
``out_dir/NNNN``; its signature (with the *reduced* op set,
:mod:`compstack.fuzz.signature`) dedups it again and is looked up in the known file of
the target's version. With ``allow_ub`` a finding on a graph with undefined behaviour
is labelled ``undefined``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import onnx

from compstack.fuzz.generate import Case, Generator
from compstack.fuzz.oracles import FINDING_KEYS as _FINDING
from compstack.fuzz.oracles import UNSUPPORTED_HINTS, evaluate_graph, evaluate_one, target_dtypes
from compstack.fuzz.signature import read_known, signature

__all__ = ["CampaignOptions", "Finding", "run_campaign", "one_line", "UNSUPPORTED_HINTS"]

@dataclass
class CampaignOptions:
    """What a campaign does (the CLI flags of ``compstack fuzz``).

    ``symbolic_shapes``: share of graphs with symbolic input dims
    (:meth:`compstack.fuzz.generate.Generator._symbolic`). ``executor``: ``local`` (this
    process's Evaluator, one graph at a time) or ``ray`` (:mod:`compstack.fuzz.ray_exec`:
    ``workers`` Ray actors, default one per CPU of the cluster; ``ray_address`` joins a
    cluster instead of starting a local one). ``parallel``: with the local executor, how
    many targets of one graph are evaluated at once (each in its own worker process).
    """

    targets: list[str]
    seed: int = 0
    budget_s: float = 600.0
    max_graphs: int | None = None
    max_nodes: int = 6
    dtypes: Sequence[str] = ("float32", "float16", "bfloat16", "int8", "int32", "int64", "bool")
    ops: str | None = None
    allow_ub: bool = False
    out_dir: Path | None = None
    timeout_s: float = 60.0
    equivalence: float = 0.5
    reduce: bool = True
    explain_budget_s: float = 120.0
    known_dir: Path | None = None
    rtol: float | None = None
    atol: float | None = None
    symbolic_shapes: float = 0.2
    executor: str = "local"
    workers: int | None = None
    ray_address: str | None = None
    parallel: int = 1


@dataclass
class Finding:
    """One unique finding."""

    number: int
    signature: str
    target: str
    stage: str
    kind: str
    label: str
    ops: list[str]
    graph: str
    error: str = ""
    attribution: str = ""
    known: bool = False
    repeats: int = 0
    bundle: str = ""
    graph_seed: int = 0
    reproduced: bool = True
    rewrite: str = ""

    def row(self) -> dict[str, Any]:
        return {"number": self.number, "signature": self.signature, "target": self.target, "stage": self.stage,
                "kind": self.kind, "label": self.label, "ops": "+".join(self.ops), "graph": self.graph,
                "attribution": self.attribution, "known": int(self.known), "repeats": self.repeats,
                "bundle": self.bundle, "graph_seed": self.graph_seed, "error": self.error}


def one_line(model: onnx.ModelProto) -> str:
    """The graph in one line: ``Op[attr=v](dtype[shape], ...)`` per node, ``;``-separated
    (a symbolic dim is shown by its name: ``float32[d3, 4]``)."""
    from onnx import helper

    types: dict[str, str] = {}
    for v in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        tt = v.type.tensor_type
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type).name if tt.elem_type else "?"
        types[v.name] = f"{dt}[{', '.join(d.dim_param or str(d.dim_value) for d in tt.shape.dim)}]"
    for t in model.graph.initializer:
        types[t.name] = f"const {helper.tensor_dtype_to_np_dtype(t.data_type).name}{list(t.dims)}"
    parts = []
    for n in model.graph.node:
        attrs = ",".join(f"{a.name}={_short(helper.get_attribute_value(a))}" for a in n.attribute)
        ins = ", ".join(types.get(i, i) if i else "-" for i in n.input)
        parts.append(f"{n.op_type}{'[' + attrs + ']' if attrs else ''}({ins})")
    return "; ".join(parts)


def _short(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ",".join(_short(x) for x in v) + "]"
    return str(v)


class _Campaign:
    def __init__(self, opts: CampaignOptions, say: Callable[[str], None]) -> None:
        from compstack.explain.evaluate import Evaluator

        self.o, self.say = opts, say
        self.gen = Generator(opts.seed, opts.max_nodes, opts.dtypes, opts.ops, opts.allow_ub, opts.symbolic_shapes)
        self.executor: dict[str, Any] = {"name": opts.executor}
        self.ev = Evaluator(opts.timeout_s)
        self.rng = np.random.default_rng(opts.seed + 7)
        self.outcomes: dict[str, dict[str, int]] = {t: {} for t in opts.targets}
        self.seconds: dict[str, dict[str, float]] = {t: {} for t in opts.targets}
        self.own: dict[str, float] = {"generate": 0.0, "judge": 0.0, "reduce": 0.0}
        self.pre: dict[str, Finding] = {}
        self.unique: dict[str, Finding] = {}
        self.findings: list[Finding] = []
        #: new failures waiting for the reduction phase: (finding, case, target, undefined)
        self.queue: list[tuple[Finding, Case, str, bool]] = []
        self.versions: dict[str, str] = {}
        self.known: dict[str, set[str]] = {}
        self.graphs = 0
        self._dtypes: dict[str, frozenset[str]] = {}
        self.bundle_root = Path(opts.out_dir) if opts.out_dir else Path(tempfile.mkdtemp(prefix="compstack-fuzz-"))

    # -- bookkeeping
    def _count(self, target: str, key: str, stage_seconds: dict[str, float] | None = None) -> None:
        self.outcomes[target][key] = self.outcomes[target].get(key, 0) + 1
        if stage_seconds:
            for st, s in stage_seconds.items():
                self.seconds[target][st] = self.seconds[target].get(st, 0.0) + s

    def start(self, info_of: Callable[[str], dict[str, Any]] | None = None) -> list[str]:
        """The targets that are available (others are counted ``unavailable``); reads each
        one's version and known file. ``info_of(target)``: the worker's ready message
        (default: this process's Evaluator)."""
        from compstack.explain.evaluate import Run

        active = []
        for t in self.o.targets:
            info = info_of(t) if info_of is not None else self.ev.info(Run.of(t))
            if not info.get("available", False):
                self.say(f"{t}: unavailable ({str(info.get('reason', ''))[:120]}); skipped")
                self._count(t, "unavailable")
                continue
            vs = info.get("versions", {})
            self.versions[t] = next(iter(vs.values()), "unknown") if vs else "unknown"
            self.known[t] = read_known(t, self.versions[t], *([self.o.known_dir] if self.o.known_dir else []))
            active.append(t)
        return active

    def dtypes_of(self, target: str) -> frozenset[str]:
        if target not in self._dtypes:
            self._dtypes[target] = target_dtypes(target)
        return self._dtypes[target]

    # -- oracles
    def evaluate(self, case: Case, ref: Any, target: str) -> tuple[str, str, str, Any]:
        """(key, stage, error, result) where key is ``ok``, a verdict kind, or a status."""
        return evaluate_one(self.ev, self.dtypes_of, case.model, case.feeds, ref, target, self.o.rtol, self.o.atol,
                            self.own)

    def plan(self, index: int) -> tuple[Case, Any, tuple[str, onnx.ModelProto] | None]:
        """Graph ``index``, its reference values and its rewrite (or None); the campaign's
        random streams are consumed here, in index order, whatever the executor."""
        from compstack.explain.graph import reference_values
        from compstack.fuzz.rewrite import rewrite

        t0 = time.perf_counter()
        case = self.gen.case(index)
        ref = case.ref if case.ref is not None else reference_values(case.model, case.feeds)
        self.own["generate"] += time.perf_counter() - t0
        rw = None
        if self.o.equivalence and self.rng.random() < self.o.equivalence:
            rw = rewrite(case.model, ref, self.rng)
        return case, ref, rw

    def step(self, index: int, active: list[str]) -> None:
        case, ref, rw = self.plan(index)
        rows = evaluate_graph(self.ev, self.dtypes_of, case.model, case.feeds, ref, rw, active, self.o.rtol,
                              self.o.atol, self.own, parallel=self.o.parallel)
        self.absorb(case, ref, rw, rows)

    def absorb(self, case: Case, ref: Any, rw: tuple[str, onnx.ModelProto] | None,
               rows: list[dict[str, Any]]) -> None:
        """Count one graph's outcomes (``rows`` of :func:`evaluate_graph`) and record its findings."""
        from compstack.explain.graph import reference_values

        rref = None
        for row in rows:
            t, key, stage, err = row["target"], row["key"], row["stage"], row["error"]
            self._count(t, key if not stage or key in ("ok", "imprecise", "reference-suspect") else f"{key}@{stage}",
                        row["stage_seconds"])
            if key in _FINDING:
                self.found(case, ref, t, key, stage, err)
                continue
            r2 = row.get("rewrite")
            if r2 is not None and rw is not None:
                k2, st2, err2 = r2["key"], r2["stage"], r2["error"]
                self._count(t, f"rewrite-{k2}" if k2 in ("ok", "imprecise") else f"rewrite-{k2}@{st2}", None)
                if k2 in _FINDING:
                    name, model = rw
                    rcase = Case(model, case.feeds, case.seed, [n.op_type for n in model.graph.node])
                    rref = rref if rref is not None else reference_values(model, case.feeds)
                    self.found(rcase, rref, t, "equivalence", st2, f"{name}: {k2}: {err2}", rewrite=name)
        self.graphs += 1

    # -- findings
    def found(self, case: Case, ref: Any, target: str, kind: str, stage: str, error: str, rewrite: str = "") -> None:
        from compstack.analysis.ub import undefined

        pre = signature(target, stage, kind, case.ops, error)
        if pre in self.pre:
            self.pre[pre].repeats += 1
            return
        ub = undefined(case.model, ref.f32)
        label = "undefined" if ub else "bug"
        f = Finding(0, pre, target, stage, kind, label, sorted(set(case.ops)), one_line(case.model), error,
                    graph_seed=case.seed, rewrite=rewrite)
        self.pre[pre] = f
        if self.o.reduce:  # reduced after the campaign (reduce_pending): generation never waits on it
            self.queue.append((f, case, target, bool(ub)))
            self.say(f"new failure {len(self.queue)}: {target} {kind} at {stage or 'compare'} on "
                     f"{'+'.join(f.ops)}: {error[:100]} (reduced after the campaign)")
            return
        self._settle(f, target, bool(ub), None)

    def _settle(self, f: Finding, target: str, ub: bool, folder: Path | None) -> None:
        """Dedup a finding by its (reduced) signature; number and announce a new one."""
        sig = signature(target, f.stage, f.kind, f.ops, f.error)
        if sig in self.unique:
            self.unique[sig].repeats += 1 + f.repeats
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            self.pre[f.signature] = self.unique[sig]
            return
        f.signature = sig
        f.known = sig in self.known.get(target, set())
        f.number = len(self.findings) + 1
        self.unique[sig] = f
        self.findings.append(f)
        self.say(f"finding {f.number:04d}: {target} {f.kind} at {f.stage or 'compare'} on {'+'.join(f.ops)}"
                 f"{' (known)' if f.known else ''}{' [undefined behaviour]' if ub else ''}: {f.error[:100]}")

    def reduce_pending(self, interrupted: bool = False) -> None:
        """The reduction phase: reduce and bundle each new failure of the campaign in the order
        found (:meth:`_reduce`, one ``compstack explain`` each), then dedup by the reduced
        signature. ``interrupted``: bundle them unreduced instead (Ctrl-C keeps every failure)."""
        if self.queue and not interrupted:
            self.say(f"reducing {len(self.queue)} new failure(s)")
        while self.queue:
            f, case, target, ub = self.queue[0]
            folder = self.bundle_root / f"{len(self.findings) + 1:04d}"
            if interrupted:
                f.reproduced = False
                f.attribution = "not reduced: the campaign was interrupted"
                self._save_unreduced(case, folder, target)
                f.bundle = str(folder)
            else:
                self._reduce(f, case, target, folder)  # Ctrl-C here: the caller bundles the rest unreduced
            self.queue.pop(0)
            self._settle(f, target, ub, folder)

    def _reduce(self, f: Finding, case: Case, target: str, folder: Path) -> None:
        from compstack.explain import explain

        t0 = time.perf_counter()
        try:
            rep = explain(case.model, case.feeds, [target], out_dir=folder, time_budget_s=self.o.explain_budget_s,
                          timeout_s=self.o.timeout_s, model_name=f"fuzz-{case.seed}", rtol=self.o.rtol,
                          atol=self.o.atol, keep_symbolic=True)
        except Exception as exc:  # noqa: BLE001 - keep the unreduced finding, say why
            f.attribution = f"not reduced: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            f.reproduced = False
            self._save_unreduced(case, folder, target)
            return
        finally:
            self.own["reduce"] += time.perf_counter() - t0
        if not rep.get("found"):
            f.reproduced = False
            f.attribution = "did not reproduce in explain (flaky?)"
            self._save_unreduced(case, folder, target)
            return
        f.ops = sorted(set(rep.get("reduce", {}).get("ops") or case.ops))
        reduced = rep.get("reduced")
        if isinstance(reduced, onnx.ModelProto):
            f.graph = one_line(reduced)
        f.attribution = (rep.get("attribution") or {}).get("summary", "")
        f.bundle = str(folder)

    def _save_unreduced(self, case: Case, folder: Path, target: str = "") -> None:
        """The graph and its inputs, and a NOT_REDUCED.md saying how to reduce it into a bundle."""
        folder.mkdir(parents=True, exist_ok=True)
        onnx.save(case.model, str(folder / "model.onnx"))
        np.savez(folder / "inputs.npz", **case.feeds)  # type: ignore[arg-type]
        (folder / "NOT_REDUCED.md").write_text(
            f"# Not reduced\n\nThe graph ({one_line(case.model)}) and its inputs, as fuzzing found them. To reduce and "
            f"bundle it:\n\n    compstack explain {folder}/model.onnx --inputs {folder}/inputs.npz --targets "
            f"{target or 'TARGET'} -o {folder}-explained\n", encoding="utf-8")

    def close(self) -> None:
        """Stop the workers; a temporary bundle folder that got no bundle is removed (the
        record then says ``out_dir: ""``)."""
        self.ev.close()
        if not self.o.out_dir and self.bundle_root.is_dir() and not any(self.bundle_root.iterdir()):
            self.bundle_root.rmdir()


def run_campaign(opts: CampaignOptions, on_progress: Callable[[str], None] | None = None,
                 store: Any = None) -> dict[str, Any]:
    """Run a campaign; returns its record (and writes it to ``store`` when given).

    Two phases: generation (every graph on every target until ``budget_s`` or
    ``max_graphs``; a new failure is queued) then reduction (each queued failure reduced and
    bundled by ``compstack explain``, then deduplicated by its reduced signature), so that
    generation never waits on a reduction (issue #29). Ctrl-C in either phase bundles the
    failures not yet reduced as they were found (``NOT_REDUCED.md`` says how to reduce one)
    and returns the record so far, with ``interrupted`` True.

    Returns:
        ``{"campaign", "graphs", "rejected", "seconds", "graphs_per_min", "phases",
        "outcomes", "stage_seconds", "own_seconds", "versions", "findings": [Finding.row()...]}``;
        ``seconds`` and ``graphs_per_min`` are end to end (both phases), ``phases`` has
        ``generate_s``, ``reduce_s`` and ``generate_graphs_per_min``.
    """
    say = on_progress or (lambda s: None)
    c = _Campaign(opts, say)
    cid = store.start(opts.seed, opts.budget_s, opts.targets, {
        "max_nodes": opts.max_nodes, "dtypes": list(opts.dtypes), "ops": opts.ops, "allow_ub": opts.allow_ub,
        "equivalence": opts.equivalence, "out_dir": str(c.bundle_root), "symbolic_shapes": opts.symbolic_shapes,
        "executor": opts.executor}) if store else 0
    t0 = time.monotonic()
    progress = _Progress(c, store, cid, t0)
    generated_s = reduce_s = 0.0
    interrupted = False
    try:
        try:
            if opts.executor == "ray":
                from compstack.fuzz.ray_exec import run_on_ray

                run_on_ray(c, opts, t0 + opts.budget_s, progress)
            else:
                active = c.start()
                deadline = t0 + opts.budget_s
                i = 0
                while active and time.monotonic() < deadline and (opts.max_graphs is None or i < opts.max_graphs):
                    c.step(i, active)
                    i += 1
                    progress(i == opts.max_graphs)
            generated_s = time.monotonic() - t0
            c.ev.close()  # the generation phase's workers: the reduction starts its own
            t_reduce = time.monotonic()
            c.reduce_pending()
            reduce_s = time.monotonic() - t_reduce
        except KeyboardInterrupt:  # Ctrl-C: every failure found so far keeps a bundle; the record is kept
            interrupted = True
            generated_s = generated_s or time.monotonic() - t0
            c.reduce_pending(interrupted=True)
    finally:
        c.close()
    progress(True)  # the last progress line counts what the summary counts (a budget-ended loop made none)
    secs = time.monotonic() - t0
    gpm = c.graphs / max(secs / 60, 1e-9)
    if store:
        store.update(cid, c.graphs, c.gen.stats["rejected"], c.outcomes, c.seconds, gpm, len(c.findings),
                     not interrupted)
        _sync(store, cid, c)
    return {"campaign": cid, "interrupted": interrupted, "graphs": c.graphs, "rejected": c.gen.stats["rejected"],
            "reject_reasons": c.gen.stats["reasons"], "seconds": secs, "graphs_per_min": gpm,
            "phases": {"generate_s": round(generated_s, 3), "reduce_s": round(reduce_s, 3),
                       "generate_graphs_per_min": round(c.graphs / max(generated_s / 60, 1e-9), 2)},
            "outcomes": c.outcomes, "stage_seconds": c.seconds, "own_seconds": c.own, "versions": c.versions,
            "out_dir": str(c.bundle_root) if c.bundle_root.is_dir() else "", "findings": [f.row() for f in c.findings],
            "ops": c.gen.ops(),
            "symbolic_graphs": c.gen.stats["symbolic"], "executor": c.executor}


class _Progress:
    """Every 30 s (and at the end of a ``max_graphs`` campaign): a progress line and the
    record so far in the store."""

    def __init__(self, c: "_Campaign", store: Any, cid: int, t0: float) -> None:
        self.c, self.store, self.cid, self.t0, self.last = c, store, cid, t0, t0
        self.said: tuple[int, int, int] | None = None  # (graphs, findings, to reduce) of the last line

    def __call__(self, force: bool = False) -> None:
        c, now = self.c, time.monotonic()
        state = (c.graphs, len(c.findings), len(c.queue))
        if (not force and now - self.last <= 30) or (force and self.said == state):
            return
        self.last, self.said = now, state
        gpm = c.graphs / max((now - self.t0) / 60, 1e-9)
        pending = f" (+{len(c.queue)} new failure(s) to reduce after the campaign)" if c.queue else ""
        c.say(f"{c.graphs} graphs, {gpm:.1f} graphs/min, {len(c.findings)} unique finding(s){pending}")
        if self.store:
            self.store.update(self.cid, c.graphs, c.gen.stats["rejected"], c.outcomes, c.seconds, gpm,
                              len(c.findings))
            _sync(self.store, self.cid, c)


def _sync(store: Any, cid: int, c: _Campaign) -> None:
    """Write findings not yet stored; refresh repeat counts of stored ones."""
    stored = {r["signature"]: r for r in store.findings(cid)}
    for f in c.findings:
        if f.signature not in stored:
            store.finding(cid, f.row())
        elif stored[f.signature]["repeats"] != f.repeats:
            with store.conn:
                store.conn.execute("UPDATE fuzz_findings SET repeats=? WHERE campaign=? AND signature=?",
                                   (f.repeats, cid, f.signature))

