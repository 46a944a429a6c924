"""Translate the common IR into a framework program, one converter per ONNX op.

XLA and Inductor do not read ONNX (see DESIGN.md, "The common IR"), so their translated
paths interpret the graph node by node with an :class:`OpTable` of converters:
:mod:`compstack.translate.jax` (``jax.numpy``/``jax.lax``) and
:mod:`compstack.translate.fx` (``torch`` ops recorded into a ``torch.fx.Graph``).

A converter is ``fn(ctx, *inputs) -> value | tuple[value, ...]``:

* ``ctx`` is a :class:`NodeContext`: the node, its opset version, attributes with
  defaults, the static shapes and dtypes of its inputs and outputs (from the IR, after
  shape inference), and the value of every input known at conversion time;
* ``inputs`` are the framework values (a traced ``jax.Array``, an ``fx.Proxy``) or, for
  values known at conversion time, ``numpy`` arrays; an omitted optional input is
  ``None``.

Converters are versioned like ONNX Runtime's kernels: ``@TABLE.op("Reshape", since=14)``
serves every opset from 14 until the next registration of the same op. Values known at
conversion time (integer initializers, small float initializers, ``Shape`` of a static
shape...) are folded with :mod:`onnx.reference` instead of being converted, so shape
arithmetic never reaches the framework and ``Reshape``/``Slice`` see constant operands,
as XLA and Inductor require.

Before any conversion, :meth:`OpTable.missing` lists every op of the graph without a
converter, so a row is ``unsupported`` with the whole list, never half converted.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir

from compstack.core.errors import UnsupportedError

__all__ = ["Converter", "NodeContext", "OpTable", "interpret", "op_key", "resize_source_coords", "slice_bounds",
           "static_initializer"]

#: ``fn(ctx, *inputs) -> value | tuple``; see the module docstring.
Converter = Callable[..., Any]

#: Ops never folded at conversion time even when every input is known (random ops).
_NO_FOLD = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                      "Multinomial", "Bernoulli", "Dropout"})

#: A float initializer with at most this many elements is a conversion-time constant
#: (Resize scales, Clip bounds, Pow exponents); larger ones are program parameters.
SMALL_FLOAT_STATIC = 64


def _gather_elements(node: ir.Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """GatherElements by the spec (:func:`compstack.core.reference_fixes.gather_elements`:
    onnx.reference's own breaks past 64 entries on the gathered axis, as BERT's
    ``position_ids`` buffer ``[1, 512]`` has)."""
    from compstack.core.reference_fixes import gather_elements

    attr = node.attributes.get("axis")
    return [gather_elements(np.asarray(args[0]), np.asarray(args[1]), int(attr.as_int()) if attr is not None else 0)]


#: Ops folded with numpy rather than onnx.reference (whose implementation is wrong or
#: breaks on shapes that real models use; each function says why).
_NUMPY_FOLD: dict[str, Callable[[ir.Node, list[np.ndarray | None]], list[np.ndarray]]] = {
    "GatherElements": _gather_elements,
}


def op_key(domain: str, op_type: str) -> str:
    """``Op`` for the default ``ai.onnx`` domain, ``domain::Op`` otherwise."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


@dataclass
class _Entry:
    since: int
    fn: Converter


class OpTable:
    """The converters of one framework, by op and ``since`` opset version.

    Args:
        name: the framework (``jax``, ``fx``), for messages.
        modules: modules that register converters into this table when imported
            (imported on first lookup, so building the table costs nothing until used).
    """

    def __init__(self, name: str, modules: Sequence[str] = ()) -> None:
        self.name = name
        self._modules = tuple(modules)
        self._loaded = False
        self._ops: dict[str, list[_Entry]] = {}

    def op(self, *op_types: str, since: int = 1, domain: str = "") -> Callable[[Converter], Converter]:
        """Decorator: register ``fn`` for each of ``op_types`` from opset ``since`` on.

        Raises:
            ValueError: the same (op, since) is registered twice.
        """

        def deco(fn: Converter) -> Converter:
            for op_type in op_types:
                entries = self._ops.setdefault(op_key(domain, op_type), [])
                if any(e.since == since for e in entries):
                    raise ValueError(f"{self.name}: {op_type} since {since} registered twice")
                entries.append(_Entry(since, fn))
                entries.sort(key=lambda e: e.since)
            return fn

        return deco

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._modules:
                importlib.import_module(module)

    def lookup(self, op_type: str, version: int, domain: str = "") -> Converter | None:
        """The converter serving ``op_type`` at opset ``version``: the newest one
        registered with ``since <= version``; None when there is none."""
        self._load()
        best = None
        for entry in self._ops.get(op_key(domain, op_type), []):
            if entry.since <= version:
                best = entry.fn
        return best

    def ops(self) -> list[str]:
        """Every op with at least one converter (``Op`` / ``domain::Op``), sorted."""
        self._load()
        return sorted(self._ops)

    def versions(self, key: str) -> list[int]:
        """The ``since`` versions registered for op ``key``."""
        self._load()
        return [e.since for e in self._ops.get(key, [])]

    def missing(self, model: ir.Model) -> list[str]:
        """Every op of ``model``'s main graph without a converter at the model's opset.

        Returns:
            Sorted ``Op`` names; ``Op (opset N)`` where converters exist only for other
            versions.
        """
        self._load()
        out: set[str] = set()
        for node in model.graph:
            domain = node.domain or ""
            version = _opset(model, domain)
            if self.lookup(node.op_type, version, domain) is not None:
                continue
            key = op_key(domain, node.op_type)
            out.add(f"{key} (opset {version})" if key in self._ops else key)
        return sorted(out)


