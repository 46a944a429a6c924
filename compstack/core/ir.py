"""The common IR: ONNX semantics held in memory as an :class:`onnx_ir.Model`.

This module loads and saves models (external data included), canonicalises them
(opset upgrade, shape inference, unique names), and gives the views the rest of
compstack needs: a stable text form for humans and diffs, a content fingerprint (the
artifact-cache key), a :mod:`networkx` view and op statistics (see
:mod:`compstack.analysis.opstats`).

Everything here is pure ONNX/onnx_ir; no compiler stack is imported.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from compstack.core.errors import UserError
from compstack.core.extdata import inline_external
from compstack.core.largeproto import byte_size, infer_shapes
from compstack.core.paths import check_input_file, resolve_inside

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["DEFAULT_OPSET", "STANDARD_DOMAINS", "ModelInput", "load", "load_proto", "from_proto", "save", "to_proto",
           "canonicalize", "fingerprint", "to_text", "to_networkx", "graph_inputs"]

#: Default ai.onnx opset of the common IR. Models with an older opset are upgraded to
#: it with :func:`onnx.version_converter.convert_version`; newer ones are kept.
DEFAULT_OPSET = 20

#: Domains whose operators every stack is expected to know. Any other domain must be
#: declared by a model-local function or a registered custom op.
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})


@dataclass(frozen=True)
class ModelInput:
    """One graph input of the common IR.

    Attributes:
        name: the ONNX value name.
        dtype: its numpy dtype (``np.float32``, ``np.int64``, ``ml_dtypes.bfloat16``...).
        shape: the dims; an ``int`` for a static dim, a ``str`` (symbolic name) or
            ``None`` for a dynamic one.
    """

    name: str
    dtype: np.dtype
    shape: tuple[int | str | None, ...]

    @property
    def is_static(self) -> bool:
        """True when every dim is a known integer."""
        return all(isinstance(d, int) for d in self.shape)


def _check_external_data(proto: onnx.ModelProto, base_dir: Path, source: str) -> None:
    """Refuse external-data locations that leave ``base_dir`` (path traversal).

    Raises:
        UserError: naming the tensor and its location.
    """
    base = base_dir.resolve()
    for tensor in onnx.external_data_helper._get_all_tensors(proto):  # noqa: SLF001
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = resolve_inside(base, location, f"{source}: external data of tensor '{tensor.name}'")
        if target is None:
            raise UserError(
                f"{source}: external data of tensor '{tensor.name}' points outside the "
                f"model's folder ({location!r}); refusing to read it"
            )
        if not target.is_file():
            raise UserError(
                f"{source}: external data file {location!r} of tensor '{tensor.name}' is missing"
            )
        info = {e.key: e.value for e in tensor.external_data}
        try:
            offset, length = int(info.get("offset") or 0), int(info.get("length") or -1)
        except ValueError:
            raise UserError(f"{source}: external data of tensor '{tensor.name}' has a malformed offset or "
                            "length") from None
        size = target.stat().st_size
        if offset < 0 or offset > size or (length >= 0 and offset + length > size):
            raise UserError(f"{source}: cannot read external data: tensor '{tensor.name}' wants bytes "
                            f"{offset}..{offset + max(length, 0)} of {location!r}, which has {size}")


def load_proto(path: str | os.PathLike[str], external_data: bool = True, checked: bool = True) -> onnx.ModelProto:
    """Read an ONNX file (and its external data) into a checked ``ModelProto``.

    Args:
        path: the ``.onnx`` file. External data is read from the same folder.
        external_data: read the external data into the proto; False leaves the tensors
            on disk (their locations and sizes are still checked), which is how
            :func:`load` keeps one copy of a large model in memory.
        checked: run :func:`check` (False: the caller checks).

    Raises:
        UserError: missing file, not an ONNX protobuf, truncated file, external data
            outside the model's folder, a model the ONNX checker rejects, or an
            operator from an unknown domain. Each message names the file (and node).
    """
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{p}: is a folder, not an ONNX file")
    check_input_file(p, "an ONNX file")  # a loop, FIFO or /dev/zero would fail, block or read until memory runs out
    proto = _parse(p)
    if not proto.HasField("graph") or not proto.opset_import:
        raise UserError(f"{p}: not an ONNX model (no graph or no opset_import)")
    _check_external_data(proto, p.parent, str(p))
    if external_data:
        try:
            onnx.load_external_data_for_model(proto, str(p.parent))
        except (OSError, ValueError, onnx.checker.ValidationError) as exc:
            raise UserError(f"{p}: cannot read external data: {str(exc).strip().splitlines()[0]}") from None
    if checked:
        check(proto, str(p), path=p if _has_external_data(proto) else None)
    return proto


def _parse(p: Path) -> onnx.ModelProto:
    """Parse the file through a memory map (the proto is the only copy made). Raises UserError:
    an empty file, or bytes that are not an ONNX protobuf."""
    proto = onnx.ModelProto()
    with open(p, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise UserError(f"{p}: empty file, not an ONNX model")
        mm, error = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), ""
        first, view = mm[:1], memoryview(mm)
        try:  # the parse error is raised after the unmap: a slice its traceback holds can stop it
            proto.ParseFromString(view)
        except DecodeError as exc:
            error = str(exc)
        finally:
            view.release()
            with contextlib.suppress(BufferError):  # CI, once: then it is unmapped when collected
                mm.close()
    if error:
        hint = "truncated or corrupt" if first == b"\x08" else "not an ONNX file"
        raise UserError(f"{p}: cannot parse as ONNX protobuf ({hint}: {error})")
    return proto


def _has_external_data(proto: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL
               for t in onnx.external_data_helper._get_all_tensors(proto))  # noqa: SLF001


def check(proto: onnx.ModelProto, source: str, path: Path | None = None) -> None:
    """Run the ONNX checker and the domain check on ``proto``.

    ``path``: the file ``proto`` was read from; the checker then reads the file itself
    (external data stays on disk) instead of a serialised copy of ``proto``.

    Raises:
        UserError: ``"<source>: ONNX checker: ..."`` or
            ``"<source>: node 'n' uses unknown op domain 'd' (Op)"``.
    """
    _check_structure(proto, source)
    known = set(STANDARD_DOMAINS) | {f.domain for f in proto.functions}
    known |= _registered_custom_domains()
    local = {(f.domain, f.name) for f in proto.functions}
    for node in proto.graph.node:
        if node.domain not in known:
            raise UserError(
                f"{source}: node '{node.name or node.op_type}' uses unknown op domain "
                f"'{node.domain}' ({node.op_type}); only standard ONNX domains, model-local "
                "functions and registered custom ops (`compstack ops list`) are known"
            )
        if node.domain == "com.microsoft" and (node.domain, node.op_type) not in local:
            from compstack.core._msops import COM_MICROSOFT_OPS

            if node.op_type not in COM_MICROSOFT_OPS:
                raise UserError(
                    f"{source}: node '{node.name or node.op_type}' uses com.microsoft::{node.op_type}, "
                    "which is no ONNX Runtime contrib op"
                )
    try:
        # Without full_check: shape inference runs later, in canonicalize().
        onnx.checker.check_model(str(path) if path is not None else proto)
    except onnx.checker.ValidationError as exc:
        text = " ".join(ln.strip() for ln in str(exc).strip().splitlines() if ln.strip())
        raise UserError(f"{source}: ONNX checker: {text[:400]}") from None
    except ValueError as exc:  # e.g. a model > 2 GB handed as a proto
        raise UserError(f"{source}: ONNX checker: {exc}") from None


def _check_structure(proto: onnx.ModelProto, source: str) -> None:
    """What the ONNX checker lets through and every stack then trips on: an ai.onnx
    opset newer than the installed onnx knows, a graph without outputs, and negative
    declared dimensions.

    Raises:
        UserError: naming the file and the opset, the graph, or the value and dim.
    """
    newest = onnx.defs.onnx_opset_version()
    opset = _ai_onnx_opset(proto)
    if opset > newest:
        raise UserError(f"{source}: ai.onnx opset {opset} is newer than the installed onnx "
                        f"{onnx.__version__} knows (at most opset {newest})")
    if not proto.graph.output:
        raise UserError(f"{source}: the graph has no outputs (nothing to compute or compare)")
    for kind, values in (("input", proto.graph.input), ("output", proto.graph.output),
                         ("value", proto.graph.value_info)):
        for v in values:
            if not v.type.HasField("tensor_type") or not v.type.tensor_type.HasField("shape"):
                continue
            for i, d in enumerate(v.type.tensor_type.shape.dim):
                if d.HasField("dim_value") and d.dim_value < 0:
                    raise UserError(f"{source}: {kind} '{v.name}' declares dimension {i} as {d.dim_value} "
                                    "(a dimension is >= 0, or a symbolic name)")


#: Callables giving the domains of registered custom ops; :mod:`compstack.ops` adds its
#: registry here when it is imported (the IR layer sits below the custom-op layer).
_DOMAIN_SOURCES: list[Callable[[], set[str]]] = []


def add_domain_source(fn: Callable[[], set[str]]) -> None:
    """Make :func:`check` accept the op domains ``fn()`` returns (called by the custom-op
    registry, whose ops also register their ONNX schemas, so the checker accepts them)."""
    if fn not in _DOMAIN_SOURCES:
        _DOMAIN_SOURCES.append(fn)


def _registered_custom_domains() -> set[str]:
    """Domains of custom ops registered with compstack (:mod:`compstack.ops`)."""
    out: set[str] = set()
    for fn in _DOMAIN_SOURCES:
        out |= fn()
    return out


def from_proto(proto: onnx.ModelProto, source: str = "<model>", opset: int = DEFAULT_OPSET) -> ir.Model:
    """Canonicalise a ``ModelProto`` and convert it to the common IR.

    Raises:
        UserError: when the opset conversion or shape inference rejects the model.
    """
    return canonicalize(proto, source=source, opset=opset)


def load(path: str | os.PathLike[str], opset: int = DEFAULT_OPSET) -> ir.Model:
    """Load an ONNX file into the canonical common IR (see :func:`canonicalize`).

    External data is not read into memory: those initializers are
    :class:`onnx_ir.ExternalTensor` objects, memory-mapped from the file when used.

    Raises:
        UserError: see :func:`load_proto` and :func:`canonicalize`.
    """
    return load_with_written(path, opset)[0]


def load_with_written(path: str | os.PathLike[str], opset: int = DEFAULT_OPSET) -> tuple[ir.Model, ir.Model]:
    """:func:`load`, and the same file exactly as written (:func:`as_written`), both on
    one parsed protobuf: the weights are not copied for the second.

    Raises:
        UserError: see :func:`load_proto` and :func:`canonicalize`.
    """
    proto = load_proto(path, external_data=False, checked=False)
    skeleton, weights = _split_weights(proto, str(path))
    check(skeleton, str(path), path=None if weights else Path(path))
    model = canonicalize(skeleton, source=str(path), opset=opset)
    del skeleton
    _attach_weights(model, weights, {v.name for v in proto.graph.input})
    base = Path(path).resolve().parent
    ir.external_data.set_base_dir(model.graph, base)  # memory-mapped when read
    written = as_written(proto)
    ir.external_data.set_base_dir(written.graph, base)
    return model, written


#: Inline initializers at least this large are kept out of the checker's and shape
#: inference's serialised copies (see :func:`_split_weights`).
_BIG_TENSOR = 1 << 20


def _split_weights(proto: onnx.ModelProto, source: str) -> tuple[onnx.ModelProto, list[onnx.TensorProto]]:
    """``proto`` without its large inline initializers, each declared as a graph input
    of the same type and shape instead, and those initializers (still in ``proto``).

    The ONNX checker and shape inference serialise the model they get (and shape
    inference returns a new copy), so running them on the skeleton costs no copy of
    the weights. Returns ``(proto, [])`` when there is nothing large.

    Raises:
        UserError: a large initializer whose byte count does not fit its dims and dtype
            (the check the ONNX checker would have made).
    """
    big = [t for t in proto.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL
           and t.HasField("raw_data") and _declared_bytes(t) >= _BIG_TENSOR]
    if not big:
        return proto, []
    for t in big:  # what the checker would check (one tensor's bytes at a time)
        have, want = len(t.raw_data), _declared_bytes(t)
        if have != want:
            raise UserError(f"{source}: initializer '{t.name}' holds {have} bytes; its dims {list(t.dims)} and "
                            f"{onnx.TensorProto.DataType.Name(t.data_type)} need {want}")
    names = {t.name for t in big}
    skeleton = onnx.ModelProto()
    for fdesc, value in proto.ListFields():
        if fdesc.name == "graph":
            continue
        _copy_field(skeleton, fdesc, value)
    for fdesc, value in proto.graph.ListFields():
        if fdesc.name == "initializer":
            skeleton.graph.initializer.extend(t for t in value if t.name not in names)
        else:
            _copy_field(skeleton.graph, fdesc, value)
    declared = {i.name for i in proto.graph.input}
    skeleton.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                for t in big if t.name not in declared)
    return skeleton, big


def _declared_bytes(t: onnx.TensorProto) -> int:
    """The bytes ``t``'s dims and dtype call for (its data is not read)."""
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return 0
    return int(np.prod(t.dims, dtype=np.int64)) * itemsize


