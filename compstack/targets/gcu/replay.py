"""The Enflame GCU adapter's replay allowlist (see :mod:`compstack.targets.common.replay`)."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, number, token

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "precision": token(r"[a-z0-9_]+"),
    "card_id": number(),
    "cluster_id": number(),
    "timeout_s": number(),
}
