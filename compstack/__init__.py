"""compstack: one model, every ML compiler stack, compared on the same graph.

The public surface is :data:`__all__`: the functions and types of :mod:`compstack.api`
(``load_model``, ``compare``, ``lower``, ``dump``, ``kernels``, ``profile``,
``run_conformance``, ``explain_model``, ``Target``, ``Report``, ...) and ``targets``, the
target registry (``compstack.targets.names()``, ``.entries()``, ``.get(name)``,
``.resolve(spec)``). They are loaded on first use (PEP 562 module ``__getattr__``), so
``import compstack`` loads no compiler stack and not even ONNX; stacks load when a target runs.

Example::

    import compstack
    report = compstack.compare("zoo:mlp", "ort-cpu,tvm-llvm")
    print([(r.target, r.status) for r in report.results])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from compstack.core import _lazy
from compstack.core.version import __version__

# onnx_ir imports sympy at the top and rarely needs it: 0.55 s of every process (core/_lazy.py)
_lazy.defer("sympy")
_lazy.defer("onnx_ir._symbolic_shapes")

if TYPE_CHECKING:  # for type checkers and IDEs; at run time these load lazily
    from compstack import targets
    from compstack.api import (
        CompareOptions,
        DumpResult,
        KernelsOptions,
        LatencyConfig,
        Limits,
        LowerOptions,
        Report,
        Result,
        SourceModel,
        Target,
        TargetKernels,
        compare,
        default_memory_mb,
        dump,
        explain_feeds,
        explain_model,
        kernels,
        load_model,
        lower,
        profile,
        resolve_target,
        resolve_targets,
        run_conformance,
        target_rows,
        validate_target_options,
    )

__all__ = [
    "__version__", "targets",
    "CompareOptions", "DumpResult", "KernelsOptions", "LatencyConfig", "Limits", "LowerOptions", "LowerRequest",
    "Report", "Result", "SourceModel", "Target", "TargetKernels",
    "compare", "default_memory_mb", "dump", "explain_feeds", "explain_model", "kernels", "load_model", "lower",
    "profile", "resolve_target", "resolve_targets", "run_conformance", "target_rows", "validate_target_options",
]

#: The names :mod:`compstack.api` defines (everything in ``__all__`` but the version and the registry).
_API = frozenset(__all__) - {"__version__", "targets"}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    if name in _API:
        value = getattr(importlib.import_module("compstack.api"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name == "targets":
        return importlib.import_module("compstack.targets")
    raise AttributeError(f"module 'compstack' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | {"api", "cli"})