def _copy_field(dest: Any, fdesc: Any, value: Any) -> None:
    if fdesc.is_repeated:
        getattr(dest, fdesc.name).extend(value)
    elif fdesc.type == fdesc.TYPE_MESSAGE:
        getattr(dest, fdesc.name).CopyFrom(value)
    else:
        setattr(dest, fdesc.name, value)


def _attach_weights(model: ir.Model, weights: list[onnx.TensorProto], declared: set[str]) -> None:
    """Turn the graph inputs :func:`_split_weights` declared back into initializers
    holding the original tensors (no copy: they wrap the parsed protos)."""
    if not weights:
        return
    by_name = {v.name: v for v in model.graph.inputs}
    for t in weights:
        value = by_name[t.name]
        if t.name not in declared:
            model.graph.inputs.remove(value)
        value.const_value = ir.serde.TensorProtoTensor(t)
        model.graph.register_initializer(value)


def _ai_onnx_opset(proto: onnx.ModelProto) -> int:
    return max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)


def upgrade_opset(proto: onnx.ModelProto, opset: int, source: str = "<model>") -> onnx.ModelProto:
    """``proto`` converted to ai.onnx ``opset`` by the ONNX version converter, nothing
    else changed (no shape inference, no renaming); ``proto`` itself when it already
    has that opset.

    Raises:
        UserError: the version converter rejects the model.
    """
    if _ai_onnx_opset(proto) == opset:
        return proto
    try:
        return onnx.version_converter.convert_version(proto, opset)
    except Exception as exc:  # noqa: BLE001 - the converter raises bare RuntimeError/ValueError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{source}: cannot convert opset {_ai_onnx_opset(proto)} -> {opset}: {first}") from None


