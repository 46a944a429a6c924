"""The IREE GPU targets (``iree-vulkan``, ``iree-cuda``, ``iree-rocm``): ``iree-llvm-cpu``
with a GPU HAL device; each compiles without the GPU and runs where its runtime
driver finds one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from compstack.targets.base import Availability, TargetOptions
from compstack.targets.iree.target import IreeLlvmCpuTarget

__all__ = ["IreeGpuOptions", "IreeVulkanTarget", "IreeCudaTarget", "IreeRocmTarget"]


@dataclass(frozen=True)
class IreeGpuOptions(TargetOptions):
    """Options of IREE's GPU targets (``iree-vulkan``, ``iree-cuda``, ``iree-rocm``).

    Attributes:
        gpu_target: the GPU to compile for: ``--iree-cuda-target`` (``sm_80``,
            ``sm_90``), ``--iree-rocm-target`` (``gfx942``) or ``--iree-vulkan-target``
            (empty: IREE's generic Vulkan target); see ``iree-compile --help``.
        extra_flags: more ``iree-compile`` flags, appended last.
        compile_timeout_s: limit for each ``iree-compile``/import run, in seconds.
        keep_locations: import with ONNX node names as MLIR locations.
    """

    gpu_target: str = ""
    extra_flags: tuple[str, ...] = ()
    compile_timeout_s: float = 600.0
    keep_locations: bool = True

    def validate(self) -> str:
        if self.compile_timeout_s <= 0:
            return f"compile_timeout_s={self.compile_timeout_s}: expected > 0"
        return ""


class _IreeGpuTarget(IreeLlvmCpuTarget):
    """An IREE GPU backend: compiles without the GPU; runs where its driver finds one."""

    tuned_as = ({"extra_flags": "--iree-opt-level=O3"}, "iree-compile --iree-opt-level=O3 (iree.dev)")

    Options = IreeGpuOptions
    hal_device: ClassVar[str] = ""
    target_flag: ClassVar[str] = ""
    default_gpu: ClassVar[str] = ""
    driver: ClassVar[str] = ""
    custom_op_support = {"": "no: the kernels are linked into llvm-cpu dispatches only"}
    options: IreeGpuOptions  # type: ignore[assignment]

    @classmethod
    def availability(cls) -> Availability:
        """Compiler as for ``iree-llvm-cpu``; ``runs`` when the runtime driver has a device."""
        base = super().availability()
        if not base.ok and "local-task" not in base.reason:
            return base
        runs, why = _device_present(cls.driver)
        return Availability(True, versions=base.versions, runs=runs, run_reason=why)

    def runtime_driver(self) -> str:
        return self.driver

    def tuning_flags(self) -> dict[str, Any]:
        """IREE's GPU backends have no ``tune`` option: ``--tuned`` adds ``--iree-opt-level=O3``."""
        return {"tuner": "none", "note": "no flag search on GPU backends; --tuned adds --iree-opt-level=O3"}

    def compile_flags(self) -> list[str]:
        gpu = self.options.gpu_target or self.default_gpu
        return [f"--iree-hal-target-device={self.hal_device}",
                *([f"{self.target_flag}={gpu}"] if gpu else []), *self.options.extra_flags]

class IreeVulkanTarget(_IreeGpuTarget):
    """IREE, ``vulkan-spirv`` backend: the artifact holds SPIR-V; runs on a Vulkan device."""

    name = "iree-vulkan"
    device = "vulkan"
    description = "IREE, vulkan-spirv backend (SPIR-V), vulkan runtime driver"
    hal_device, target_flag, driver = "vulkan", "--iree-vulkan-target", "vulkan"

    def tool_hint(self, stderr: str) -> str:
        """IREE's generic Vulkan target (no ``gpu_target``) has no 64-bit integers: SPIR-V
        code generation then fails on ``i64`` vectors (zoo:bert: ``vector.insert_strided_slice``
        on ``vector<2xi64>``); a concrete GPU target enables ``Int64`` (``ampere`` compiles
        zoo:bert, measured with IREE 3.13)."""
        if not self.options.gpu_target and re.search(r"\bi64\b|xi64>", stderr):
            return (f"IREE's generic Vulkan target has no int64; compile for your GPU, e.g. "
                    f"--option {self.name}:gpu_target=ampere (NVIDIA; rdna3 for AMD, valhall4 for Arm Mali, adreno: "
                    "see iree-compile --help, --iree-vulkan-target)")
        return ""

class IreeCudaTarget(_IreeGpuTarget):
    """IREE, ``cuda`` backend: the artifact holds PTX; runs on an NVIDIA GPU."""

    name = "iree-cuda"
    device = "cuda"
    description = "IREE, cuda backend (PTX), cuda runtime driver"
    hal_device, target_flag, default_gpu, driver = "cuda", "--iree-cuda-target", "sm_80", "cuda"

class IreeRocmTarget(_IreeGpuTarget):
    """IREE, ``rocm`` backend (HIP runtime): the artifact holds AMDGPU code objects."""

    name = "iree-rocm"
    device = "rocm"
    description = "IREE, rocm backend (AMDGPU), hip runtime driver"
    hal_device, target_flag, default_gpu, driver = "hip", "--iree-rocm-target", "gfx942", "hip"

def _device_present(driver: str) -> tuple[bool, str]:
    """Whether ``iree.runtime`` can create ``driver`` and it lists a device, and why not."""
    try:
        import iree.runtime as rt

        if driver not in rt.query_available_drivers():
            return False, f"this iree.runtime has no {driver} driver"
        devices = rt.get_driver(driver).query_available_devices()
    except Exception as exc:  # noqa: BLE001 - the runtime's reason is the answer
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return False, f"no {driver} device here ({first[-160:]})"
    if not devices:
        return False, f"the {driver} driver lists no device"
    return True, ""
