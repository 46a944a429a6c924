"""Import ``timm`` beside torch 2.13+cpu, where no torchvision can be imported.

timm's model code needs nothing from torchvision, but ``import timm`` imports it: its data
and augmentation modules (``torchvision.transforms``) and ``timm.layers.create_norm``
(``torchvision.ops.misc.FrozenBatchNorm2d``, used only to freeze a trained model). The PyPI
torchvision that pins torch 2.13 is a CUDA build that fails to import beside the CPU torch
("operator torchvision::nms does not exist"), and pip's ``timm`` would replace torch with a
multi-GB CUDA build to get a newer torchvision; so compstack installs ``timm`` with
``--no-deps`` and, only while ``import timm`` runs, answers ``torchvision`` imports with
placeholder modules. A placeholder's names are classes that raise when called, so any use
of torchvision (timm's data pipeline: never on compstack's path) fails loudly rather than
computing something else. A real, importable torchvision is always preferred.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

__all__ = ["TIMM_PIN", "import_timm"]

#: The timm release the zoo's entries (and their parameter counts) were checked with.
TIMM_PIN = "timm==1.0.31"

_WHY = "torchvision is not importable here; compstack imports timm for its model code only"


class _AbsentMeta(type):
    """Metaclass of placeholder classes: any attribute is another placeholder
    (``InterpolationMode.BILINEAR`` at timm's import time)."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _absent(f"{cls.__qualname__}.{name}")


def _absent(name: str) -> type:
    def call(self: Any, *args: Any, **kwargs: Any) -> None:
        raise ImportError(f"{name}: {_WHY}")

    return _AbsentMeta(name, (), {"__init__": call, "__module__": "torchvision"})


class _Placeholder(types.ModuleType):
    """A ``torchvision`` (sub)module whose every name is a placeholder class."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _absent(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        mod = _Placeholder(spec.name)
        mod.__path__ = []  # a package: submodules come through this finder too
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _torchvision_imports() -> bool:
    try:
        importlib.import_module("torchvision")
        return True
    except Exception:  # noqa: BLE001 - a broken install raises RuntimeError, not only ImportError
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        return False


def import_timm() -> Any:
    """``import timm``, with placeholder torchvision modules while it imports when no
    torchvision can be imported (see the module docstring). The finder is removed
    afterwards: later ``torchvision`` imports elsewhere fail as they would have.

    Raises:
        ImportError: timm is not installed.
    """
    if "timm" in sys.modules:
        return sys.modules["timm"]
    if importlib.util.find_spec("timm") is None:
        raise ImportError(f"No module named 'timm' (pip install --no-deps '{TIMM_PIN}')")
    if _torchvision_imports():
        return importlib.import_module("timm")
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module("timm")
    finally:  # timm keeps what it bound; nothing else finds a torchvision
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
