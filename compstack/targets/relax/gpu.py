"""The TVM GPU targets (``tvm-cuda``, ``tvm-vulkan``): ``tvm-llvm``'s Relax pipeline with a
GPU target; each compiles without the GPU and runs where TVM finds the device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from compstack.targets.base import Availability
from compstack.targets.relax.target import TvmLlvmTarget, TvmOptions


@dataclass(frozen=True)
class TvmCudaOptions(TvmOptions):
    """Options of ``tvm-cuda``; ``arch`` is the ``sm_XX`` the kernels are generated for."""

    arch: str = "sm_80"

    def validate(self) -> str:
        if not self.arch.startswith("sm_") or not self.arch[3:].rstrip("a").isdigit():
            return f"arch={self.arch}: expected sm_XX (e.g. sm_80, sm_90)"
        return super().validate()

class TvmCudaTarget(TvmLlvmTarget):
    """TVM Relax for NVIDIA GPUs: the default CUDA pipeline (DLight GPU schedules),
    CUDA C kernels in the library; runs where TVM's CUDA runtime finds a device."""

    name = "tvm-cuda"
    custom_op_support = {"": "no: the packed functions take CPU tensors; only tvm-llvm"}
    device = "cuda"
    description = "Apache TVM Relax, CUDA codegen (DLight default schedules), host LLVM"
    Options = TvmCudaOptions
    tvm_device = "cuda"
    relax_backend = "cuda"
    stage_suffix: ClassVar[dict[str, str]] = {**TvmLlvmTarget.stage_suffix, "cuda": ".cu"}
    stage_names = ("relax", "relax-fused", "relax-final", "tir", "tir-lowered", "llvm", "asm", "cuda")
    compiled_stages = ("relax-final", "tir", "tir-lowered", "llvm", "asm", "cuda")
    options: TvmCudaOptions  # type: ignore[assignment]

    @classmethod
    def availability(cls) -> Availability:
        """Compiles wherever TVM imports (CUDA C is generated without nvcc); runs only
        where the TVM runtime has CUDA enabled and a device exists."""
        base = super().availability()
        if not base.ok:
            return base
        import tvm

        if not tvm.runtime.enabled("cuda"):
            return Availability(True, versions=base.versions, runs=False,
                                run_reason="this TVM build's runtime has no CUDA device API (or no CUDA driver)")
        if not tvm.cuda(0).exist:
            return Availability(True, versions=base.versions, runs=False, run_reason="no CUDA device")
        return Availability(True, versions=base.versions)

    def target_dict(self) -> dict[str, Any]:
        return {"kind": "cuda", "arch": self.options.arch, "host": super().target_dict()}

    def flags(self) -> dict[str, Any]:
        out = super().flags()
        out.update(pipeline="relax.get_default_pipeline (relax.backend.cuda: DLight default GPU schedules)",
                   tuned=False)
        return out

class TvmVulkanTarget(TvmLlvmTarget):
    """TVM Relax for Vulkan (SPIR-V); only where the TVM build has Vulkan codegen."""

    name = "tvm-vulkan"
    custom_op_support = {"": "no: the packed functions take CPU tensors; only tvm-llvm"}
    device = "vulkan"
    description = "Apache TVM Relax, Vulkan/SPIR-V codegen"

    @classmethod
    def availability(cls) -> Availability:
        base = super().availability()
        if not base.ok:
            return base
        import tvm

        if tvm.get_global_func("target.build.vulkan", allow_missing=True) is None:
            return Availability(False, "this TVM wheel is built without Vulkan (USE_VULKAN=OFF): no "
                                "target.build.vulkan; build TVM from source with USE_VULKAN=ON", base.versions)
        return Availability(True, versions=base.versions, runs=bool(tvm.vulkan(0).exist),
                            run_reason="" if tvm.vulkan(0).exist else "no Vulkan device")

    def target_dict(self) -> dict[str, Any]:
        return {"kind": "vulkan", "host": super().target_dict()}
