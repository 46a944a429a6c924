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
   (:func:`compstack.analysis.ub.undefined`) reject it.
   A rejected graph is retried with the next sub-seed and counted in ``stats``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper

from compstack.fuzz.builder import _FROM_ONNX, Builder, Tensor, _Skip, np_dtype, values
from compstack.fuzz.specs import ALL_DTYPES, OPSET, SPECS, OpSpec

__all__ = ["Case", "Generator", "Tensor", "Builder", "np_dtype", "values"]


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


class Generator:
    """Random valid ONNX graphs.

    Args:
        seed: campaign seed; graph ``i`` uses sub-seed ``seed * 1_000_003 + i``.
        max_nodes: at most this many nodes per graph (guards included).
        dtypes: dtypes of graph inputs and constants.
        ops: a regex matched against the whole op type (``Conv|Resize`` is those two, not
            ConvTranspose); only matching specs are used.
        allow_ub: keep graphs whose inputs trigger undefined behaviour (labelled later).
        symbolic: share (0..1) of graphs whose inputs get symbolic dims (``dim_param``),
            see :meth:`_symbolic`; the choice uses its own random stream, so a graph's
            nodes and feeds are the same as with ``symbolic=0``.
    """

    def __init__(self, seed: int = 0, max_nodes: int = 6, dtypes: Sequence[str] = ALL_DTYPES,
                 ops: str | None = None, allow_ub: bool = False, symbolic: float = 0.0) -> None:
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
        self.symbolic = float(symbolic)
        self.stats: dict[str, Any] = {"generated": 0, "rejected": 0, "reasons": {}, "symbolic": 0,
                                      "symbolic_fallback": 0}

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
            from compstack.core.errors import UserError

            raise UserError("--ops/--dtypes: no op spec matches (run with fewer filters; the specs are in "
                            "compstack/fuzz/specs.py)")
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
        from compstack.analysis.ub import undefined

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
        sym = self._symbolic(model, feeds, seed)
        if sym is not None:
            model, ref = sym
        return Case(model, feeds, seed, [n.op_type for n in model.graph.node], ref)

    def _symbolic(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                  seed: int) -> tuple[onnx.ModelProto, Any] | None:
        """For a share ``self.symbolic`` of graphs: ``model`` with symbolic input dims, and
        its reference values on the same ``feeds``; None to keep the static model.

        Which dims: a random non-empty subset of the distinct concrete sizes > 1 of the
        graph inputs; every input dim of a chosen size ``k`` becomes ``dim_param "dk"``. One
        name per size keeps every equality the graph relies on (matching or broadcasting
        dims, ONNX Broadcasting.md) provable from the declared types; sizes 1 stay static
        (a 1 broadcasts; a symbol could not). Output types are inferred again (strict ONNX
        shape inference, with data propagation) so they carry the symbols. The model must
        pass the full checker and the reference evaluator must run it with the concrete
        ``feeds`` giving the static model's output shapes; otherwise the static model is
        kept (counted in ``stats["symbolic_fallback"]``), so a symbolic graph is valid by
        construction and the static acceptance rule is unchanged.
        """
        rng = np.random.default_rng([seed, 0x5E])
        if self.symbolic <= 0 or rng.random() >= self.symbolic:
            return None
        sizes = sorted({d.dim_value for i in model.graph.input for d in i.type.tensor_type.shape.dim
                        if d.dim_value > 1})
        if not sizes:
            return None
        chosen = {k for k in sizes if rng.random() < 0.5} or {sizes[int(rng.integers(len(sizes)))]}
        m = onnx.ModelProto()
        m.CopyFrom(model)
        for i in m.graph.input:
            for d in i.type.tensor_type.shape.dim:
                if d.dim_value in chosen:
                    d.dim_param = f"d{d.dim_value}"  # the oneof clears dim_value
        for o in m.graph.output:
            o.type.tensor_type.ClearField("shape")
        del m.graph.value_info[:]
        try:
            inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
            types = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
            for o in m.graph.output:
                o.type.CopyFrom(types[o.name])
            onnx.checker.check_model(m, full_check=True)
            from compstack.explain.graph import reference_values

            ref = reference_values(m, feeds)
            for o in model.graph.output:
                if np.shape(ref.f32[o.name]) != tuple(d.dim_value for d in o.type.tensor_type.shape.dim):
                    raise ValueError(f"output {o.name}: shape changed")
        except Exception:  # noqa: BLE001 - the symbolic variant does not hold: keep the static model
            self.stats["symbolic_fallback"] += 1
            return None
        self.stats["symbolic"] += 1
        return m, ref

    def _reject(self, why: str) -> Case | None:
        self.stats["rejected"] += 1
        key = why.split(":")[0]
        self.stats["reasons"][key] = self.stats["reasons"].get(key, 0) + 1
        return None  # always None: callers return it


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
