"""Import a JAX function into the common IR.

The function is traced with ``jax.make_jaxpr`` and its jaxpr is converted to ONNX
(opset 20) here, one converter per JAX primitive; the result is checked and
canonicalised by :mod:`compstack.core.ir` like every other import.

Why our own jaxpr -> ONNX converter and not jax2onnx: every jaxpr equation carries its
``source_info`` (the Python traceback at trace time and the ``jax.named_scope`` stack),
so provenance comes straight from the jaxpr; and jax2onnx would add ~40 packages to the
install and lowers ``lax.reduce_window`` max pooling with the batch/channel window dims
(1, 1) in MaxPool's ``kernel_shape`` (wrong rank), which this converter does not.

What the ONNX graph looks like:

* one graph input per array leaf of ``example_args``, named from the function's parameter
  names and the leaf's pytree key path (``x``, ``params.w1``, ``params.layers.0.wq``;
  characters other than letters, digits, ``_`` and ``.`` become ``_``); dtypes and
  shapes are those of the example (static shapes only);
* leaves of the arguments listed in ``const_argnums`` (e.g. the weights) become
  initializers under the same names instead of inputs; constants closed over by the
  function (jaxpr consts) and literals become initializers ``const_N``;
* the outputs are the leaves of the result, ``output_0``, ``output_1``... (a dict's
  key paths when the result is a dict, or ``output_names``);
* every node carries ``metadata_props``: ``compstack.source`` = ``/path/file.py:LINE``
  of the innermost frame of the user's code (not jax's, not this module's), followed
  by `` scope/inner`` when the equation ran inside ``jax.named_scope``;
  ``pkg.jax.primitive`` = the primitive's name; ``pkg.jax.name_stack`` when non-empty.
  Nodes are named ``<primitive>_<k>`` (``scope/.../<primitive>_<k>`` under a named
  scope or inside a named ``jit``/``custom_jvp`` function); helper nodes one
  primitive needs (a Transpose before a MatMul) are ``<that name>/<OpType>``.

Calls (``jit``/``pjit``, ``closed_call``, ``custom_jvp_call``, ``custom_vjp_call``,
``checkpoint``/``remat``) are inlined. Converted primitives: see :data:`PRIMITIVES`.
A jaxpr with primitives outside that list fails with one :class:`UserError` naming
every unknown primitive and where it was traced. Semantics notes: integer ``div``
truncates toward zero (as in JAX), ``gather`` in ``fill`` mode masks out-of-range
indices with the fill value as JAX does, ``sort`` becomes a stable ``TopK``
(NaN placement may differ), ``log1p``/``expm1``/``erfc`` are ``Log(1 + x)``/``Exp(x) - 1``/``1 - Erf(x)``.

jax is imported only when :func:`import_jax` or :func:`native_program` is called.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compstack.core import ir as cir
from compstack.core.errors import UserError

__all__ = ["PRIMITIVES", "ConversionError", "import_jax", "input_names_of", "native_program"]

#: Metadata key with the user-code location (same key as the torch frontend).
SOURCE_KEY = "compstack.source"
PRIMITIVE_KEY = "pkg.jax.primitive"
NAME_STACK_KEY = "pkg.jax.name_stack"

_OPSET = cir.DEFAULT_OPSET
_IR_VERSION = 10

# ----------------------------------------------------------------------------- public API


def import_jax(
    fn: Callable[..., Any],
    example_args: Any,
    *,
    name: str,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    const_argnums: Sequence[int] = (),
    partial: bool = False,
) -> cir.SourceModel:
    """Trace a JAX function and import it into the common IR.

    Args:
        fn: a function of arrays / pytrees of arrays (plain, ``jax.jit``-wrapped or a
            ``functools.partial``) returning an array or a pytree of arrays.
        example_args: the positional arguments: a tuple whose items are arrays (jax or
            numpy, any dtype ONNX has) or pytrees of them, e.g. ``(params, x)``. One
            non-tuple array is taken as ``(array,)``. Shapes are static.
        name: display name used for the model and in error messages.
        input_names: names for the graph inputs, one per leaf that is an input, in
            flattening order (default: derived from parameter names and key paths).
        output_names: names for the graph outputs, one per output leaf (default:
            the dict key paths when ``fn`` returns a dict, else ``output_0``...).
        const_argnums: positions in ``example_args`` whose leaves are baked in as named
            initializers (weights) instead of graph inputs.
        partial: when the jaxpr does not convert (:class:`ConversionError`), return
            the source anyway with ``import_error`` set to the converter's one-line
            reason and ``model`` a signature-only graph (inputs and outputs, no nodes),
            so the native XLA path can still run it; default: raise.

    Returns:
        A :class:`compstack.core.ir.SourceModel` with ``origin="jax"``, ``framework="jax"``,
        ``example_inputs`` (numpy arrays by graph-input name, dtypes as traced: a
        Python float becomes float32) and ``native`` a
        :class:`compstack.frontends.native.NativeProgram` calling ``fn`` with the pytrees rebuilt.

    Raises:
        UserError: ``fn`` is not callable; ``example_args`` holds something that is not
            an array; ``jax.make_jaxpr`` fails (first line of its error); a primitive
            has no ONNX conversion (all of them listed, with ``file.py:LINE``); a
            primitive is used in a form the converter does not handle (e.g. a general
            gather); the function returns no array; wrong number of
            ``input_names``/``output_names``; or the ONNX
            checker / shape inference rejects the result.
    """
    import jax

    if not callable(fn):
        raise UserError(f"{name}: expected a JAX function, got {type(fn).__name__}")
    args = _as_args(example_args)
    spec = _flatten_args(fn, args, name, input_names, const_argnums)
    try:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    except Exception as exc:  # tracing runs the user's code: any error is possible
        raise UserError(f"{name}: tracing with jax.make_jaxpr failed: {_first_line(exc)}") from exc
    out_leaves = jax.tree_util.tree_flatten_with_path(out_shape)[0]
    if not out_leaves:
        raise UserError(f"{name}: the JAX function returns no array (got {type(out_shape).__name__}); "
                        "a model needs at least one output")
    outs = _output_names(out_shape, out_leaves, output_names, name, set(spec.names))

    spec.arrays = [a.astype(v.aval.dtype, copy=False) for a, v in zip(spec.arrays, closed.jaxpr.invars)]
    import_error = ""
    try:
        model = _to_common_ir(closed, spec, outs, name)
    except ConversionError as exc:
        if not partial:
            raise
        import_error = str(exc)
        model = _signature_model(closed, spec, outs, out_leaves, name)
    examples = {n: a for n, a, is_input in zip(spec.names, spec.arrays, spec.is_input) if is_input}
    source = cir.SourceModel(name=name, model=model, example_inputs=examples, origin="jax",
                             native=_program(fn, spec), import_error=import_error)
    source.framework = "jax"
    return source


class ConversionError(UserError):
    """The function traced, but its jaxpr does not convert to the common IR (a primitive
    without an ONNX conversion, a form the converter does not handle, or a graph the
    ONNX checker rejects). The JAX program itself is fine: XLA can still compile it."""


def _to_common_ir(closed: Any, spec: _ArgSpec, outs: list[str], name: str) -> Any:
    """The jaxpr converted, checked and canonicalised.

    Raises:
        ConversionError: the one-line reason, naming every unconvertible primitive and
            its ``file.py:LINE``.
    """
    conv = _Converter(name)
    try:
        _check_known(closed.jaxpr, conv)
        proto = conv.build(closed, spec, outs)
        cir.check(proto, name)
        model = cir.from_proto(proto, source=name)
    except ConversionError:
        raise
    except UserError as exc:
        raise ConversionError(str(exc)) from None
    _remove_unused(model)
    return model


def _signature_model(closed: Any, spec: _ArgSpec, outs: list[str], out_leaves: list[tuple[Any, Any]],
                     name: str) -> Any:
    """A graph with the function's inputs and outputs and no nodes: the signature the
    native XLA path needs (input names, dtypes, shapes; output names) when the common IR
    could not be built. It computes nothing and no stack that reads ONNX is given it."""
    inputs = [helper.make_tensor_value_info(n, _onnx_dtype(v.aval.dtype), list(v.aval.shape))
              for v, n, is_input in zip(closed.jaxpr.invars, spec.names, spec.is_input) if is_input]
    outputs = [helper.make_tensor_value_info(n, _onnx_dtype(leaf.dtype), list(leaf.shape))
               for n, (_, leaf) in zip(outs, out_leaves)]
    graph = helper.make_graph([], _sanitize(name) or "main_graph", inputs, outputs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], ir_version=_IR_VERSION,
                              producer_name="compstack.from_jax (signature only)")
    import logging

    serde = logging.getLogger("onnx_ir")
    level, serde.level = serde.level, logging.ERROR  # "output not produced by any node" is the point here
    try:
        return cir.as_written(proto)
    finally:
        serde.setLevel(level)


def input_names_of(fn: Callable[..., Any], example_args: Any,
                   const_argnums: Sequence[int] = ()) -> list[str]:
    """The graph-input names :func:`import_jax` gives ``fn``'s arguments (no tracing).

    Raises:
        UserError: a leaf of ``example_args`` is not an array.
    """
    spec = _flatten_args(fn, _as_args(example_args), "<jax>", None, const_argnums)
    return [n for n, is_input in zip(spec.names, spec.is_input) if is_input]


def native_program(fn: Callable[..., Any], example_args: Any, *, input_names: Sequence[str] | None = None,
                   const_argnums: Sequence[int] = (), name: str = "<jax>") -> Any:
    """A :class:`compstack.frontends.native.NativeProgram` for ``fn``, without tracing or exporting.

    Args:
        fn: the JAX function.
        example_args: as for :func:`import_jax` (fixes the pytree structure; the leaves
            of ``const_argnums`` are kept and passed on every call).
        input_names: the IR's graph-input names, in order (default: those
            :func:`import_jax` derives).
        const_argnums: as for :func:`import_jax`.
        name: display name for errors.

    Raises:
        UserError: a leaf is not an array, or ``input_names`` has the wrong length.
    """
    spec = _flatten_args(fn, _as_args(example_args), name, input_names, const_argnums)
    return _program(fn, spec)


# ----------------------------------------------------------------------------- arguments


@dataclass
class _ArgSpec:
    """The flattened example arguments: one entry per leaf, in jaxpr-invar order."""

    names: list[str]
    arrays: list[np.ndarray]
    is_input: list[bool]
    treedef: Any


def _as_args(example_args: Any) -> tuple[Any, ...]:
    if isinstance(example_args, tuple):
        return example_args
    if isinstance(example_args, list):
        return tuple(example_args)
    return (example_args,)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _sanitize(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.]+", "_", text).strip("_") or "v"
    return out


def _param_names(fn: Callable[..., Any], count: int) -> list[str]:
    """Names of the first ``count`` positional parameters (``arg{i}`` when unknown)."""
    names: list[str] = []
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if len(names) == count:
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            start = len(names)
            names += [f"{p.name}{i}" for i in range(count - start)]
    names += [f"arg{i}" for i in range(len(names), count)]
    return names


def _key_str(key: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _is_array_leaf(leaf: Any) -> bool:
    import jax

    return isinstance(leaf, (bool, int, float, np.generic, np.ndarray, jax.Array))


def _flatten_args(fn: Callable[..., Any], args: tuple[Any, ...], name: str,
                  input_names: Sequence[str] | None, const_argnums: Sequence[int]) -> _ArgSpec:
    import jax

    params = _param_names(fn, len(args))
    consts = {int(i) % max(len(args), 1) for i in const_argnums}
    leaves, treedef = jax.tree_util.tree_flatten_with_path(args)
    names, arrays, is_input = [], [], []
    taken: set[str] = set()
    for path, leaf in leaves:
        argnum = path[0].idx
        keys = [_key_str(k) for k in path[1:]]
        shown = ".".join([params[argnum], *keys])
        if not _is_array_leaf(leaf):
            raise UserError(f"{name}: example argument '{shown}' is a {type(leaf).__name__}, not an array")
        base = _sanitize(shown)
        leaf_name, k = base, 1
        while leaf_name in taken:
            leaf_name = f"{base}_{k}"
            k += 1
        taken.add(leaf_name)
        names.append(leaf_name)
        arr = np.array(leaf)
        if isinstance(leaf, float) and not isinstance(leaf, np.floating):
            arr = arr.astype(np.float32)  # JAX traces Python floats as (weak) float32
        elif isinstance(leaf, int) and not isinstance(leaf, (bool, np.integer)):
            arr = arr.astype(np.int32)
        arrays.append(arr)
        is_input.append(argnum not in consts)
    if input_names is not None:
        wanted = sum(is_input)
        if len(input_names) != wanted:
            raise UserError(f"{name}: {len(input_names)} input name(s) given for {wanted} input leaves "
                            f"({', '.join(n for n, i in zip(names, is_input) if i)})")
        it = iter(input_names)
        names = [next(it) if i else n for n, i in zip(names, is_input)]
        if len(set(names)) != len(names):
            raise UserError(f"{name}: input names are not unique: {', '.join(names)}")
    return _ArgSpec(names, arrays, is_input, treedef)


def _program(fn: Callable[..., Any], spec: _ArgSpec) -> Any:
    """The NativeProgram: leaves in input order -> the original pytrees -> ``fn(*args)``."""
    import jax

    from compstack.frontends.native import NativeProgram

    fixed = list(spec.arrays)
    slots = [i for i, is_input in enumerate(spec.is_input) if is_input]
    treedef = spec.treedef

    def pack(arrays: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if len(arrays) != len(slots):
            raise UserError(f"expected {len(slots)} input arrays, got {len(arrays)}")
        leaves = list(fixed)
        for slot, arr in zip(slots, arrays):
            leaves[slot] = arr
        return tuple(jax.tree_util.tree_unflatten(treedef, leaves)), {}

    names = [spec.names[i] for i in slots]
    return NativeProgram("jax", fn, names, pack)


def _output_names(out_shape: Any, leaves: list[tuple[Any, Any]], given: Sequence[str] | None,
                  name: str, inputs: set[str]) -> list[str]:
    """Graph-output names: ``given``, else dict key paths or ``output_<i>``, made unique
    (``_1``...) against each other and the input / weight names."""
    if given is not None:
        if len(given) != len(leaves):
            raise UserError(f"{name}: {len(given)} output name(s) given, the function returns "
                            f"{len(leaves)} array(s)")
        clash = sorted((set(given) & inputs) | {n for n in given if list(given).count(n) > 1})
        if clash:
            raise UserError(f"{name}: output names must be unique and differ from the input names: "
                            f"{', '.join(clash)}")
        return list(given)
    if isinstance(out_shape, dict):
        raw = [_sanitize(".".join(_key_str(k) for k in path)) for path, _ in leaves]
    else:
        raw = [f"output_{i}" for i in range(len(leaves))]
    out, taken = [], set(inputs)
    for base in raw:
        n, k = base, 1
        while n in taken:
            n = f"{base}_{k}"
            k += 1
        taken.add(n)
        out.append(n)
    return out


def _remove_unused(model: Any) -> None:
    import onnx_ir.passes.common as common_passes

    common_passes.RemoveUnusedNodesPass()(model)


# ----------------------------------------------------------------------------- provenance


_THIS_FILE = os.path.normcase(os.path.abspath(__file__))


def _location(eqn: Any) -> str:
    """``/path/file.py:LINE`` of the innermost user frame of ``eqn``, or ``""``."""
    from jax._src import source_info_util

    tb = getattr(eqn.source_info, "traceback", None)
    if tb is None:
        return ""
    for frame in source_info_util.user_frames(tb):
        if os.path.normcase(os.path.abspath(frame.file_name)) == _THIS_FILE:
            continue
        return f"{frame.file_name}:{frame.start_line}"
    return ""


def _name_stack(eqn: Any) -> str:
    return str(getattr(eqn.source_info, "name_stack", "") or "")


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


# ----------------------------------------------------------------------------- converter core


_CALL_PRIMITIVES = frozenset({
    "jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
    "custom_vjp_call_jaxpr", "checkpoint", "remat", "remat2", "custom_lin",
})

_ALIAS_PRIMITIVES = frozenset({
    "stop_gradient", "copy", "copy_p", "device_put", "optimization_barrier", "sharding_constraint",
    "mesh_cast", "pvary", "reshard",
})


def _sub_jaxpr(eqn: Any) -> tuple[Any, list[Any]]:
    """The inner jaxpr of a call-like equation and its consts."""
    for key in ("call_jaxpr", "jaxpr", "fun_jaxpr"):
        inner = eqn.params.get(key)
        if inner is None:
            continue
        if hasattr(inner, "jaxpr") and hasattr(inner, "consts"):  # ClosedJaxpr
            return inner.jaxpr, list(inner.consts)
        if hasattr(inner, "eqns"):
            return inner, []
    raise UserError(f"JAX primitive '{eqn.primitive.name}' has no inner jaxpr")


def _call_scope(eqn: Any) -> str:
    """Scope name a call adds to its inner nodes: the public function name, if any."""
    fname = eqn.params.get("name")
    fname = getattr(fname, "__name__", fname)
    if isinstance(fname, str) and fname and not fname.startswith("_") and fname != "<lambda>":
        return fname
    return ""


def _check_known(jaxpr: Any, conv: _Converter) -> None:
    """Raise one UserError listing every primitive without a conversion."""
    unknown: list[tuple[str, str]] = []

    def walk(j: Any, outer: str) -> None:
        for eqn in j.eqns:
            prim = eqn.primitive.name
            where = _location(eqn) or outer
            if prim in _CALL_PRIMITIVES:
                walk(_sub_jaxpr(eqn)[0], where)
            elif prim not in _ALIAS_PRIMITIVES and prim not in _CONVERTERS:
                item = (prim, where or "<unknown location>")
                if item not in unknown:
                    unknown.append(item)

    walk(jaxpr, "")
    if not unknown:
        return
    shown = ", ".join(f"'{p}' at {w}" for p, w in unknown[:12])
    more = f" (and {len(unknown) - 12} more)" if len(unknown) > 12 else ""
    if len(unknown) == 1:
        msg = f"{conv.model_name}: JAX primitive {shown} has no ONNX conversion"
    else:
        msg = f"{conv.model_name}: JAX primitives {shown}{more} have no ONNX conversion"
    raise ConversionError(msg)


def _onnx_dtype(dtype: Any) -> int:
    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (KeyError, TypeError, ValueError):
        raise UserError(f"dtype {dtype} has no ONNX equivalent") from None


class _Unsupported(Exception):
    """A primitive used in a form the converter does not handle (becomes a UserError)."""


@dataclass
class _Eqn:
    """Per-equation emission state."""

    base: str  # node name: scope/prim_k
    props: dict[str, str]
    nodes: list[onnx.NodeProto] = field(default_factory=list)


class _Converter:
    """Builds the ONNX graph of a closed jaxpr, equation by equation."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.known: dict[str, np.ndarray] = {}  # statically known values by ONNX name
        self.taken: set[str] = set()
        self._const_ids: dict[tuple[str, tuple[int, ...], bytes], str] = {}
        self._prim_counts: dict[str, int] = {}
        self._node_names: set[str] = set()
        self._eqn: _Eqn | None = None

    # -- names and constants

    def fresh(self, base: str) -> str:
        base = _sanitize(base.replace("/", "."))
        name, k = base, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name

    def const(self, value: Any, dtype: Any = None) -> str:
        """An initializer holding ``value`` (deduplicated); returns its name."""
        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, hashlib.sha256(np.ascontiguousarray(arr).view(np.uint8).data).digest())
        if key in self._const_ids:
            return self._const_ids[key]
        name = self.fresh(f"const_{len(self._const_ids)}")
        self._const_ids[key] = name
        self.inits.append(numpy_helper.from_array(np.array(arr, order="C"), name))
        self.known[name] = arr
        return name

    def i64(self, values: Sequence[int] | int) -> str:
        return self.const(np.asarray(values, dtype=np.int64))

    # -- emission

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> Any:
        """Emit one node of the current equation; returns its output name (list if n_out > 1)."""
        assert self._eqn is not None
        outs = [self.fresh(f"{self._eqn.base}_{op_type}") for _ in range(n_out)]
        node = helper.make_node(op_type, list(inputs), outs, **{k: v for k, v in attrs.items() if v is not None})
        self._eqn.nodes.append(node)
        return outs if n_out > 1 else outs[0]

    def unsupported(self, reason: str) -> _Unsupported:
        return _Unsupported(reason)

    # -- graph

    def build(self, closed: Any, spec: _ArgSpec, out_names: list[str]) -> onnx.ModelProto:
        jaxpr = closed.jaxpr
        self.taken.update(spec.names)
        self.taken.update(out_names)
        inputs: list[onnx.ValueInfoProto] = []
        in_names: list[str] = []
        for var, name, arr, is_input in zip(jaxpr.invars, spec.names, spec.arrays, spec.is_input):
            aval = var.aval
            if is_input:
                inputs.append(helper.make_tensor_value_info(name, _onnx_dtype(aval.dtype), list(aval.shape)))
            else:
                self.inits.append(numpy_helper.from_array(np.array(arr, dtype=aval.dtype, order="C"), name))
                self.known[name] = arr
            in_names.append(name)
        results = self.convert(jaxpr, list(closed.consts), in_names, "")
        outputs = self._bind_outputs(jaxpr.outvars, results, out_names)
        graph = helper.make_graph(self.nodes, _sanitize(self.model_name) or "main_graph", inputs, outputs,
                                  initializer=self.inits)
        import jax

        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET), *_custom_opsets(self.nodes)],
                                 ir_version=_IR_VERSION, producer_name="compstack.from_jax",
                                 producer_version=jax.__version__)

    def _bind_outputs(self, outvars: list[Any], results: list[str], out_names: list[str]) -> list[onnx.ValueInfoProto]:
        produced = {o: node for node in self.nodes for o in node.output}
        renames: dict[str, str] = {}
        infos = []
        for var, src, name in zip(outvars, results, out_names):
            aval = var.aval
            if src in produced and src not in renames:
                renames[src] = name
            else:  # an input, a constant, or a value returned twice
                node = helper.make_node("Identity", [renames.get(src, src)], [name], name=f"{name}_identity")
                self.nodes.append(node)
            infos.append(helper.make_tensor_value_info(name, _onnx_dtype(aval.dtype), list(aval.shape)))
        for node in self.nodes:
            for i, v in enumerate(node.input):
                if v in renames:
                    node.input[i] = renames[v]
            for i, v in enumerate(node.output):
                if v in renames:
                    node.output[i] = renames[v]
        return infos

    def read(self, atom: Any, env: dict[Any, str]) -> str:
        """The ONNX name of a jaxpr atom (a Var, or a Literal made into a constant)."""
        from jax.extend.core import Literal

        if isinstance(atom, Literal):
            return self.const(np.asarray(atom.val, dtype=atom.aval.dtype))  # type: ignore[attr-defined]  # a ShapedArray
        try:
            return env[atom]
        except KeyError:
            raise UserError(f"{self.model_name}: internal error: jaxpr value {atom} is undefined") from None

    def convert(self, jaxpr: Any, consts: list[Any], in_names: list[str], scope: str,
                outer: str = "") -> list[str]:
        """Emit the nodes of ``jaxpr`` (inputs bound to ``in_names``); returns output names.

        ``outer`` is the user location of the call being inlined: equations of an inner
        jaxpr traced lazily (``custom_jvp`` functions such as ``jax.nn.relu``) have no
        user frame of their own and take the call's.
        """
        env: dict[Any, str] = {}
        for var, value in zip(jaxpr.constvars, consts):
            env[var] = self.const(np.asarray(value))
        for var, name in zip(jaxpr.invars, in_names):
            env[var] = name
        for eqn in jaxpr.eqns:
            ins = [self.read(v, env) for v in eqn.invars]
            prim = eqn.primitive.name
            eqn_scope = _join(scope, _name_stack(eqn))
            if prim in _CALL_PRIMITIVES:
                inner, inner_consts = _sub_jaxpr(eqn)
                outs = self.convert(inner, inner_consts, ins, _join(eqn_scope, _call_scope(eqn)),
                                    _location(eqn) or outer)
            elif prim in _ALIAS_PRIMITIVES:
                outs = ins[:len(eqn.outvars)]
            else:
                outs = self._convert_eqn(eqn, ins, eqn_scope, outer)
            for var, name in zip(eqn.outvars, outs):
                if type(var).__name__ != "DropVar":
                    env[var] = name
        return [self.read(v, env) for v in jaxpr.outvars]

    def _convert_eqn(self, eqn: Any, ins: list[str], scope: str, outer: str) -> list[str]:
        prim = eqn.primitive.name
        k = self._prim_counts.get(prim, 0)  # counts equations that emitted nodes
        base = _join(scope, f"{prim}_{k}")
        props = {PRIMITIVE_KEY: prim}
        where = _location(eqn) or outer
        if where:
            props[SOURCE_KEY] = f"{where} {scope}" if scope else where
        if scope:
            props[NAME_STACK_KEY] = scope
        self._eqn = _Eqn(base, props)
        try:
            outs = _CONVERTERS[prim](self, eqn, ins)
        except _Unsupported as exc:
            loc = f" at {where}" if where else ""
            raise ConversionError(f"{self.model_name}: JAX primitive '{prim}'{loc}: {exc}") from None
        finally:
            current, self._eqn = self._eqn, None
        if current.nodes:
            self._prim_counts[prim] = k + 1
        self._finish(current, outs, len(eqn.outvars))
        return outs

    def _finish(self, eqn: _Eqn, outs: list[str], n_out: int) -> None:
        """Name the equation's nodes and values, attach provenance, append to the graph."""
        if not eqn.nodes:
            return
        producers = {o: node for node in eqn.nodes for o in node.output}
        main = next((producers[o] for o in outs if o in producers), eqn.nodes[-1])
        renames: dict[str, str] = {}
        for j, o in enumerate(outs):
            if o in producers and o not in renames:
                self.taken.discard(o)
                renames[o] = self.fresh(eqn.base if n_out == 1 else f"{eqn.base}_{j}")
        for i, o in enumerate(outs):
            outs[i] = renames.get(o, o)
        for node in eqn.nodes:
            for i, v in enumerate(node.input):
                node.input[i] = renames.get(v, v)
            for i, v in enumerate(node.output):
                node.output[i] = renames.get(v, v)
            node.name = self._node_name(eqn.base if node is main else f"{eqn.base}/{node.op_type}")
            for key, value in eqn.props.items():
                entry = node.metadata_props.add()
                entry.key, entry.value = key, value
        self.nodes.extend(eqn.nodes)

    def _node_name(self, base: str) -> str:
        name, k = base, 1
        while name in self._node_names:
            name = f"{base}_{k}"
            k += 1
        self._node_names.add(name)
        return name


