"""Import a PyTorch program into the common IR.

The path is ``torch.export`` (non-strict) -> the dynamo ONNX exporter
(``torch.onnx.export(..., dynamo=True, optimize=False)``) -> onnxscript constant folding
only -> every ``Constant`` node lifted to an initializer -> :func:`compstack.core.ir.from_proto`.
The full onnxscript optimizer is *not* run by default, so the graph keeps what the user
wrote (``BatchNormalization`` stays a node); constant folding and lifting are still
needed so that shape/axes operands are initializers instead of computed values or
``Constant(value_ints)`` nodes, which TVM's ONNX importer rejects.

Every node keeps the exporter's provenance (``metadata_props``: ``namespace``,
``pkg.torch.onnx.stack_trace``, ``pkg.torch.onnx.fx_node``...). The frontend adds
``compstack.source``: the innermost frame of the stack trace that is not inside torch
itself or the Python standard library, so :func:`compstack.core.ir.source_of` points at the
model's own code (``model.py:12``) rather than at ``torch/nn/modules/linear.py``.

torch is imported only when :func:`import_torch` is called.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from compstack.core import ir as cir
from compstack.core.errors import ExportError, UserError
from compstack.frontends.native import MUTATED_SUFFIX

if TYPE_CHECKING:
    import torch

__all__ = ["add_source_locations", "import_torch", "quiet", "to_numpy"]

#: Metadata key written on every node that has a user-code frame.
SOURCE_KEY = "compstack.source"

_QUIET_LOGGERS = ("torch", "onnxscript", "onnx_ir", "onnx", "transformers", "huggingface_hub")


def import_torch(
    program: Any,
    example_inputs: Sequence[Any] | Mapping[str, Any] | None,
    *,
    name: str,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    fold_batchnorm: bool = False,
    opset: int = cir.DEFAULT_OPSET,
) -> cir.SourceModel:
    """Export a PyTorch module or ``ExportedProgram`` into the common IR.

    The module is exported as given (call ``.eval()`` first for inference graphs;
    a module in training mode exports training-mode BatchNorm and dropout).
    Shapes are static: the example inputs fix every dim.

    Args:
        program: a ``torch.nn.Module`` or a ``torch.export.ExportedProgram``.
        example_inputs: a tuple/list of tensors (positional arguments of ``forward``)
            or a dict ``name -> tensor`` (keyword arguments). For an
            ``ExportedProgram`` it may be ``None``: the program's own example inputs
            are used.
        name: display name used for the model and in error messages.
        input_names: names for the ONNX graph inputs, in order (default: the
            argument names of ``forward``).
        output_names: names for the ONNX graph outputs, in order (default: the
            exporter's, e.g. ``linear_1``).
        fold_batchnorm: run the exporter's full optimizer, which folds
            ``BatchNormalization`` into the preceding ``Conv`` (and more). Default
            ``False`` keeps the graph as written.
        opset: minimum ai.onnx opset of the result (default 20).

    Returns:
        A :class:`compstack.core.ir.SourceModel` with ``origin="torch"``, ``native`` set to
        ``program``, and ``example_inputs`` as numpy arrays keyed by the ONNX input
        names (same dtypes and shapes as the tensors; bfloat16 becomes
        ``ml_dtypes.bfloat16``).

    Raises:
        UserError: ``program`` or ``example_inputs`` has the wrong type, ``torch.export``
            or the ONNX exporter fails (one line naming the model and the first line
            of the exporter's error), or the exported graph does not take the given
            inputs.
    """
    args, kwargs = _split_inputs(program, example_inputs, name)
    ep = _export(program, args, kwargs, name)
    mutated = _mutated_inputs(ep, args, kwargs)
    n_user_outputs = 0
    if mutated:  # export again, returning the mutated inputs too: the graph then computes them
        n_user_outputs = len([s for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"])
        ep = _export(_returning_mutated(program, [k for k, _ in mutated]), args, kwargs, name)
    model = _to_onnx(ep, name, input_names, output_names and [*output_names, *(f"{n}@mutated" for _, n in mutated)],
                     fold_batchnorm, opset)
    if mutated:
        _name_mutated_outputs(model, n_user_outputs, [k for k, _ in mutated], args, kwargs, name)
    add_source_locations(model)
    with quiet():
        canonical = cir.from_proto(cir.to_proto(model), source=name, opset=opset)
    tensors: list[tuple[str | None, Any]] = [(None, t) for t in args]
    tensors += list(kwargs.items())
    examples = _match_inputs(canonical, tensors, name, by_name=input_names is None)
    return cir.SourceModel(name=name, model=canonical, example_inputs=examples,
                           origin="torch", native=program, framework="torch")


def _split_inputs(
    program: Any, example_inputs: Sequence[Any] | Mapping[str, Any] | None, name: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Validate ``program`` and ``example_inputs``; return ``(args, kwargs)``."""
    import torch

    is_ep = isinstance(program, torch.export.ExportedProgram)
    if not is_ep and not isinstance(program, torch.nn.Module):
        raise UserError(
            f"{name}: expected a torch.nn.Module or torch.export.ExportedProgram, "
            f"got {type(program).__name__}"
        )
    if example_inputs is None:
        if not is_ep:
            raise UserError(f"{name}: example_inputs are required to export an nn.Module")
        args, kwargs = program.example_inputs or ((), {})
        return tuple(args), dict(kwargs)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if isinstance(example_inputs, Mapping):
        args, kwargs = (), dict(example_inputs)
    elif isinstance(example_inputs, (tuple, list)):
        args, kwargs = tuple(example_inputs), {}
    else:
        raise UserError(
            f"{name}: example_inputs must be a tuple or a dict of tensors, "
            f"got {type(example_inputs).__name__}"
        )
    for key, value in [*enumerate(args), *kwargs.items()]:
        if not isinstance(value, torch.Tensor):
            raise UserError(
                f"{name}: example input {key!r} is a {type(value).__name__}, not a torch.Tensor"
            )
    return args, kwargs


def _first_line(exc: BaseException) -> str:
    """``Type: first non-empty line`` of an exception."""
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost ``__cause__`` of an exception (exporters wrap the real error)."""
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen:
        exc = exc.__cause__
        seen.add(id(exc))
    return exc


def _export(program: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """``torch.export.export`` (non-strict) unless ``program`` already is one."""
    import torch

    if isinstance(program, torch.export.ExportedProgram):
        return program
    try:
        with quiet():
            return torch.export.export(program, args, kwargs, strict=False)
    except Exception as exc:  # torch.export raises many unrelated types
        raise ExportError(f"{name}: torch.export failed: {_first_line(exc)}", "torch.export") from exc




def _mutated_inputs(ep: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[int | str, str]]:
    """The user inputs the program mutates in place, from the functionalised program's
    ``graph_signature.user_inputs_to_mutate``: ``(position or keyword, placeholder)`` in
    input order. Programs without a mutating op skip the functionalisation."""
    mutable = any(n.op == "call_function" and getattr(getattr(n.target, "_schema", None), "is_mutable", False)
                  for n in ep.graph.nodes)
    if not mutable:
        return []
    try:
        with quiet():
            sig = ep.run_decompositions({}).graph_signature  # functionalise only: no op is decomposed
    except Exception:  # noqa: BLE001 - torch cannot functionalise it: the ONNX export will say why, if it fails
        return []
    targets = set(sig.user_inputs_to_mutate.values())
    keys: list[int | str] = [*range(len(args)), *kwargs]
    return [(keys[i], ph) for i, ph in enumerate(sig.user_inputs) if ph in targets and i < len(keys)]


def _returning_mutated(program: Any, keys: list[int | str]) -> Any:
    """A shallow copy of the module (same parameters and names) whose ``forward`` also
    returns the inputs ``keys`` after the call, so the export computes their new values."""
    import copy
    import inspect
    import types

    import torch

    module = program.module() if isinstance(program, torch.export.ExportedProgram) else copy.copy(program)
    inner = type(module).forward

    def forward(self: Any, *a: Any, **k: Any) -> Any:
        out = inner(self, *a, **k)
        return out, tuple(a[key] if isinstance(key, int) else k[key] for key in keys)

    forward.__signature__ = inspect.signature(inner)  # type: ignore[attr-defined]  # keeps the input names
    module.forward = types.MethodType(forward, module)
    return module


def _name_mutated_outputs(model: ir.Model, n_user: int, keys: list[int | str], args: tuple[Any, ...],
                          kwargs: dict[str, Any], name: str) -> None:
    """Name the graph outputs after the first ``n_user`` ``<input>@mutated``, after the
    ONNX input each one is (inputs are in argument order: positional, then keywords)."""
    order: list[int | str] = [*range(len(args)), *kwargs]
    inputs = [v for v in model.graph.inputs if not v.is_initializer()]
    extra = list(model.graph.outputs)[n_user:]
    if len(extra) != len(keys) or len(inputs) != len(order):
        raise UserError(f"{name}: cannot match the mutated inputs to the exported graph's outputs")
    user = set(list(model.graph.outputs)[:n_user])
    for i, (value, key) in enumerate(zip(extra, keys)):
        new = f"{inputs[order.index(key)].name}{MUTATED_SUFFIX}"
        if value in user or value.is_graph_input() or value.is_initializer():  # shared: give it its own value
            node = ir.Node("", "Identity", [value], name=new)
            model.graph.append(node)
            copy = node.outputs[0]
            copy.dtype, copy.shape = value.dtype, value.shape  # type: ignore[assignment]  # onnx_ir types the setter DataType; None is kept as unknown
            model.graph.outputs[n_user + i] = copy
            value = copy
        value.name = new


def _to_onnx(
    ep: Any,
    name: str,
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    fold_batchnorm: bool,
    opset: int,
) -> ir.Model:
    """Run the dynamo exporter on ``ep`` and fold constants; return the onnx_ir model."""
    import onnx_ir.passes.common as common_passes
    import onnxscript.optimizer
    import torch

    try:
        with quiet():
            onnx_program = torch.onnx.export(
                ep,
                (),
                dynamo=True,
                optimize=fold_batchnorm,
                opset_version=max(opset, 18),
                input_names=list(input_names) if input_names is not None else None,
                output_names=list(output_names) if output_names is not None else None,
                verbose=False,
                report=False,
                custom_translation_table=_custom_translations(),
            )
            if onnx_program is None:  # only when f= is given, which we never pass
                raise RuntimeError("torch.onnx.export returned no program")
            model = onnx_program.model
            if not fold_batchnorm:
                _name_transposed_weights(model)
                onnxscript.optimizer.fold_constants(model)
            # Constant(value_ints) feeding Slice/Reshape/axes operands breaks TVM's importer.
            common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
            common_passes.RemoveUnusedNodesPass()(model)
    except Exception as exc:  # the exporter wraps errors in its own types
        raise ExportError(f"{name}: ONNX export failed: {_first_line(_root_cause(exc))}", "onnx-export") from exc
    return model


def _custom_translations() -> dict[Any, Any] | None:
    """The exporter's translations of compstack custom ops defined in ``torch.library``
    (:func:`compstack.ops.torch_op`): each becomes a node of its own ONNX domain."""
    import sys

    bindings = sys.modules.get("compstack.ops._torch")
    return bindings.translation_table() or None if bindings is not None else None


def _name_transposed_weights(model: ir.Model) -> None:
    """Name ``Transpose(weight)`` outputs ``<weight>.T`` before constant folding.

    ``nn.Linear`` on 3-D inputs exports as ``MatMul(x, Transpose(W))``; folding turns
    the transpose into a new initializer named ``val_N``. Renaming first keeps the
    parameter's name visible in the folded graph (``...k_proj.weight.T``).
    """
    taken = {v.name for v in model.graph.inputs} | set(model.graph.initializers)
    taken |= {o.name for node in model.graph for o in node.outputs}
    for node in model.graph:
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
            continue
        src, out = node.inputs[0], node.outputs[0]
        if src is None or not src.is_initializer() or out.is_graph_output():
            continue
        new = f"{src.name}.T"
        if new not in taken:
            taken.add(new)
            out.name = new


@contextlib.contextmanager
def quiet() -> Iterator[io.StringIO]:
    """Silence exporter chatter inside the ``with`` block.

    Redirects Python-level stdout/stderr to a buffer, ignores Python warnings, and
    raises the torch, onnxscript, onnx_ir, transformers and huggingface_hub loggers to
    ERROR; everything is restored on exit. Output written by C++ code directly to the
    file descriptors is not caught.

    Yields:
        The ``io.StringIO`` that received stdout/stderr.
    """
    saved: list[tuple[logging.Logger, int]] = []
    for logger_name in list(logging.root.manager.loggerDict):
        if logger_name.split(".")[0] in _QUIET_LOGGERS:
            logger = logging.getLogger(logger_name)
            saved.append((logger, logger.level))
    for top in _QUIET_LOGGERS:
        logger = logging.getLogger(top)
        saved.append((logger, logger.level))
    buf = io.StringIO()
    try:
        for logger, _ in saved:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(buf), \
                contextlib.redirect_stderr(buf):
            warnings.simplefilter("ignore")
            yield buf
    finally:
        for logger, level in reversed(saved):
            logger.setLevel(level)


def add_source_locations(model: ir.Model) -> int:
    """Record the model-code location of each node as ``compstack.source``.

    The value has the form :func:`compstack.core.ir.source_of` prints (``file:line`` then
    the ``namespace``), but the frame is the innermost one outside torch and the
    standard library. Nodes without a stack trace, or whose whole trace is inside
    torch, are left alone.

    Returns:
        The number of nodes that got a location.
    """
    count = 0
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        props = node.metadata_props
        where = cir.user_frame(props.get("pkg.torch.onnx.stack_trace", ""))
        if not where:
            continue
        ns = props.get("namespace", "")
        if ns:
            where += " " + (ns.split("/")[-1] if len(ns) > 80 else ns)
        props[SOURCE_KEY] = where
        count += 1
    return count


def _match_inputs(
    model: ir.Model, tensors: list[tuple[str | None, Any]], name: str, by_name: bool
) -> dict[str, np.ndarray]:
    """Key the example tensors by ONNX input name, checking count, dtype and shape.

    Keyword inputs are matched by name when every graph input has one; otherwise the
    order is used (the exporter keeps the flattened order of the arguments).
    """
    graph_inputs = cir.graph_inputs(model)
    keys = {k for k, _ in tensors if k is not None}
    if by_name and keys and {i.name for i in graph_inputs} <= keys:
        lookup = dict(tensors)
        pairs = [(i, lookup[i.name]) for i in graph_inputs]
    else:
        if len(tensors) != len(graph_inputs):
            names = ", ".join(i.name for i in graph_inputs)
            raise UserError(
                f"{name}: {len(tensors)} example input(s) given but the exported graph "
                f"takes {len(graph_inputs)} ({names})"
            )
        pairs = [(i, t) for i, (_, t) in zip(graph_inputs, tensors)]
    out: dict[str, np.ndarray] = {}
    for inp, tensor in pairs:
        arr = to_numpy(tensor)
        if inp.is_static and tuple(arr.shape) != tuple(inp.shape):
            raise UserError(
                f"{name}: example input for '{inp.name}' has shape {tuple(arr.shape)}, "
                f"the graph expects {tuple(inp.shape)}"
            )
        out[inp.name] = arr
    return out


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A detached CPU numpy copy of ``tensor`` (bfloat16 -> ``ml_dtypes.bfloat16``).

    Args:
        tensor: any dense ``torch.Tensor``.

    Returns:
        An array of the same shape; dtype as numpy spells it.
    """
    import torch

    t = tensor.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().copy().view(ml_dtypes.bfloat16)
    return t.numpy().copy()
