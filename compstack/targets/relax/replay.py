"""TVM's replay allowlist (see :mod:`compstack.targets.common.replay`): no option names a
compiler (``cc``), a library or a file; ``mcpu`` and ``arch`` are plain LLVM/CUDA names."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, names, number, token

__all__ = ["ALLOWED"]

ALLOWED: dict[str, Rule] = {
    "opt_level": number(),
    "num_cores": number(),
    "mcpu": token(r"[A-Za-z0-9_.-]*"),
    "arch": token(r"[A-Za-z0-9_.-]+"),
    "pass_stages": number(),
    "disabled_passes": names(),
    "tune_trials": number(),
    "tune": token(r"[0-9.]+[smh]?"),
}
