"""The reference target's replay allowlist (see :mod:`compstack.targets.common.replay`)."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, token

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "precision": token(r"[a-z0-9]+"),
    "outputs": token(r"[a-z]+"),
}