def as_written(proto: onnx.ModelProto) -> ir.Model:
    """``proto`` in memory as an :class:`onnx_ir.Model`, exactly as written: its opset,
    node names (empty ones too) and structure; no canonicalisation. What the stacks get
    by default (see :class:`SourceModel`)."""
    return ir.serde.deserialize_model(proto)


def canonicalize(proto: onnx.ModelProto, source: str = "<model>", opset: int = DEFAULT_OPSET) -> ir.Model:
    """Bring a model to the common IR's canonical form.

    Steps: upgrade the ai.onnx opset to ``opset`` when older (ONNX version converter;
    newer opsets are kept), run ONNX shape inference (``data_prop=True``), and give
    every node a unique, non-empty name (``onnx_ir.passes.common.NameFixPass``).

    Args:
        proto: the model; not modified, except past 2 GiB: its value_info, output types in place.
        source: file name or model name used in error messages.
        opset: minimum ai.onnx opset.

    Returns:
        The canonical :class:`onnx_ir.Model`.

    Raises:
        UserError: the version converter or shape inference rejects the model.
    """
    if _ai_onnx_opset(proto) < opset:
        proto = upgrade_opset(proto, opset, source)
    try:
        proto = infer_shapes(proto)
    except onnx.shape_inference.InferenceError as exc:
        first = str(exc).strip().splitlines()[0]
        raise UserError(f"{source}: shape inference failed: {first}") from None
    model = ir.serde.deserialize_model(proto)
    _fix_node_names(model)
    return model


