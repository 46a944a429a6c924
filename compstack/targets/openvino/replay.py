"""OpenVINO's replay allowlist (see :mod:`compstack.targets.common.replay`): no extension
library and no config file, only precision, threads and the performance hint."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, choice, number, token

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "precision": token(r"[a-z0-9]+"),
    "num_threads": number(),
    "performance_hint": choice("latency", "throughput", "cumulative_throughput"),
}
