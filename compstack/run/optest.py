"""``compstack ops test``: every stack against the op's NumPy reference.

For each dtype signature the op declares, one ONNX model holds one node of the op per
test shape (``test_shapes``), each with its own inputs and outputs, so a stack compiles
once per signature, not once per shape. Inputs are random (floats from a standard
normal, integers in ``[0, 10)``), the same for every stack; the oracle is the reference
run in float64 (integer inputs as they are). Outputs are compared with compstack's
per-dtype tolerances (:mod:`compstack.analysis.numerics`: float32 ``rtol=1e-3, atol=1e-5``,
float16 ``rtol=1e-2, atol=1e-3``).

Columns: ``kernel`` (the C kernel called directly through ctypes: the kernel itself,
without any stack) and one per target. Each target runs in its own process
(``python -m compstack.run.optest``), so a kernel that crashes one stack costs that
column only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from compstack.ops._spec import DTYPES, CustomOp, TensorType

__all__ = [
    "DEFAULT_TARGETS",
    "KERNEL",
    "CaseResult",
    "OpTestReport",
    "format_matrix",
    "op_model",
    "run_matrix",
    "run_target",
]

#: The stacks ``compstack ops test`` runs by default (the CPU targets).
DEFAULT_TARGETS = ("ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu")
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


@dataclass
class OpTestReport:
    """The whole matrix for one op."""

    op: str
    attrs: dict[str, Any]
    seed: int
    targets: list[str]
    results: list[CaseResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no cell is ``fail``, ``error`` or ``crashed``."""
        return not any(r.status in ("fail", "error", "crashed") for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "attrs": self.attrs, "seed": self.seed, "targets": self.targets, "ok": self.ok,
                "results": [asdict(r) for r in self.results]}


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


def run_target(name: str, op: CustomOp, attrs: Mapping[str, Any], seed: int = 0) -> list[CaseResult]:
    """Run every case of ``op`` on target ``name`` in this process (``kernel``: the C
    kernel directly). Failures become cells; nothing raises for a stack's error."""
    if name == KERNEL:
        return _run_kernel_column(op, attrs, seed)
    from compstack import targets as registry
    from compstack.core import ir as cir

    cls = registry.get(name)
    avail = cls.availability()
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
            target = cls()
            compiled = target.lower(model).compile()
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


def _subprocess(name: str, op: CustomOp, attrs: Mapping[str, Any], seed: int, timeout: float) -> list[CaseResult]:
    from compstack.core.procs import child_kwargs, python_module_argv

    cmd = python_module_argv("compstack.run.optest", name, op.qualname, "--seed", str(seed),
                             "--attrs", json.dumps(dict(attrs)))
    if op.origin and not op.origin.startswith("module:compstack.ops."):
        cmd += ["--origin", op.origin]
    cases = [(d, s) for d in op.dtype_cases() for s in _cases(op)]

    def all_cells(status: str, error: str) -> list[CaseResult]:
        return [CaseResult(name, list(d), [list(x) for x in s], status, error=error) for d, s in cases]

    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **child_kwargs())
    except subprocess.TimeoutExpired:
        return all_cells("error", f"timed out after {timeout:g} s")
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return all_cells("crashed", f"process died (exit {done.returncode}): {tail[:300]}")
    try:
        rows = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return all_cells("crashed", "no result from the test process")
    return [CaseResult(**r) for r in rows]


def run_matrix(op: CustomOp, targets: Sequence[str] = DEFAULT_TARGETS, attrs: Mapping[str, Any] | None = None,
               seed: int = 0, isolate: bool = True, jobs: int | None = None, timeout: float = 900.0) -> OpTestReport:
    """Run ``op`` on the ``kernel`` column and each target; returns the report.

    Args:
        op: the registered op.
        targets: target names (``kernel`` is always added first).
        attrs: attribute values (default: the declared defaults).
        seed: seed of the random inputs.
        isolate: one process per target (default); False runs in this process.
        jobs: targets run at once (default: the number of cores).
        timeout: limit per target, seconds.

    Raises:
        UserError: the op declares no test shapes, or a bad attribute value.
    """
    from compstack.core.errors import UserError
    from compstack.ops._spec import OpDefinitionError

    try:
        values = op.attr_values(attrs)
    except OpDefinitionError as exc:
        raise UserError(str(exc)) from None
    _cases(op)
    columns = [KERNEL, *[t for t in targets if t != KERNEL]]
    report = OpTestReport(op.qualname, values, seed, columns)
    if not isolate:
        for name in columns:
            report.results += run_target(name, op, values, seed)
        return report
    report.results += _run_kernel_column(op, values, seed)
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        futures = [pool.submit(_subprocess, name, op, values, seed, timeout) for name in columns[1:]]
        for fut in futures:
            report.results += fut.result()
    return report


