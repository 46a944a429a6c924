"""IREE's replay allowlist: the options a bundle may set on replay (see
:mod:`compstack.targets.common.replay`). ``extra_flags`` takes optimisation and codegen
flags only: no flag that names a linker, a plugin, a library or a file
(``--iree-llvmcpu-embedded-linker-path``, ``--iree-hal-executable-plugin``, ...)."""

from __future__ import annotations

from compstack.targets.common.replay import Rule, choice, flags, number, token

__all__ = ["ALLOWED"]

#: ``iree-compile`` flag prefixes a bundle's ``extra_flags`` may use.
FLAG_PREFIXES = ("--iree-opt-", "--iree-global-opt-", "--iree-dispatch-creation-", "--iree-flow-", "--iree-stream-",
                 "--iree-llvmcpu-", "--iree-codegen-", "--iree-input-", "--iree-util-", "--iree-vm-",
                 "--iree-hal-target-device", "--iree-cuda-target", "--iree-vulkan-target", "--iree-hip-target",
                 "--iree-llvmgpu-")

ALLOWED: dict[str, Rule] = {
    "target_cpu": token(r"[A-Za-z0-9_.+-]+"),
    "gpu_target": token(r"[A-Za-z0-9_.+-]+"),
    "extra_flags": flags(*FLAG_PREFIXES),
    "driver": choice("local-task", "local-sync", "vulkan", "cuda", "hip"),
    "compile_timeout_s": number(),
    "keep_locations": number(),
}
