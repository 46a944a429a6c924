"""Kernels and per-kernel times, mapped back to the nodes of the common IR.

Every stack splits a model into its own units of work: ONNX Runtime runs the nodes of its
optimized graph, TVM the fused PrimFuncs of its Relax ``main``, IREE dispatches, XLA the
instructions (mostly fusions) of the HLO entry computation, Inductor its generated C++
kernels and extern library calls. A :class:`Kernel` is one such unit at one call site,
with the IR nodes whose computation it performs; a :class:`KernelMap` is all of them for
one target, with the coverage of the source graph; a :class:`KernelProfile` holds each
kernel's time from the stack's own profiler, measured with the latency protocol of
:mod:`compstack.core.latency` (warm-up, repeats, median, CV).

Units: times in milliseconds, sizes in bytes, FLOPs as counted by
:mod:`compstack.analysis.nodecost` (a multiply-accumulate is 2 FLOPs).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from compstack.analysis.nodecost import constant_nodes, group_bytes, is_compute, node_cost_flops

__all__ = ["KINDS", "SCHEMA_VERSION", "Kernel", "Unmapped", "KernelMap", "build_map", "KernelTime",
           "KernelProfile", "CONSISTENCY", "ProfileSamples", "make_profile", "GraphIndex", "infer_by_position"]

#: Version of the JSON layout of :class:`KernelMap` and :class:`KernelProfile`.
SCHEMA_VERSION = 1

#: Kernel kinds: ``generated`` (code the stack generated for this model), ``library``
#: (a hand-written kernel: oneDNN/MKL/MLAS/Eigen/YNNPACK, ORT's CPU kernels), ``copy``
#: (data movement the stack inserted: layout changes, padding, reformatting).
KINDS = ("generated", "library", "copy")


@dataclass
class Kernel:
    """One kernel at one call site.

    Attributes:
        id: the kernel's name in the stack's own terms, unique within its map; a kernel
            launched from several call sites gets ``#N`` (N-th call, from 0) appended.
        kind: one of :data:`KINDS`.
        nodes: IR node names it computes, in graph order.
        inferred: the subset of ``nodes`` attributed by position (a layout copy given to
            the node that consumes it, an epilogue to its producer), not read from the
            stack's own records.
        flops: FLOPs of the covered nodes (a node covered by several non-copy kernels is
            split evenly among them; copy kernels get 0); None when a shape is unknown.
        bytes: compulsory bytes of the covered nodes (:func:`compstack.analysis.nodecost.group_bytes`).
        detail: the stack's own record: function/executable name, op kinds, call index.
    """

    id: str
    kind: str
    nodes: list[str] = field(default_factory=list)
    inferred: list[str] = field(default_factory=list)
    flops: int | None = None
    bytes: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Unmapped:
    """A node of the source graph that no kernel covers, and why."""

    node: str
    op: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class KernelMap:
    """Every kernel of one target, mapped to the source graph.

    Attributes:
        target: the target name.
        kernels: in execution order.
        compute_nodes: names of the compute nodes of the source graph (not views, not
            folded constants; see :func:`compstack.analysis.nodecost.is_compute`).
        unmapped: compute nodes no kernel covers, with the reason.
        not_compute: nodes that need no kernel (views, constants) and got none.
        source: where the mapping was read from (``optimized graph tensor names``...).
        notes: remarks for the reader.
    """

    target: str
    kernels: list[Kernel]
    compute_nodes: list[str]
    unmapped: list[Unmapped] = field(default_factory=list)
    not_compute: list[Unmapped] = field(default_factory=list)
    source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        """Share of compute nodes mapped to at least one kernel (1.0 for a graph without any)."""
        if not self.compute_nodes:
            return 1.0
        return 1.0 - len(self.unmapped) / len(self.compute_nodes)

    def kernel(self, kernel_id: str) -> Kernel:
        """The kernel named ``kernel_id``; KeyError when there is none."""
        for k in self.kernels:
            if k.id == kernel_id:
                return k
        raise KeyError(kernel_id)

    def kinds(self) -> dict[str, int]:
        """Kernel count per kind."""
        return {kind: sum(1 for k in self.kernels if k.kind == kind) for kind in KINDS}

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "target": self.target, "coverage": self.coverage,
                "kernel_count": len(self.kernels), "kinds": self.kinds(),
                "kernels": [k.to_json() for k in self.kernels], "compute_nodes": self.compute_nodes,
                "unmapped": [u.to_json() for u in self.unmapped],
                "not_compute": [u.to_json() for u in self.not_compute], "source": self.source,
                "notes": self.notes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "KernelMap":
        return cls(target=data["target"], kernels=[Kernel(**k) for k in data["kernels"]],
                   compute_nodes=list(data["compute_nodes"]), unmapped=[Unmapped(**u) for u in data["unmapped"]],
                   not_compute=[Unmapped(**u) for u in data.get("not_compute", [])],
                   source=data.get("source", ""), notes=list(data.get("notes", [])))


class GraphIndex:
    """Lookups over the main graph that every stack's mapper needs.

    Attributes:
        nodes: the nodes in graph order; ``by_name``: name -> node; ``order``: name -> index.
        producer: value name -> producing node; ``consumers``: value name -> reading nodes.
        constants: names of nodes folded at compile time (:func:`constant_nodes`).
    """

    def __init__(self, model: ir.Model) -> None:
        self.model = model
        self.nodes = list(model.graph)
        self.by_name = {n.name: n for n in self.nodes if n.name}
        self.order = {n.name: i for i, n in enumerate(self.nodes) if n.name}
        self.producer: dict[str, ir.Node] = {}
        self.consumers: dict[str, list[ir.Node]] = {}
        for n in self.nodes:
            for v in n.outputs:
                if v is not None and v.name:
                    self.producer[v.name] = n
            for u in n.inputs:
                if u is not None and u.name:
                    self.consumers.setdefault(u.name, []).append(n)
        self.outputs = [v.name for v in model.graph.outputs if v.name]
        self.constants = constant_nodes(model.graph)
        self.compute = [n.name for n in self.nodes if n.name and is_compute(n, self.constants)]
        self.compute_set = set(self.compute)

    def sort(self, names: Iterable[str]) -> list[str]:
        """Known node names of ``names``, deduplicated, in graph order."""
        return sorted({n for n in names if n in self.order}, key=self.order.__getitem__)

    def op(self, name: str) -> str:
        node = self.by_name.get(name)
        if node is None:
            return ""
        return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _split_flops(kernels: Sequence[Kernel], index: GraphIndex) -> None:
    """Fill ``flops`` and ``bytes`` of every kernel (see :class:`Kernel`)."""
    sharing: dict[str, int] = {}
    for k in kernels:
        if k.kind != "copy":
            for n in k.nodes:
                sharing[n] = sharing.get(n, 0) + 1
    for k in kernels:
        nodes = [index.by_name[n] for n in k.nodes if n in index.by_name]
        k.bytes = group_bytes(nodes, index.consumers, index.outputs) if nodes else None
        if k.kind == "copy":
            k.flops = 0
            continue
        total = 0.0
        for node in nodes:
            f = node_cost_flops(node)
            if f is None:
                total = math.nan
                break
            total += f / sharing.get(node.name or "", 1)
        k.flops = None if math.isnan(total) else int(round(total))


def _component(start: ir.Node, free: set[str], index: GraphIndex) -> list[str]:
    """The uncovered compute nodes connected to ``start`` through uncovered nodes
    (views and constants pass through)."""
    seen, todo, out = {start.name}, [start], []
    while todo:
        node = todo.pop()
        if node.name in free:
            out.append(node.name)
        near = [index.producer[v.name] for v in node.inputs if v is not None and v.name in index.producer]
        near += [c for v in node.outputs if v is not None for c in index.consumers.get(v.name or "", [])]
        for m in near:
            if m.name not in seen and (m.name in free or m.name not in index.compute_set):
                seen.add(m.name)
                todo.append(m)
    return out


def _side_kernels(names: list[str], owner: Mapping[str, Kernel], index: GraphIndex, up: bool) -> list[Kernel]:
    """Kernels owning the nearest mapped nodes above (``up``) or below a set of nodes,
    looking through nodes that are neither in the set nor mapped."""
    inside, seen, found = set(names), set(names), []
    todo = [index.by_name[n] for n in names]
    while todo:
        node = todo.pop()
        if up:
            near = [index.producer[v.name] for v in node.inputs if v is not None and v.name in index.producer]
        else:
            near = [c for v in node.outputs if v is not None for c in index.consumers.get(v.name or "", [])]
        for m in near:
            if m.name in seen:
                continue
            name = m.name or ""
            seen.add(name)
            if name in owner and name not in inside:
                if owner[name] not in found:
                    found.append(owner[name])
            else:
                todo.append(m)
    return found


def infer_by_position(kernels: list[Kernel], index: GraphIndex) -> None:
    """Attribute uncovered compute nodes by position, in place (``Kernel.inferred``): a
    run of uncovered nodes between two nodes of one kernel goes to that kernel (an op
    folded into its neighbours' indexing maps leaves no op, hence no record); a run whose
    consumers all belong to one kernel goes to it (fused into its consumer)."""
    owner: dict[str, Kernel] = {}
    for k in kernels:
        if k.kind != "copy":
            for n in k.nodes:
                owner.setdefault(n, k)
    free = {n for n in index.compute if n not in owner}
    for name in list(index.compute):
        if name not in free:
            continue
        comp = _component(index.by_name[name], free, index)
        above = _side_kernels(comp, owner, index, up=True)
        below = _side_kernels(comp, owner, index, up=False)
        both = [k for k in above if k in below]
        pick = both[0] if both else (below[0] if len(below) == 1 else None)
        for n in comp:
            free.discard(n)
            if pick is not None:
                pick.nodes.append(n)
                pick.inferred.append(n)


def _duplicates(index: GraphIndex) -> dict[str, str]:
    """Node -> an earlier node with the same op, attributes and inputs (CSE merges them)."""
    seen: dict[tuple[Any, ...], str] = {}
    out: dict[str, str] = {}
    for node in index.nodes:
        attrs = tuple(sorted((k, repr(a.value)) for k, a in node.attributes.items()))
        key = (node.domain, node.op_type, attrs, tuple(v.name if v is not None else "" for v in node.inputs))
        if key in seen:
            out[node.name or ""] = seen[key]
        else:
            seen[key] = node.name or ""
    return out


def build_map(model: ir.Model, target: str, kernels: list[Kernel], reasons: Mapping[str, str] | None = None,
              source: str = "", notes: Sequence[str] = (), default_reason: str = "",
              index: GraphIndex | None = None, infer: bool = False) -> KernelMap:
    """Assemble a :class:`KernelMap`: nodes sorted and checked, FLOPs and bytes computed,
    unmapped nodes listed.

    Args:
        model: the source model (common IR).
        target: target name.
        kernels: in execution order, ``nodes`` as found in the stack's records (unknown
            names are dropped).
        reasons: node name -> why the stack made no kernel for it, where the stack says.
        source: where the mapping was read from.
        notes: remarks for the reader.
        default_reason: the reason for unmapped nodes ``reasons`` does not name.
        index: a prebuilt :class:`GraphIndex` of ``model``.
        infer: attribute uncovered nodes by position (:func:`infer_by_position`).
    """
    index = index or GraphIndex(model)
    reasons = dict(reasons or {})
    for k in kernels:
        k.nodes = index.sort(k.nodes)
    if infer:
        infer_by_position(kernels, index)
    for k in kernels:
        k.nodes = index.sort(k.nodes)
        k.inferred = [n for n in index.sort(k.inferred) if n in k.nodes]
    _split_flops(kernels, index)
    covered = {n for k in kernels for n in k.nodes}
    dups = _duplicates(index)
    for name, first in dups.items():
        if name not in covered and name not in reasons and first in covered:
            reasons[name] = f"same op and inputs as {first}: computed once (common-subexpression elimination)"
    unmapped, not_compute = [], []
    compute = set(index.compute)
    for node in index.nodes:
        name = node.name or ""
        if name in covered:
            continue
        if name in compute:
            why = reasons.get(name) or default_reason or "no kernel of this stack records this node"
            unmapped.append(Unmapped(name, index.op(name), why))
        else:
            why = "folded at compile time (all inputs are constants)" if name in index.constants \
                else reasons.get(name, "a view or metadata op: no kernel needed")
            not_compute.append(Unmapped(name, index.op(name), why))
    return KernelMap(target, kernels, list(index.compute), unmapped, not_compute, source, list(notes))


# ---- per-kernel time ------------------------------------------------------------------


@dataclass
class KernelTime:
    """Time of one kernel per model run, from the stack's profiler, in milliseconds.

    ``median``/``p10``/``p90``/``mean``/``cv`` are over the profiled runs; a kernel
    launched several times per run is summed within each run first. ``calls`` is the
    number of launches per run. ``p10``/``p90``/``cv`` are None for imported profiles
    that carry no per-run samples (trtexec).
    """

    id: str
    calls: int
    median: float
    p10: float | None
    p90: float | None
    mean: float
    cv: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProfileSamples:
    """What a stack's profiler gave, before statistics: per-run times in ms.

    Attributes:
        profiler: the profiler, in words (``onnxruntime enable_profiling``).
        kernels: kernel id -> one time per profiled run (ms, the kernel's launches in
            that run summed).
        calls: kernel id -> launches per run.
        run_ms: wall time of each profiled run (ms, profiler on), when measured.
        other: profiler events matched to no kernel (runtime overhead, allocations):
            name -> one time per run (ms).
        notes: remarks (events dropped, runs where matching failed).
    """

    profiler: str
    kernels: dict[str, list[float]]
    calls: dict[str, int] = field(default_factory=dict)
    run_ms: list[float] = field(default_factory=list)
    other: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


#: Limits of :meth:`KernelProfile.inconsistencies`: the kernel sum may exceed the profiled
#: runs' wall time by 2 % (clock granularity) and the end-to-end latency by 25 % (a
#: profiler's own per-event cost lands inside kernel events); the profiled and the
#: end-to-end runs may differ by a factor of 3 either way.
CONSISTENCY = {"sum_over_run": 1.02, "sum_over_e2e": 1.25, "window": 3.0}


@dataclass
class KernelProfile:
    """Per-kernel times of one target, beside its end-to-end latency.

    Attributes:
        target: the target name.
        profiler: the stack's profiler, in words.
        runs: profiled runs (after ``warmup`` untimed ones).
        warmup: warm-up runs before profiling.
        kernels: one :class:`KernelTime` per kernel that ran, in execution order.
        kernel_sum: statistics (ms) of the per-run sums of kernel times (``of: "mean"``: sums of means, OpenVINO).
        end_to_end: latency (ms) measured with the profiler off (:func:`compstack.core.latency.measure`).
        profiled_run: wall time (ms) of a run with the profiler on, when measured.
        other: statistics of profiler events matched to no kernel, name -> median ms.
        notes: remarks.
    """

    target: str
    profiler: str
    runs: int
    warmup: int
    kernels: list[KernelTime]
    kernel_sum: dict[str, Any]  # ms; ``cv`` is None where not measured (imported profiles)
    end_to_end: dict[str, Any]
    profiled_run: dict[str, Any] | None = None
    other: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def _side(self, stats: Mapping[str, Any] | None) -> float | None:
        """The run time set beside the kernel sum, like with like: the median, or the mean (``of``)."""
        return (stats or {}).get(self.kernel_sum.get("of", "median"), (stats or {}).get("median"))

    @property
    def sum_over_e2e(self) -> float | None:
        """Kernel-time sum divided by the end-to-end latency (:meth:`_side`)."""
        e2e = self._side(self.end_to_end)
        return self.kernel_sum["median"] / e2e if e2e else None

    @property
    def sum_over_profiled_run(self) -> float | None:
        """Kernel-time sum divided by the wall time of the same profiled runs (:meth:`_side`)."""
        run = self._side(self.profiled_run)
        return self.kernel_sum["median"] / run if run else None

    def inconsistencies(self) -> list[str]:
        """Why this profile's kernel times do not describe the model's runs; empty when they do.

        Three cross-checks (limits in :data:`CONSISTENCY`):

        * the kernel sum against the wall time of the same profiled runs: kernels of one
          run execute one after another, so a larger sum means times counted more than
          once (per thread, or an event nested in another) or overlapping launches;
        * the kernel sum against the end-to-end latency (profiler off): a larger sum
          means the profiled runs were slower than the program is (profiler overhead,
          compilation or first-run work inside the profiled runs, a slower machine state);
        * the profiled runs against the end-to-end runs, both ways: the two measurements
          saw different programs or different machine states (e.g. a thread pool waiting
          for threads the OS descheduled on a loaded machine), so neither explains the other.

        Imported profiles (no end-to-end latency, no per-run wall time) are not checked.
        """
        out: list[str] = []
        total, run, e2e = self.kernel_sum.get("median"), self._side(self.profiled_run), self._side(self.end_to_end)
        if total is None:
            return out
        if run and total > run * CONSISTENCY["sum_over_run"]:
            out.append(f"kernel sum {total:.4f} ms exceeds the wall time of the same profiled runs ({run:.4f} ms): "
                       "kernel times are counted more than once (per thread or nested events) or overlap")
        if e2e and total > e2e * CONSISTENCY["sum_over_e2e"]:
            why = (f"the profiled runs themselves took {run:.4f} ms" if run else "the profiled runs were slower")
            out.append(f"kernel sum {total:.4f} ms exceeds the end-to-end latency {e2e:.4f} ms "
                       f"({total / e2e:.2f}x; {why}): the profile measured slower runs than the program's "
                       "(profiler overhead, compilation or first-run work in the profiled runs, or a busier machine)")
        factor = CONSISTENCY["window"]
        if run and e2e and not (e2e / factor <= run <= e2e * factor):
            out.append(f"profiled runs took {run:.4f} ms, end-to-end runs {e2e:.4f} ms ({run / e2e:.3g}x): the two "
                       "measurements saw different machine states (e.g. threads descheduled on a loaded machine; "
                       "see each one's cv) and do not explain each other")
        return out

    @property
    def consistent(self) -> bool:
        """True when :meth:`inconsistencies` finds nothing (throughput and roofline may be shown)."""
        return not self.inconsistencies()

    def time_of(self, kernel_id: str) -> KernelTime | None:
        return next((k for k in self.kernels if k.id == kernel_id), None)

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "target": self.target, "profiler": self.profiler,
                "runs": self.runs, "warmup": self.warmup, "kernels": [k.to_json() for k in self.kernels],
                "kernel_sum_ms": self.kernel_sum, "end_to_end_ms": self.end_to_end,
                "profiled_run_ms": self.profiled_run, "sum_over_end_to_end": self.sum_over_e2e,
                "sum_over_profiled_run": self.sum_over_profiled_run, "consistent": self.consistent,
                "inconsistencies": self.inconsistencies(), "other_ms": self.other, "notes": self.notes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "KernelProfile":
        return cls(target=data["target"], profiler=data["profiler"], runs=data["runs"], warmup=data["warmup"],
                   kernels=[KernelTime(**k) for k in data["kernels"]], kernel_sum=dict(data["kernel_sum_ms"]),
                   end_to_end=dict(data["end_to_end_ms"]), profiled_run=data.get("profiled_run_ms"),
                   other=dict(data.get("other_ms", {})), notes=list(data.get("notes", [])))


def _stats(samples: Sequence[float]) -> dict[str, float]:
    a = np.asarray(samples, dtype=np.float64)
    mean = float(a.mean())
    return {"median": float(np.median(a)), "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "mean": mean, "min": float(a.min()), "cv": float(a.std() / mean) if mean > 0 else 0.0, "runs": a.size}


def make_profile(target: str, samples: ProfileSamples, end_to_end: Mapping[str, Any], warmup: int,
                 order: Sequence[str] = ()) -> KernelProfile:
    """Statistics of :class:`ProfileSamples` (see :class:`KernelProfile`).

    Args:
        target: target name.
        samples: the stack's per-run samples; every kernel's list has one entry per run.
        end_to_end: :meth:`compstack.core.latency.LatencyStats.to_dict` measured without profiler.
        warmup: warm-up runs done before the profiled ones.
        order: kernel ids in execution order (from the kernel map); others follow.

    Raises:
        ValueError: no profiled run, or kernels with different run counts.
    """
    lengths = {len(v) for v in samples.kernels.values()}
    if not samples.kernels or lengths == {0}:
        raise ValueError(f"{target}: the profiler recorded no kernel")
    if len(lengths) != 1:
        raise ValueError(f"{target}: kernels have different numbers of profiled runs ({sorted(lengths)})")
    runs = lengths.pop()
    ids = [i for i in order if i in samples.kernels] + [i for i in samples.kernels if i not in order]
    times = []
    for kid in ids:
        st = _stats(samples.kernels[kid])
        times.append(KernelTime(kid, samples.calls.get(kid, 1), st["median"], st["p10"], st["p90"], st["mean"],
                                st["cv"]))
    per_run = np.sum([samples.kernels[k] for k in ids], axis=0)
    other = {name: float(np.median(v)) for name, v in samples.other.items() if v}
    return KernelProfile(target=target, profiler=samples.profiler, runs=runs, warmup=warmup, kernels=times,
                         kernel_sum=_stats(per_run), end_to_end=dict(end_to_end),
                         profiled_run=_stats(samples.run_ms) if samples.run_ms else None, other=other,
                         notes=list(samples.notes))