_MARK = {"pass": "pass", "fail": "FAIL", "unsupported": "unsup", "unavailable": "n/a", "error": "ERROR",
         "crashed": "CRASH"}


def format_matrix(report: OpTestReport) -> list[str]:
    """The pass/fail matrix as text lines: one row per (dtypes, shapes), one column per
    target, then each target's max errors and the reasons for cells that did not pass."""
    cols = report.targets
    keys: list[tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]] = []
    cells: dict[tuple[Any, ...], CaseResult] = {}
    for r in report.results:
        key = (tuple(r.dtypes), tuple(tuple(s) for s in r.shapes))
        if key not in keys:
            keys.append(key)
        cells[(key, r.target)] = r
    label = [f"{'/'.join(d)} {' '.join('x'.join(map(str, s)) or 'scalar' for s in sh)}" for d, sh in keys]
    width = max([len(x) for x in label] + [10])
    attrs = ", ".join(f"{k}={v}" for k, v in report.attrs.items())
    lines = [f"{report.op}" + (f" ({attrs})" if attrs else "") + f"  seed {report.seed}", ""]
    lines.append(f"{'dtypes / input shapes':<{width}}  " + "  ".join(f"{c:>13}" for c in cols))
    for key, text in zip(keys, label):
        row = [_MARK.get(cells[(key, c)].status, "?") if (key, c) in cells else "-" for c in cols]
        lines.append(f"{text:<{width}}  " + "  ".join(f"{m:>13}" for m in row))
    lines.append("")
    for c in cols:
        rows = [r for r in report.results if r.target == c]
        passed = sum(r.status == "pass" for r in rows)
        summary = f"{c}: {passed}/{len(rows)} pass"
        by_sig: dict[str, float] = {}
        for r in rows:
            if r.max_abs_err is not None:
                sig = "/".join(dict.fromkeys(r.dtypes))
                by_sig[sig] = max(by_sig.get(sig, 0.0), r.max_abs_err)
        if by_sig:
            summary += "; max abs err " + ", ".join(f"{sig} {err:.2g}" for sig, err in by_sig.items())
        reasons = sorted({f"{r.status}: {r.error}" for r in rows if r.status != "pass" and r.error})
        lines.append(summary + (f" — {reasons[0]}" if reasons else ""))
        lines += [f"    {x}" for x in reasons[1:3]]
    lines.append("")
    lines.append("ok" if report.ok else "FAILED")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m compstack.run.optest TARGET OP [--seed N] [--attrs JSON] [--origin O]``:
    one target's cells as a JSON list on the last line of stdout."""
    import argparse

    from compstack.ops._registry import get, load_origins

    parser = argparse.ArgumentParser(prog="python -m compstack.run.optest")
    parser.add_argument("target")
    parser.add_argument("op")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attrs", default="{}")
    parser.add_argument("--origin", action="append", default=[])
    args = parser.parse_args(argv)
    load_origins(args.origin)  # first: a user's declarations may import torch
    if args.target != KERNEL:
        from compstack import targets as registry
        from compstack.run.jobs import prepare_worker

        prepare_worker(registry.get(args.target))  # as compare's workers: no torch where the stack needs none
    t0 = time.perf_counter()
    rows = run_target(args.target, get(args.op), json.loads(args.attrs), args.seed)
    print(f"# {args.target}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    sys.stdout.write("\n" + json.dumps([asdict(r) for r in rows]) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
