"""Task ``conformance``: one ONNX node-test case on one target.

The case comes from the verified cases file (:func:`compstack.frontends.node_cases.read_cases`,
read once per worker process) by name (:class:`Params`); the typed result is a
:class:`CaseResult` in ``JobOutcome.result``. Run on the pool executor
(:mod:`compstack.run.executors`), a worker imports its stack once for many cases.

Compiled cases are cached as artifacts; a deterministic failure to lower or compile is
cached too (``<cache>/artifacts/conformance-failures/<target>/<key>.json``, same key:
case model, target, options, stack versions), so a warm run compiles nothing again.
Timeouts and crashes are never cached.

Each case ends in one stage (the funnel): ``import``, ``lower``, ``compile``, ``run``,
``compare``, or ``passed``; ``unsupported`` when the case uses a dtype or a non-tensor
input/output the target does not take, or an op the stack reports unsupported.

Comparison rule (the ONNX backend test runner's ``assert_similar_outputs``): same
number of outputs, same shapes, same dtypes; strings equal; integers and bools exact;
floats ``|a - b| <= atol + rtol * |b|`` (``assert_allclose``'s rule) with NaN equal to NaN
and Inf of the same sign, the case's tolerances (rtol 1e-3, atol 1e-7 by default),
decided by the one verdict, :func:`compstack.analysis.verdict.judge` (no float32 floor:
the case's expected outputs are the oracle); bfloat16 compared in float32 with
``rtol >= 2**-6`` as the runner does.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compstack.analysis.verdict import AGREEING, judge
from compstack.frontends.node_cases import Case
from compstack.run.jobs import Job, JobOutcome, _first_line

__all__ = ["CaseResult", "Params", "compare_case", "run", "run_case"]


@dataclass(frozen=True)
class Params:
    """A conformance job's parameters (``Job.params``).

    Attributes:
        cases: the cases file (:func:`compstack.frontends.node_cases.cases_path`).
        case: the case's name.
        cache_dir: the artifact cache root (compiled cases and known failures), or None.
    """

    cases: str
    case: str
    cache_dir: str | None = None

    def to_json(self) -> dict[str, Any]:
        """This as ``Job.params``."""
        return asdict(self)


@dataclass
class CaseResult:
    """One case's row.

    Attributes:
        case: the case name.
        stage: the funnel stage it ended in (``passed`` when it passed).
        status: ``passed``, ``failed``, ``unsupported``; the executors add ``timeout``
            and ``crashed``.
        error: one line (at most 400 characters).
        seconds: wall time of the case, seconds.
    """

    case: str
    stage: str
    status: str
    error: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data (the conformance report's ``cases`` entries)."""
        return asdict(self)


_CASES: dict[str, dict[str, Case]] = {}


def _cases(path: str) -> dict[str, Case]:
    """The cases of ``path`` by name, read (and verified) once per process."""
    if path not in _CASES:
        from compstack.frontends.node_cases import read_cases

        _CASES[path] = {c.name: c for c in read_cases(Path(path))}
    return _CASES[path]


def run(job: Job, target: Any, outcome: JobOutcome, stage: Callable[[str], None], avail: Any) -> None:
    """Run the case named by ``job.params`` (:class:`Params`) on ``target``; the row goes
    into ``outcome.result``. Never raises for the stack's sake.

    Raises:
        KeyError: no such case in the cases file.
        ValueError: the cases file is not a verified compstack cases file.
    """
    from compstack.core.store import ArtifactCache

    p = Params(**job.params)
    case = _cases(p.cases)[p.case]
    cache = ArtifactCache(Path(p.cache_dir) / "artifacts" / "conformance", "conformance") if p.cache_dir else None
    outcome.result = run_case(case, target, cache, dict(avail.versions), stage)