def _fix_node_names(model: ir.Model) -> None:
    """Give every node of the main graph a unique non-empty name, keeping existing ones."""
    seen: set[str] = set()
    for i, node in enumerate(ir.traversal.RecursiveGraphIterator(model.graph)):
        name = node.name or f"{node.op_type}_{i}"
        base, k = name, 1
        while name in seen:
            name = f"{base}_{k}"
            k += 1
        node.name = name
        seen.add(name)


def inline_functions(model: ir.Model) -> ir.Model:
    """``model`` with its model-local functions inlined into the main graph.

    Returns ``model`` itself when it has no functions, else a copy
    (``onnx_ir.passes.common.InlinePass``); TVM's and IREE's ONNX importers do not call
    local functions.
    """
    if not model.functions:
        return model
    from onnx_ir.passes.common import InlinePass

    copy = ir.serde.deserialize_model(to_proto(model))
    InlinePass()(copy)
    return copy


def to_proto(model: ir.Model) -> onnx.ModelProto:
    """Serialise the common IR to a ``ModelProto``, initializers inline (:mod:`compstack.core.extdata`)."""
    return inline_external(ir.serde.serialize_model(model), model)


def save(model: ir.Model, path: str | os.PathLike[str], external_data: bool | None = None,
         data_name: str | None = None) -> Path:
    """Write the model to ``path``.

    Args:
        external_data: store initializers in ``<name>.data`` beside the file. Default:
            when the model is larger than 1.5 GiB (protobuf's 2 GiB limit) or some of
            its initializers are external (memory-mapped) already.
        data_name: file name of the external data (default ``<name>.data``), for a
            file written under a temporary name and renamed afterwards.

    Raises:
        UserError: the folder cannot be written.
    """
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if external_data is None:
            external_data = _initializer_bytes(model) > 1.5 * 2**30 or _any_external(model)
        if external_data:  # tensor by tensor, at most 64 MiB in flight
            ir.save(model, p, external_data=data_name or p.name + ".data", max_in_flight_bytes=64 * 2**20)
        else:
            p.write_bytes(to_proto(model).SerializeToString())
    except OSError as exc:
        raise UserError(f"{p}: cannot write: {exc.strerror or exc}") from None
    return p