# ----------------------------------------------------------------------------- helpers


def _shape(atom: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in atom.aval.shape)


def _dtype(atom: Any) -> np.dtype:
    return np.dtype(atom.aval.dtype)


def _transpose(cx: _Converter, x: str, perm: Sequence[int]) -> str:
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    return cx.op("Transpose", [x], perm=perm)


def _reshape(cx: _Converter, x: str, shape: Sequence[int], current: Sequence[int] | None = None) -> str:
    shape = [int(d) for d in shape]
    if current is not None and list(current) == shape:
        return x
    return cx.op("Reshape", [x, cx.i64(shape)], allowzero=1 if 0 in shape else None)


def _cast(cx: _Converter, x: str, src: np.dtype, dst: Any) -> str:
    if np.dtype(src) == np.dtype(dst):
        return x
    return cx.op("Cast", [x], to=_onnx_dtype(dst))


_Conv = Callable[[_Converter, Any, list[str]], list[str]]
_CONVERTERS: dict[str, _Conv] = {}


def _register(*names: str) -> Callable[[_Conv], _Conv]:
    def deco(f: _Conv) -> _Conv:
        for n in names:
            _CONVERTERS[n] = f
        return f
    return deco


def _simple(prim: str, op_type: str) -> None:
    def conv(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
        return [cx.op(op_type, ins)]
    _CONVERTERS[prim] = conv


for _prim, _op in {
    "add": "Add", "sub": "Sub", "mul": "Mul", "max": "Max", "min": "Min", "neg": "Neg", "exp": "Exp",
    "log": "Log", "tanh": "Tanh", "logistic": "Sigmoid", "sqrt": "Sqrt", "pow": "Pow", "erf": "Erf",
    "abs": "Abs", "sign": "Sign", "floor": "Floor", "ceil": "Ceil", "sin": "Sin", "cos": "Cos", "tan": "Tan",
    "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh",
    "acosh": "Acosh", "atanh": "Atanh", "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
    "ge": "GreaterOrEqual",
}.items():
    _simple(_prim, _op)


@_register("ffi_call")
def _ffi_call(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    """A compstack custom op called through ``jax.ffi`` (:func:`compstack.ops.jax_call`):
    one node of the op's ONNX domain, attributes recovered from the call."""
    from compstack.ops._jax import op_of_ffi_call

    target = str(eqn.params.get("target_name", ""))
    found = op_of_ffi_call(target, eqn.params.get("attributes", ()))
    if found is None:
        raise cx.unsupported(f"custom call target {target!r} is not a compstack custom op (compstack.ops)")
    op, attrs = found
    values = {k: int(v) if isinstance(v, bool) else v for k, v in attrs.items()}
    outs = cx.op(op.name, ins, n_out=len(op.outputs), domain=op.domain, **values)
    return outs if isinstance(outs, list) else [outs]


def _custom_opsets(nodes: Sequence[onnx.NodeProto]) -> list[onnx.OperatorSetIdProto]:
    """Opset imports of the custom-op domains ``nodes`` use (compstack.ops)."""
    domains = sorted({n.domain for n in nodes if n.domain not in ("", "ai.onnx")})
    if not domains:
        return []
    from compstack.ops._registry import all_ops

    versions = {op.domain: op.version for op in all_ops()}
    return [helper.make_opsetid(d, versions.get(d, 1)) for d in domains]


@_register("ne")
def _ne(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    return [cx.op("Not", [cx.op("Equal", ins)])]


@_register("and", "or", "xor", "not")
def _logical(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    prim = eqn.primitive.name
    if _dtype(eqn.invars[0]) == np.bool_:
        return [cx.op(prim.capitalize(), ins)]
    return [cx.op("Bitwise" + prim.capitalize(), ins)]


@_register("div")
def _div(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    dt = _dtype(eqn.outvars[0])
    if not np.issubdtype(dt, np.signedinteger):
        return [cx.op("Div", ins)]
    # JAX (C) integer division truncates toward zero; ONNX leaves the rounding of
    # negative quotients to the backend: divide magnitudes, then apply the sign.
    a, b = ins
    q = cx.op("Div", [cx.op("Abs", [a]), cx.op("Abs", [b])])
    sign = cx.op("Mul", [cx.op("Sign", [a]), cx.op("Sign", [b])])
    return [cx.op("Mul", [q, sign])]


@_register("rem")
def _rem(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    return [cx.op("Mod", ins, fmod=1)]  # C fmod: the sign of the dividend, like lax.rem


@_register("log1p")
def _log1p(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    one = cx.const(np.ones((), _dtype(eqn.invars[0])))
    return [cx.op("Log", [cx.op("Add", [ins[0], one])])]


@_register("expm1")
def _expm1(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    one = cx.const(np.ones((), _dtype(eqn.invars[0])))
    return [cx.op("Sub", [cx.op("Exp", ins), one])]


@_register("erfc")
def _erfc(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    # 1 - erf(x): exact in absolute terms; relative accuracy is lost for x >> 1
    # (jax.nn.gelu's tail, where the result is ~0 anyway).
    one = cx.const(np.ones((), _dtype(eqn.invars[0])))
    return [cx.op("Sub", [one, cx.op("Erf", ins)])]


@_register("exp2")
def _exp2(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    two = cx.const(np.asarray(2, _dtype(eqn.invars[0])))
    return [cx.op("Pow", [two, ins[0]])]


@_register("rsqrt")
def _rsqrt(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    return [cx.op("Reciprocal", [cx.op("Sqrt", ins)])]


@_register("square")
def _square(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    return [cx.op("Mul", [ins[0], ins[0]])]


@_register("integer_pow")
def _integer_pow(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    y = int(eqn.params["y"])
    x = ins[0]
    dt = _dtype(eqn.invars[0])
    if y == 0:
        return [cx.op("Expand", [cx.const(np.ones((), dt)), cx.i64(_shape(eqn.invars[0]))])]
    # Repeated squaring, as XLA expands integer_pow (closer to JAX than Pow's powf).
    result, power, n = None, x, abs(y)
    while n:
        if n & 1:
            result = power if result is None else cx.op("Mul", [result, power])
        n >>= 1
        if n:
            power = cx.op("Mul", [power, power])
    assert result is not None
    if y < 0:
        result = cx.op("Reciprocal", [result])
    return [result]


@_register("round")
def _round(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    method = int(eqn.params.get("rounding_method", 0))
    if method == 1:  # TO_NEAREST_EVEN, like ONNX Round
        return [cx.op("Round", ins)]
    x = ins[0]  # AWAY_FROM_ZERO: sign(x) * floor(|x| + 0.5)
    half = cx.const(np.asarray(0.5, _dtype(eqn.invars[0])))
    mag = cx.op("Floor", [cx.op("Add", [cx.op("Abs", [x]), half])])
    return [cx.op("Mul", [cx.op("Sign", [x]), mag])]


@_register("is_finite")
def _is_finite(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    bad = cx.op("Or", [cx.op("IsInf", ins), cx.op("IsNaN", ins)])
    return [cx.op("Not", [bad])]


@_register("clamp")
def _clamp(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    lo, x, hi = ins  # lax.clamp(min, x, max)
    return [cx.op("Min", [cx.op("Max", [x, lo]), hi])]


@_register("select_n")
def _select_n(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    pred, *cases = ins
    if len(cases) == 1:
        return [cases[0]]
    if _dtype(eqn.invars[0]) == np.bool_:
        return [cx.op("Where", [pred, cases[1], cases[0]])]
    pdt = _dtype(eqn.invars[0])
    result = cases[0]
    for i, case in enumerate(cases[1:], start=1):
        hit = cx.op("Equal", [pred, cx.const(np.asarray(i, pdt))])
        result = cx.op("Where", [hit, case, result])
    return [result]


@_register("convert_element_type")
def _convert(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    src, dst = _dtype(eqn.invars[0]), _dtype(eqn.outvars[0])
    if src == dst:
        return [ins[0]]
    return [cx.op("Cast", ins, to=_onnx_dtype(dst))]


@_register("reduce_precision")
def _reduce_precision(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    dt = _dtype(eqn.invars[0])
    bits = (int(eqn.params["exponent_bits"]), int(eqn.params["mantissa_bits"]))
    info = np.finfo(dt)
    if bits[0] >= info.nexp and bits[1] >= info.nmant:
        return [ins[0]]
    target = {(8, 7): "bfloat16", (5, 10): np.float16}.get(bits)
    if target is None:
        raise cx.unsupported(f"reduce_precision to {bits[0]} exponent / {bits[1]} mantissa bits "
                             "matches no ONNX type")
    if target == "bfloat16":
        import ml_dtypes

        target = ml_dtypes.bfloat16
    low = cx.op("Cast", ins, to=_onnx_dtype(target))
    return [cx.op("Cast", [low], to=_onnx_dtype(dt))]


# ----------------------------------------------------------------------------- linear algebra


@_register("dot_general")
def _dot_general(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = (list(map(int, d)) for d in (lc, rc, lb, rb))
    lhs, rhs = eqn.invars
    ls, rs = _shape(lhs), _shape(rhs)
    out_dt = _dtype(eqn.outvars[0])
    a = _cast(cx, ins[0], _dtype(lhs), out_dt)
    b = _cast(cx, ins[1], _dtype(rhs), out_dt)
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    a = _transpose(cx, a, lb + lf + lc)
    b = _transpose(cx, b, rb + rc + rf)
    bshape = [ls[d] for d in lb]
    m, k, n = [ls[d] for d in lf], [ls[d] for d in lc], [rs[d] for d in rf]
    direct = len(k) == 1 and len(n) <= 1 and (not lb or (len(m) == 1 and len(n) == 1))
    if direct:
        return [cx.op("MatMul", [a, b])]
    pm, pk, pn = int(np.prod(m)), int(np.prod(k)), int(np.prod(n))
    a = _reshape(cx, a, bshape + [pm, pk], bshape + m + k)
    b = _reshape(cx, b, bshape + [pk, pn], bshape + k + n)
    y = cx.op("MatMul", [a, b])
    return [_reshape(cx, y, bshape + m + n)]


@_register("conv_general_dilated")
def _conv(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    p = eqn.params
    if any(int(d) != 1 for d in p["lhs_dilation"]):
        raise cx.unsupported("lhs_dilation (transposed convolution) is not converted")
    if int(p.get("batch_group_count", 1)) != 1:
        raise cx.unsupported("batch_group_count > 1 is not converted")
    pads = [(int(lo), int(hi)) for lo, hi in p["padding"]]
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise cx.unsupported("negative padding is not converted")
    dn = p["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = (list(map(int, s)) for s in (dn.lhs_spec, dn.rhs_spec, dn.out_spec))
    out_dt = _dtype(eqn.outvars[0])
    x = _transpose(cx, _cast(cx, ins[0], _dtype(eqn.invars[0]), out_dt), lhs_spec)
    w = _transpose(cx, _cast(cx, ins[1], _dtype(eqn.invars[1]), out_dt), rhs_spec)
    kernel = [_shape(eqn.invars[1])[d] for d in rhs_spec[2:]]
    y = cx.op("Conv", [x, w], kernel_shape=kernel, strides=[int(s) for s in p["window_strides"]],
              pads=[lo for lo, _ in pads] + [hi for _, hi in pads],
              dilations=[int(d) for d in p["rhs_dilation"]], group=int(p["feature_group_count"]))
    return [_transpose(cx, y, list(np.argsort(out_spec)))]


# ----------------------------------------------------------------------------- reductions


def _reduce(op_type: str) -> _Conv:
    def conv(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
        axes = [int(a) for a in eqn.params["axes"]]
        if not axes:
            return [ins[0]]
        return [cx.op(op_type, [ins[0], cx.i64(axes)], keepdims=0)]
    return conv


for _prim, _op in {"reduce_sum": "ReduceSum", "reduce_max": "ReduceMax", "reduce_min": "ReduceMin",
                   "reduce_prod": "ReduceProd"}.items():
    _CONVERTERS[_prim] = _reduce(_op)


@_register("reduce_and", "reduce_or")
def _reduce_bool(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    axes = [int(a) for a in eqn.params["axes"]]
    if not axes:
        return [ins[0]]
    op_type = "ReduceMin" if eqn.primitive.name == "reduce_and" else "ReduceMax"
    as_int = cx.op("Cast", ins, to=onnx.TensorProto.INT32)
    red = cx.op(op_type, [as_int, cx.i64(axes)], keepdims=0)
    return [cx.op("Cast", [red], to=onnx.TensorProto.BOOL)]


@_register("argmax", "argmin")
def _argmax(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    (axis,) = eqn.params["axes"]
    op_type = "ArgMax" if eqn.primitive.name == "argmax" else "ArgMin"
    y = cx.op(op_type, ins, axis=int(axis), keepdims=0)
    return [_cast(cx, y, np.dtype(np.int64), _dtype(eqn.outvars[0]))]


@_register("cumsum")
def _cumsum(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    axis = cx.const(np.asarray(int(eqn.params["axis"]), np.int64))
    return [cx.op("CumSum", [ins[0], axis], reverse=1 if eqn.params.get("reverse") else 0)]


def _pool_layout(eqn: Any) -> tuple[list[int], list[int]]:
    """Split the dims of a reduce_window into untouched (batch/channel) and spatial ones."""
    p = eqn.params
    shape = _shape(eqn.invars[0])
    win, strides = [int(w) for w in p["window_dimensions"]], [int(s) for s in p["window_strides"]]
    pads = [(int(lo), int(hi)) for lo, hi in p["padding"]]
    lead = [d for d in range(len(shape)) if win[d] == 1 and strides[d] == 1 and pads[d] == (0, 0)]
    spatial = [d for d in range(len(shape)) if d not in lead]
    return lead, spatial


@_register("reduce_window_max", "reduce_window_min", "reduce_window_sum")
def _reduce_window(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    """Pooling: MaxPool / AveragePool over the spatial dims only.

    The dims whose window, stride and padding are trivial (batch, channel) are moved
    first and merged into ONNX's (N, C); the rest is the kernel (a 2-D kernel for
    NCHW/NHWC 2x2 pooling, never the 4-D window JAX writes).
    """
    p = eqn.params
    prim = eqn.primitive.name
    if any(int(d) != 1 for d in p["base_dilation"]):
        raise cx.unsupported("base_dilation is not converted")
    pads = [(int(lo), int(hi)) for lo, hi in p["padding"]]
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise cx.unsupported("negative padding is not converted")
    shape, out_shape = _shape(eqn.invars[0]), _shape(eqn.outvars[0])
    lead, spatial = _pool_layout(eqn)
    if not spatial:
        return [ins[0]]
    x = ins[0]
    if prim == "reduce_window_min":
        x = cx.op("Neg", [x])
    perm = lead + spatial
    x = _transpose(cx, x, perm)
    lead_shape = [shape[d] for d in lead]
    nc = [int(np.prod(lead_shape[:-1])), lead_shape[-1]] if lead else [1, 1]
    x = _reshape(cx, x, nc + [shape[d] for d in spatial], lead_shape + [shape[d] for d in spatial])
    attrs: dict[str, Any] = {"kernel_shape": [int(p["window_dimensions"][d]) for d in spatial],
             "strides": [int(p["window_strides"][d]) for d in spatial],
             "pads": [pads[d][0] for d in spatial] + [pads[d][1] for d in spatial],
             "dilations": [int(p["window_dilation"][d]) for d in spatial]}
    if prim == "reduce_window_sum":
        y = cx.op("AveragePool", [x], count_include_pad=1, **attrs)
        y = cx.op("Mul", [y, cx.const(np.asarray(np.prod(attrs["kernel_shape"]), _dtype(eqn.invars[0])))])
    else:
        y = cx.op("MaxPool", [x], **attrs)
    pooled_perm_shape = lead_shape + [out_shape[d] for d in spatial]
    y = _reshape(cx, y, pooled_perm_shape, nc + [out_shape[d] for d in spatial])
    y = _transpose(cx, y, list(np.argsort(perm)))
    if prim == "reduce_window_min":
        y = cx.op("Neg", [y])
    return [y]


# ----------------------------------------------------------------------------- shapes


@_register("broadcast_in_dim")
def _broadcast_in_dim(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    src = _shape(eqn.invars[0])
    shape = [int(d) for d in eqn.params["shape"]]
    dims = [int(d) for d in eqn.params["broadcast_dimensions"]]
    if list(src) == shape:
        return [ins[0]]
    expanded = [1] * len(shape)
    for s, d in zip(src, dims):
        expanded[d] = s
    x = ins[0] if not src else _reshape(cx, ins[0], expanded, src)
    if expanded == shape:
        return [x]
    return [cx.op("Expand", [x, cx.i64(shape)])]


@_register("reshape")
def _reshape_prim(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    x = ins[0]
    dims = eqn.params.get("dimensions")
    if dims is not None:
        x = _transpose(cx, x, dims)
    return [cx.op("Reshape", [x, cx.i64([int(d) for d in eqn.params["new_sizes"]])],
                  allowzero=1 if 0 in eqn.params["new_sizes"] else None)]


@_register("squeeze")
def _squeeze(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    dims = [int(d) for d in eqn.params["dimensions"]]
    if not dims:
        return [ins[0]]
    return [cx.op("Squeeze", [ins[0], cx.i64(dims)])]


@_register("expand_dims")
def _expand_dims(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    return [cx.op("Unsqueeze", [ins[0], cx.i64([int(d) for d in eqn.params["dimensions"]])])]


@_register("transpose")
def _transpose_prim(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    return [cx.op("Transpose", ins, perm=[int(p) for p in eqn.params["permutation"]])]


@_register("concatenate")
def _concatenate(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    return [cx.op("Concat", ins, axis=int(eqn.params["dimension"]))]


@_register("stack")
def _stack(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    axis = cx.i64([int(eqn.params["axis"])])
    parts = [cx.op("Unsqueeze", [x, axis]) for x in ins]
    return [cx.op("Concat", parts, axis=int(eqn.params["axis"]))]


@_register("tile")
def _tile(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    reps = [int(r) for r in eqn.params["reps"]]
    rank = len(_shape(eqn.outvars[0]))
    x = ins[0]
    src = _shape(eqn.invars[0])
    if len(src) < rank:  # numpy semantics: leading dims of 1 are added
        x = _reshape(cx, x, [1] * (rank - len(src)) + list(src), src)
    reps = [1] * (rank - len(reps)) + reps
    return [cx.op("Tile", [x, cx.i64(reps)])]


@_register("split")
def _split(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    sizes = [int(s) for s in eqn.params["sizes"]]
    outs = cx.op("Split", [ins[0], cx.i64(sizes)], n_out=len(sizes), axis=int(eqn.params["axis"]))
    return outs if isinstance(outs, list) else [outs]


@_register("slice")
def _slice(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    starts = [int(s) for s in eqn.params["start_indices"]]
    ends = [int(s) for s in eqn.params["limit_indices"]]
    strides = eqn.params.get("strides")
    steps = [int(s) for s in strides] if strides is not None else [1] * len(starts)
    shape = _shape(eqn.invars[0])
    axes = [d for d in range(len(shape)) if (starts[d], ends[d], steps[d]) != (0, shape[d], 1)]
    if not axes:
        return [ins[0]]
    inputs = [ins[0], cx.i64([starts[d] for d in axes]), cx.i64([ends[d] for d in axes]), cx.i64(axes)]
    if any(steps[d] != 1 for d in axes):
        inputs.append(cx.i64([steps[d] for d in axes]))
    return [cx.op("Slice", inputs)]


@_register("rev")
def _rev(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    dims = [int(d) for d in eqn.params["dimensions"]]
    if not dims:
        return [ins[0]]
    n = len(dims)
    big = np.iinfo(np.int64).min
    return [cx.op("Slice", [ins[0], cx.i64([-1] * n), cx.i64([big] * n), cx.i64(dims), cx.i64([-1] * n)])]


@_register("dynamic_slice")
def _dynamic_slice(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    x, *idx = ins
    shape = _shape(eqn.invars[0])
    sizes = [int(s) for s in eqn.params["slice_sizes"]]
    if len(idx) != len(shape):
        raise cx.unsupported("dynamic_slice with dynamic shapes is not converted")
    if all(i in cx.known for i in idx):
        # JAX clamps each start so the slice stays inside the operand.
        starts = [min(max(int(cx.known[i]), 0), shape[d] - sizes[d]) for d, i in enumerate(idx)]
        axes = [d for d in range(len(shape)) if (starts[d], sizes[d]) != (0, shape[d])]
        if not axes:
            return [x]
        return [cx.op("Slice", [x, cx.i64([starts[d] for d in axes]),
                                cx.i64([starts[d] + sizes[d] for d in axes]), cx.i64(axes)])]
    parts = []
    for d, i in enumerate(idx):
        i64 = _cast(cx, i, _dtype(eqn.invars[1 + d]), np.int64)
        clipped = cx.op("Clip", [i64, cx.i64(0), cx.i64(shape[d] - sizes[d])])
        parts.append(cx.op("Reshape", [clipped, cx.i64([1])]))
    starts_v = cx.op("Concat", parts, axis=0)
    ends_v = cx.op("Add", [starts_v, cx.i64(sizes)])
    return [cx.op("Slice", [x, starts_v, ends_v, cx.i64(list(range(len(shape))))])]


@_register("pad")
def _pad(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    x, value = ins
    config = [(int(lo), int(hi), int(interior)) for lo, hi, interior in eqn.params["padding_config"]]
    if any(interior for _, _, interior in config):
        raise cx.unsupported("interior padding is not converted")
    pads = [max(lo, 0) for lo, _, _ in config] + [max(hi, 0) for _, hi, _ in config]
    y = cx.op("Pad", [x, cx.i64(pads), value], mode="constant") if any(pads) else x
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        padded = [s + max(lo, 0) + max(hi, 0) for s, (lo, hi, _) in zip(_shape(eqn.invars[0]), config)]
        starts = [max(-lo, 0) for lo, _, _ in config]
        ends = [p - max(-hi, 0) for p, (_, hi, _) in zip(padded, config)]
        y = cx.op("Slice", [y, cx.i64(starts), cx.i64(ends), cx.i64(list(range(len(config))))])
    return [y]


@_register("iota")
def _iota(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    p = eqn.params
    shape = [int(d) for d in p["shape"]]
    dim = int(p["dimension"])
    dt = np.dtype(p["dtype"])
    small = [1] * len(shape)
    small[dim] = shape[dim]
    ramp = np.arange(shape[dim]).astype(dt).reshape(small)
    if small == shape:
        return [cx.const(ramp)]  # a constant; _finish names nothing (no node)
    y = cx.op("Expand", [cx.const(ramp), cx.i64(shape)])
    if int(np.prod(shape)) <= 1 << 16:
        cx.known[y] = np.broadcast_to(ramp, shape)
    return [y]


# ----------------------------------------------------------------------------- indexing


def _gather_fill(dtype: np.dtype, fill: Any) -> np.ndarray:
    if fill is not None:
        return np.asarray(fill, dtype)
    if np.issubdtype(dtype, np.inexact):
        return np.asarray(np.nan, dtype)
    if dtype == np.bool_:
        return np.asarray(True)
    if np.issubdtype(dtype, np.signedinteger):
        return np.asarray(np.iinfo(dtype).min, dtype)
    return np.asarray(np.iinfo(dtype).max, dtype)


@_register("gather")
def _gather(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    """``jnp.take`` / ``x[idx]`` / ``x[:, idx]``: one indexed axis, whole slices -> Gather."""
    p = eqn.params
    dn = p["dimension_numbers"]
    shape, ishape, oshape = _shape(eqn.invars[0]), _shape(eqn.invars[1]), _shape(eqn.outvars[0])
    sizes = [int(s) for s in p["slice_sizes"]]
    collapsed = [int(d) for d in dn.collapsed_slice_dims]
    index_map = [int(d) for d in dn.start_index_map]
    simple = (len(index_map) == 1 and collapsed == index_map and not tuple(dn.operand_batching_dims)
              and ishape and ishape[-1] == 1)
    axis = index_map[0] if simple else -1
    if simple:
        simple = all(sizes[d] == (1 if d == axis else shape[d]) for d in range(len(shape)))
    if not simple:
        raise cx.unsupported("only take-like gathers (one indexed axis, whole slices: jnp.take, x[idx], "
                             "x[:, idx]) are converted; this gather indexes "
                             f"{len(index_map)} axis/axes with slice sizes {tuple(sizes)}")
    mode = str(p.get("mode", "")).rsplit(".", 1)[-1].upper()
    idx_dt = _dtype(eqn.invars[1])
    nbatch = len(ishape) - 1
    idx = _reshape(cx, ins[1], ishape[:-1], ishape)
    dim = shape[axis]
    valid = None
    if "CLIP" in mode:
        idx = cx.op("Clip", [idx, cx.const(np.asarray(0, idx_dt)), cx.const(np.asarray(dim - 1, idx_dt))])
    elif "FILL" in mode:
        lo = cx.op("GreaterOrEqual", [idx, cx.const(np.asarray(0, idx_dt))])
        hi = cx.op("Less", [idx, cx.const(np.asarray(dim, idx_dt))])
        valid = cx.op("And", [lo, hi])
        idx = cx.op("Where", [valid, idx, cx.const(np.asarray(0, idx_dt))])
    y = cx.op("Gather", [ins[0], idx], axis=axis)
    onnx_shape = list(shape[:axis]) + list(ishape[:-1]) + list(shape[axis + 1:])
    if valid is not None:
        mask_shape = [1] * axis + list(ishape[:-1]) + [1] * (len(shape) - axis - 1)
        mask = _reshape(cx, valid, mask_shape, ishape[:-1])
        fill = cx.const(_gather_fill(_dtype(eqn.outvars[0]), p.get("fill_value")))
        y = cx.op("Where", [mask, y, fill])
    # ONNX puts the batch dims at ``axis``; JAX puts the operand's dims at offset_dims.
    labels = [("o", d) for d in range(axis)] + [("b", j) for j in range(nbatch)] + \
             [("o", d) for d in range(axis + 1, len(shape))]
    offset = [int(d) for d in dn.offset_dims]
    kept = [d for d in range(len(shape)) if d != axis]
    jax_labels, it_o, it_b = [], iter(kept), iter(range(nbatch))
    for pos in range(len(oshape)):
        jax_labels.append(("o", next(it_o)) if pos in offset else ("b", next(it_b)))
    perm = [labels.index(lab) for lab in jax_labels]
    assert [onnx_shape[i] for i in perm] == list(oshape), (onnx_shape, oshape, perm)
    return [_transpose(cx, y, perm)]


# ----------------------------------------------------------------------------- sorting


@_register("sort")
def _sort(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    """Ascending sort along ``dimension`` as a stable TopK (largest=0); extra operands
    (argsort's iota) follow the keys' permutation."""
    p = eqn.params
    if int(p.get("num_keys", 1)) != 1:
        raise cx.unsupported("sort with several keys is not converted")
    axis = int(p["dimension"])
    n = _shape(eqn.invars[0])[axis]
    values, indices = cx.op("TopK", [ins[0], cx.i64([n])], n_out=2, axis=axis, largest=0, sorted=1)
    outs = [values]
    for var, x in zip(eqn.invars[1:], ins[1:]):
        known = cx.known.get(x)
        shape = _shape(var)
        ramp = np.arange(shape[axis]).reshape([-1 if d == axis else 1 for d in range(len(shape))])
        if known is not None and np.array_equal(known, np.broadcast_to(ramp, shape)):
            outs.append(_cast(cx, indices, np.dtype(np.int64), _dtype(var)))  # argsort
        else:
            outs.append(cx.op("GatherElements", [x, indices], axis=axis))
    return outs


@_register("top_k")
def _top_k(cx: _Converter, eqn: Any, ins: list[str]) -> list[str]:
    k = int(eqn.params["k"])
    axis = int(eqn.params.get("axis", -1))
    values, indices = cx.op("TopK", [ins[0], cx.i64([k])], n_out=2, axis=axis, largest=1, sorted=1)
    return [values, _cast(cx, indices, np.dtype(np.int64), _dtype(eqn.outvars[1]))]


#: The JAX primitives :func:`import_jax` converts (calls are inlined, identities dropped).
PRIMITIVES: frozenset[str] = frozenset(_CONVERTERS) | _CALL_PRIMITIVES | _ALIAS_PRIMITIVES
