"""Resolve a model argument of the CLI into a :class:`compstack.core.ir.SourceModel`.

Accepted forms:

* ``zoo:NAME`` — a model of the built-in zoo (``compstack zoo`` lists them);
* ``path/to/model.onnx`` — an ONNX file (external data beside it);
* ``path/to/file.py:function`` — a Python function returning ``(nn.Module, inputs)``,
  ``(jax_function, example_args)`` or an ONNX model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from compstack.core.errors import UserError
from compstack.core.ir import SourceModel
from compstack.frontends import native as native_mod
from compstack.frontends.native import NativeProgram

__all__ = ["DEFAULT_MODEL", "jax_rebuild_differs", "load_native", "resolve_model"]

#: The model ``compstack compare`` uses when none is given.
DEFAULT_MODEL = "zoo:cnn"


def resolve_model(spec: str | os.PathLike[str] | onnx.ModelProto, cache_dir: Path | None = None,
                  timeout_s: float | None = None, memory_mb: int = 0, partial: bool = False) -> SourceModel:
    """Import the model named by ``spec``.

    Args:
        spec: ``zoo:NAME``, ``file.onnx`` or ``file.py:function`` (or a path), or an
            in-memory ``onnx.ModelProto`` (checked like a file, named ``<ModelProto>``).
        cache_dir: the cache folder (zoo exports).
        timeout_s: when given, a ``file.py:function`` runs in a worker process under this
            wall-clock limit and ``memory_mb`` (see :mod:`compstack.frontends._pyworker`);
            None runs it in this process.
        memory_mb: resident-memory limit of that worker, MiB (0: none).
        partial: a ``file.py:function`` JAX program whose jaxpr does not convert to the
            common IR is returned with ``import_error`` set instead of raising (``compare``
            and ``run`` still run its native XLA path).

    Raises:
        UserError: unknown zoo name, missing or malformed file, bad ``file.py:function``
            (or one that passes its limits), a ``spec`` of another type.
    """
    if isinstance(spec, onnx.ModelProto):
        from compstack.core import ir as cir

        cir.check(spec, "<ModelProto>")  # the checks a .onnx file gets (as from_pyfile's ModelProto)
        return SourceModel(name="<ModelProto>", model=cir.from_proto(spec, source="<ModelProto>"), origin="onnx",
                           as_written=cir.as_written(spec))
    if not isinstance(spec, (str, os.PathLike)):
        raise UserError(f"model: expected a zoo:NAME, a file name, an onnx.ModelProto or a SourceModel, "
                        f"not {type(spec).__name__}")
    spec = os.fspath(spec)
    if not spec.strip():
        raise UserError(f"MODEL {spec!r} is empty: give zoo:NAME, a file.onnx or file.py:function")
    if spec.startswith("zoo:"):
        from compstack.frontends import zoo

        source = zoo.load(spec[4:], cache_dir=cache_dir)
        source.spec = f"zoo:{spec[4:]}"
        source.framework = source.framework or zoo.framework(spec[4:])
        return source
    path_part, sep, func = spec.rpartition(":")
    if sep and path_part.endswith(".py"):
        from compstack.frontends.from_pyfile import import_pyfile, parse_spec

        if timeout_s is None:
            source = import_pyfile(spec, partial=partial)
        else:
            from compstack.frontends._pyworker import import_isolated

            path, _ = parse_spec(spec)  # the cheap checks stay in this process
            if not path.exists():
                raise UserError(f"{path}: no such file")
            if not path.is_file():
                raise UserError(f"{path}: not a file")
            source = import_isolated(spec, timeout_s, memory_mb, partial=partial)
        source.spec = f"{Path(path_part).resolve()}:{func}"
        return source
    if spec.endswith(".py"):
        raise UserError(f"{spec}: a Python model needs a function: {spec}:build")
    if sep and func.isidentifier() and Path(path_part).is_file() and not Path(spec).exists():
        raise UserError(f"{spec}: {path_part} is not a .py file (a Python model is FILE.py:FUNCTION; "
                        "an ONNX model is a .onnx file)")
    from compstack.core import ir as cir

    model, written = cir.load_with_written(spec)  # one copy of the weights for both forms
    return SourceModel(name=Path(spec).name, model=model, origin="onnx", as_written=written)


def load_native(spec: str, input_names: list[str]) -> NativeProgram | None:
    """Rebuild the native program of a model spec (``zoo:NAME``, ``file.py:function``).

    Args:
        spec: the model spec as given to the CLI.
        input_names: the common IR's graph-input names, in order.

    Returns:
        None for ONNX files (no framework program exists).

    Raises:
        UserError: as :func:`compstack.frontends.sources.resolve_model` would.
    """
    if spec.startswith("zoo:"):
        from compstack.frontends import zoo

        return zoo.native(spec[4:])
    path_part, sep, _ = spec.rpartition(":")
    if sep and path_part.endswith(".py"):
        from compstack.frontends.from_pyfile import native_of

        return native_of(spec, input_names)
    return None


def jax_rebuild_differs(spec: str, native: NativeProgram, inputs: list[Any]) -> bool:
    """Whether building the JAX program again gives different outputs on the same inputs:
    then ``build()`` draws its weights without a seed, and the worker's program cannot be
    the one that was imported (a JAX closure's constants cannot be replaced)."""
    again = load_native(spec, native.input_names)
    if again is None:
        return True
    outs = []
    for prog in (native, again):
        args, kwargs = prog.pack(list(inputs))
        outs.append([np.asarray(x) for x in native_mod.flatten_outputs(prog.fn(*args, **kwargs), "jax")])
    return len(outs[0]) != len(outs[1]) or any(
        a.shape != b.shape or not np.array_equal(a, b, equal_nan=True) for a, b in zip(*outs))
