"""Tuning curves: the best latency an auto-tuner had found after each number of trials (issue #26).

A tuner measures candidates one after another; the curve says what a smaller budget would
have given, so a user can tell whether 5 minutes is enough or 30 are needed (the tuning
curves of the Ansor and MetaSchedule papers: latency against measurement trials).

For MetaSchedule the model's latency is estimated as MetaSchedule's task scheduler does
(``Total latency`` in its tuning summary): the sum over tasks of the task's weight (how
often the model calls it) times the best mean run time measured for it. compstack tunes
the tasks one after another, each with an equal share of the budget
(:mod:`compstack.targets.relax.tuning`), so point ``k`` of ``n`` takes the first
``k / n`` of *every* task's trials: what each task had after that fraction of its share,
which is what a budget ``k / n`` as large would have given under the same equal shares.
Tasks with no valid measurement are left out and counted (``tasks_left_out``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["TaskTrials", "curve", "record_latencies_us"]

#: Points of a curve (fractions 1/n, 2/n, ..., 1 of each task's trials).
POINTS = 10
#: MetaSchedule's run time of a candidate that failed to build or run (``1e10`` s, a "max" marker).
_FAILED_S = 1e9


class TaskTrials:
    """One tuning task's measured candidates, in measurement order.

    Attributes:
        task: the task's name (the fused PrimFunc).
        weight: how many times the model calls it (MetaSchedule's task weight).
        us: each candidate's mean run time, microseconds; None for a failed candidate.
    """

    def __init__(self, task: str, weight: float, us: Sequence[float | None]) -> None:
        self.task, self.weight, self.us = task, float(weight), list(us)

    def best(self, n: int) -> float | None:
        """Best valid run time (µs) among the first ``n`` candidates; None when none is valid."""
        valid = [u for u in self.us[:n] if u is not None]
        return min(valid) if valid else None

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "weight": self.weight, "trials": len(self.us),
                "best_us": self.best(len(self.us)), "first_us": next((u for u in self.us if u is not None), None)}


def record_latencies_us(path: Path, start: int = 0) -> list[float | None]:
    """Mean run time (µs) of each MetaSchedule tuning record in ``path`` (its JSON database
    ``database_tuning_record.json``, one record per line, appended as measured) from line
    ``start`` on; None for a record without valid run times.

    A record is ``[workload_index, [trace, run_secs, target, args_info]]`` (TVM's
    ``TuningRecord.as_json``); ``run_secs`` of a failed candidate is ``[1e10]``.
    """
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    except OSError:
        return []
    out: list[float | None] = []
    for line in lines[start:]:
        try:
            secs = [float(s) for s in (json.loads(line)[1][1] or []) if s is not None]
        except (ValueError, TypeError, IndexError, KeyError):
            out.append(None)
            continue
        secs = [s for s in secs if s < _FAILED_S]
        out.append(sum(secs) / len(secs) * 1e6 if secs else None)
    return out


def curve(tasks: Sequence[TaskTrials], points: int = POINTS) -> dict[str, Any]:
    """The tuning curve of ``tasks``: ``{"points": [{"trials", "est_ms"}...], "method",
    "tasks_left_out"}`` (trials: candidates measured over all tasks up to that point;
    est_ms: Σ weight × best µs, in ms). Empty points when no task has a valid measurement.
    See the module docstring for the rule."""
    used = [t for t in tasks if t.best(len(t.us)) is not None]
    pts: list[dict[str, Any]] = []
    for k in range(1, points + 1):
        counts = [max(1, math.ceil(len(t.us) * k / points)) for t in used]
        bests = [t.best(c) for t, c in zip(used, counts)]
        if used and all(b is not None for b in bests):
            total = sum(t.weight * b for t, b in zip(used, bests) if b is not None)
            pt = {"trials": sum(counts), "est_ms": float(f"{total / 1e3:.6g}")}  # 6 significant digits
            if not pts or pt["trials"] > pts[-1]["trials"]:
                pts.append(pt)
    return {"points": pts, "tasks_left_out": len(tasks) - len(used),
            "method": ("MetaSchedule's estimate: sum over tuned tasks of weight x best measured mean; point k of n "
                       "takes the first k/n of every task's trials (its equal share of the budget)")}
