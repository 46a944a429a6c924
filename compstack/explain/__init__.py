"""``compstack explain``: from "these stacks differ" to which node, whose fault, and a bug report.

Steps, each usable alone (``compstack bisect``, ``compstack reduce``):

1. **verdict** (:mod:`.verdict`): each output of each target against the float64
   reference *and* the float32 noise floor, so an ill-conditioned model is not called a
   stack bug;
2. **bisect** (:mod:`.core`): the first divergent node by binary search over graph
   prefixes, ⌈log₂ n⌉ + 2 compiles, never marking every tensor an output; then the node
   alone on reference inputs (op bug vs interaction);
3. **reduce** (:mod:`.core`): ddmin over nodes keeping the property (``--keep``), cut
   producers fed with the reference's values;
4. **attribute** (:mod:`.attribute`): compstack's translation vs the stack's optimiser
   vs the rest of the stack, by re-running the reduced model eagerly and with the
   optimiser off;
5. **bundle** (:mod:`.bundle`): reduced model in the ONNX backend-test layout, every
   target's outputs and stages, standalone ``repro_<target>.py`` per stack, ISSUE.md.

Pieces run in long-lived workers per target (:mod:`.evaluate`: ``evaluate`` jobs on the
pool executor), so dozens of small compiles cost one stack import each.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx

from compstack.analysis.ub import undefined_behaviour

__all__ = ["explain", "replay", "undefined_behaviour"]


def _jsonable(x: Any) -> Any:
    if hasattr(x, "to_dict"):
        return x.to_dict()
    if hasattr(x, "__dataclass_fields__"):
        return {k: _jsonable(v) for k, v in asdict(x).items()}
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def explain(proto: onnx.ModelProto, feeds: dict[str, np.ndarray], targets: Sequence[str], *,
            keep: str | None = None, target_options: Mapping[str, Mapping[str, str]] | None = None,
            time_budget_s: float = math.inf, out_dir: Path | None = None, steps: str = "all",
            model_name: str = "model", timeout_s: float = 300.0, op_origins: Sequence[str] = (),
            rtol: float | None = None, atol: float | None = None, keep_symbolic: bool = False,
            on_progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Explain why ``targets`` disagree with the reference (or each other) on a model.

    Args:
        proto: the model.
        feeds: its inputs by name.
        targets: target names (``--targets``).
        keep: the property (``--keep``); default: the first target that is wrong on the
            whole model differs from the reference.
        target_options: ``--option`` values per target.
        time_budget_s: wall-clock budget; reduction stops when it is spent.
        out_dir: write the bundle here.
        steps: ``all``, ``bisect`` (localise only) or ``reduce`` (reduce only).
        model_name: for the report.
        timeout_s: limit per compile-and-run.
        op_origins: user custom-op declarations the workers import.
        rtol, atol: the user's tolerance override (None: per-dtype defaults).
        keep_symbolic: graph inputs with symbolic dims (``dim_param``) keep them in every
            compiled piece (only cut tensors become static), so a stack that fails only on
            dynamic shapes is localised and reduced as such; by default pieces are static.
        on_progress: called with one line per step.

    Returns:
        The explanation as JSON-able data: ``verdicts`` (whole model), ``target``,
        ``keep``, ``undefined``, ``bisect``, ``reduce``, ``attribution``, ``bundle``,
        ``compiles``, ``seconds``.

    Raises:
        UserError: a bad ``--keep``, an unknown target, or a model the reference
            evaluator cannot run.
    """
    from compstack.core.errors import UserError
    from compstack.explain.attribute import attribute
    from compstack.explain.bundle import write_bundle
    from compstack.explain.core import Explainer, simplify
    from compstack.explain.evaluate import Evaluator
    from compstack.explain.graph import reference_values
    from compstack.explain.keep import Clause, parse_keep

    say = on_progress or (lambda s: None)
    t0 = time.monotonic()
    targets = list(dict.fromkeys(targets))
    clauses = parse_keep(keep, targets) if keep else [Clause(t, "!=", "ref") for t in targets]
    if not proto.graph.node:
        return {"model": model_name, "nodes": 0, "targets": targets, "found": False, "undefined": [],
                "verdicts": {}, "status": {}, "keep": keep or "", "compiles": 0, "seconds": time.monotonic() - t0,
                "summary": "the graph has no nodes (every output is a graph input): nothing a stack computes"}
    try:
        ref = reference_values(proto, feeds)
    except Exception as exc:  # noqa: BLE001 - the oracle cannot run the model: nothing to judge against
        raise UserError(f"{model_name}: the ONNX reference evaluator cannot run this model "
                        f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
    report: dict[str, Any] = {"model": model_name, "nodes": len(proto.graph.node), "targets": targets,
                              "undefined": undefined_behaviour(proto, ref.f64)}
    if keep_symbolic:
        ref.symbolic_inputs = {vi.name: vi for vi in proto.graph.input
                               if any(d.HasField("dim_param") for d in vi.type.tensor_type.shape.dim)}
    with Evaluator(timeout_s, list(op_origins)) as ev:
        ex = Explainer(proto, feeds, clauses, ev, {k: dict(v) for k, v in (target_options or {}).items()},
                       rtol, atol, t0 + time_budget_s, ref)
        ex.all_targets = list(dict.fromkeys([*ex.targets(), *targets]))
        say(f"checking {', '.join(targets)} on the whole model ({len(proto.graph.node)} nodes)")
        whole = ex.whole()
        report["verdicts"] = {t: {o: v.to_dict() for o, v in vs.items()} for t, vs in whole.verdicts.items()}
        report["status"] = {t: {"status": r.status, "stage": r.stage, "error": r.error}
                            for t, r in whole.results.items()}
        if not keep:  # the default property: the first target that is wrong
            bad = [c for c in clauses if ex._clause(c, _whole_piece(ex), whole.results, whole.verdicts,
                                                    {o: ref.f32[o] for o in _outputs(proto)})[0]]
            clauses = bad[:1]
            ex.clauses = clauses
        report["keep"] = ",".join(str(c) for c in clauses)
        if not clauses or (keep and not whole.holds):
            report.update(found=False, target="", compiles=ev.compiles, seconds=time.monotonic() - t0,
                          summary="no discrepancy: every target agrees with the reference within the tolerance "
                                  "or the float32 noise floor" if not clauses else
                                  f"the property {report['keep']} does not hold on the whole model")
            return _jsonable(report)
        target = clauses[0].left
        report.update(found=True, target=target, label="undefined" if report["undefined"] else "bug")
        if target in ex.failure:
            say(f"{target} fails ({ex.failure[target][0]} at {ex.failure[target][1]}): reducing that failure")
        must: list[int] = []
        start: list[int] | None = None
        if steps in ("all", "bisect") and target not in ex.failure:
            say("bisecting prefixes for the first divergent node")
            b = ex.bisect(on_step=lambda k, h: say(f"  prefix 0..{k}: {'diverges' if h else 'agrees'}"))
            report["bisect"] = _jsonable(b)
            if b.node is not None:
                say(f"first divergent node: {b.node['name'] or b.node['op_type']} ({b.node['op_type']}), "
                    f"{_alone(b.kind, target, ex.target_options.get(target, {}))}")
                must, start = [b.node["index"]], ex.cone(b.node["index"])
        if steps == "bisect":
            report.update(compiles=ev.compiles, seconds=time.monotonic() - t0)
            return _jsonable(report)
        say("reducing (ddmin over nodes)")
        r = ex.reduce(start, must=must)
        kept = [proto.graph.node[i] for i in r.piece.nodes]
        if r.check is not None:
            report["reduced_verdicts"] = {t: {o: v.to_dict() for o, v in vs.items()}
                                          for t, vs in r.check.verdicts.items()}
        report["reduce"] = {"nodes_before": len(proto.graph.node), "nodes_after": r.nodes_after,
                            "compiles": r.compiles, "seconds": r.seconds, "complete": r.complete,
                            "nodes": [n.name or n.op_type for n in kept], "ops": [n.op_type for n in kept]}
        say(f"reduced {len(proto.graph.node)} -> {r.nodes_after} node(s) in {r.compiles} compiles")
        if steps == "all":
            say("simplifying attributes and inputs of the reduced model")
            simple = simplify(ex, r.piece)
            report["simplify"] = {"steps": simple.steps, "compiles": simple.compiles}
            if simple.steps:
                say("  " + "; ".join(simple.steps))
                r.piece = _replace(r.piece, simple)
                ex = _rebase(ex, r.piece, simple)
                again = ex.whole()
                report["reduced_verdicts"] = {t: {o: v.to_dict() for o, v in vs.items()}
                                              for t, vs in again.verdicts.items()}
            say("attributing")
            report["attribution"] = _jsonable(attribute(ex, r.piece, target))
        report["title"] = _title(target, kept, report)
        if out_dir is not None:
            say(f"writing the bundle to {out_dir}")
            try:
                report["bundle"] = write_bundle(Path(out_dir), ex, r.piece, _jsonable(report))
            except OSError as exc:
                raise UserError(f"-o {out_dir}: cannot write the bundle ({exc.strerror or exc})") from None
            report["reduced_model"] = str(Path(out_dir) / "model.onnx")
        report["reduced"] = r.piece.model
        report.update(compiles=ev.compiles, seconds=time.monotonic() - t0)
    return {k: (_jsonable(v) if k != "reduced" else v) for k, v in report.items()}


def _alone(kind: str, target: str, opts: Mapping[str, str]) -> str:
    """How bisect's first divergent node behaves alone: an op bug, unless the user chose a
    lower precision for ``target`` (then that precision, :func:`attribute.chosen_precision`)."""
    from compstack import targets as registry
    from compstack.explain.attribute import chosen_precision

    if kind != "op":
        return "right alone (interaction)"
    chosen = chosen_precision(registry.get(target), dict(opts))
    return f"wrong alone (precision option you chose: {chosen})" if chosen else "wrong alone (op bug)"


def _replace(p: Any, simple: Any) -> Any:
    """The reduced piece with the simplified model (same node indices, inputs, outputs)."""
    from compstack.explain.graph import Piece

    return Piece(simple.model, list(range(len(simple.model.graph.node))), list(p.inputs), list(p.outputs))


def _rebase(ex: Any, p: Any, simple: Any) -> Any:
    """An explainer over the simplified model alone: its reference values are the
    simplified model's own (attribution and the bundle judge against those)."""
    from compstack.explain.core import Explainer

    sub = Explainer(simple.model, simple.feeds, ex.clauses, ex.evaluator, ex.target_options, ex.rtol, ex.atol,
                    ex.deadline)
    from compstack.explain.graph import symbolic_inputs_of

    sub.ref.symbolic_inputs = symbolic_inputs_of(simple.model) if ex.ref.symbolic_inputs else {}
    sub.all_targets = ex.all_targets
    sub.failure = dict(ex.failure)
    return sub


def _outputs(proto: onnx.ModelProto) -> list[str]:
    return [o.name for o in proto.graph.output]


def _whole_piece(ex: Any) -> Any:
    from compstack.explain.graph import piece

    return piece(ex.proto, range(len(ex.proto.graph.node)), ex.ref, outputs=_outputs(ex.proto))


def _title(target: str, kept: list[onnx.NodeProto], report: dict[str, Any]) -> str:
    ops = "+".join(dict.fromkeys(n.op_type for n in kept)) or "model"
    status = report.get("status", {}).get(target, {})
    if status.get("status") not in (None, "ok"):
        return f"{target}: {status['status']} at {status.get('stage')} on {ops}"
    att = report.get("attribution") or {}
    if att.get("culprit") == "precision" and "=" in str(att.get("knob") or ""):
        return (f"{target}: {ops} beyond the float32 noise floor at the precision you chose ({att['knob']}), "
                "not a stack bug")
    return f"{target}: wrong result for {ops} (vs ONNX reference, beyond the float32 noise floor)"


def replay(folder: Path, timeout_s: float = 300.0, trust_flags: bool = False) -> dict[str, Any]:
    """Run a bundle's model again on each of its targets; does the discrepancy reproduce?

    The bundle is untrusted data: each target's options pass its stack's replay
    allowlist (:func:`compstack.targets.common.replay.screen`, issue #27 class 1) and
    the bundle's environment variables are never applied.

    Args:
        folder: the bundle folder.
        timeout_s: limit of each target's run, seconds.
        trust_flags: ``--trust-bundle-flags``: apply the options the allowlist refuses.

    Returns:
        ``{"targets": {target: {"status", "verdicts", "reproduces"}}, "reproduces": bool,
        "refused": ["target: name=value (why)", ...], "trusted": bool}``.

    Raises:
        UserError: ``folder`` is not a bundle, or names a target that is not registered.
    """
    from compstack.analysis.verdict import judge
    from compstack.explain.bundle import read_bundle
    from compstack.explain.evaluate import Evaluator, Run
    from compstack.explain.graph import reference_values
    from compstack.targets.common.replay import screen

    b = read_bundle(Path(folder))
    screened = {t: screen(t, spec, trust_flags) for t, spec in b["flags"].items()}
    ref = reference_values(b["model"], b["feeds"])
    outs = _outputs(b["model"])
    result: dict[str, Any] = {"targets": {}, "trusted": trust_flags,
                              "refused": [f"{t}: {d}" for t, (_, dropped) in screened.items() for d in dropped]}
    with Evaluator(timeout_s) as ev:
        for target, (options, _) in screened.items():
            res = ev.run(Run.of(target, options), b["model"], b["feeds"])
            row: dict[str, Any] = {"status": res.status, "error": res.error}
            if res.status == "ok":
                verdicts = {o: judge(res.outputs[o], ref.f64[o], ref.f32[o]) for o in outs if o in res.outputs}
                row["verdicts"] = {o: v.to_dict() for o, v in verdicts.items()}
                row["reproduces"] = any(v.bad for v in verdicts.values())
            else:
                row["reproduces"] = b["report"].get("status", {}).get(target, {}).get("status") == res.status
            result["targets"][target] = row
    keep_target = b["report"].get("target", "")
    result["reproduces"] = bool(result["targets"].get(keep_target, {}).get("reproduces"))
    result["target"] = keep_target
    return result
