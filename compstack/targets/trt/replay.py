"""TensorRT's replay allowlist (see :mod:`compstack.targets.common.replay`): no plugin
library, no timing cache file."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, number, token

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "precision": token(r"[a-z0-9]+"),
    "workspace_mib": number(),
    "opt_level": number(),
}