def compare_case(expected: list[Any], got: list[Any], rtol: float, atol: float) -> str:
    """The ONNX runner's rule (see the module docstring); ``""`` when similar, else why."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (ref, out) in enumerate(zip(expected, got)):
        out = np.asarray(out)
        if out.shape != ref.shape:
            return f"output {i}: shape {list(out.shape)} != expected {list(ref.shape)}"
        if ref.dtype == object:
            if not np.array_equal(out.astype(object), ref):
                return f"output {i}: strings differ"
            continue
        if out.dtype != ref.dtype:
            return f"output {i}: dtype {out.dtype} != expected {ref.dtype}"
        if ref.dtype.kind in "biu":
            if not np.array_equal(out, ref):
                return f"output {i}: {int((out != ref).sum())} integer elements differ"
            continue
        r, a, b = rtol, out, ref
        if ref.dtype.kind not in "fc":  # ml_dtypes (bfloat16, float8...): compare in float32
            a, b = out.astype(np.float32), ref.astype(np.float32)
            if ref.dtype.name == "bfloat16":
                r = max(rtol, 2**-6)  # two bfloat16 ULPs, as the ONNX runner does
        if judge(a, b, None, rtol=r, atol=atol).kind not in AGREEING:  # the one verdict, the case's tolerance
            with np.errstate(all="ignore"):
                err = np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))) if a.size else 0.0
            return f"output {i}: not close (rtol={r:g}, atol={atol:g}; max abs err {err:.3g})"
    return ""


def _dtype_problem(case: Case, supported: frozenset[str]) -> str:
    if case.io_kind != "tensor":
        return f"{case.io_kind} input/output: the harness feeds tensors only"
    for arr in [*case.inputs, *case.outputs]:
        name = "object" if arr.dtype == object else arr.dtype.name
        if name not in supported:
            return f"dtype {name} not taken by this target"
    return ""


def _result(case: str, stage: str, status: str, error: str = "", t0: float = 0.0) -> dict[str, Any]:
    return {"case": case, "stage": stage, "status": status, "error": error[:400],
            "seconds": round(time.perf_counter() - t0, 4)}


def run_case(case: Case, target: Any, cache: Any, versions: dict[str, str],
             progress: Callable[[str], None]) -> dict[str, Any]:
    """Run one case on ``target`` through the stages; never raises for the stack's sake."""
    import onnx
    import onnx_ir as ir

    from compstack.core.errors import UnsupportedError
    from compstack.core.store import cache_key

    t0 = time.perf_counter()
    stage = "import"
    try:
        progress(stage)
        why = _dtype_problem(case, target.supported_dtypes)
        if why:
            return _result(case.name, stage, "unsupported", why, t0)
        proto = onnx.ModelProto()
        proto.ParseFromString(case.model)
        model = ir.serde.deserialize_model(proto)
        names = [v.name for v in model.graph.inputs if not v.is_initializer()]
        if len(names) != len(case.inputs):
            return _result(case.name, stage, "unsupported", "inputs do not match the graph's", t0)
        key = cache_key(hash_bytes(case.model), target.name, target.options.to_dict(), versions) if cache else ""
        known = _known_failure(cache, target, key)
        if known is not None:  # with the frames it raised from, so a warm run blames whom the cold one did
            return {**_result(case.name, known["stage"], known["status"], known["error"], t0),
                    "log": str(known.get("log", ""))}
        compiled = _cached(cache, target, key, model)
        if compiled is None:
            try:
                stage = "lower"
                progress(stage)
                lowered = target.lower(model)
                stage = "compile"
                progress(stage)
                compiled = lowered.compile()
            except Exception as exc:  # noqa: BLE001 - recorded, then handled below like any other
                _record_failure(cache, target, key, stage, exc)
                raise
            if cache is not None:
                try:
                    staging = cache.staging(target.name)
                    cache.publish(staging, target.name, key, compiled.save(staging), {"case": case.name})
                except OSError:
                    pass  # a store that cannot be written (full disk) costs the cache, not the case
        stage = "run"
        progress(stage)
        outs = compiled.run(dict(zip(names, case.inputs)))
        stage = "compare"
        progress(stage)
        why = compare_case(case.outputs, [outs[n] for n in compiled.output_names], case.rtol, case.atol)
        return _result(case.name, "compare" if why else "passed", "failed" if why else "passed", why, t0)
    except UnsupportedError as exc:
        return _result(case.name, stage, "unsupported", str(exc), t0)
    except Exception as exc:  # noqa: BLE001 - the stack's failure is this case's outcome
        return {**_result(case.name, stage, "failed", _first_line(exc), t0), "log": _frames(exc)}


def _frames(exc: BaseException) -> str:
    """The traceback's frames (``File "...", line N``, the last 4,000 characters): they tell
    whose code raised (:func:`compstack.analysis.fault.conformance_fault`)."""
    import traceback

    return "".join(f'File "{f.filename}", line {f.lineno}\n' for f in traceback.extract_tb(exc.__traceback__))[-4000:]


def hash_bytes(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()[:16]


def _failure_key(target: Any, key: str) -> str:
    return f"{target.name}/{key}"


def _known_failure(cache: Any, target: Any, key: str) -> dict[str, Any] | None:
    """A lower/compile failure recorded by an earlier run with the same key (same case,
    target, options and stack versions), so a warm run does not compile it again: a
    verified record of the store's ``failures`` kind (an altered one is dropped)."""
    if cache is None:
        return None
    data, _ = cache.store.read_record("failures", _failure_key(target, key))
    if data is None or not all(isinstance(data.get(k), str) for k in ("stage", "status", "error")):
        return None
    return data


def _record_failure(cache: Any, target: Any, key: str, stage: str, exc: BaseException) -> None:
    """Remember a deterministic lower/compile failure (not timeouts or crashes, which
    kill the worker before this runs)."""
    from compstack.core.errors import ToolTimeoutError, UnsupportedError

    if cache is None or isinstance(exc, ToolTimeoutError):
        return
    status = "unsupported" if isinstance(exc, UnsupportedError) else "failed"
    error = str(exc) if isinstance(exc, UnsupportedError) else _first_line(exc)
    try:
        cache.store.write_record("failures", _failure_key(target, key),
                                 {"stage": stage, "status": status, "error": error[:400], "log": _frames(exc)})
    except OSError:
        pass  # a store that cannot be written costs the warm run a compile, not the case


def _cached(cache: Any, target: Any, key: str, model: Any) -> Any:
    if cache is None:
        return None
    entry, _ = cache.lookup(target.name, key)
    if entry is None:
        return None
    try:
        return target.load_compiled(entry.folder, model)
    except Exception:  # noqa: BLE001 - an unloadable entry is rebuilt
        cache.evict(target.name, key)
        return None
