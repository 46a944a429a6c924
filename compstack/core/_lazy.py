"""Deferred imports of heavy modules that compstack's dependencies import but rarely use.

``onnx_ir`` (1.x) imports ``sympy`` at the top of ``onnx_ir._core`` for symbolic shape
expressions, which compstack never builds on most paths; importing sympy costs about
0.55 s of every process (``python -X importtime``, sympy 1.14, this 2-core machine), and
compstack starts a process per command and per worker. ``onnx_ir._symbolic_shapes``
(its parser of symbolic dims, which reads ``sympy.Max`` and others at import) is deferred
too, else it would load sympy at once.

:func:`defer` puts a stand-in module in ``sys.modules``: ``import NAME`` binds it, and the
first attribute it lacks imports the real module (which replaces it in ``sys.modules``)
and copies the real module's names into the stand-in, so both see the same objects from
then on. It is not :class:`importlib.util.LazyLoader`: on Python 3.11 any attribute of a
LazyLoader module, ``__spec__`` included, loads it, and ``import NAME`` of a module
already in ``sys.modules`` reads ``__spec__`` (``import_ensure_initialized``), so the
second ``import sympy`` (onnx_ir's) would load it at once. The stand-in of a package has
no ``__path__`` of its own: a submodule import reads it, and so loads the real package
first, as a plain import would have.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["defer"]

_LOCK = threading.RLock()


class _Deferred(types.ModuleType):
    """A module's stand-in until its first attribute access (see the module docstring)."""

    def __getattr__(self, attr: str) -> Any:  # only for names the stand-in lacks
        if attr.startswith("__") and attr.endswith("__") and attr not in ("__all__", "__version__", "__path__"):
            raise AttributeError(attr)  # introspection (copy, pickle, inspect) loads nothing
        name = self.__dict__["__name__"]
        with _LOCK:
            if sys.modules.get(name) is self:
                del sys.modules[name]
                try:
                    real = importlib.import_module(name)
                except BaseException:
                    sys.modules.setdefault(name, self)
                    raise
                self.__dict__.update({k: v for k, v in real.__dict__.items() if k != "__class__"})
        return object.__getattribute__(self, attr) if attr in self.__dict__ else getattr(sys.modules[name], attr)


def defer(name: str) -> bool:
    """Make ``import name`` cheap until the module's first attribute access.

    Nothing happens when the module is already imported or cannot be found. Returns
    whether the module is now deferred.
    """
    if name in sys.modules:
        return False
    parent, _, _ = name.rpartition(".")
    try:
        if parent:  # a submodule, found without importing (running) its package
            pkg = importlib.util.find_spec(parent)
            where = pkg.submodule_search_locations if pkg is not None else None
            spec = importlib.machinery.PathFinder.find_spec(name, list(where)) if where else None
        else:
            spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None:
        return False
    stand_in = _Deferred(name)
    stand_in.__spec__ = spec
    stand_in.__loader__ = spec.loader
    stand_in.__file__ = spec.origin
    # no __path__: importing a submodule (``import sympy.core``) reads the package's
    # __path__ first, which loads the real package before any of its submodules runs
    sys.modules[name] = stand_in
    return True