#: Weights from this size on are written as external data by :func:`prefers_external_data`
#: callers (the cached model file): streamed a tensor at a time, not serialised whole.
STREAM_MIN_BYTES = 16 * 2**20


def prefers_external_data(model: ir.Model) -> bool:
    """True when ``model`` is better written with external data: its initializers are
    external already, or weigh :data:`STREAM_MIN_BYTES` or more (so writing it costs no
    second and third copy of the weights)."""
    return _any_external(model) or _initializer_bytes(model) >= STREAM_MIN_BYTES


def _any_external(model: ir.Model) -> bool:
    return any(isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values())


def _initializer_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def fingerprint(model: ir.Model) -> str:
    """Content fingerprint of a model: 16 hex digits of SHA-256.

    Computed over the deterministic protobuf serialisation of the graph, the opset
    imports and the model-local functions, with every ``doc_string`` and
    ``metadata_props`` (provenance: file paths and line numbers) cleared, so the same
    graph exported from another checkout, or after editing an unrelated line, gets the
    same key. Each initializer of the main graph enters as the SHA-256 of its dtype,
    shape and bytes, read one tensor at a time (memory-mapped for external data), so
    the fingerprint costs no second copy of the weights and is the same whether they
    are stored inline or as external data.
    """
    proto = _proto_with_digests(model)
    _strip_metadata(proto.graph)
    h = hashlib.sha256()
    for op in sorted((o.domain, o.version) for o in proto.opset_import):
        h.update(f"{op[0]}:{op[1]};".encode())
    h.update(proto.graph.SerializeToString(deterministic=True))
    for f in proto.functions:
        for node in f.node:
            del node.metadata_props[:]
            node.ClearField("doc_string")
        h.update(f.SerializeToString(deterministic=True))
    return h.hexdigest()[:16]


