"""What a custom op is: its signature, shape rule, reference and kernels, validated.

A :class:`CustomOp` is plain data plus two Python callables (the shape rule and the
NumPy reference). Everything is checked when it is built (:func:`make_op`), so a
mistake in a registration is one clear error at import time, never a crash inside a
compiler stack later.
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEVICES",
    "DTYPES",
    "Attr",
    "CustomOp",
    "OpDefinitionError",
    "TensorParam",
    "TensorType",
    "make_op",
    "same_as",
]

#: dtypes a custom op may declare, with their ONNX ``TensorProto`` codes (the kernel ABI's
#: ``cs_tensor.dtype``, see ``csrc/include/compstack/kernel.h``).
DTYPES: dict[str, int] = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "bool": 9,
                          "float16": 10, "float64": 11}

#: Devices a kernel may be given for.
DEVICES = ("cpu", "cuda")

#: Domains an op may not claim (every stack already defines them).
_RESERVED = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.contrib", "ai.onnx.preview.training",
                       "com.microsoft", "com.microsoft.nchwc", "pkg.onnxscript.torch_lib"})
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MISSING = object()


class OpDefinitionError(ValueError):
    """A custom-op registration is invalid; the message names the op and the field."""


@dataclass(frozen=True)
class TensorType:
    """A tensor's type as shape rules see it.

    Attributes:
        shape: the dims; ``None`` for an unknown (symbolic) dim.
        dtype: numpy dtype name (``float32``).
    """

    shape: tuple[int | None, ...]
    dtype: str

    @property
    def rank(self) -> int:
        """Number of dims."""
        return len(self.shape)


@dataclass(frozen=True)
class Attr:
    """An attribute declaration: ``Attr(float, 1e-6, "added to the mean square")``.

    Attributes:
        kind: ``int``, ``float`` or ``bool`` (what the kernel ABI can pass).
        default: the value when a node omits it; ``Attr.REQUIRED`` for none.
        doc: one line for schemas and ``compstack ops list``.
    """

    kind: type
    default: Any = _MISSING
    doc: str = ""

    REQUIRED = _MISSING

    @property
    def required(self) -> bool:
        """True when the attribute has no default."""
        return self.default is _MISSING


@dataclass(frozen=True)
class TensorParam:
    """One input or output: its name and the dtypes it may take.

    Attributes:
        name: the formal parameter name (an identifier).
        dtypes: allowed numpy dtype names.
        type_var: the type variable shared with other parameters (``T``), or ``""``
            when the parameter has its own dtype list.
    """

    name: str
    dtypes: tuple[str, ...]
    type_var: str = ""


#: ``shape(*input_types, **attrs) -> TensorType | sequence of TensorType``.
ShapeRule = Callable[..., Any]
#: ``reference(*numpy_inputs, **attrs) -> array | tuple of arrays``.
Reference = Callable[..., Any]


@dataclass(frozen=True)
class CustomOp:
    """A registered custom op (see :func:`compstack.ops.custom_op`).

    Attributes:
        domain: the ONNX domain (``compstack``, ``mylib``).
        name: the op type inside the domain (``rms_norm``).
        inputs, outputs: the tensor parameters, in order.
        attrs: attribute declarations, in order (the kernel ABI's order).
        shape_rule: output types from input types and attributes.
        reference: the NumPy implementation (the oracle of ``compstack ops test``).
        kernels: C symbol per device (``{"cpu": "cs_rms_norm"}``) in the kernel library.
        sources: extra C++ sources compiled into the kernel library (user ops).
        cuda_sources: extra CUDA sources.
        test_shapes: input shapes ``compstack ops test`` runs, one tuple of shapes per case.
        doc: what the op computes.
        version: the domain's opset version the op is defined in.
        origin: where the op was registered (``module:NAME`` or ``file:/abs/path.py``).
    """

    domain: str
    name: str
    inputs: tuple[TensorParam, ...]
    outputs: tuple[TensorParam, ...]
    attrs: tuple[tuple[str, Attr], ...]
    shape_rule: ShapeRule
    reference: Reference
    kernels: Mapping[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    cuda_sources: tuple[str, ...] = ()
    test_shapes: tuple[tuple[tuple[int, ...], ...], ...] = ()
    doc: str = ""
    version: int = 1
    origin: str = ""

    @property
    def qualname(self) -> str:
        """``domain::name``."""
        return f"{self.domain}::{self.name}"

    @property
    def type_vars(self) -> dict[str, tuple[str, ...]]:
        """Type variable -> allowed dtypes (only parameters declared with one)."""
        return {p.type_var: p.dtypes for p in self.inputs + self.outputs if p.type_var}

    def signature_key(self) -> tuple[Any, ...]:
        """What must match for a second registration of the same name to be accepted."""
        return (self.inputs, self.outputs, tuple((n, a.kind, repr(a.default)) for n, a in self.attrs),
                tuple(sorted(self.kernels.items())), self.version)

    def attr_values(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every attribute's value: ``given`` checked and converted, defaults filled in.

        Raises:
            OpDefinitionError: an unknown name, a missing required attribute, or a value
                of the wrong type.
        """
        given = dict(given or {})
        out: dict[str, Any] = {}
        for name, attr in self.attrs:
            if name in given:
                out[name] = _convert_attr(self.qualname, name, attr.kind, given.pop(name))
            elif attr.required:
                raise OpDefinitionError(f"{self.qualname}: attribute '{name}' is required")
            else:
                out[name] = attr.default
        if given:
            raise OpDefinitionError(f"{self.qualname}: unknown attribute(s) {', '.join(sorted(given))} "
                                    f"(declared: {', '.join(n for n, _ in self.attrs) or 'none'})")
        return out

    def kernel_attrs(self, values: Mapping[str, Any]) -> tuple[list[int], list[float]]:
        """The kernel ABI's ``(iattrs, fattrs)``: int/bool attributes and float ones,
        each in declaration order."""
        ints = [int(values[n]) for n, a in self.attrs if a.kind in (int, bool)]
        floats = [float(values[n]) for n, a in self.attrs if a.kind is float]
        return ints, floats

    def infer(self, inputs: Sequence[TensorType], attrs: Mapping[str, Any] | None = None) -> list[TensorType]:
        """Output types for ``inputs`` (dtypes checked against the declaration).

        Raises:
            OpDefinitionError: wrong input count, a dtype the op does not declare,
                inconsistent type variables, or the shape rule rejects the shapes (its
                ``ValueError`` message is kept) or returns something malformed.
        """
        if len(inputs) != len(self.inputs):
            raise OpDefinitionError(f"{self.qualname}: expected {len(self.inputs)} inputs, got {len(inputs)}")
        bound = self.bind_dtypes([t.dtype for t in inputs])
        values = self.attr_values(attrs)
        try:
            result = self.shape_rule(*inputs, **values)
        except (ValueError, TypeError, IndexError) as exc:
            raise OpDefinitionError(f"{self.qualname}: shape rule: {exc}") from None
        outs = [result] if isinstance(result, TensorType) else list(result)
        if len(outs) != len(self.outputs) or not all(isinstance(o, TensorType) for o in outs):
            raise OpDefinitionError(f"{self.qualname}: shape rule must return {len(self.outputs)} TensorType(s), "
                                    f"got {result!r}")
        for param, out in zip(self.outputs, outs):
            want = bound.get(param.type_var) if param.type_var else None
            if out.dtype not in param.dtypes or (want is not None and out.dtype != want):
                raise OpDefinitionError(f"{self.qualname}: shape rule gave output '{param.name}' dtype {out.dtype}, "
                                        f"declared {want or '|'.join(param.dtypes)}")
        return outs

    def bind_dtypes(self, dtypes: Sequence[str]) -> dict[str, str]:
        """Type variable -> dtype for these input dtypes.

        Raises:
            OpDefinitionError: a dtype not declared, or one type variable bound to two dtypes.
        """
        bound: dict[str, str] = {}
        for param, dt in zip(self.inputs, dtypes):
            if dt not in param.dtypes:
                raise OpDefinitionError(f"{self.qualname}: input '{param.name}' is {dt}, "
                                        f"declared {'|'.join(param.dtypes)}")
            if param.type_var:
                if bound.setdefault(param.type_var, dt) != dt:
                    raise OpDefinitionError(f"{self.qualname}: type {param.type_var} is both "
                                            f"{bound[param.type_var]} and {dt} (input '{param.name}')")
        return bound

    def dtype_cases(self) -> list[tuple[str, ...]]:
        """Every combination of input dtypes the declaration allows (type variables
        bound once), in declaration order."""
        combos: list[dict[str, str]] = [{}]
        for var, dts in self.type_vars.items():
            combos = [{**c, var: d} for c in combos for d in dts]
        cases: list[tuple[str, ...]] = []
        for combo in combos:
            partial: list[tuple[str, ...]] = [()]
            for p in self.inputs:
                choices = [combo[p.type_var]] if p.type_var else list(p.dtypes)
                partial = [c + (d,) for c in partial for d in choices]
            cases.extend(c for c in partial if c not in cases)
        return cases

    def run_reference(self, *arrays: np.ndarray, **attrs: Any) -> list[np.ndarray]:
        """Run the NumPy reference; outputs as a list of arrays.

        Raises:
            OpDefinitionError: the reference returned the wrong number of outputs.
        """
        values = self.attr_values(attrs)
        result = self.reference(*arrays, **values)
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(outs) != len(self.outputs):
            raise OpDefinitionError(f"{self.qualname}: reference returned {len(outs)} outputs, "
                                    f"declared {len(self.outputs)}")
        return [np.asarray(o) for o in outs]

    def __call__(self, *arrays: np.ndarray, **attrs: Any) -> Any:
        """The NumPy reference (one array, or a tuple for several outputs)."""
        outs = self.run_reference(*arrays, **attrs)
        return outs[0] if len(outs) == 1 else tuple(outs)


def same_as(index: int = 0, outputs: int = 1) -> ShapeRule:
    """A shape rule: every output has the type of input ``index`` (elementwise ops,
    normalisations)."""

    def rule(*inputs: TensorType, **_: Any) -> list[TensorType]:
        return [inputs[index]] * outputs

    rule.__name__ = f"same_as_{index}"
    return rule


def _convert_attr(op: str, name: str, kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, (bool, np.bool_)) or value in (0, 1):
            return bool(value)
    elif kind is int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
    elif kind is float:
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            return float(value)
    raise OpDefinitionError(f"{op}: attribute '{name}' must be {kind.__name__}, got {value!r}")


def _fail(op: str, message: str) -> OpDefinitionError:
    return OpDefinitionError(f"custom op {op!r}: {message}")


def _split_qualname(qualname: Any) -> tuple[str, str]:
    if not isinstance(qualname, str) or qualname.count("::") != 1:
        raise _fail(str(qualname), "name must be 'domain::op' (e.g. 'mylib::rms_norm')")
    domain, name = qualname.split("::")
    if not _IDENT.match(domain) or keyword.iskeyword(domain):
        raise _fail(qualname, f"domain {domain!r} must be a Python identifier (it is also the torch.library "
                              "namespace)")
    if domain in _RESERVED:
        raise _fail(qualname, f"domain {domain!r} is reserved for standard ONNX ops")
    if not _IDENT.match(name) or keyword.iskeyword(name):
        raise _fail(qualname, f"op name {name!r} must be a Python identifier")
    return domain, name


def _parse_params(op: str, what: str, specs: Any, type_vars: Mapping[str, tuple[str, ...]]) -> tuple[TensorParam, ...]:
    if isinstance(specs, str) or not isinstance(specs, Sequence) or not specs:
        raise _fail(op, f"{what} must be a non-empty list like ['x: T', 'ids: int64']")
    out = []
    for spec in specs:
        if not isinstance(spec, str) or ":" not in spec:
            raise _fail(op, f"{what} entry {spec!r} must be 'name: TYPE' (TYPE a dtype, 'a|b', or a type variable)")
        name, _, typ = (s.strip() for s in spec.partition(":"))
        if not _IDENT.match(name):
            raise _fail(op, f"{what} name {name!r} must be an identifier")
        if typ in type_vars:
            out.append(TensorParam(name, type_vars[typ], typ))
            continue
        dts = tuple(t.strip() for t in typ.split("|"))
        bad = [t for t in dts if t not in DTYPES]
        if bad:
            raise _fail(op, f"{what} '{name}': unknown dtype or type variable {bad[0]!r} (dtypes: "
                            f"{', '.join(DTYPES)}; type variables: {', '.join(type_vars) or 'none declared'})")
        out.append(TensorParam(name, dts))
    return tuple(out)


def _parse_type_vars(op: str, dtypes: Any) -> dict[str, tuple[str, ...]]:
    if dtypes is None:
        return {}
    if not isinstance(dtypes, Mapping):
        raise _fail(op, "dtypes must map type variables to dtype lists, e.g. {'T': ['float32', 'float16']}")
    out = {}
    for var, dts in dtypes.items():
        if not isinstance(var, str) or not _IDENT.match(var) or var in DTYPES:
            raise _fail(op, f"type variable {var!r} must be an identifier that is not a dtype name")
        if isinstance(dts, str) or not isinstance(dts, Sequence) or not dts:
            raise _fail(op, f"type variable {var}: give a non-empty list of dtypes")
        bad = [d for d in dts if d not in DTYPES]
        if bad:
            raise _fail(op, f"type variable {var}: unknown dtype {bad[0]!r} (known: {', '.join(DTYPES)})")
        out[var] = tuple(dict.fromkeys(dts))
    return out


def _parse_attrs(op: str, attrs: Any) -> tuple[tuple[str, Attr], ...]:
    if attrs is None:
        return ()
    if not isinstance(attrs, Mapping):
        raise _fail(op, "attrs must be a dict: {'epsilon': 1e-6} or {'k': Attr(int)}")
    out = []
    for name, spec in attrs.items():
        if not isinstance(name, str) or not _IDENT.match(name) or keyword.iskeyword(name):
            raise _fail(op, f"attribute name {name!r} must be an identifier")
        if isinstance(spec, Attr):
            attr = spec
        elif spec in (int, float, bool):
            attr = Attr(spec)
        elif isinstance(spec, (bool, int, float)):
            attr = Attr(type(spec), spec)
        else:
            raise _fail(op, f"attribute '{name}': {spec!r} is not int, float or bool (the kernel ABI passes "
                            "scalars only)")
        if attr.kind not in (int, float, bool):
            raise _fail(op, f"attribute '{name}': type {getattr(attr.kind, '__name__', attr.kind)} is not int, "
                            "float or bool")
        if not attr.required:
            try:
                attr = Attr(attr.kind, _convert_attr(op, name, attr.kind, attr.default), attr.doc)
            except OpDefinitionError:
                raise _fail(op, f"attribute '{name}': default {attr.default!r} is not "
                                f"{attr.kind.__name__}") from None
        out.append((name, attr))
    return tuple(out)


def _check_callable(op: str, what: str, fn: Any, n_inputs: int, attrs: Sequence[str]) -> None:
    if not callable(fn):
        raise _fail(op, f"{what} must be callable, got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n_inputs), **{a: 0 for a in attrs})
    except TypeError as exc:
        raise _fail(op, f"{what} {getattr(fn, '__name__', fn)}{sig} cannot be called with {n_inputs} "
                        f"positional inputs and the attributes as keywords ({', '.join(attrs) or 'none'}): "
                        f"{exc}") from None


def _parse_kernels(op: str, kernels: Any) -> dict[str, str]:
    if kernels is None:
        return {}
    if not isinstance(kernels, Mapping):
        raise _fail(op, "kernels must map a device to a C symbol, e.g. {'cpu': 'cs_rms_norm'}")
    for device, symbol in kernels.items():
        if device not in DEVICES:
            raise _fail(op, f"kernel device {device!r} is not one of {', '.join(DEVICES)}")
        if not isinstance(symbol, str) or not _IDENT.match(symbol):
            raise _fail(op, f"kernel symbol {symbol!r} for {device} is not a C identifier")
    return dict(kernels)


def _parse_sources(op: str, what: str, sources: Any, base: Path | None) -> tuple[str, ...]:
    if isinstance(sources, str):
        sources = [sources]
    out = []
    for src in sources or ():
        path = Path(src)
        if not path.is_absolute() and base is not None:
            path = base / path
        if not path.is_file():
            raise _fail(op, f"{what} file {src} does not exist")
        out.append(str(path.resolve()))
    return tuple(out)


def _parse_test_shapes(op: str, shapes: Any, n_inputs: int) -> tuple[tuple[tuple[int, ...], ...], ...]:
    out = []
    for case in shapes or ():
        if not isinstance(case, (tuple, list)) or len(case) != n_inputs:
            raise _fail(op, f"test_shapes entry {case!r} must give one shape per input ({n_inputs})")
        shapes_ = []
        for s in case:
            if not isinstance(s, (tuple, list)) or not all(isinstance(d, int) and d >= 0 for d in s):
                raise _fail(op, f"test_shapes entry {case!r}: {s!r} is not a tuple of dims >= 0")
            shapes_.append(tuple(s))
        out.append(tuple(shapes_))
    return tuple(out)


def make_op(
    qualname: str,
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
    reference: Reference,
    shape: ShapeRule,
    dtypes: Mapping[str, Sequence[str]] | None = None,
    attrs: Mapping[str, Any] | None = None,
    kernels: Mapping[str, str] | None = None,
    sources: Sequence[str] = (),
    cuda_sources: Sequence[str] = (),
    test_shapes: Sequence[Sequence[Sequence[int]]] = (),
    doc: str = "",
    version: int = 1,
    origin: str = "",
    base_dir: Path | None = None,
) -> CustomOp:
    """Validate every field and build the :class:`CustomOp` (see :func:`compstack.ops.custom_op`).

    Raises:
        OpDefinitionError: one line naming the op and what is wrong.
    """
    domain, name = _split_qualname(qualname)
    type_vars = _parse_type_vars(qualname, dtypes)
    ins = _parse_params(qualname, "inputs", inputs, type_vars)
    outs = _parse_params(qualname, "outputs", outputs, type_vars)
    names = [p.name for p in ins + outs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _fail(qualname, f"parameter name(s) used twice: {', '.join(dup)}")
    in_vars = {p.type_var for p in ins if p.type_var}
    for p in outs:
        if p.type_var and p.type_var not in in_vars:
            raise _fail(qualname, f"output '{p.name}' uses type variable {p.type_var}, which no input binds")
    unused = sorted(set(type_vars) - {p.type_var for p in ins + outs})
    if unused:
        raise _fail(qualname, f"type variable(s) declared but unused: {', '.join(unused)}")
    if len(ins) > 8 or len(outs) > 4:
        raise _fail(qualname, "at most 8 inputs and 4 outputs (the kernel adapters' limit)")
    attr_list = _parse_attrs(qualname, attrs)
    clash = sorted(set(names) & {n for n, _ in attr_list})
    if clash:
        raise _fail(qualname, f"attribute name(s) also used as a tensor name: {', '.join(clash)}")
    attr_names = [n for n, _ in attr_list]
    _check_callable(qualname, "reference", reference, len(ins), attr_names)
    _check_callable(qualname, "shape rule", shape, len(ins), attr_names)
    if not isinstance(version, int) or version < 1:
        raise _fail(qualname, f"version must be an int >= 1, got {version!r}")
    return CustomOp(
        domain=domain, name=name, inputs=ins, outputs=outs, attrs=attr_list, shape_rule=shape,
        reference=reference, kernels=_parse_kernels(qualname, kernels),
        sources=_parse_sources(qualname, "source", sources, base_dir),
        cuda_sources=_parse_sources(qualname, "CUDA source", cuda_sources, base_dir),
        test_shapes=_parse_test_shapes(qualname, test_shapes, len(ins)),
        doc=doc or (inspect.getdoc(reference) or "").split("\n\n")[0], version=version, origin=origin,
    )
