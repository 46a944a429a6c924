"""The Ascend CANN adapter's replay allowlist (see :mod:`compstack.targets.common.replay`):
``extra_flags`` takes ATC's precision and implementation-mode flags only, never one that
names a file (``--insert_op_conf``, ``--fusion_switch_file``, ``--customize_dtypes``)."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, flags, number, token

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "soc": token(r"[A-Za-z0-9_.-]+"),
    "precision_mode": token(r"[a-z0-9_]+"),
    "opset": number(),
    "extra_flags": flags("--precision_mode", "--op_select_implmode", "--optypelist_for_implmode",
                         "--enable_small_channel", "--buffer_optimize", "--op_debug_level"),
    "timeout_s": number(),
}
