"""The custom-op registry: a table of :class:`CustomOp` by ``domain::name``.

compstack's own ops (:mod:`compstack.ops.library`) are loaded on first use of the
registry, like the target table; a user's ops are registered when the module that
declares them is imported. Each op records where it was declared (``origin``), so a
worker process can import the same modules before it runs a model that uses them.
Registering an op also registers its ONNX schema; listeners (the translated paths'
converter tables) hear of every op, including ones registered later.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import onnx_ir as ir

from compstack.core import ir as cir
from compstack.ops._spec import CustomOp, OpDefinitionError

__all__ = [
    "BUILTIN_MODULES",
    "add_listener",
    "all_ops",
    "domains",
    "get",
    "load_origins",
    "lookup",
    "ops_in",
    "origins_for",
    "register",
]

#: Modules declaring compstack's own ops, imported on first use of the registry.
BUILTIN_MODULES = ("compstack.ops.library",)

_OPS: dict[str, CustomOp] = {}
_LISTENERS: list[Callable[[CustomOp], None]] = []
_LOCK = threading.RLock()
_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    with _LOCK:
        if _loaded:
            return
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def register(op: CustomOp) -> CustomOp:
    """Add ``op`` to the registry and register its ONNX schema.

    Registering the same name again is accepted when the signature (inputs, outputs,
    attributes, kernels, version) is the same (a module imported twice); the new
    reference and shape rule replace the old ones.

    Raises:
        OpDefinitionError: the name is taken by an op with another signature.
    """
    from compstack.ops._onnx import register_schema

    _load_builtins()  # a user op may not take the name of one of compstack's own
    with _LOCK:
        old = _OPS.get(op.qualname)
        if old is not None and old.signature_key() != op.signature_key():
            raise OpDefinitionError(f"custom op {op.qualname!r} is already registered with another signature "
                                    f"(from {old.origin or 'unknown'}); pick another name or domain")
        register_schema(op)
        _OPS[op.qualname] = op
        listeners = list(_LISTENERS)
    for listener in listeners:
        listener(op)
    _define_in_torch(op)
    return op


def _define_in_torch(op: CustomOp) -> None:
    """When torch is already imported, define ``op`` in ``torch.library`` at once, so a
    model's ``forward`` can call :func:`compstack.ops.torch_op` under TorchDynamo
    (which cannot trace the definition itself)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "library"):
        from compstack.ops import _torch

        _torch.ensure(op)


def get(qualname: str) -> CustomOp:
    """The op registered as ``domain::name``.

    Raises:
        KeyError: no such op; the message lists the registered ones.
    """
    _load_builtins()
    op = _OPS.get(qualname)
    if op is None:
        raise KeyError(f"no custom op {qualname!r}; registered: {', '.join(sorted(_OPS)) or 'none'} "
                       "(run `compstack ops list`)")
    return op


def lookup(domain: str, name: str) -> CustomOp | None:
    """The op ``domain::name``, or None."""
    _load_builtins()
    return _OPS.get(f"{domain}::{name}")


def all_ops() -> list[CustomOp]:
    """Every registered op, sorted by name."""
    _load_builtins()
    return [_OPS[k] for k in sorted(_OPS)]


def domains() -> set[str]:
    """The domains of the registered ops."""
    _load_builtins()
    return {op.domain for op in _OPS.values()}


def add_listener(fn: Callable[[CustomOp], None]) -> None:
    """Call ``fn(op)`` for every op registered so far and every later one."""
    _load_builtins()
    with _LOCK:
        _LISTENERS.append(fn)
        current = list(_OPS.values())
    for op in current:
        fn(op)


def _nodes(graph: ir.Graph) -> Iterable[ir.Node]:
    return ir.traversal.RecursiveGraphIterator(graph)


def ops_in(model: ir.Model) -> list[CustomOp]:
    """The registered custom ops ``model`` uses (main graph, subgraphs, local functions)."""
    _load_builtins()
    found: dict[str, CustomOp] = {}
    graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
    for g in graphs:
        for node in _nodes(g):  # type: ignore[arg-type]
            op = _OPS.get(f"{node.domain}::{node.op_type}")
            if op is not None:
                found[op.qualname] = op
    return [found[k] for k in sorted(found)]


def origins_for(model: ir.Model) -> list[str]:
    """Where the custom ops of ``model`` were declared, for a worker to import
    (:func:`load_origins`); compstack's own modules are left out (always loaded)."""
    origins = []
    for op in ops_in(model):
        if op.origin and op.origin.partition(":")[2] not in BUILTIN_MODULES and op.origin not in origins:
            origins.append(op.origin)
    return origins


def load_origins(origins: Iterable[str]) -> None:
    """Import the modules or files that declare custom ops (``module:NAME`` or
    ``file:/abs/path.py``), as recorded by :func:`origins_for`.

    Raises:
        UserError: a file is missing or fails to import (names the file).
    """
    _load_builtins()
    for origin in origins:
        kind, _, where = origin.partition(":")
        if kind == "module":
            importlib.import_module(where)
        elif kind == "file":
            _import_file(Path(where))


def _import_file(path: Path) -> None:
    """Import a user's ``.py`` file once, under the module name compstack's
    ``file.py:function`` frontend gives it.

    Raises:
        UserError: the file is missing or its import raises.
    """
    import hashlib
    import importlib.util
    import sys

    from compstack.core.errors import UserError

    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    name = f"_compstack_user_{path.stem if path.stem.isidentifier() else 'file'}_{digest}"
    if name in sys.modules:
        return
    if not resolved.is_file():
        raise UserError(f"{path}: declares custom ops but no longer exists")
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(resolved.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code may raise anything
        sys.modules.pop(name, None)
        raise UserError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(resolved.parent))


cir.add_domain_source(domains)
