"""The checked oracle of a comparison: float32 floor, undefined behaviour, second opinion.

compare judges every output with :func:`compstack.analysis.verdict.judge` against the
float64 reference (``onnx.reference`` with the corrected ops of
:mod:`compstack.analysis.refdefects`). What that needs beyond the reference's outputs is
computed here, lazily and once per model (never per target), so rows within tolerance
cost nothing:

* the float32 evaluation (the noise floor), with every intermediate tensor: the
  reference evaluator on the model in its own precision, in this process (NumPy only);
  with sums also in sequential order, the floor being the worse of the two (:meth:`CheckedOracle.floors`);
* the undefined-behaviour rules (:func:`compstack.analysis.ub.undefined`) on those values;
* the cross-check, only once a stack disagrees: ONNX Runtime with every graph
  optimisation off (``opt_level=disable``) on a float64 copy of the model, in a worker
  like any job; where ORT lacks a float64 kernel, the translated FX program in float64
  under TorchDynamo's ``aot_eager`` backend (eager ATen ops, no code generation). Every
  intermediate tensor is an output of the copy, so a disagreement names its op
  (:func:`compstack.analysis.crosscheck.suspect_ops`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import onnx

from compstack.analysis.crosscheck import oracles_agree, suspect_ops
from compstack.core.inputs import save_npz
from compstack.run.jobs import JobOutcome, pack_sets

__all__ = ["CheckedOracle", "CrossCheck", "second_oracles", "checked_oracle", "judge_row"]

def second_oracles() -> list[tuple[str, dict[str, str], str]]:
    """The independent float64 oracles, tried in order: (target, options, what it is), the
    targets of the registry's ``second-oracle`` role (ONNX Runtime with every graph
    optimisation off, then the translated FX program run eagerly under ``aot_eager``)."""
    from compstack import targets as registry

    out = []
    for name in registry.with_role("second-oracle"):
        opts = dict(next(e for e in registry.entries() if e.name == name).roles["second-oracle"])
        out.append((name, opts, f"{name} ({', '.join(f'{k}={v}' for k, v in opts.items())}) on a float64 copy"))
    return out


@dataclass
class CrossCheck:
    """The second oracle's opinion.

    Attributes:
        oracle: which second oracle ran (see :func:`second_oracles`), "" when none could.
        values: its float64 values by tensor name (outputs and intermediates).
        disagree: output name -> the ops where the oracles part (``"name (Op)"``), for
            every output on which it disagrees with the reference.
        error: why no second oracle could run ("" when one did).
    """

    oracle: str = ""
    values: dict[str, np.ndarray] = field(default_factory=dict)
    disagree: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""


#: ``run_job(target, options, model_path, fingerprint, inputs_path, tag)``: one isolated job
#: through the comparison's executor, its outputs in ``extra["outputs"]``.
RunJob = Callable[[str, Mapping[str, str], Path, str, Path, str], JobOutcome]
#: ``store(proto) -> (model_path, fingerprint)``: a verified model store entry of ``proto``
#: (workers run only store entries, :func:`compstack.run.jobs._verify_model_file`).
StoreModel = Callable[[onnx.ModelProto], tuple[Path, str]]


class CheckedOracle:
    """What compare needs besides the float64 reference's outputs, computed at most once.

    Args:
        model_path: the ONNX file every stack got (the reference ran on it).
        feeds: input set 0 (the compared one), by input name.
        ref64: the float64 reference's outputs by name.
        run_job: runs one job isolated (see :data:`RunJob`).
        store: publishes the float64 copy as a model store entry (see :data:`StoreModel`).
        work: a scratch folder for the float64 copy and its inputs.
        cache: an :class:`compstack.run.oracle_cache.OracleCache`: the floor and the
            undefined-behaviour findings are read from it when an earlier run stored them,
            and stored once computed; None: always computed.
    """

    #: What the float64 reference is, for a row's reason.
    reference_what = "onnx.reference"
    #: A note for a row that does not agree (``""``: none).
    note_if_bad = ""

    def __init__(self, model_path: Path, feeds: Mapping[str, np.ndarray], ref64: Mapping[str, np.ndarray],
                 run_job: RunJob, store: StoreModel, work: Path, cache: Any = None) -> None:
        self.model_path, self.feeds, self.ref64 = Path(model_path), dict(feeds), dict(ref64)
        self.run_job, self.store, self.work, self.cache = run_job, store, Path(work), cache
        self._floors: dict[str, np.ndarray] | None = None
        self._proto: onnx.ModelProto | None = None
        self._f32: dict[str, np.ndarray] | None = None
        self._f32_error = ""
        self._f64: dict[str, np.ndarray] | None = None
        self._ub: list[str] | None = None
        #: Findings set aside because no output depends on the undefined elements (:func:`compstack.analysis.ub.observable`).
        self.masked_ub: list[str] = []
        self._cross: CrossCheck | None = None

    @property
    def proto(self) -> onnx.ModelProto:
        """The model, loaded once."""
        if self._proto is None:
            self._proto = onnx.load(str(self.model_path))
        return self._proto

    def _evaluate(self, proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                  extra: list[type] | None = None, intermediate: bool = True) -> dict[str, np.ndarray]:
        from onnx.reference import ReferenceEvaluator

        from compstack.analysis.refdefects import corrected_ops
        from compstack.ops._onnx import reference_ops

        fixed = {c.__name__: c for c in [*corrected_ops(proto), *(extra or [])]}  # extra wins for its ops
        sess = ReferenceEvaluator(proto, new_ops=reference_ops(proto) + list(fixed.values()) or None)
        types = {v.name: onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
                 for v in proto.graph.input if v.type.HasField("tensor_type")}
        cast = {k: np.asarray(v).astype(types[k], copy=False) if k in types else v for k, v in feeds.items()}
        with np.errstate(all="ignore"):
            if not intermediate:
                return {o.name: np.asarray(v) for o, v in zip(proto.graph.output, sess.run(None, cast))}
            out = sess.run(None, cast, intermediate=True)
        return {k: np.asarray(v) for k, v in out.items()}  # type: ignore[union-attr]  # a dict with intermediate=True

    def f32(self) -> dict[str, np.ndarray] | None:
        """The model evaluated in its own precision: the tensors the floor and the undefined-
        behaviour rules read (graph outputs, integer and bool tensors, inputs of the ops in
        ``_UB_OPS``); the rest is let go, as a real model's intermediates reach gigabytes.
        None when the reference evaluator cannot run it; :attr:`f32_error` says why."""
        if self._f32 is None and not self._f32_error:
            try:
                every = self._evaluate(self.proto, self.feeds)
                read = {o.name for o in self.proto.graph.output}
                read.update(i for n in self.proto.graph.node if n.op_type in _UB_OPS for i in n.input)
                self._f32 = {k: v for k, v in every.items() if k in read or v.dtype.kind in "biu"}
                del every
            except Exception as exc:  # noqa: BLE001 - no floor: the tolerance alone decides
                self._f32_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return self._f32

    def floors(self) -> dict[str, np.ndarray] | None:
        """Per output, the float32 evaluation farther from float64: NumPy's (pairwise sums, BLAS
        blocks) or, for models with ``ReduceSum``/``ReduceMean``/``MatMul``/``Gemm``, one that sums
        sequentially as a compiled loop does (:func:`compstack.analysis.refdefects.sequential_reductions`).
        Read from the cache when an earlier run stored them; computed once, then stored."""
        if self._floors is None:
            self._floors = self.cache.arrays("floor") if self.cache is not None else None
            if self._floors is not None and not all(
                    k in self.ref64 and np.shape(v) == np.shape(self.ref64[k]) for k, v in self._floors.items()):
                self.cache.drop("floor", "its shapes differ from the reference's outputs")
                self._floors = None
            if self._floors is None:
                self._floors = self._compute_floors()
                if self._floors is not None and self.cache is not None:
                    self.cache.put_arrays("floor", {k: v for k, v in self._floors.items() if k in self.ref64})
        return self._floors

    def _compute_floors(self) -> dict[str, np.ndarray] | None:
        from compstack.analysis.refdefects import sequential_reductions

        base = self.f32()
        seq_ops = sequential_reductions(self.proto)
        if base is None or not seq_ops:
            return base
        try:
            seq = self._evaluate(self.proto, self.feeds, seq_ops)
        except Exception:  # noqa: BLE001 - the pairwise floor alone
            return base
        out = dict(base)
        for name, ref in self.ref64.items():
            a, b = base.get(name), seq.get(name)
            if a is None or b is None or np.asarray(a).dtype.kind != "f":
                continue
            with np.errstate(all="ignore"):
                r = np.asarray(ref, np.float64)
                worse = np.nanmean((np.asarray(b, np.float64) - r) ** 2) > np.nanmean((np.asarray(a, np.float64) - r) ** 2)
            out[name] = b if worse else a
        return out

    @property
    def f32_error(self) -> str:
        """Why there is no float32 evaluation ("" when there is, or none was tried)."""
        return self._f32_error

    def f64(self) -> dict[str, np.ndarray]:
        """Every tensor in float64 (the reference with intermediates), computed once."""
        if self._f64 is None:
            from compstack.targets.reference.target import to_float64

            self._f64 = self._evaluate(to_float64(self.proto), self.feeds)
        return self._f64

    def may_be_undefined(self) -> bool:
        """True when the model has an op with an undefined-behaviour rule that is checked on
        every compared row (:data:`_UB_OPS`)."""
        return any(n.op_type in _UB_OPS for n in self.proto.graph.node)

    def undefined(self) -> list[str]:
        """The undefined-behaviour rules that fire on this model and input set and can reach an
        output (one line each); :attr:`masked_ub` holds those that cannot."""
        if self._ub is None and self.cache is not None:
            hit = self.cache.record("ub")
            if hit is not None and isinstance(hit.get("ub"), list) and isinstance(hit.get("masked"), list):
                self._ub, self.masked_ub = [str(x) for x in hit["ub"]], [str(x) for x in hit["masked"]]
        if self._ub is None:
            from compstack.analysis.ub import observable

            values = self.f32()
            if values is None:  # the rules need intermediate values; random ops need none
                values = {}
            for t in self.proto.graph.initializer:
                values.setdefault(t.name, onnx.numpy_helper.to_array(t))
            try:
                self._ub, self.masked_ub = observable(
                    self.proto, values, lambda p, extra: self._evaluate(p, self.feeds, extra, intermediate=False))
                if self.cache is not None and not self._f32_error:
                    self.cache.put_record("ub", {"ub": self._ub, "masked": self.masked_ub})
            except Exception:  # noqa: BLE001 - a rule that cannot run never crashes the row
                self._ub = []
        return self._ub

    def cross_check(self) -> CrossCheck:
        """The second float64 oracle on the whole model, once (see the module docstring)."""
        if self._cross is None:
            self._cross = self._second_opinion()
        return self._cross

    def _copy64(self) -> tuple[Path, str, Path, list[str]]:
        from compstack.targets.reference.target import to_float64

        f64 = self.f64()
        proto = to_float64(self.proto)
        have = {o.name for o in proto.graph.output}
        extra = []
        for node in proto.graph.node:
            for o in node.output:
                v = f64.get(o)
                if o and o not in have and v is not None and v.dtype != object:
                    extra.append(onnx.helper.make_tensor_value_info(
                        o, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
                    have.add(o)
        proto.graph.output.extend(extra)
        path, fp = self.store(proto)
        types = {v.name: onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
                 for v in proto.graph.input if v.type.HasField("tensor_type")}
        feeds = {k: np.asarray(v).astype(types[k], copy=False) if k in types else v for k, v in self.feeds.items()}
        inputs = self.work / "oracle64-inputs.npz"
        save_npz(inputs, pack_sets([feeds]))
        return path, fp, inputs, [o.name for o in self.proto.graph.output]

    def _second_opinion(self) -> CrossCheck:
        try:
            path, fp, inputs, outs = self._copy64()
        except Exception as exc:  # noqa: BLE001 - no float64 copy: say so on the row
            return CrossCheck(error=f"no float64 copy of the model ({type(exc).__name__}: {exc})"[:300])
        errors = []
        f64 = self.f64()
        for target, opts, what in second_oracles():
            outcome = self.run_job(target, opts, path, fp, inputs, f"oracle-{target}")
            values: dict[str, Any] | None = outcome.extra.get("outputs") if outcome.status == "ok" else None
            if not values:
                errors.append(f"{target}: {outcome.status} in {outcome.stage}: {outcome.error}"[:200])
                continue
            vals = {k: np.asarray(v) for k, v in values.items()}
            disagree = {}
            for o in outs:
                if o in vals and o in self.ref64 and not oracles_agree(vals[o], np.asarray(self.ref64[o])):
                    disagree[o] = suspect_ops(self.proto, f64, vals) or ["(op not located)"]
            return CrossCheck(what, vals, disagree)
        return CrossCheck(error="could not be cross-checked: " + "; ".join(errors))


#: Ops for which an undefined-behaviour rule may fire whatever the stacks output: checked on
#: every compared row (the rest, integer overflow, only where a stack disagrees).
_UB_OPS = frozenset({"Div", "Mod", "Cast", "Clip", "LpNormalization", "Dropout", "RandomNormal", "RandomNormalLike",
                     "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"})


def judge_row(result: Any, actual: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray],
              expected: Mapping[str, Any], rtol: float | None, atol: float | None,
              oracle: CheckedOracle | None) -> None:
    """Judge one target's outputs and write the verdict into its row.

    Every output goes through :func:`compstack.analysis.verdict.judge` (via
    :func:`compstack.analysis.numerics.compare_outputs`): the tolerance, then for
    outputs beyond it the float32 noise floor; then, with an ``oracle``, an undefined
    behaviour rule that fires makes every output ``undefined``, and a bad output on which
    the second float64 oracle disagrees with the reference becomes ``reference-suspect``.

    Args:
        result: the :class:`~compstack.core.results.Result` row (status ``ok`` on entry);
            its ``outputs``, ``status``, ``stage``, ``error`` and ``notes`` are set.
        actual: the target's outputs by name.
        ref: the reference's outputs by name.
        expected: the model's declared output dtypes.
        rtol, atol: the user's override, or None for the per-dtype defaults.
        oracle: the comparison's :class:`CheckedOracle`, or None when the reference is
            not the float64 ONNX reference (the tolerance alone judges).

    An explicit ``rtol``/``atol`` is the user's absolute bound: the noise-floor gate is
    skipped, so an output beyond it is ``wrong`` even where float32 explains the error.

    An output whose reference holds no finite element (all NaN or inf: NaN inputs, an
    overflow) gets a note: agreeing on it says nothing about the numerics.

    Row status: ``ok`` when every output is ``ok`` or ``imprecise``; ``mismatch`` when one
    is ``wrong``, ``nan`` or ``shape``; else ``undefined`` or ``reference-suspect``.
    """
    from compstack.analysis.numerics import compare_outputs
    from compstack.analysis.verdict import AGREEING, row_kind

    comps = compare_outputs(actual, ref, expected, rtol, atol)
    user = rtol is not None or atol is not None  # the user's tolerance is absolute (as Polygraphy's)
    if oracle is not None and not user and any(c.kind == "wrong" for c in comps):
        floors = oracle.floors()
        if floors is not None:
            comps = compare_outputs(actual, ref, expected, rtol, atol, floors)
        else:
            result.notes.append(f"no float32 noise floor ({oracle.f32_error}): the tolerance alone judged")
    if oracle is not None:
        _relabel(comps, oracle)
        result.notes.extend(f"undefined behaviour set aside: {m}" for m in oracle.masked_ub)
        if oracle.note_if_bad and row_kind(c.kind for c in comps) not in AGREEING:
            result.notes.append(oracle.note_if_bad)
    result.outputs = [c.to_dict() for c in comps]
    kind = row_kind(c.kind for c in comps)
    for name, r in ref.items():  # an agreement on no finite value says nothing about the numerics
        r = np.asarray(r)
        if r.size and r.dtype.kind in "fc" and not np.isfinite(r).any():
            result.notes.append(f"output {name}: the reference has no finite element (all NaN or inf), so its "
                                "verdict says nothing about the numerics; check the inputs")
    if user:
        result.notes.append(f"tolerance: the user's override (--rtol {rtol}, --atol {atol}), not the per-dtype default; "
                            "it alone judges (no float32 noise-floor gate)")
    if kind in AGREEING:
        if kind == "imprecise":
            result.notes.append("imprecise: beyond the tolerance but within the float32 noise floor (agrees)")
        return
    result.status = "mismatch" if kind in ("wrong", "nan", "shape") else kind
    result.stage = "compare"
    bad = [c for c in comps if c.kind not in AGREEING]
    result.error = "; ".join(f"{c.name}: {c.kind}: {c.reason} (max abs err {c.max_abs_err:.3g})" for c in bad[:3])


def _relabel(comps: list[Any], oracle: CheckedOracle) -> None:
    """``undefined`` / ``reference-suspect`` on the comparisons that earn it (in place)."""
    from compstack.analysis.verdict import BAD

    bad = [c for c in comps if c.kind in BAD]
    if bad or oracle.may_be_undefined():
        rules = oracle.undefined()
        if rules:
            for c in comps:
                c.kind, c.ok = "undefined", False
                c.reason = "undefined behaviour: " + "; ".join(rules[:3]) + (f" (was {c.reason})" if c.reason else "")
            return
    if not bad:
        return
    cc = oracle.cross_check()
    for c in bad:
        if cc.error:
            c.reason += f"; the reference was not cross-checked ({cc.error})"
        elif c.name in cc.disagree:
            c.reason = (f"the oracles disagree at {', '.join(cc.disagree[c.name][:3])}: {oracle.reference_what} vs "
                        f"{cc.oracle} (was {c.kind}: {c.reason})")
            c.kind, c.ok = "reference-suspect", False
        else:
            c.reason += f"; the reference agrees with a second float64 oracle ({cc.oracle})"


def checked_oracle(report: Any, ref: Mapping[str, np.ndarray] | None, run: Callable[..., JobOutcome], model: Path,
                   feeds: Mapping[str, np.ndarray], work: Path,
                   store_model: Callable[[Any, str, Path, str], Path], cache: Any = None) -> CheckedOracle | None:
    """The comparison's :class:`CheckedOracle` when its reference is the float64 ONNX
    reference, a :class:`compstack.run.stackref.LargeOracle` when it is the float64
    ``large-reference`` of a model too large for it; None otherwise (a float32 stand-in:
    the tolerance alone judges).

    Args:
        report: the comparison's :class:`~compstack.core.results.Report` (its ``reference``).
        ref: the reference's outputs, or None when it failed.
        run: the comparison's ``run(target, options, latency, **job_fields)``.
        model: the model file every stack got; ``feeds`` input set 0.
        work: the comparison's scratch folder (the float64 copy's store lives there).
        store_model: :func:`compstack.run.session._store_model` (a verified store entry).
        cache: the comparison's :class:`compstack.run.oracle_cache.OracleCache` (the floor
            and the undefined-behaviour findings of an earlier run), or None.
    """
    info = report.reference
    if ref is not None and info.get("role") and not info.get("fallback_from") and not report.model.get("import_error"):
        from compstack.run.stackref import LARGE_ROLE, LargeOracle

        if info["role"] == LARGE_ROLE:
            return LargeOracle(model, ref, lambda name, opts, latency, tag: run(name, opts, latency, tag),
                               work / "large-oracle", cache)
    if ref is None or info.get("target") != "reference" or info.get("precision") != "float64" \
            or report.model.get("import_error"):
        return None

    def job(target: str, opts: Mapping[str, str], path: Path, fp: str, inputs: Path, tag: str) -> JobOutcome:
        return run(target, opts, False, model_path=str(path), fingerprint=fp, inputs_path=str(inputs),
                   workdir=str(work / tag), cache_dir=None, canonical_path="")

    def store(proto: onnx.ModelProto) -> tuple[Path, str]:
        import onnx_ir

        from compstack.core.ir import fingerprint

        m = onnx_ir.from_proto(proto)  # as written: no opset conversion of the oracle's copy
        fp = fingerprint(m)
        return store_model(m, fp, work / "oracle-store", "-oracle64"), fp

    return CheckedOracle(model, feeds, ref, job, store, work, cache)
