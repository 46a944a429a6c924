"""Import a model from a Python file: the CLI form ``path/to/file.py:function``.

The function takes no arguments and returns one of:

* ``(torch.nn.Module, example_inputs)`` — a tuple/list or a dict of tensors;
* ``(torch.export.ExportedProgram, example_inputs)``;
* ``(jax_function, example_args)`` — a function of arrays / pytrees of arrays and the
  tuple of its positional arguments (jax or numpy arrays, or pytrees of them, e.g.
  ``(params, x)``), imported with :func:`compstack.frontends.from_jax.import_jax`
  (every leaf becomes a graph input);
* an ``onnx.ModelProto`` (or an ``onnx_ir.Model``);
* ``(tf.keras.Model | tf.function, inputs)``, ``(paddle.nn.Layer, inputs)`` or
  ``(mindspore.nn.Cell, inputs)``: a file that imports TensorFlow/Keras, Paddle or
  MindSpore is not run here; it runs in that framework's own process and is exported by
  the framework's own exporter (:mod:`compstack.frontends.from_framework`).

A pair is taken as torch when its first item is an ``nn.Module`` or
``ExportedProgram``, as JAX when the file imported jax, the first item is any other
callable, and every leaf of the second is an array (numpy, jax, or a Python scalar).

The file is run as a fresh module (its folder is on ``sys.path`` while it is
imported, so it can import its neighbours). Every way this can go wrong is a
one-line :class:`~compstack.core.errors.UserError`. The CLI runs all of this in a worker
process under ``--timeout``/``--memory-limit`` (:mod:`compstack.frontends._pyworker`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from compstack.core import ir as cir
from compstack.core.errors import UserError

__all__ = ["import_pyfile", "native_of", "parse_spec"]

_EXPECTED = (
    "(torch.nn.Module | torch.export.ExportedProgram, example_inputs), "
    "(jax_function, example_args: tuple of arrays/pytrees) or an onnx.ModelProto"
)


def parse_spec(spec: str) -> tuple[Path, str]:
    """Split ``path/to/file.py:function`` into the path and the function name.

    The last ``:`` separates them, so Windows drive letters are fine.

    Raises:
        UserError: no ``:function`` part, or the function part is not an identifier.
    """
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func or "/" in func or "\\" in func:
        raise UserError(f"{spec}: expected FILE.py:FUNCTION (e.g. model.py:build)")
    if not func.isidentifier():
        raise UserError(f"{spec}: {func!r} is not a Python function name")
    return Path(path), func


def import_pyfile(spec: str, partial: bool = False, on_phase: Callable[[str], object] | None = None) -> cir.SourceModel:
    """Run ``file.py:function`` and import the model it returns.

    Args:
        spec: ``path/to/file.py:function``; the function takes no arguments.
        partial: a JAX function whose jaxpr does not convert is still returned, with
            ``import_error`` set (see :func:`compstack.frontends.from_jax.import_jax`).
        on_phase: called with what runs next, in words (``"the function (or its module's
            import)"``, ``"the torch export of the module it returned"``...), so a worker
            cut by ``--timeout`` can say where it was.

    Returns:
        A :class:`compstack.core.ir.SourceModel` named ``file.py:function`` (the file's base
        name). A torch model is exported with
        :func:`compstack.frontends.from_torch.import_torch` (``origin="torch"``,
        example inputs as numpy arrays by ONNX input name); a JAX function is traced
        and converted with :func:`compstack.frontends.from_jax.import_jax`
        (``origin="jax"``, example inputs by graph-input name); an ONNX model is
        checked and canonicalised (``origin="onnx"``, no example inputs).

    Raises:
        UserError: spec without ``:function``; the file is missing or is not a file;
            importing the file raises (names the file and the exception's first line);
            the function is missing (lists the functions the file defines), is not
            callable, needs arguments, or raises; it returns something else than
            ``(nn.Module | ExportedProgram, example_inputs)``,
            ``(jax_function, example_args)`` or ``onnx.ModelProto``; or the export
            (or the JAX conversion) fails.
    """
    foreign = _foreign(spec)
    if foreign is not None:
        from compstack.frontends.from_framework import import_framework

        return import_framework(*foreign)
    say = on_phase or (lambda what: None)
    say(f"{Path(spec.rpartition(':')[0]).name} itself (its import or the function's call)")
    result, name = _call(spec)
    say(_export_phase(result))
    return _to_source(result, name, partial)


def _export_phase(result: Any) -> str:
    """What :func:`_to_source` will run on ``result``, in words."""
    if isinstance(result, (tuple, list)) and len(result) == 2 and _is_torch_program(result[0]):
        return "the torch export of the module it returned (torch.export / torch.onnx.export)"
    if _is_jax_program(result):
        return "the JAX conversion of the function it returned (jaxpr to ONNX)"
    return "the check of the model it returned"


def _foreign(spec: str) -> tuple[Path, str, str, str] | None:
    """``(path, function, framework, name)`` when ``spec``'s file imports TensorFlow,
    Paddle or MindSpore (see :func:`compstack.frontends.from_framework.detect`)."""
    path, func_name = parse_spec(spec)
    if not path.is_file():
        return None
    from compstack.frontends.from_framework import detect

    framework = detect(path)
    return None if framework is None else (path, func_name, framework, f"{path.name}:{func_name}")


def _call(spec: str) -> tuple[Any, str]:
    """Run ``file.py:function``; returns its result and the display name."""
    path, func_name = parse_spec(spec)
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if not path.is_file():
        raise UserError(f"{path}: not a file")
    name = f"{path.name}:{func_name}"
    module = _run_file(path)
    func = _find_function(module, path, func_name)
    try:
        return func(), name
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code may raise anything, sys.exit() or a BaseException
        raise UserError(f"{name}: raised {_first_line(exc)}") from exc


def native_of(spec: str, input_names: list[str]) -> Any:
    """The framework program ``file.py:function`` returns, without exporting it.

    Args:
        spec: ``path/to/file.py:function``.
        input_names: the IR's graph-input names, in order (positional inputs map to them
            in order).

    Returns:
        A :class:`compstack.frontends.native.NativeProgram` (``framework`` ``torch`` or ``jax``;
        a JAX function is neither traced nor converted here; for ``tf``, ``paddle`` and
        ``mindspore`` nothing runs here and ``fn`` is the spec itself, run by
        :func:`compstack.frontends.from_framework.run_framework`), or None when the
        function returns an ONNX model.

    Raises:
        UserError: see :func:`import_pyfile`.
    """
    foreign = _foreign(spec)
    if foreign is not None:
        from compstack.frontends.native import NativeProgram

        return NativeProgram(foreign[2], spec, list(input_names), lambda xs: (tuple(xs), {}))
    result, name = _call(spec)
    if isinstance(result, (tuple, list)) and len(result) == 2 and _is_torch_program(result[0]):
        from compstack.frontends.native import torch_program

        return torch_program(result[0], result[1], input_names)
    if _is_jax_program(result):
        from compstack.frontends.from_jax import native_program

        return native_program(result[0], result[1], input_names=input_names, name=name)
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _run_file(path: Path) -> ModuleType:
    """Import ``path`` as a uniquely named module (registered in ``sys.modules``).

    Raises:
        UserError: ``"<path>: import failed: <Type>: <first line>"``.
    """
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    mod_name = f"_compstack_user_{path.stem if path.stem.isidentifier() else 'file'}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, resolved)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: cannot be imported as Python (expected a .py file)")
    module = importlib.util.module_from_spec(spec)
    folder = str(resolved.parent)
    sys.modules[mod_name] = module
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        sys.modules.pop(mod_name, None)
        raise
    except BaseException as exc:  # SyntaxError, ImportError, sys.exit(), a user BaseException...
        sys.modules.pop(mod_name, None)
        raise UserError(f"{path}: import failed: {_first_line(exc)}") from exc
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module


def _find_function(module: ModuleType, path: Path, func_name: str) -> Callable[[], Any]:
    """The named zero-argument callable of ``module``.

    Raises:
        UserError: missing (listing the file's own functions), not callable, or it
            has required parameters.
    """
    func = getattr(module, func_name, None)
    if func is None:
        own = sorted(
            n for n, obj in vars(module).items()
            if inspect.isfunction(obj) and obj.__module__ == module.__name__
            and not n.startswith("_")
        )
        listing = ", ".join(own) if own else "none"
        raise UserError(f"{path}: no function '{func_name}' (functions defined there: {listing})")
    if not callable(func):
        raise UserError(f"{path}: '{func_name}' is of type {type(func).__name__}, not a function")
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return func
    required = [
        p.name for p in sig.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                               p.KEYWORD_ONLY)
    ]
    if required:
        raise UserError(
            f"{path}:{func_name} must take no arguments (it requires {', '.join(required)})"
        )
    return func


def _to_source(result: Any, name: str, partial: bool = False) -> cir.SourceModel:
    """Turn the function's return value into a SourceModel.

    Raises:
        UserError: a return value of the wrong type (says what was expected).
    """
    import onnx
    import onnx_ir

    if isinstance(result, onnx_ir.Model):
        result = cir.to_proto(result)
    if isinstance(result, onnx.ModelProto):
        cir.check(result, name)
        return cir.SourceModel(name=name, model=cir.from_proto(result, source=name),
                               origin="onnx", as_written=cir.as_written(result))
    if isinstance(result, (tuple, list)) and len(result) == 2 and _is_torch_program(result[0]):
        from compstack.frontends.from_torch import import_torch

        program, example_inputs = result
        if not isinstance(example_inputs, (tuple, list, dict)) and not _is_tensor(example_inputs):
            raise UserError(
                f"{name}: example_inputs must be a tuple or dict of tensors, "
                f"got {type(example_inputs).__name__}"
            )
        return import_torch(program, example_inputs, name=name)
    if _is_jax_program(result):
        from compstack.frontends.from_jax import import_jax

        return import_jax(result[0], result[1], name=name, partial=partial)
    raise UserError(f"{name}: expected the function to return {_EXPECTED}, got {_describe(result)}")


def _is_torch_program(obj: Any) -> bool:
    """True for an nn.Module or ExportedProgram (torch is already imported if so)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    return isinstance(obj, (torch.nn.Module, torch.export.ExportedProgram))


def _is_jax_program(result: Any) -> bool:
    """True for ``(callable, example_args)`` whose leaves are all arrays, when the file
    imported jax (jax is never imported here otherwise)."""
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(result, (tuple, list)) or len(result) != 2:
        return False
    fn, args = result
    if not callable(fn) or _is_torch_program(fn):
        return False
    import numpy as np

    leaves = jax.tree_util.tree_leaves(args)
    arrays = (np.ndarray, np.generic, jax.Array)
    return any(isinstance(x, arrays) for x in leaves) and all(
        isinstance(x, (*arrays, bool, int, float)) for x in leaves)


def _is_tensor(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _describe(obj: Any) -> str:
    """``tuple of (int, str)`` / ``NoneType``: what the function returned, briefly."""
    if isinstance(obj, (tuple, list)):
        inner = ", ".join(type(x).__name__ for x in obj[:4])
        more = ", ..." if len(obj) > 4 else ""
        return f"a {type(obj).__name__} of ({inner}{more})"
    return type(obj).__name__
