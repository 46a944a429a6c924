"""``iree-llvm-cpu`` tuned: a search over IREE's documented CPU flag sets, the fastest kept (issue #26).

IREE has no auto-tuner on llvm-cpu, and its performance flags do not always pay: measured
with ``python3 benchmarks/tuned.py`` on this 2-core machine, ``--iree-opt-level=O3
--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=all`` made zoo:bert 1.5x *slower*
(packing costs more than it saves on small matrices). So ``tune=DURATION`` compiles the
candidates below in turn, times each on the job's own thread count, and keeps the fastest
(a later candidate must beat the best so far by :data:`KEEP_MARGIN`),
as trtexec's builder times its tactics and keeps the fastest
(``--builderOptimizationLevel``). The default flags are always the first candidate, so a
tuned row is never slower than the default by more than the timing noise.

Each candidate is timed on inputs made from the model's declared shapes (floats uniform in
[-1, 1), integers and booleans zero: a valid index for every Gather), two warm-up runs,
then runs until :data:`MIN_TIME_S` and :data:`MIN_RUNS` are both reached; the median is
compared. A candidate that fails to compile or to run is recorded with its error and skipped; when
the budget is spent the remaining candidates are recorded as not tried. The row's
``flags["tuning"]`` lists every candidate (flags, compile seconds, median, runs), the kept
one, and the tuning curve (best median against candidates tried).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from compstack.core.errors import ToolError

if TYPE_CHECKING:
    from compstack.targets.iree.stages import _IreeCompiled, _IreeLowered

__all__ = ["CANDIDATES", "search"]

_O3, _DT, _UK = "--iree-opt-level=O3", "--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all"
#: The flag sets tried, in order (iree.dev, "Optimization options" and "CPU microkernels"):
#: the default (``O0`` for the whole flow), O3, O3 with data tiling, and O3 with data
#: tiling and every ukernel.
CANDIDATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("default", ()), ("O3", (_O3,)), ("O3 + data tiling", (_O3, _DT)), ("O3 + data tiling + ukernels", (_O3, _DT, _UK)))
#: Timing of one candidate: at least this long and this many runs, after two warm-up runs.
MIN_TIME_S = 0.3
MIN_RUNS = 5
MAX_RUNS = 200
#: A later candidate replaces the best so far only when its median is below this fraction
#: of the best's: on a loaded machine two timings of one artifact differ by a few per cent,
#: and the default flags (tried first) should not lose to noise.
KEEP_MARGIN = 0.95


def search(lowered: _IreeLowered, budget_s: float) -> tuple[_IreeCompiled, dict[str, Any], float]:
    """Compile and time :data:`CANDIDATES` within ``budget_s`` seconds; return the fastest
    artifact, the record for ``flags["tuning"]`` and the seconds spent apart from the kept
    candidate's own compile (the row's ``tune_s``).

    The first candidate always runs, whatever the budget; a later one starts only while
    the budget lasts. A model with a dynamic input shape is compiled with the default flags
    only, and the record says why.

    Raises:
        UnsupportedError, ToolError: every candidate failed to compile (the first error).
    """
    from compstack.core import ir as cir
    from compstack.core.errors import UnsupportedError
    from compstack.targets.iree.stages import _IreeCompiled

    t0 = time.perf_counter()
    dynamic = [v.name or "" for v in cir.graph_inputs(lowered.model) if not v.is_static]
    if dynamic:  # nothing to time on: the default flags, and the row says why
        vmfb = lowered.scratch.path / "model.vmfb"
        lowered.run_phase(None, start=lowered.scratch.path / "input.mlir", output=vmfb)
        why = f"not searched: input(s) {', '.join(dynamic)} have dynamic shapes (nothing to time on); default flags"
        return (_IreeCompiled(lowered.target, lowered.model, vmfb.read_bytes(), lowered.function),
                {"tuner": "flag search", "budget_s": budget_s, "candidates": [], "kept": "default", "kept_flags": [],
                 "trials": 0, "summary": why, "curve": {"points": [], "tasks_left_out": 0, "method": why}}, 0.0)
    inputs = _timing_inputs(lowered.model)
    tried: list[dict[str, Any]] = []
    best: tuple[float, _IreeCompiled, float] | None = None
    untimed: tuple[_IreeCompiled, float] | None = None  # the first that compiled but could not be timed
    first_error: Exception | None = None
    for i, (name, flags) in enumerate(CANDIDATES):
        entry: dict[str, Any] = {"name": name, "flags": list(flags)}
        tried.append(entry)
        if i and time.perf_counter() - t0 >= budget_s:
            entry["status"] = "not tried: the budget was spent"
            continue
        vmfb = lowered.scratch.path / f"candidate{i}.vmfb"
        c0 = time.perf_counter()
        try:
            lowered.run_phase(None, start=lowered.scratch.path / "input.mlir", output=vmfb, flags=flags)
            compiled = _IreeCompiled(lowered.target, lowered.model, vmfb.read_bytes(), lowered.function)
        except (ToolError, UnsupportedError, RuntimeError) as exc:
            first_error = first_error or exc
            entry.update(status="failed to compile", error=(str(exc).strip().splitlines() or [""])[0][:300])
            continue
        compile_s = time.perf_counter() - c0
        try:
            median_s, runs = _time(compiled, inputs)
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is skipped, as one that cannot compile
            first_error = first_error or exc
            untimed = untimed or (compiled, compile_s)
            entry.update(status="failed to run", compile_s=round(compile_s, 3),
                         error=f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}")
            continue
        entry.update(status="ok", compile_s=round(compile_s, 3), median_ms=round(median_s * 1e3, 6), runs=runs)
        if best is None or median_s < best[0] * KEEP_MARGIN:  # a flag set must pay beyond the timing noise
            best = (median_s, compiled, compile_s)
    if best is None and untimed is not None:  # nothing could be timed here: keep the first that compiled
        first = next(e for e in tried if "compile_s" in e)
        why = f"not searched: no candidate could be timed on generated inputs ({first_error}); kept {first['name']}"
        return (untimed[0], _record(lowered, budget_s, tried, first, [], why, why),
                max(0.0, time.perf_counter() - t0 - untimed[1]))
    if best is None:
        assert first_error is not None
        raise first_error
    median_s, compiled, kept_compile_s = best
    kept = next(e for e in tried if e.get("median_ms") == round(median_s * 1e3, 6))
    points, so_far = [], float("inf")
    for n, e in enumerate(tried, 1):  # the kept median after each timed candidate (the same margin rule)
        if "median_ms" in e:
            so_far = e["median_ms"] if e["median_ms"] < so_far * KEEP_MARGIN else so_far
            points.append({"trials": n, "est_ms": so_far})
    default_ms = tried[0].get("median_ms")
    summary = (f"flag search, kept {kept['name']} ({kept['median_ms']:.4g} ms"
               + (f"; default {default_ms:.4g} ms, x{default_ms / kept['median_ms']:.2f}" if default_ms else "")
               + f") of {sum('median_ms' in e for e in tried)} timed candidate(s)")
    record = _record(lowered, budget_s, tried, kept, points, summary,
                     "measured median of each candidate flag set (its own timing runs); best so far")
    return compiled, record, max(0.0, time.perf_counter() - t0 - kept_compile_s)


def _record(lowered: _IreeLowered, budget_s: float, tried: list[dict[str, Any]], kept: dict[str, Any],
            points: list[dict[str, Any]], summary: str, method: str) -> dict[str, Any]:
    """The ``flags["tuning"]`` record of a search that kept candidate ``kept``; its flags
    become ``lowered.kept_flags`` (later dumps, pass lists and kernel listings compile with
    them) and the row's own ``iree-compile`` flags (``row_flags``)."""
    lowered.kept_flags = tuple(kept["flags"])
    built = [*lowered.target.compile_flags(), *kept["flags"]]  # what built the artifact
    return {"tuner": "flag search (compile each flag set, time it, keep the fastest)", "budget_s": budget_s,
            "candidates": tried, "kept": kept["name"], "kept_flags": kept["flags"], "iree-compile": built,
            "row_flags": {"iree-compile": built}, "trials": sum("median_ms" in e for e in tried), "summary": summary,
            "curve": {"points": points, "tasks_left_out": 0, "method": method}}


def _timing_inputs(model: Any) -> list[np.ndarray]:
    """Inputs of the declared static shapes: floats uniform in [-1, 1), the rest zeros."""
    from compstack.core import ir as cir

    rng = np.random.default_rng(0)
    out = []
    for v in cir.graph_inputs(model):
        shape = tuple(int(d) for d in v.shape if isinstance(d, int))  # static: checked by search
        dtype = np.dtype(v.dtype)
        out.append(rng.uniform(-1, 1, shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype))
    return out


def _time(compiled: _IreeCompiled, inputs: list[np.ndarray]) -> tuple[float, int]:
    """Median seconds of one call (after two warm-up calls) and the runs it took."""
    fn = compiled.prepare_impl(inputs)
    for _ in range(2):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < MAX_RUNS and (len(times) < MIN_RUNS or time.perf_counter() - start < MIN_TIME_S):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), len(times)
