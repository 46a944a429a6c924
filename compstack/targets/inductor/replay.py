"""TorchInductor's replay allowlist (see :mod:`compstack.targets.common.replay`)."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, choice, names, number

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "path": choice("auto", "native", "translated"),
    "freezing": number(),
    "mode": choice("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
    "backend": choice("inductor", "aot_eager", "eager"),
    "disable_config": names(),
}