def _proto_with_digests(model: ir.Model) -> onnx.ModelProto:
    """``to_proto(model)`` with every main-graph initializer replaced by a uint8 tensor
    holding the digest of its content (the model is restored before returning)."""
    saved: dict[ir.Value, Any] = {}
    try:
        for value in model.graph.initializers.values():
            tensor = value.const_value
            if tensor is None:
                continue
            h = hashlib.sha256(f"{tensor.dtype.name}{list(tensor.shape)}".encode())
            h.update(_content_bytes(tensor))
            saved[value] = tensor
            value.const_value = ir.Tensor(np.frombuffer(h.digest(), np.uint8), name=value.name)
        proto = to_proto(model)
    finally:
        for value, tensor in saved.items():
            value.const_value = tensor
    for part in ("initializer", "value_info"):  # their order carries no meaning
        items = sorted((copy.copy(t) for t in getattr(proto.graph, part)), key=lambda t: t.name)
        del getattr(proto.graph, part)[:]
        getattr(proto.graph, part).extend(items)
    return proto


def _content_bytes(tensor: Any) -> Any:
    """A tensor's content as a bytes-like object (a view, no copy, for numeric tensors).

    Raises:
        UserError: the stored bytes do not fit the tensor's shape and dtype.
    """
    try:
        arr = tensor.numpy()
    except (ValueError, OSError) as exc:
        raise UserError(f"initializer '{tensor.name}': its data does not fit its shape {list(tensor.shape)} and "
                        f"dtype {tensor.dtype.name} ({str(exc).strip().splitlines()[0] if str(exc) else exc})") \
            from None
    if arr.dtype == object:  # a string tensor
        return b"\0".join(x if isinstance(x, bytes) else str(x).encode() for x in arr.reshape(-1))
    return memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # numpy stubs


def _strip_metadata(graph: onnx.GraphProto) -> None:
    graph.ClearField("doc_string")
    del graph.metadata_props[:]
    for v in list(graph.input) + list(graph.output) + list(graph.value_info) + list(graph.initializer):
        v.ClearField("doc_string")
        del v.metadata_props[:]
    for node in graph.node:
        node.ClearField("doc_string")
        del node.metadata_props[:]
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _strip_metadata(a.g)
            for g in a.graphs:
                _strip_metadata(g)


def _dtype_of(value: ir.Value) -> np.dtype:
    if value.dtype is None:
        raise UserError(f"graph input '{value.name}' has no element type")
    return value.dtype.numpy()