def _opset(model: ir.Model, domain: str) -> int:
    imports = model.opset_imports
    if domain in ("", "ai.onnx"):
        return imports.get("", imports.get("ai.onnx", 1))
    return imports.get(domain, 1)


@dataclass
class NodeContext:
    """What a converter may know about its node at conversion time.

    Attributes:
        node: the IR node.
        version: the opset version of the node's domain in the model.
        statics: per input, its value when known at conversion time (numpy), else None.
    """

    node: ir.Node
    version: int
    statics: list[np.ndarray | None] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The node's name (the converter's scope)."""
        return self.node.name or self.node.op_type

    def _where(self) -> str:
        return f"{self.node.op_type} node '{self.name}'"

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute value: int, float, str, list of ints/floats/strs, numpy array for a
        tensor attribute; ``default`` when absent."""
        attr = self.node.attributes.get(name)
        if attr is None:
            return default
        value = attr.value
        if isinstance(value, ir.TensorProtocol):
            return value.numpy()
        if isinstance(value, (list, tuple)):
            return list(value)
        return value

    @property
    def n_inputs(self) -> int:
        """Number of input slots (including omitted optional ones)."""
        return len(self.node.inputs)

    def has(self, i: int) -> bool:
        """True when input ``i`` is given (not omitted)."""
        return i < len(self.node.inputs) and self.node.inputs[i] is not None

    def static(self, i: int, what: str = "") -> np.ndarray | None:
        """The value of input ``i`` when known at conversion time; None when the input
        is omitted.

        Raises:
            UnsupportedError: the input is given but computed at run time (naming the
                node and what the converter needs it for).
        """
        if not self.has(i):
            return None
        value = self.statics[i] if i < len(self.statics) else None
        if value is None:
            need = f" ({what})" if what else ""
            raise UnsupportedError(f"{self._where()}: input {i}{need} must be known at compile time",
                                   [self.node.op_type])
        return value

    def _shape_of(self, value: ir.Value | None, label: str) -> tuple[int, ...]:
        if value is None or value.shape is None or not all(isinstance(d, int) for d in value.shape):
            raise UnsupportedError(f"{self._where()}: {label} has no static shape", [self.node.op_type])
        return value.shape.numpy()

    def shape(self, i: int) -> tuple[int, ...]:
        """Static shape of input ``i``.

        Raises:
            UnsupportedError: the shape is unknown or symbolic.
        """
        value = self.node.inputs[i] if i < len(self.node.inputs) else None
        return self._shape_of(value, f"input {i}")

    def out_shape(self, j: int = 0) -> tuple[int, ...]:
        """Static shape of output ``j`` (see :meth:`shape`)."""
        return self._shape_of(self.node.outputs[j], f"output {j}")

    def rank(self, i: int) -> int:
        """Rank of input ``i``."""
        return len(self.shape(i))

    def dtype(self, i: int) -> np.dtype:
        """numpy dtype of input ``i``."""
        return _np_dtype(self.node.inputs[i], self)

    def out_dtype(self, j: int = 0) -> np.dtype:
        """numpy dtype of output ``j``."""
        return _np_dtype(self.node.outputs[j], self)

    def unsupported(self, why: str) -> UnsupportedError:
        """An :class:`UnsupportedError` naming this node (raise it)."""
        return UnsupportedError(f"{self._where()}: {why}", [self.node.op_type])


def _np_dtype(value: ir.Value | None, ctx: NodeContext) -> np.dtype:
    if value is None or value.dtype is None:
        raise ctx.unsupported("a value has no known dtype")
    return np.dtype(value.dtype.numpy())


