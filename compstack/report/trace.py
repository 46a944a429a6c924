"""``compstack profile --trace FILE``: Chrome trace-event JSON (the JSON trace format that
ui.perfetto.dev and the older chrome://tracing viewer open).

The stacks' profilers give per-kernel statistics over many runs, not one timeline, so
the trace draws one representative run per target: its kernels back to back in
execution order, each lasting its median time (``ts``/``dur`` in microseconds, whole
nanoseconds, so back-to-back slices never overlap after rounding). Layout:

- one process per target (``pid`` 1, 2, ... in the order profiled), named by a
  ``process_name`` metadata event, ordered by ``process_sort_index``;
- thread 1 of it, ``kernels (median run, back to back)``: one complete (``"ph": "X"``)
  slice per kernel, named by the kernel, ``args`` holding the source nodes it computes,
  its kind, launches per run and median/p10/p90 in ms;
- thread 2, ``end-to-end (profiler off)``: one slice of the median end-to-end latency,
  so the gap between the kernel sum and the whole run is visible.

A target that produced no profile still gets its named process (saying why), with no slice.

The file is strict JSON (RFC 8259): a non-finite number in ``args`` is written as
``null``, since ``NaN``/``Infinity`` literals make Perfetto's JSON importer reject the
whole file. ``tests/trace_event_format.schema.json`` (a JSON Schema of the format) checks
the written file in the tests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compstack.core.errors import UserError

__all__ = ["E2E_TID", "KERNEL_TID", "trace_events", "write_trace"]

KERNEL_TID = 1
E2E_TID = 2


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, +-inf) replaced by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _ns(ms: Any) -> int:
    """Milliseconds as whole nanoseconds (0 for a missing, negative or non-finite time)."""
    return round(ms * 1e6) if isinstance(ms, (int, float)) and math.isfinite(ms) and ms > 0 else 0


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _target_events(pid: int, row: Any) -> list[dict[str, Any]]:
    prof, km = row.profile, row.kernels
    label = row.target if prof is not None else f"{row.target} (no profile: {row.status}" + \
        (f" in {row.stage}" if row.stage else "") + ")"
    events = [_meta("process_name", pid, 0, {"name": label}), _meta("process_sort_index", pid, 0, {"sort_index": pid})]
    if prof is None:
        return events
    events.append(_meta("thread_name", pid, KERNEL_TID, {"name": "kernels (median run, back to back)"}))
    ts_ns = 0  # whole nanoseconds, so one slice ends exactly where the next starts (no rounding overlap)
    for kt in prof.kernels:
        k = next((k for k in km.kernels if k.id == kt.id), None) if km is not None else None
        dur_ns = _ns(kt.median)
        args = {"nodes": list(k.nodes) if k else [], "kind": k.kind if k else "", "calls": kt.calls,
                "median_ms": kt.median, "p10_ms": kt.p10, "p90_ms": kt.p90}
        events.append({"name": kt.id, "cat": "kernel", "ph": "X", "ts": ts_ns / 1000, "dur": dur_ns / 1000,
                       "pid": pid, "tid": KERNEL_TID, "args": _finite(args)})
        ts_ns += dur_ns
    e2e = (prof.end_to_end or {}).get("median")
    if _ns(e2e):
        events.append(_meta("thread_name", pid, E2E_TID, {"name": "end-to-end (profiler off)"}))
        events.append({"name": "end-to-end run", "cat": "run", "ph": "X", "ts": 0.0, "dur": _ns(e2e) / 1000,
                       "pid": pid, "tid": E2E_TID,
                       "args": _finite({"median_ms": e2e, "p10_ms": prof.end_to_end.get("p10"),
                                        "p90_ms": prof.end_to_end.get("p90"), "runs": prof.end_to_end.get("runs")})})
    return events


def trace_events(model_name: str, rows: Sequence[Any]) -> dict[str, Any]:
    """The trace document for ``compstack profile``'s rows (:class:`compstack.fusion.run.TargetKernels`):
    ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``, ``ts``/``dur``
    in microseconds (the format's unit), one process per row in the order given."""
    events: list[dict[str, Any]] = []
    for pid, row in enumerate(rows, start=1):
        events.extend(_target_events(pid, row))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"model": model_name, "generator": "compstack profile --trace",
                          "note": "one representative run per target: kernels back to back in execution order, "
                                  "each at its median time over the profiled runs"}}


def write_trace(path: Path, model_name: str, rows: Sequence[Any]) -> None:
    """Write :func:`trace_events` to ``path``.

    Raises:
        UserError: the file cannot be written.
    """
    try:
        path.write_text(json.dumps(trace_events(model_name, rows), indent=None, allow_nan=False), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--trace {path}: cannot write ({exc.strerror or exc})") from None
