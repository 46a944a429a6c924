"""XLA's replay allowlist (see :mod:`compstack.targets.common.replay`); a bundle never sets
``XLA_FLAGS`` (an environment variable)."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, choice, names, number

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "path": choice("auto", "native", "translated"),
    "x64": number(),
    "disable_hlo_passes": names(),
}
