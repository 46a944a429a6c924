"""Task ``optest``: one target's column of ``compstack ops test`` (the parent side,
the matrix and its format are :mod:`compstack.run.optest`).

For each dtype signature the op declares, one ONNX model holds one node of the op per
test shape, each with its own inputs and outputs; the oracle is the op's NumPy reference
in float64; outputs are compared with compstack's per-dtype tolerances
(:mod:`compstack.analysis.numerics`). The typed result is ``{"cells": [CaseResult...]}``
in ``JobOutcome.result``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper

from compstack import targets as registry
from compstack.ops._spec import DTYPES, CustomOp, TensorType
from compstack.run.jobs import Job, JobOutcome

__all__ = ["CaseResult", "DEFAULT_TARGETS", "KERNEL", "Params", "op_model", "run", "run_target"]


@dataclass(frozen=True)
class Params:
    """An ``optest`` job's parameters (``Job.params``).

    Attributes:
        op: the op's qualified name (``domain::Name``).
        attrs: its attribute values.
        seed: seed of the random inputs.
        origins: where the user declared the op (``module:NAME``/``file:/abs.py``), to load first.
    """

    op: str
    attrs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    origins: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """This as ``Job.params``."""
        return asdict(self)


def run(job: Job, target: Any, outcome: JobOutcome, stage: Callable[[str], None], avail: Any) -> None:
    """Run every case of the op named by ``job.params`` (:class:`Params`) on ``target``;
    the cells go into ``outcome.result["cells"]``."""
    from compstack.ops._registry import get, load_origins

    p = Params(**job.params)
    if "torch" in sys.modules and sys.modules["torch"] is None:
        del sys.modules["torch"]  # prepare_worker's block: a user's declarations may import torch
    load_origins(p.origins)
    stage("run")
    rows = run_target(job.target, get(p.op), p.attrs, p.seed, target, avail)
    outcome.result = {"cells": [asdict(r) for r in rows]}


#: The stacks ``compstack ops test`` runs by default: the targets with the ``ops-test``
#: role in the registry table (the CPU targets).
DEFAULT_TARGETS = tuple(registry.with_role("ops-test"))
#: The column of the C kernel called directly.
KERNEL = "kernel"


@dataclass
class CaseResult:
    """One cell of the matrix: one target, one dtype signature, one shape case.

    Attributes:
        status: ``pass``, ``fail`` (wrong values), ``unsupported`` (the stack cannot
            take the op; ``error`` says why), ``unavailable`` (stack not installed),
            ``error`` (the stack failed), ``crashed`` (the process died).
        max_abs_err, max_rel_err: over all outputs of the case (None when not run).
    """

    target: str
    dtypes: list[str]
    shapes: list[list[int]]
    status: str
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    error: str = ""


def _cases(op: CustomOp) -> list[tuple[tuple[int, ...], ...]]:
    if not op.test_shapes:
        from compstack.core.errors import UserError

        raise UserError(f"{op.qualname} declares no test_shapes; add test_shapes=[...] to its custom_op(...)")
    return list(op.test_shapes)


def op_model(op: CustomOp, dtypes: Sequence[str], cases: Sequence[Sequence[Sequence[int]]],
             attrs: Mapping[str, Any]) -> onnx.ModelProto:
    """An ONNX model with one ``op`` node per case: inputs ``c<k>_<input>``, outputs
    ``c<k>_<output>``, static shapes, types from the shape rule."""
    values = op.attr_values(attrs)
    nodes, inputs, outputs = [], [], []
    for k, shapes in enumerate(cases):
        types = [TensorType(tuple(s), d) for s, d in zip(shapes, dtypes)]
        outs = op.infer(types, values)
        ins = [f"c{k}_{p.name}" for p in op.inputs]
        res = [f"c{k}_{p.name}" for p in op.outputs]
        inputs += [helper.make_tensor_value_info(n, DTYPES[t.dtype], list(t.shape)) for n, t in zip(ins, types)]
        outputs += [helper.make_tensor_value_info(n, DTYPES[t.dtype], list(t.shape)) for n, t in zip(res, outs)]
        kw: dict[str, Any] = {n: (int(v) if isinstance(v, bool) else v) for n, v in values.items()}
        nodes.append(helper.make_node(op.name, ins, res, name=f"{op.name}_{k}", domain=op.domain, **kw))
    graph = helper.make_graph(nodes, f"test_{op.name}", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                   helper.make_opsetid(op.domain, op.version)])


def _inputs(op: CustomOp, dtypes: Sequence[str], cases: Sequence[Sequence[Sequence[int]]],
            seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for shapes in cases:
        arrays = []
        for shape, dt in zip(shapes, dtypes):
            if dt.startswith("float"):
                arrays.append(rng.standard_normal(tuple(shape)).astype(dt))
            elif dt == "bool":
                arrays.append(rng.integers(0, 2, tuple(shape)).astype(bool))
            else:
                arrays.append(rng.integers(0, 10, tuple(shape)).astype(dt))
        out.append(arrays)
    return out


def _oracle(op: CustomOp, arrays: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    return op.run_reference(*wide, **attrs)


def _score(op: CustomOp, target: str, dtypes: Sequence[str], shapes: Sequence[Sequence[int]],
           got: Sequence[np.ndarray], want: Sequence[np.ndarray], out_types: Sequence[TensorType]) -> CaseResult:
    from compstack.analysis.numerics import compare_outputs

    names = [p.name for p in op.outputs]
    comps = compare_outputs(dict(zip(names, got)), dict(zip(names, want)),
                            {n: np.dtype(t.dtype) for n, t in zip(names, out_types)})
    abs_err = max((c.max_abs_err for c in comps), default=0.0)
    rel_err = max((c.max_rel_err for c in comps), default=0.0)
    bad = [c for c in comps if not c.ok]
    error = "; ".join(f"{c.name}: {c.reason}" for c in bad)
    return CaseResult(target, list(dtypes), [list(s) for s in shapes], "fail" if bad else "pass",
                      float(abs_err), float(rel_err), error)


def _run_kernel_column(op: CustomOp, attrs: Mapping[str, Any], seed: int) -> list[CaseResult]:
    from compstack.ops._kernel import run_kernel

    rows = []
    cases = _cases(op)
    for dtypes in op.dtype_cases():
        sets = _inputs(op, dtypes, cases, seed)
        for shapes, arrays in zip(cases, sets):
            types = op.infer([TensorType(tuple(s), d) for s, d in zip(shapes, dtypes)], attrs)
            try:
                got = run_kernel(op, *arrays, **attrs)
            except Exception as exc:  # noqa: BLE001 - a failing kernel is a cell of the matrix
                rows.append(CaseResult(KERNEL, list(dtypes), [list(s) for s in shapes], _status(exc), error=_line(exc)))
                continue
            rows.append(_score(op, KERNEL, dtypes, shapes, got, _oracle(op, arrays, attrs), types))
    return rows


def _status(exc: BaseException) -> str:
    from compstack.core.errors import UnavailableError, UnsupportedError

    if isinstance(exc, UnsupportedError):
        return "unsupported"
    if isinstance(exc, UnavailableError):
        return "unavailable"
    return "error"


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    pick = next((ln for ln in lines if "Error" in ln or "error:" in ln), lines[0] if lines else "")
    return f"{type(exc).__name__}: {pick[:400]}"


def run_target(name: str, op: CustomOp, attrs: Mapping[str, Any], seed: int = 0, target: Any = None,
               avail: Any = None) -> list[CaseResult]:
    """Run every case of ``op`` on target ``name`` in this process (``kernel``: the C
    kernel directly). Failures become cells; nothing raises for a stack's error.

    Args:
        name: the target (or :data:`KERNEL`).
        op: the registered op; ``attrs`` its attribute values; ``seed`` the inputs' seed.
        target, avail: the target already built and its availability (a worker job's);
            None: built here from the registry.

    Raises:
        UserError: unknown target, or the op declares no test shapes.
    """
    if name == KERNEL:
        return _run_kernel_column(op, attrs, seed)
    from compstack import targets as registry
    from compstack.core import ir as cir

    cls = registry.get(name) if target is None else type(target)
    avail = cls.availability() if avail is None else avail
    cases = _cases(op)
    rows: list[CaseResult] = []
    for dtypes in op.dtype_cases():
        def cell(status: str, error: str, shapes: Sequence[Sequence[int]], dtypes: Sequence[str] = dtypes) -> CaseResult:
            return CaseResult(name, list(dtypes), [list(s) for s in shapes], status, error=error)

        if not avail.ok or not avail.runs:
            rows += [cell("unavailable", avail.reason or avail.run_reason, s) for s in cases]
            continue
        sets = _inputs(op, dtypes, cases, seed)
        try:
            model = cir.from_proto(op_model(op, dtypes, cases, attrs), source=f"{op.qualname} test")
            compiled = (target if target is not None else cls()).lower(model).compile()
            feeds = {f"c{k}_{p.name}": a for k, arrays in enumerate(sets) for p, a in zip(op.inputs, arrays)}
            outs = compiled.run(feeds)
        except Exception as exc:  # noqa: BLE001 - a stack's failure is a row of the matrix
            rows += [cell(_status(exc), _line(exc), s) for s in cases]
            continue
        for k, (shapes, arrays) in enumerate(zip(cases, sets)):
            types = op.infer([TensorType(tuple(s), d) for s, d in zip(shapes, dtypes)], attrs)
            got = [outs[f"c{k}_{p.name}"] for p in op.outputs]
            rows.append(_score(op, name, dtypes, shapes, got, _oracle(op, arrays, attrs), types))
    return rows
