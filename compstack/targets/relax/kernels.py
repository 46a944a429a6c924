"""Kernels and per-kernel times of TVM Relax (``tvm-llvm``; ``tvm-cuda`` inherits).

How each fused PrimFunc call is traced back to ONNX nodes:

1. At import (:func:`named_bindings`), every Relax binding the ONNX frontend emits for a
   node is named ``N_<node name>`` (non-identifier characters replaced by ``_``); the
   frontend's own nested bindings get the name of the next named binding, which belongs
   to the same node (the frontend converts nodes one after another).
2. ``FuseOps`` groups the legalized ``call_tir`` bindings of ``main`` into fused Relax
   functions, but gives identical groups one shared function (``BlockBuilder``
   deduplicates structurally equal functions), so a fused function's body names only one
   of its call sites. Each call site is therefore matched against the module ``FuseOps``
   received: every ``call_tir`` of the fused body, with its arguments bound to that call
   site's arguments, is the binding with the same PrimFunc and the same argument objects.
3. ``FuseTIR`` turns each fused function into the PrimFunc of the same name; the VM runs
   the PrimFuncs in the order of the ``call_tir`` sites of the final ``main``. A PrimFunc
   launched from several sites is one kernel per site (``name#N``, N-th launch).

Per-kernel time: ``VirtualMachine.set_instrument`` (TVM 0.27 has no ``profile()``): the
instrument is called before and after every VM call; the time between is the kernel's
(``perf_counter_ns``, so it includes the packed-function call overhead). Calls to
``vm.builtin.*`` are reported as ``other``.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any, Iterator

import numpy as np

from compstack.analysis.kernel_ids import unique_ids
from compstack.analysis.kernels import GraphIndex, Kernel, KernelMap, ProfileSamples, build_map

__all__ = ["named_bindings", "binding_name", "kernel_map", "profile"]

_PREFIX = "N_"


def binding_name(node_name: str) -> str:
    """The Relax binding name given to the bindings of ONNX node ``node_name``."""
    return _PREFIX + re.sub(r"\W", "_", node_name)


@contextlib.contextmanager
def named_bindings() -> Iterator[None]:
    """While active, TVM's ONNX importer names each node's bindings ``N_<node>`` and binds
    each node's result (rule 1 of the module docstring). Not thread-safe (it patches the
    importer class); compstack runs one import per worker process."""
    from tvm import relax
    from tvm.relax.frontend.onnx import onnx_frontend as of

    original = of.ONNXGraphImporter._convert_operator

    def convert(self: Any, op_name: str, inputs: Any, attrs: dict, opset: int) -> Any:
        # as ONNXGraphImporter._convert_operator, but the result is emitted under the
        # node's name instead of normalized (normalize binds tuple results anonymously)
        convert_map = of._get_convert_map()
        if op_name not in convert_map:
            return original(self, op_name, inputs, attrs, opset)
        hint = binding_name(str(attrs.get("tvm_custom", {}).get("name", "")))
        cls = type(self.bb)
        plain_emit = cls.emit

        def emit(bb: Any, expr: Any, name_hint: str = "") -> Any:
            return plain_emit(bb, expr, name_hint or hint)

        def bind(expr: Any) -> Any:
            var = plain_emit(self.bb, expr, hint)
            if isinstance(getattr(var, "ty", None), relax.TupleType):
                # name the items too: legalizing a tuple-valued call renames its binding
                return relax.Tuple([plain_emit(self.bb, relax.TupleGetItem(var, i), hint)
                                    for i in range(len(var.ty.fields))])
            return var

        cls.emit = emit
        try:
            sym = convert_map[op_name].get_converter(opset)(self.bb, inputs, attrs, [self._nodes, self._params])
            if isinstance(sym, (relax.Call, relax.TupleGetItem)):
                sym = bind(sym)
            elif isinstance(sym, relax.Tuple):
                sym = relax.Tuple([bind(f) if isinstance(f, (relax.Call, relax.TupleGetItem)) else f
                                   for f in sym.fields])
            elif isinstance(sym, relax.Expr):
                sym = self.bb.normalize(sym)
        finally:
            cls.emit = plain_emit
        return sym

    of.ONNXGraphImporter._convert_operator = convert
    try:
        yield
    finally:
        of.ONNXGraphImporter._convert_operator = original


# ---- mapping ---------------------------------------------------------------------------


def _h(x: Any) -> Any:
    return x.__chandle__()


def _bindings(func: Any) -> Iterator[Any]:
    for block in func.body.blocks:
        yield from block.bindings


class _Matcher:
    """Rule 2 of the module docstring: call sites of the ``FuseOps`` output matched to the
    bindings of its input."""

    def __init__(self, pre_main: Any) -> None:
        import tvm

        self.call_tir = tvm.ir.Op.get("relax.call_tir")
        self.const_type = tvm.ir.expr.Constant
        self.owner: dict[Any, str] = {}
        pending: list[Any] = []
        for b in _bindings(pre_main):
            pending.append(b.var)
            if b.var.name.startswith(_PREFIX):
                for v in pending:
                    self.owner[_h(v)] = b.var.name
                pending = []
        self.key: dict[Any, Any] = {}
        for b in _bindings(pre_main):
            k = self._key(b.value, {})
            if k is not None:
                self.key[k] = b.var

    def _resolve(self, a: Any, env: dict[Any, Any]) -> Any:
        from tvm import relax

        while isinstance(a, relax.Var) and _h(a) in env and env[_h(a)] is not a:
            a = env[_h(a)]
        return a

    def _arg(self, a: Any, env: dict[Any, Any]) -> Any:
        from tvm import relax

        a = self._resolve(a, env)
        return _h(a) if isinstance(a, (relax.Var, self.const_type)) else str(a)

    def _key(self, value: Any, env: dict[Any, Any]) -> Any:
        from tvm import relax

        if isinstance(value, relax.Call) and value.op.same_as(self.call_tir):
            return (value.args[0].name_hint, tuple(self._arg(a, env) for a in value.args[1].fields))
        if isinstance(value, relax.TupleGetItem):
            return ("tgi", self._arg(value.tuple_value, env), value.index)
        return None

    def sites(self, post: Any) -> list[tuple[str, list[str]]]:
        """``(PrimFunc name, binding names)`` of each kernel call site of ``post['main']``."""
        from tvm import relax

        env: dict[Any, Any] = {}
        out = []
        for b in _bindings(post["main"]):
            v = b.value
            k = self._key(v, env)
            if k is not None:
                pre = self.key.get(k)
                if pre is not None:
                    env[_h(b.var)] = pre
                if isinstance(v, relax.Call):
                    out.append((v.args[0].name_hint, [self.owner.get(_h(pre), "")] if pre is not None else []))
            elif isinstance(v, relax.Call) and isinstance(v.op, relax.GlobalVar):
                func = post[v.op]
                local = {_h(p): self._resolve(a, env) for p, a in zip(func.params, v.args)}
                names: list[str] = []
                for b2 in _bindings(func):
                    k2 = self._key(b2.value, local)
                    pre = self.key.get(k2) if k2 is not None else None
                    if pre is not None:
                        local[_h(b2.var)] = pre
                        names.append(self.owner.get(_h(pre), ""))
                env[_h(b.var)] = self._resolve(func.body.body, local)
                out.append((v.op.name_hint, names))
            elif isinstance(v, relax.Var):
                env[_h(b.var)] = self._resolve(v, env)
        return out


def _final_calls(final: Any) -> list[str]:
    """PrimFunc names called by the final ``main``, in order."""
    from tvm import relax

    prims = {gv.name_hint for gv, f in final.functions.items() if not isinstance(f, relax.Function)}
    out = []
    for b in _bindings(final["main"]):
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, relax.GlobalVar) and v.op.name_hint in prims:
            out.append(v.op.name_hint)
    return out




def kernel_map(compiled: Any) -> KernelMap:
    """The :class:`KernelMap` of a TVM artifact compiled in this process (``compiled.marks``:
    the modules before and after ``FuseOps`` and the final Relax module)."""
    marks = getattr(compiled, "marks", {})
    if not all(k in marks for k in ("pre-FuseOps", "FuseOps", "relax-final")):
        raise NotImplementedError("no record of FuseOps (artifact loaded from the cache)")
    index = GraphIndex(compiled.model)
    by_binding: dict[str, str] = {}
    for name in index.order:
        by_binding.setdefault(binding_name(name), name)
    sites = _Matcher(marks["pre-FuseOps"]["main"]).sites(marks["FuseOps"])
    calls = _final_calls(marks["relax-final"])
    kept = {c: calls.count(c) for c in set(calls)}
    kernels: list[Kernel] = []
    notes: list[str] = []
    per_func: dict[str, list[list[str]]] = {}
    for func, names in sites:
        per_func.setdefault(func, []).append(names)
    for func, groups in per_func.items():
        if kept.get(func, 0) not in (0, len(groups)):
            notes.append(f"{func}: {len(groups)} call sites before FuseTIR, {kept[func]} in the final module; "
                         "the first ones are kept")
    used: dict[str, int] = {}
    for kid, func in zip(unique_ids(calls), calls):
        i = used.get(func, 0)
        used[func] = i + 1
        groups = per_func.get(func, [])
        names = groups[i] if i < len(groups) else []
        nodes = [by_binding[n] for n in names if n in by_binding]
        kernels.append(Kernel(kid, "generated", nodes, detail={"primfunc": func, "launch": i}))
    return build_map(compiled.model, compiled.target.name, kernels, index=index, notes=notes,
                     source="Relax binding names (N_<node>) matched through FuseOps call sites",
                     default_reason="no TVM kernel computes it: folded at import or by FoldConstant, "
                                    "or made a view (R.reshape -> vm.builtin.reshape)")


# ---- timing ------------------------------------------------------------------------------


def profile(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> ProfileSamples:
    """Per-kernel times from ``VirtualMachine.set_instrument`` (module docstring)."""
    from tvm import relax

    kmap = compiled.kernels()
    if kmap is None:
        raise NotImplementedError
    vm = relax.VirtualMachine(compiled.executable, compiled.device)
    sync = compiled.device.sync
    args = [compiled._tensors(a) for a in inputs]
    records: list[tuple[str, int]] = []
    open_at: dict[str, int] = {}

    def instrument(func: Any, symbol: str, before: bool, ret: Any, *a: Any) -> int:
        now = time.perf_counter_ns()
        if before:
            open_at[symbol] = now
        else:
            records.append((symbol, now - open_at.pop(symbol, now)))
        return 0  # relax.VMInstrumentReturnKind.NO_OP

    main = vm["main"]
    for i in range(warmup):
        main(*args[i % len(args)])
    sync()
    vm.set_instrument(instrument)
    per_run: list[list[tuple[str, int]]] = []
    run_ms: list[float] = []
    for i in range(runs):
        records.clear()
        t0 = time.perf_counter_ns()
        main(*args[(warmup + i) % len(args)])
        sync()
        run_ms.append((time.perf_counter_ns() - t0) / 1e6)
        per_run.append(list(records))
    return _samples(kmap, per_run, run_ms)


def _samples(kmap: KernelMap, per_run: list[list[tuple[str, int]]], run_ms: list[float]) -> ProfileSamples:
    ids = [k.id for k in kmap.kernels]
    funcs = [k.detail.get("primfunc", k.id) for k in kmap.kernels]
    kernels = {kid: [0.0] * len(per_run) for kid in ids}
    other: dict[str, list[float]] = {}
    notes: list[str] = []
    for r, recs in enumerate(per_run):
        kernel_recs = [(s, ns) for s, ns in recs if not s.startswith("vm.")]
        if [s for s, _ in kernel_recs] != funcs:
            notes.append(f"run {r}: the VM's call sequence differs from the kernel map; matched by name")
        slots: dict[str, list[str]] = {}
        for kid, f in zip(ids, funcs):
            slots.setdefault(f, []).append(kid)
        for s, ns in recs:
            if s in slots and slots[s]:
                kernels[slots[s].pop(0)][r] += ns / 1e6
            else:
                other.setdefault(s, [0.0] * len(per_run))[r] += ns / 1e6
    return ProfileSamples(profiler="tvm relax VirtualMachine.set_instrument (perf_counter around each call)",
                          kernels=kernels, calls={k: 1 for k in ids}, run_ms=run_ms, other=other, notes=notes[:5])