def graph_inputs(model: ir.Model) -> list[ModelInput]:
    """The model's real inputs (graph inputs that are not initializers), in order."""
    out = []
    for v in model.graph.inputs:
        if v.is_initializer():
            continue
        dims: tuple[int | str | None, ...] = ()
        if v.shape is not None:
            dims = tuple(d if isinstance(d, int) else (d.value if d.value else None) for d in v.shape)
        out.append(ModelInput(v.name or "", _dtype_of(v), dims))
    return out


def _fmt_attr(attr: ir.Attr) -> str:
    if attr.type == ir.AttributeType.TENSOR:
        t = attr.value
        arr = t.numpy()
        return f"tensor<{t.dtype.name}{list(arr.shape)}:{_short_hash(arr)}>"
    if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
        return "<graph>"
    v = attr.value
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(repr(x) if isinstance(x, float) else str(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


def _short_hash(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()[:8]


def _fmt_type(v: ir.Value) -> str:
    dtype = v.dtype.name if v.dtype is not None else "?"
    shape = "?" if v.shape is None else "[" + ",".join(str(d) for d in v.shape) + "]"
    return f"{dtype}{shape}"


def to_text(model: ir.Model, provenance: bool = False) -> str:
    """A stable, diff-friendly text form of the main graph.

    One line per input, initializer (dtype, shape and an 8-hex-digit content hash, never
    the values) and node (``%out = domain::Op<attrs>(%in)  # node_name``). The same
    model always prints the same bytes.

    Args:
        provenance: also print each node's source (``pkg.torch.onnx.stack_trace`` last
            frame and ``namespace``) when the frontend recorded it.
    """
    g = model.graph
    ops = ", ".join(f"{d or 'ai.onnx'}:{v}" for d, v in sorted(model.opset_imports.items()))
    lines = [f"model {g.name or 'main'} (opsets {ops})"]
    for v in g.inputs:
        if not v.is_initializer():
            lines.append(f"  input  %{v.name}: {_fmt_type(v)}")
    for name in sorted(g.initializers):
        t = g.initializers[name].const_value
        if t is None:
            continue
        dims = ",".join(str(d) for d in t.shape)
        lines.append(f"  init   %{name}: {t.dtype.name}[{dims}] #{_short_hash(t.numpy())}")
    for node in g:
        outs = ", ".join(f"%{o.name}" for o in node.outputs)
        ins = ", ".join(f"%{i.name}" if i is not None else "_" for i in node.inputs)
        attrs = ", ".join(f"{k}={_fmt_attr(a)}" for k, a in sorted(node.attributes.items()))
        op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        line = f"  {outs} = {op}{'<' + attrs + '>' if attrs else ''}({ins})  # {node.name}"
        if provenance:
            src = source_of(node)
            if src:
                line += f"  @ {src}"
        lines.append(line)
    for v in g.outputs:
        lines.append(f"  output %{v.name}: {_fmt_type(v)}")
    return "\n".join(lines) + "\n"


def source_of(node: ir.Node) -> str:
    """The user-code location a frontend recorded for ``node``, or ``""``.

    Reads the PyTorch exporter's ``pkg.torch.onnx.stack_trace`` (last frame, as
    ``file:line``) and ``namespace`` (module path), or compstack's own
    ``compstack.source``.
    """
    props = node.metadata_props
    if "compstack.source" in props:
        return props["compstack.source"]
    parts = []
    where = user_frame(props.get("pkg.torch.onnx.stack_trace", ""))
    if where:
        parts.append(where)
    ns = props.get("namespace", "")
    if ns:
        parts.append(ns.split("/")[-1] if len(ns) > 80 else ns)
    return " ".join(parts)


@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    """Folders whose frames are library code, not the user's: the stdlib and torch
    (found without importing torch)."""
    import importlib.util
    import sysconfig

    dirs = [sysconfig.get_paths()["stdlib"]]
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        dirs.append(os.path.dirname(spec.origin))
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs)


def user_frame(trace: str) -> str:
    """``file:line`` of the innermost frame of a Python stack trace outside the
    standard library and torch (``File "/path/x.py", line 12, in f`` lines), or ``""``."""
    skipped = _library_dirs()
    frames = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith('File "')]
    for line in reversed(frames):
        try:
            fname = line.split('"')[1]
            lineno = line.split("line ")[1].split(",")[0].strip()
        except IndexError:
            continue
        if os.path.join(os.path.realpath(fname), "").startswith(skipped):
            continue
        return f"{fname}:{lineno}"
    return ""


def to_networkx(model: ir.Model) -> "nx.MultiDiGraph":
    """A :mod:`networkx` view of the main graph.

    Nodes are ONNX node names with attributes ``op_type``, ``domain``. Edges go from
    producer to consumer, one per tensor, with attributes ``tensor`` (name), ``dtype``,
    ``shape`` and ``bytes`` (``None`` when the shape is not static).
    """
    import networkx as nx

    g = nx.MultiDiGraph()
    for node in model.graph:
        g.add_node(node.name, op_type=node.op_type, domain=node.domain)
    for node in model.graph:
        for out in node.outputs:
            for consumer, _ in out.uses():
                if consumer.graph is not model.graph:
                    continue
                g.add_edge(node.name, consumer.name, key=out.name, tensor=out.name,
                           dtype=out.dtype.name if out.dtype else None,
                           shape=tuple(out.shape) if out.shape is not None else None,
                           bytes=tensor_bytes(out))
    return g


def tensor_bytes(value: ir.Value) -> int | None:
    """Size in bytes of a value with a static shape, else None."""
    if value.shape is None or value.dtype is None or not value.shape.is_static():
        return None
    n = 1
    for d in value.shape:
        n *= int(d)  # type: ignore[arg-type]  # static: every dim is an int
    return n * int(value.dtype.itemsize)


@dataclass
class SourceModel:
    """A model imported into the common IR, with what the frontend knows about it.

    Attributes:
        name: display name (``zoo:bert``, a file name, ``file.py:build``).
        model: the canonical common IR.
        example_inputs: realistic inputs by name (token ids inside the vocabulary,
            attention masks of ones...), or empty when the frontend has none.
        val_ranges: per-input ``(low, high)`` used when generating random inputs.
        origin: which frontend made it (``onnx``, ``torch``, ``zoo``).
        native: the source program when it came from a framework (kept for native
            paths of XLA/Inductor; not serialised).
        spec: how to resolve the model again (``zoo:bert``, ``/abs/path/file.py:build``),
            so worker processes can rebuild the native program; empty for ONNX files.
        framework: the framework the model was written in (``torch``, ``jax``), or
            ``""`` for an ONNX file.
        as_written: the user's ONNX model exactly as written (opset, node names,
            structure), when the user gave an ONNX model; None when a frontend made the
            graph (torch, JAX, zoo), whose canonical form is then what the stacks get.
            The stacks receive this form by default; :attr:`model` (canonical) serves
            compstack's own analysis and translation.
        import_error: when the common IR could not be built from a framework program
            (a JAX primitive without an ONNX conversion), the converter's one-line
            reason; :attr:`model` is then a signature-only graph (inputs and outputs, no
            nodes) and only a native path can run the model. Empty otherwise.
    """

    name: str
    model: ir.Model
    example_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    val_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    origin: str = "onnx"
    native: Any = None
    spec: str = ""
    framework: str = ""
    as_written: ir.Model | None = field(default=None, repr=False)
    import_error: str = ""

    @functools.cached_property
    def fingerprint(self) -> str:
        """See :func:`fingerprint` (computed once; do not mutate ``model`` afterwards)."""
        return fingerprint(self.model)


__all__ += ["SourceModel", "as_written", "load_with_written", "upgrade_opset", "source_of", "user_frame", "tensor_bytes", "check",
            "inline_functions", "prefers_external_data", "STREAM_MIN_BYTES", "byte_size"]
