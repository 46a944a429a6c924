"""Whose fault: compstack's translation, the stack's optimiser, or the rest of the stack.

Each question is answered by running the reduced model again a different way and
checking whether the discrepancy is still there:

1. **compstack's translation** (a target with a translated path: XLA, Inductor): run
   the translated JAX/FX program eagerly, without the compiler. Still wrong means the
   bug is ours: the report says so plainly.
2. **the stack's optimiser**: run with the switch the target declares in
   ``Target.optimizations_off`` (ORT ``ORT_DISABLE_ALL``, TVM ``opt_level=0``, IREE
   ``--iree-opt-level=O0``, XLA ``--xla_backend_optimization_level=0``, Inductor
   ``backend=aot_eager``, TorchScript ``optimize=false``). Right then
   means an optimisation introduced it; still wrong means the stack's frontend, code
   generation or runtime.
3. **which pass**: where the stack switches passes off by name (``Target.pass_option``:
   ORT ``disabled_optimizers``, TVM ``disabled_passes`` -> ``PassContext(disabled_pass)``,
   XLA ``disable_hlo_passes`` -> ``xla_disable_hlo_passes``, Inductor ``disable_config`` ->
   ``torch._inductor.config`` switches) and says which passes changed the model
   (``Target.applied_passes``: ORT's own log of each graph transformer that modified the
   graph, TVM's pass instrument, XLA's per-pass dump, Inductor's pattern-matcher counter
   and its switches that were on), each such pass is
   switched off alone, in the order the stack applied them; the one whose removal makes
   the result agree is named.
4. **precision knobs** (``Target.precision_knobs``: IREE's FP-reduction reassociation,
   ...): each is switched to strict arithmetic alone, before the optimiser question; one
   that makes the result agree is reported as "differs because of KNOB" (culprit
   ``precision``), a documented trade-off of the stack, not a bug. Before them, a
   precision option the user chose (``precision_options`` of the target: OpenVINO
   ``precision=bf16``...) is taken away alone: right then, the attribution is "precision
   option you chose: KEY=VALUE", never an op bug.
5. **the op alone vs in context** comes from bisect (an op that is wrong alone is an
   op bug; right alone but wrong in context is an interaction: fusion, layout).

Where a stack has no switch the report says which question could not be asked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from compstack.explain.evaluate import Run
from compstack.explain.graph import Piece, feeds_for

__all__ = ["Attribution", "attribute", "chosen_precision", "merge_options", "MAX_PASSES"]

#: Passes tried one by one (the first that changed the model, in pipeline order): TVM's
#: TIR pipeline alone has a hundred, most of which cannot be switched off.
MAX_PASSES = 25


@dataclass
class Attribution:
    """Where the discrepancy comes from.

    Attributes:
        culprit: ``compstack`` (our translation), ``precision`` (a precision knob of the
            stack closes the gap: not a bug), ``optimizer`` (the stack's optimiser),
            ``stack`` (frontend, code generation or runtime), or ``unknown``.
        summary: one sentence for the reader.
        checks: each re-run: ``{"run": label, "holds": bool, "status", "detail"}``.
    """

    culprit: str
    summary: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    #: the pass named as the cause, where the pass search found one.
    pass_name: str = ""
    #: the precision knob that closes the gap, where one does.
    knob: str = ""


def merge_options(cls: Any, opts: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """``opts`` with ``extra`` laid over it; a tuple-valued option (``extra_flags``) gets
    ``extra``'s items appended to the user's (comma-separated, as ``--option`` takes them)
    instead of replacing them."""
    fields = getattr(getattr(cls, "Options", None), "__dataclass_fields__", {})
    out = dict(opts)
    for k, v in extra.items():
        kind = str(getattr(fields.get(k), "type", ""))
        out[k] = f"{out[k]},{v}" if out.get(k) and kind.startswith("tuple") else v
    return out


def _check(explainer: Any, run: Run, p: Piece, target: str) -> dict[str, Any]:
    res = explainer.evaluator.run(run, p.model, feeds_for(p, explainer.ref))
    if res.status != "ok":
        return {"run": run.label(), "holds": None, "status": res.status, "detail": f"{res.stage}: {res.error[:200]}"}
    f32 = explainer._floor(p, prefix=False)
    verdicts = explainer.judge_outputs(res.outputs, p, f32)
    bad = [o for o, v in verdicts.items() if v.bad]
    detail = verdicts[bad[0]].detail if bad else "agrees with the float64 reference"
    return {"run": run.label(), "holds": bool(bad), "status": "ok", "detail": detail}


def attribute(explainer: Any, p: Piece, target: str) -> Attribution:
    """Attribute the discrepancy of ``target`` on the reduced piece ``p``.

    Args:
        explainer: the :class:`compstack.explain.core.Explainer` (its evaluator,
            reference values and target options are reused).
        p: the reduced piece (it must keep ``target != ref``).
        target: the target name.
    """
    from compstack import targets as registry

    cls = registry.get(target)
    opts = explainer.target_options.get(target, {})
    checks = []
    if getattr(cls, "table_module", "") and opts.get("path") != "native":
        eager = _check(explainer, Run.of(target, opts, mode="eager"), p, target)
        checks.append(eager)
        if eager["holds"]:
            return Attribution("compstack", "compstack's own translation is wrong: the translated program gives the "
                               "same wrong result run eagerly, without the compiler. This is a compstack bug, not "
                               f"{target}'s.", checks)
    chosen = chosen_precision(cls, opts)
    if chosen:
        att = _without_chosen(explainer, cls, opts, chosen, p, target, checks)
        if att is not None:
            return att
    for knob, how in (getattr(cls, "precision_knobs", {}) or {}).items():
        if time.monotonic() > explainer.deadline:
            break
        run = Run.of(target, merge_options(cls, opts, dict(how.get("options", {}))), env=how.get("env"))
        res = _check(explainer, run, p, target)
        checks.append(res)
        if res["holds"] is False:
            return Attribution("precision", f"{target} differs because of {knob}: with it switched off "
                               f"({run.label()}) the result agrees with the float64 reference. That is a documented "
                               "precision trade-off of the stack, not a bug.", checks, knob=knob)
    off = dict(getattr(cls, "optimizations_off", {}) or {})
    if not off:
        culprit = "stack" if checks else "unknown"
        why = ("the translated program is right when run eagerly, so the compiler changed the result; "
               if checks else "")
        return Attribution(culprit, f"{why}{target} declares no switch to turn its optimiser off, so the optimiser "
                           "and the rest of the stack were not told apart.", checks)
    run = Run.of(target, merge_options(cls, opts, dict(off.get("options", {}))), env=off.get("env"))
    plain = _check(explainer, run, p, target)
    checks.append(plain)
    if plain["holds"] is None:
        return Attribution("unknown", f"{target} did not run with its optimiser off ({plain['detail']}).", checks)
    if plain["holds"]:
        return Attribution("stack", f"{target} is wrong even with its optimiser off ({run.label()}): the fault is in "
                           "its frontend, code generation or runtime, not an optimisation.", checks)
    culprit = _find_pass(explainer, cls, target, opts, p, checks)
    if culprit:
        return Attribution("optimizer", f"{target}'s pass {culprit} introduced the discrepancy: with it switched off "
                           f"({cls.pass_option}={culprit}) the result agrees with the reference.", checks, culprit)
    return Attribution("optimizer", f"{target} agrees with the reference with its optimiser off ({run.label()}): an "
                       "optimisation introduced the discrepancy"
                       + ("; no single pass alone explains it." if cls.pass_option else "."), checks)


def chosen_precision(cls: Any, opts: dict[str, str]) -> str:
    """``KEY=VALUE`` of the user's own option that lowers ``cls``'s precision (bf16, fp16,
    mixed), ``""`` when there is none. Each stack lists its own in
    ``precision_options`` (option -> the values that lower precision; OpenVINO's
    ``precision=bf16``, CANN's ``precision_mode``, GCU's ``precision``)."""
    for key, lowering in (getattr(cls, "precision_options", {}) or {}).items():
        if str(opts.get(key, "")).lower() in lowering:
            return f"{key}={opts[key]}"
    return ""


def _without_chosen(explainer: Any, cls: Any, opts: dict[str, str], chosen: str, p: Piece, target: str,
                    checks: list[dict[str, Any]]) -> Attribution | None:
    """Run without the user's precision option ``chosen``: right then means that option is
    the cause (an Attribution saying so), still wrong means another cause (None)."""
    key = chosen.partition("=")[0]
    run = Run.of(target, {k: v for k, v in opts.items() if k != key})
    res = _check(explainer, run, p, target)
    checks.append(res)
    if res["holds"] is not False:
        return None
    return Attribution("precision", f"precision option you chose: {chosen}. Without it ({run.label()}) {target} "
                       "agrees with the float64 reference: the difference is the lower precision you asked for, "
                       "not a bug.", checks, knob=chosen)


def _find_pass(explainer: Any, cls: Any, target: str, opts: dict[str, str], p: Piece,
               checks: list[dict[str, Any]]) -> str:
    """The one pass whose removal makes ``target`` agree, searched among the passes the
    stack itself reports as having changed the model (``Target.applied_passes``), one
    compile each, in the order the stack applied them; ``""`` when none does alone."""
    option = getattr(cls, "pass_option", "")
    if not option:
        return ""
    names = (explainer.evaluator.passes(Run.of(target, opts), p.model) or [])[:MAX_PASSES]
    for name in names:
        if time.monotonic() > explainer.deadline:
            break
        prior = [x for x in opts.get(option, "").split(",") if x]
        res = _check(explainer, Run.of(target, {**opts, option: ",".join([*prior, name])}), p, target)
        checks.append(res)
        if res["holds"] is False:
            return name
    return ""
