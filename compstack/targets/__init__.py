"""The target registry: a lazy table of names, loaded on first use.

Each entry maps a target name to ``"module:Class"``; nothing is imported until a
target is used (pattern of ``torch/_dynamo/backends/registry.py``). A target whose
stack is missing still lists, with the reason from its ``availability()``.

Third-party targets register through the ``compstack.targets`` entry-point group.
Adding a stack is one module in this folder plus one line in ``_TABLE``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points

from compstack.core.errors import UserError
from compstack.targets.base import Target

__all__ = ["TargetEntry", "names", "entries", "get", "resolve", "register", "ALIASES"]


@dataclass(frozen=True)
class TargetEntry:
    """One row of the registry.

    Attributes:
        name: target name (``STACK-DEVICE``).
        ref: ``"module:Class"`` of its :class:`~compstack.targets.base.Target` subclass.
        device: device kind (``cpu``, ``cuda``, ``vulkan``).
        default: part of ``compare``'s default set when available.
    """

    name: str
    ref: str
    device: str
    default: bool = True


_TABLE: tuple[TargetEntry, ...] = (
    TargetEntry("reference", "compstack.targets.reference.target:ReferenceTarget", "cpu", default=False),
    TargetEntry("ort-cpu", "compstack.targets.ort.target:OrtCpuTarget", "cpu"),
    TargetEntry("ort-cuda", "compstack.targets.ort.target:OrtCudaTarget", "cuda"),
    TargetEntry("tvm-llvm", "compstack.targets.relax.target:TvmLlvmTarget", "cpu"),
    TargetEntry("iree-llvm-cpu", "compstack.targets.iree.target:IreeLlvmCpuTarget", "cpu"),
    TargetEntry("iree-vulkan", "compstack.targets.iree.target:IreeVulkanTarget", "vulkan"),
    TargetEntry("iree-cuda", "compstack.targets.iree.target:IreeCudaTarget", "cuda"),
    TargetEntry("iree-rocm", "compstack.targets.iree.target:IreeRocmTarget", "rocm"),
    TargetEntry("tvm-cuda", "compstack.targets.relax.target:TvmCudaTarget", "cuda"),
    TargetEntry("tvm-vulkan", "compstack.targets.relax.target:TvmVulkanTarget", "vulkan"),
    TargetEntry("tensorrt", "compstack.targets.trt.target:TensorRTTarget", "cuda"),
    TargetEntry("cann", "compstack.targets.cann.target:CannTarget", "ascend", default=False),
    TargetEntry("gcu", "compstack.targets.gcu.target:GcuTarget", "gcu", default=False),
    TargetEntry("xla-cpu", "compstack.targets.xla.target:XlaCpuTarget", "cpu"),
    TargetEntry("xla-cuda", "compstack.targets.xla.target:XlaCudaTarget", "cuda"),
    TargetEntry("inductor-cpu", "compstack.targets.inductor.target:InductorCpuTarget", "cpu"),
    TargetEntry("openvino-cpu", "compstack.targets.openvino.target:OpenVinoCpuTarget", "cpu"),
    TargetEntry("inductor-cuda", "compstack.targets.inductor.target:InductorCudaTarget", "cuda"),
    TargetEntry("torchscript-cpu", "compstack.targets.torchscript.target:TorchScriptCpuTarget", "cpu"),
    TargetEntry("tf", "compstack.targets.framework.target:TfTarget", "cpu", default=False),
    TargetEntry("paddle", "compstack.targets.framework.target:PaddleTarget", "cpu", default=False),
    TargetEntry("mindspore", "compstack.targets.framework.target:MindSporeTarget", "cpu", default=False),
)

#: Short names for a device: an alias expands to every registered target of it.
ALIASES: dict[str, str] = {"cpu": "device:cpu", "cuda": "device:cuda", "vulkan": "iree-vulkan",
                           "rocm": "iree-rocm"}


_EXTRA: list[TargetEntry] = []


def register(name: str, ref: str, device: str = "cpu", default: bool = False) -> None:
    """Register a target at run time (``ref`` = ``"module:Class"``, importable by workers).

    Raises:
        UserError: the name is taken.
    """
    if name in names():
        raise UserError(f"target '{name}' is already registered")
    _EXTRA.append(TargetEntry(name, ref, device, default))


def entries() -> list[TargetEntry]:
    """Built-in entries, run-time registrations, and the ``compstack.targets`` entry-point group."""
    rows = list(_TABLE) + _EXTRA
    known = {e.name for e in rows}
    for ep in entry_points(group="compstack.targets"):
        if ep.name not in known:
            rows.append(TargetEntry(ep.name, ep.value, "cpu"))
    return rows


def names() -> list[str]:
    """All registered target names, in table order."""
    return [e.name for e in entries()]


def get(name: str) -> type[Target]:
    """The :class:`Target` class registered as ``name``, imported now.

    Raises:
        UserError: unknown name (pointing to ``compstack targets``).
    """
    for e in entries():
        if e.name == name:
            module, _, cls = e.ref.partition(":")
            return getattr(importlib.import_module(module), cls)
    raise UserError(f"unknown target '{name}'; run `compstack targets` to list them")


def resolve(spec: str) -> list[str]:
    """Expand a comma-separated target list with aliases (``cpu``, ``all``).

    ``all`` and ``cpu`` expand to every default target of that device (availability
    is checked later, so unavailable ones show as ``unavailable`` rows).

    Raises:
        UserError: an unknown name, naming it and pointing to ``compstack targets``.
    """
    out: list[str] = []
    known = {e.name: e for e in entries()}
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        if name == "all":
            expanded = [e.name for e in known.values() if e.default]
        elif name in ALIASES and ALIASES[name].startswith("device:"):
            dev = ALIASES[name].split(":", 1)[1]
            expanded = [e.name for e in known.values() if e.default and e.device == dev]
        elif name in ALIASES:
            expanded = [ALIASES[name]]
        elif name in known:
            expanded = [name]
        else:
            raise UserError(f"unknown target '{name}'; run `compstack targets` to list them")
        out.extend(n for n in expanded if n not in out)
    if not out:
        raise UserError("--targets: no target given; run `compstack targets` to list them")
    return out
