"""Valid-by-construction random ONNX graphs from the op specs.

Why a seeded generator of our own and not Hypothesis strategies: a graph is built one
node at a time, and each node's legal attributes depend on the shapes the previous
nodes produced (ONNX shape inference is the only sound source of those), which is
awkward to express as composable strategies and slow to shrink through; Hypothesis's
shrinking would also duplicate what compstack already has in a stronger form: explain's
ddmin over the nodes of the *ONNX graph*, driven by the real stack (``explain.core``).
A finding is therefore reproducible from ``(seed, index)`` alone, generation costs
milliseconds, and reduction happens where it is meaningful.

Each graph:

1. starts from one or two graph inputs (rank 1..4, dims 1..5, a dtype of ``dtypes``);
2. adds 1..``max_nodes`` nodes, each from a spec whose family
   (:mod:`compstack.fuzz.families`) picks inputs from the tensors made so far (or new
   inputs/constants) and attributes the op's spec section allows; the new outputs'
   shapes come from ``onnx.shape_inference`` (strict), and only fully static, non-empty
   ones are offered to later nodes;
3. is checked: ``onnx.checker.check_model(full_check=True)`` and the reference
   evaluator must run it; unless ``allow_ub``, nodes that trigger undefined behaviour
   (:func:`compstack.explain.undefined_behaviour`, integer overflow) reject it.
   A rejected graph is retried with the next sub-seed and counted in ``stats``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compstack.fuzz.specs import ALL_DTYPES, OPSET, SPECS, OpSpec

__all__ = ["Case", "Generator", "Tensor", "Builder", "np_dtype"]


def np_dtype(name: str) -> np.dtype:
    """numpy dtype of a dtype name (bfloat16 via ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _onnx_type(name: str) -> int:
    return {"float32": onnx.TensorProto.FLOAT, "float16": onnx.TensorProto.FLOAT16,
            "bfloat16": onnx.TensorProto.BFLOAT16, "int8": onnx.TensorProto.INT8, "int32": onnx.TensorProto.INT32,
            "int64": onnx.TensorProto.INT64, "bool": onnx.TensorProto.BOOL}[name]


_FROM_ONNX = {v: k for k, v in {n: _onnx_type(n) for n in ALL_DTYPES}.items()}


@dataclass
class Tensor:
    """A tensor the graph has so far.

    Attributes:
        name: tensor name.
        dtype: dtype name (``float32``...).
        shape: static shape.
        leaf: a graph input or constant (values on the 1/4 grid): discrete ops may read it.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    leaf: bool = False


@dataclass
class Case:
    """One generated model and its inputs.

    Attributes:
        model: the ONNX model.
        feeds: graph input name -> array.
        seed: the sub-seed that made it (``Generator.one(seed)`` makes it again).
        ops: op types in node order.
        ref: the reference values of every tensor (computed while validating).
    """

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    seed: int
    ops: list[str] = field(default_factory=list)
    ref: Any = None


class Builder:
    """The graph under construction, with the helpers families use."""

    def __init__(self, rng: np.random.Generator, dtypes: Sequence[str]) -> None:
        self.rng = rng
        self.dtypes = list(dtypes)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[tuple[Tensor, str]] = []  # (tensor, domain)
        self.pool: list[Tensor] = []
        self.consumed: set[str] = set()
        self.types: dict[str, onnx.TypeProto] = {}
        self._n = 0

    # -- naming and choice
    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def dtype(self, names: Sequence[str]) -> str:
        """A dtype of ``names``; float32 half of the time when it is one (most models are)."""
        return "float32" if "float32" in names and self.coin(0.5) else self.choice(list(names))

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def shape(self, rank: int | None = None, lo: int = 1, hi: int = 5) -> tuple[int, ...]:
        r = int(self.rng.integers(1, 5)) if rank is None else rank
        return tuple(int(d) for d in self.rng.integers(lo, hi + 1, size=r))

    # -- tensors
    def new_input(self, dtype: str, shape: tuple[int, ...], domain: str = "any") -> Tensor:
        t = Tensor(self.fresh("in"), dtype, tuple(shape), leaf=True)
        self.inputs.append((t, domain))
        self.types[t.name] = helper.make_tensor_type_proto(_onnx_type(dtype), list(shape))
        return t

    def const(self, arr: np.ndarray, stem: str = "c") -> str:
        name = self.fresh(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def const_tensor(self, dtype: str, shape: tuple[int, ...], domain: str = "any") -> Tensor:
        name = self.const(values(self.rng, dtype, shape, domain), "w")
        return Tensor(name, dtype, tuple(shape), leaf=True)

    def pick(self, dtypes: Sequence[str], *, leaf: bool = False, pred: Any = None) -> Tensor | None:
        """A tensor of the pool with one of ``dtypes`` (and ``pred``), preferring unconsumed ones."""
        ok = [t for t in self.pool if t.dtype in dtypes and (t.leaf or not leaf) and (pred is None or pred(t))]
        if not ok:
            return None
        fresh = [t for t in ok if t.name not in self.consumed]
        seq = fresh if fresh and self.coin(0.8) else ok
        return seq[-1] if self.coin(0.5) else self.choice(seq)  # favour the newest: deeper graphs

    def operand(self, dtypes: Sequence[str], *, leaf: bool = False, pred: Any = None, rank: int | None = None,
                domain: str = "any", shape: tuple[int, ...] | None = None) -> Tensor:
        """A pool tensor that fits, or a new graph input of a dtype in ``dtypes``."""
        usable = [d for d in dtypes if d in self.dtypes] or list(dtypes)
        if domain == "any" and shape is None:
            t = self.pick(usable, leaf=leaf, pred=pred if rank is None else
                          (lambda x: len(x.shape) == rank and (pred is None or pred(x))))
            if t is not None and self.coin(0.9):
                return t
            if t is None and self.coin(0.7):  # connect: Cast a tensor of another dtype
                c = self._cast_from_pool(usable, leaf, pred if rank is None else
                                         (lambda x: len(x.shape) == rank and (pred is None or pred(x))))
                if c is not None:
                    return c
        dtype = self.dtype(usable)
        return self.new_input(dtype, shape if shape is not None else self.shape(rank), domain)

    def _cast_from_pool(self, dtypes: Sequence[str], leaf: bool, pred: Any) -> Tensor | None:
        """A pool tensor Cast to one of ``dtypes`` (never float to integer/bool: a computed
        float may be out of range or sit on a rounding boundary; Operators.md#Cast)."""
        if leaf:
            return None
        to = self.dtype(dtypes)
        src = self.pick([d for d in ALL_DTYPES if d != to and (np_dtype(d).kind != "f" or np_dtype(to).kind == "f")],
                        pred=pred)
        if src is None:
            return None
        (y,) = self.node("Cast", [src.name], to=_onnx_type(to))
        return Tensor(y, to, src.shape)

    def node(self, op: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [self.fresh("t") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=f"n{len(self.nodes)}_{op}", **attrs))
        self.consumed.update(i for i in inputs if i)
        return outs

    def guard(self, t: Tensor, domain: str) -> Tensor:
        """``t`` moved into ``domain`` by nodes (Abs/Add, Tanh/Mul) so a domain op may read it."""
        if domain == "any":
            return t
        return self._guard_nodes(t, domain)

    def _guard_nodes(self, t: Tensor, domain: str) -> Tensor:
        one = np.ones((), np_dtype(t.dtype))
        if domain == "unit":
            (a,) = self.node("Tanh", [t.name])
            (b,) = self.node("Mul", [a, self.const(one * np_dtype(t.dtype).type(0.75))])
            return Tensor(b, t.dtype, t.shape)
        (a,) = self.node("Abs", [t.name])
        shift = {"positive": 0.5, "ge1": 1.0, "nonzero": 1}[domain]
        (b,) = self.node("Add", [a, self.const((one * shift).astype(np_dtype(t.dtype)))])
        return Tensor(b, t.dtype, t.shape)


def values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], domain: str = "any") -> np.ndarray:
    """Input values: floats on a 1/4 grid (exact in float16/bfloat16), small integers, in ``domain``."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo, hi = {"any": (-4, 4), "positive": (1, 4), "ge1": (1, 4), "unit": (0, 0), "nonzero": (1, 4)}[domain]
        v = rng.integers(lo, hi + 1, size=shape)
        if domain == "nonzero":
            v = v * rng.choice([-1, 1], size=shape)
        return v.astype(dt)
    lo, hi = {"any": (-8, 8), "positive": (1, 8), "ge1": (4, 12), "unit": (-3, 3), "nonzero": (1, 8)}[domain]
    return (rng.integers(lo, hi + 1, size=shape) / 4.0).astype(dt)


class Generator:
    """Random valid ONNX graphs.

    Args:
        seed: campaign seed; graph ``i`` uses sub-seed ``seed * 1_000_003 + i``.
        max_nodes: at most this many nodes per graph (guards included).
        dtypes: dtypes of graph inputs and constants.
        ops: a regex matched against the whole op type (``Conv|Resize`` is those two, not
            ConvTranspose); only matching specs are used.
        allow_ub: keep graphs whose inputs trigger undefined behaviour (labelled later).
    """

    def __init__(self, seed: int = 0, max_nodes: int = 6, dtypes: Sequence[str] = ALL_DTYPES,
                 ops: str | None = None, allow_ub: bool = False) -> None:
        from compstack.fuzz import families

        pat = re.compile(ops) if ops else None
        self.seed, self.max_nodes, self.dtypes, self.allow_ub = seed, max(1, max_nodes), list(dtypes), allow_ub
        schema_ok = _schema_dtypes()
        self.specs: list[OpSpec] = []
        for s in SPECS:
            if pat is not None and not pat.fullmatch(s.op):
                continue
            allowed = [d for d in s.dtypes if d in schema_ok.get(s.op, set(ALL_DTYPES))]
            if not [d for d in allowed if d in self.dtypes]:
                continue
            self.specs.append(OpSpec(s.op, s.family, tuple(allowed), s.domain, s.discrete, s.attrs, s.source))
        self.families = families
        self.stats: dict[str, Any] = {"generated": 0, "rejected": 0, "reasons": {}}

    def ops(self) -> list[str]:
        """Op types this generator can emit."""
        return sorted({s.op for s in self.specs})

    def case(self, index: int) -> Case:
        """Graph number ``index`` of the campaign (retried with later sub-seeds if rejected)."""
        base = (self.seed * 1_000_003 + index) * 64
        for attempt in range(64):
            c = self.one(base + attempt)
            if c is not None:
                self.stats["generated"] += 1
                return c
        raise RuntimeError(f"generator: 64 rejected attempts in a row for graph {index} (ops too narrow?)")

    def one(self, seed: int) -> Case | None:
        """The graph of sub-seed ``seed``, or None when it was rejected (reason in ``stats``)."""
        if not self.specs:
            raise RuntimeError("no op spec matches --ops/--dtypes")
        rng = np.random.default_rng(seed)
        b = Builder(rng, self.dtypes)
        b.pool.append(b.new_input(b.dtype(self.dtypes), b.shape()))
        target = int(rng.integers(1, self.max_nodes + 1))
        tries = 0
        while len(b.nodes) < target and tries < 4 * self.max_nodes:
            tries += 1
            spec = b.choice(self.specs)
            mark = (len(b.nodes), len(b.inits), len(b.inputs), b._n, set(b.consumed))
            before = len(b.nodes)
            try:
                getattr(self.families, spec.family)(b, spec)
            except _Skip:
                _rollback(b, mark)
                continue
            except (ValueError, IndexError, ZeroDivisionError) as exc:  # a family's own slip: count it, go on
                key = f"family {spec.family}: {type(exc).__name__}"
                self.stats["reasons"][key] = self.stats["reasons"].get(key, 0) + 1
                _rollback(b, mark)
                continue
            if len(b.nodes) > self.max_nodes or not self._infer(b, before):
                _rollback(b, mark)
                continue
        if not b.nodes:
            return self._reject("no node fits")
        return self._finish(b, seed)

    def _infer(self, b: Builder, before: int) -> bool:
        model = _model(b, [])
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        except Exception:  # noqa: BLE001 - the family built a node the standard rejects: drop it
            return False
        vi = {v.name: v.type for v in inferred.graph.value_info}
        for node in b.nodes[before:]:
            for o in node.output:
                tp = vi.get(o)
                if tp is None or not tp.HasField("tensor_type") or tp.tensor_type.elem_type not in _FROM_ONNX:
                    return False
                b.types[o] = tp
                dims = tp.tensor_type.shape.dim
                shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
                if tp.tensor_type.HasField("shape") and 1 <= len(shape) <= 5 and all(d > 0 for d in shape) \
                        and int(np.prod(shape)) <= 4096:
                    b.pool.append(Tensor(o, _FROM_ONNX[tp.tensor_type.elem_type], shape))
        return True

    def _finish(self, b: Builder, seed: int) -> Case | None:
        produced = [o for n in b.nodes for o in n.output]
        consumed = {i for n in b.nodes for i in n.input}
        outs = [o for o in produced if o not in consumed] or produced[-1:]
        model = _model(b, outs)
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as exc:  # noqa: BLE001
            return self._reject(f"checker: {str(exc).splitlines()[0][:80]}")
        feeds = {t.name: values(b.rng, t.dtype, t.shape, dom) for t, dom in b.inputs}
        feeds = {i.name: feeds[i.name] for i in model.graph.input}
        from compstack.fuzz.ub import undefined

        try:
            from compstack.explain.graph import reference_values

            ref = reference_values(model, feeds)
        except Exception as exc:  # noqa: BLE001 - the reference cannot run it: not a valid case
            return self._reject(f"reference: {type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}")
        for o in model.graph.output:  # the reference against ONNX shape inference: both are the spec
            dims = [d.dim_value for d in o.type.tensor_type.shape.dim]
            if o.type.tensor_type.HasField("shape") and all(dims) and list(np.shape(ref.f32[o.name])) != dims:
                return self._reject(f"reference shape: {o.name} {list(np.shape(ref.f32[o.name]))} != inferred {dims}")
        if not self.allow_ub and undefined(model, ref.f32):
            return self._reject("undefined behaviour")
        return Case(model, feeds, seed, [n.op_type for n in model.graph.node], ref)

    def _reject(self, why: str) -> Case | None:
        self.stats["rejected"] += 1
        key = why.split(":")[0]
        self.stats["reasons"][key] = self.stats["reasons"].get(key, 0) + 1
        return None  # always None: callers return it


class _Skip(Exception):
    """A family cannot place its op on this graph (raised by families)."""


def _rollback(b: Builder, mark: tuple[int, int, int, int, set[str]]) -> None:
    n, i, inp, _, consumed = mark
    dropped = {o for node in b.nodes[n:] for o in node.output}
    del b.nodes[n:]
    del b.inits[i:]
    for t, _d in b.inputs[inp:]:
        b.types.pop(t.name, None)
    del b.inputs[inp:]
    b.pool = [t for t in b.pool if t.name not in dropped]
    b.consumed = consumed


def _model(b: Builder, outs: list[str]) -> onnx.ModelProto:
    inputs = [helper.make_value_info(t.name, b.types[t.name]) for t, _ in b.inputs
              if any(t.name in n.input for n in b.nodes)]
    outputs = [helper.make_value_info(o, b.types[o]) for o in outs]
    used = {i for n in b.nodes for i in n.input}
    graph = helper.make_graph(b.nodes, "fuzz", inputs, outputs, [t for t in b.inits if t.name in used])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)


_SCHEMA_CACHE: dict[str, set[str]] = {}


def _schema_dtypes() -> dict[str, set[str]]:
    """Op -> dtype names its schema's first input type constraint allows (at OPSET)."""
    if _SCHEMA_CACHE:
        return _SCHEMA_CACHE
    names = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(bfloat16)": "bfloat16",
             "tensor(int8)": "int8", "tensor(int32)": "int32", "tensor(int64)": "int64", "tensor(bool)": "bool"}
    for s in SPECS:
        try:
            schema = onnx.defs.get_schema(s.op, OPSET)
        except Exception:  # noqa: BLE001
            continue
        first = schema.inputs[0].type_str if schema.inputs else ""
        allowed = next((set(tc.allowed_type_strs) for tc in schema.type_constraints if tc.type_param_str == first),
                       None)
        _SCHEMA_CACHE[s.op] = {names[a] for a in allowed if a in names} if allowed else set(ALL_DTYPES)
    return _SCHEMA_CACHE
