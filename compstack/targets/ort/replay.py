"""ONNX Runtime's replay allowlist (see :mod:`compstack.targets.common.replay`): no custom-op
library (``session.load_custom_op_library``, ``register_custom_ops_library``), no session
config entry, only the optimisation level, threads and optimizer names."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, choice, names, number

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "opt_level": choice("disable", "basic", "extended", "layout", "all"),
    "intra_op_threads": number(),
    "disabled_optimizers": names(),
}
