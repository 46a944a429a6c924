"""The framework targets' replay allowlist (see :mod:`compstack.targets.common.replay`):
they take no options, so a bundle sets none."""

from __future__ import annotations

from compstack.targets.common.replay import Rule

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {}
