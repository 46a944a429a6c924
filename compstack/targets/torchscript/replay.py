"""TorchScript's replay allowlist (see :mod:`compstack.targets.common.replay`)."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, choice, number, token

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "path": choice("auto", "native", "translated"),
    "capture": token(r"[a-z_]+"),
    "optimize": number(),
    "threads": number(),
}
