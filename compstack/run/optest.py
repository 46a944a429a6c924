"""``compstack ops test``: every stack against the op's NumPy reference.

For each dtype signature the op declares, one ONNX model holds one node of the op per
test shape (``test_shapes``), each with its own inputs and outputs, so a stack compiles
once per signature, not once per shape. Inputs are random (floats from a standard
normal, integers in ``[0, 10)``), the same for every stack; the oracle is the reference
run in float64 (integer inputs as they are). Outputs are compared with compstack's
per-dtype tolerances (:mod:`compstack.analysis.numerics`: float32 ``rtol=1e-3, atol=1e-5``,
float16 ``rtol=1e-2, atol=1e-3``).

Columns: ``kernel`` (the C kernel called directly through ctypes: the kernel itself,
without any stack) and one per target. Each target runs as an ``optest`` job
(:mod:`compstack.run.tasks.optest`) in its own worker process
(:class:`compstack.run.executors.ProcessExecutor`), so a kernel that crashes one stack
costs that column only.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from compstack.core.procs import run_tempdir
from compstack.ops._spec import CustomOp
from compstack.run.executors import Limits, ProcessExecutor
from compstack.run.jobs import Job
from compstack.run.tasks.optest import (
    DEFAULT_TARGETS,
    KERNEL,
    CaseResult,
    Params,
    _cases,
    _run_kernel_column,
    op_model,
    run_target,
)

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


def _run_job(executor: Any, name: str, op: CustomOp, attrs: Mapping[str, Any], seed: int, timeout: float,
             workdir: Any) -> list[CaseResult]:
    """One target's column as an ``optest`` job on ``executor``; a worker that times out,
    dies or fails outside the cases makes every cell of the column say so."""
    from compstack import targets as registry

    cases = [(d, s) for d in op.dtype_cases() for s in _cases(op)]

    def all_cells(status: str, error: str) -> list[CaseResult]:
        return [CaseResult(name, list(d), [list(x) for x in s], status, error=error) for d, s in cases]

    ref = next((e.ref for e in registry.entries() if e.name == name), None)
    if ref is None:
        return all_cells("error", f"unknown target '{name}'")
    origins = [op.origin] if op.origin and not op.origin.startswith("module:compstack.ops.") else []
    job = Job(model_path="", fingerprint="", target=name, target_ref=ref, inputs_path="", workdir=str(workdir),
              kind="optest", params=Params(op.qualname, dict(attrs), seed, origins).to_json())
    outcome = executor.run(job, Limits(timeout_s=timeout))
    if outcome.result is not None:
        return [CaseResult(**r) for r in outcome.result["cells"]]
    if outcome.status == "timeout":
        return all_cells("error", f"timed out after {timeout:g} s")
    if outcome.status in ("crashed", "oom"):
        return all_cells("crashed", f"process died: {outcome.error[:300]}")
    if outcome.status == "unavailable":
        return all_cells("unavailable", outcome.error)
    return all_cells("error", outcome.error[:400])


def run_matrix(op: CustomOp, targets: Sequence[str] = DEFAULT_TARGETS, attrs: Mapping[str, Any] | None = None,
               seed: int = 0, isolate: bool = True, jobs: int | None = None, timeout: float = 900.0) -> OpTestReport:
    """Run ``op`` on the ``kernel`` column and each target; returns the report.

    Args:
        op: the registered op.
        targets: target names (``kernel`` is always added first).
        attrs: attribute values (default: the declared defaults).
        seed: seed of the random inputs.
        isolate: one worker process per target (default; :class:`compstack.run.executors.ProcessExecutor`,
            task :mod:`compstack.run.tasks.optest`); False runs in this process.
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
    work = run_tempdir("compstack-optest-")
    try:
        with ProcessExecutor() as executor, ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
            futures = [pool.submit(_run_job, executor, name, op, values, seed, timeout, work / name)
                       for name in columns[1:]]
            for fut in futures:
                report.results += fut.result()
    finally:
        shutil.rmtree(work, ignore_errors=True)
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