def slice_bounds(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX ``Slice`` start/end for one axis of size ``dim``, after the spec's rules:
    negative values count from the end, then are clamped to ``[0, dim]`` for a positive
    step and to ``[0, dim - 1]`` (start) / ``[-1, dim - 1]`` (end) for a negative one
    (ONNX operator spec, Slice-13). ``step`` must not be 0."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


def resize_source_coords(mode: str, out_n: int, in_n: int, scale: float,
                         roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """ONNX Resize, ``coordinate_transformation_mode``: each output index of one axis
    mapped to its input coordinate (float64, shape ``[out_n]``), and, for
    ``tf_crop_and_resize``, which outputs fall outside the input (extrapolated).

    Raises:
        ValueError: an unknown mode.
    """
    y = np.arange(out_n, dtype=np.float64)
    out_w = scale * in_n
    extrap = None
    if mode == "align_corners":
        x = np.zeros(out_n) if out_w == 1 else y * (in_n - 1) / (out_w - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_crop_and_resize":
        r0, r1 = roi if roi is not None else (0.0, 1.0)
        if out_w == 1:
            x = np.full(out_n, (r1 - r0) * (in_n - 1) / 2)
        else:
            x = y * (r1 - r0) * (in_n - 1) / (out_w - 1)
        x = x + r0 * (in_n - 1)
        extrap = (x < 0) | (x > in_n - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(out_n, -0.5) if out_w == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        adjustment = out_n / out_w
        x = in_n / 2 * (1 - adjustment) + (y + 0.5) / scale - 0.5
    else:
        raise ValueError(mode)
    return x, extrap


def static_initializer(value: ir.Value) -> bool:
    """Whether an initializer is a conversion-time constant: integer and bool ones, and
    float ones of at most :data:`SMALL_FLOAT_STATIC` elements."""
    tensor = value.const_value
    if tensor is None or value.dtype is None:
        return False
    if not value.dtype.is_floating_point():
        return True
    return int(np.prod(tensor.shape.numpy(), dtype=np.int64)) <= SMALL_FLOAT_STATIC


def _fold(node: ir.Node, version: int, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """Evaluate one node on known values with :mod:`onnx.reference` (the ONNX spec's
    own Python implementation), or with numpy for the ops in :data:`_NUMPY_FOLD`."""
    from onnx.reference import ReferenceEvaluator

    if node.op_type in _NUMPY_FOLD and node.domain in ("", "ai.onnx"):
        return _NUMPY_FOLD[node.op_type](node, args)

    proto = ir.serde.serialize_node(node)
    names = [f"i{k}" if a is not None else "" for k, a in enumerate(args)]
    del proto.input[:]
    proto.input.extend(names)
    outs = [f"o{k}" if o is not None and o.name else "" for k, o in enumerate(node.outputs)]
    del proto.output[:]
    proto.output.extend(outs)
    domain = node.domain or ""
    evaluator = ReferenceEvaluator(proto, opsets={domain: version} if domain else {"": version})
    feeds = {n: a for n, a in zip(names, args) if n}
    wanted = [o for o in outs if o]
    got = dict(zip(wanted, evaluator.run(wanted, feeds)))
    return [np.asarray(got[o]) if o else None for o in outs]  # type: ignore[misc]


def interpret(
    table: OpTable,
    model: ir.Model,
    env: dict[str, Any],
    scope: Callable[[ir.Node], contextlib.AbstractContextManager[Any]] | None = None,
    wrap_static: Callable[[np.ndarray], Any] | None = None,
) -> list[Any]:
    """Run ``model``'s main graph through ``table``'s converters.

    Args:
        table: the framework's converters.
        model: the common IR (static shapes after shape inference).
        env: value name -> framework value or numpy array, for every graph input and
            initializer (numpy entries are conversion-time constants).
        scope: ``scope(node)`` wraps each converter call (``jax.named_scope``, the FX
            builder's node naming).
        wrap_static: applied to each known (numpy) input before it is passed to a
            converter (FX: ``torch.from_numpy``); ``ctx.static(i)`` still gives numpy.

    Returns:
        The graph outputs, in order (framework values or numpy arrays).

    Raises:
        UnsupportedError: ops without a converter (all listed at once, before any
            conversion), or a converter that cannot take its node.
    """
    missing = table.missing(model)
    if missing:
        raise UnsupportedError(f"{table.name}: no converter for: {', '.join(missing)}", missing)
    scope = scope or (lambda node: contextlib.nullcontext())
    env = dict(env)
    for node in model.graph:
        domain = node.domain or ""
        version = _opset(model, domain)
        args = [env[v.name or ""] if v is not None else None for v in node.inputs]
        statics = [a if isinstance(a, np.ndarray) else None for a in args]
        known = all(v is None or s is not None for v, s in zip(node.inputs, statics))
        if known and node.op_type not in _NO_FOLD and domain in ("", "ai.onnx"):
            outs: Sequence[Any] = _fold(node, version, statics)
        else:
            ctx = NodeContext(node, version, statics)
            fn = table.lookup(node.op_type, version, domain)
            assert fn is not None  # checked by missing()
            if wrap_static is not None:
                args = [wrap_static(a) if isinstance(a, np.ndarray) else a for a in args]
            with scope(node):
                result = fn(ctx, *args)
            outs = result if isinstance(result, (tuple, list)) else (result,)
        for value, out in zip(node.outputs, outs):
            if value is not None and value.name:
                env[value.name] = out
    return [env[v.name or ""] for v in model.graph.outputs]
