"""Compare how targets partitioned one graph into kernels, and attribute time to nodes.

* :func:`fusion_groups`: a target's fusion groups, each the set of source compute nodes one
  kernel computes (copy kernels left out: they move data for a group, they are not one).
* :func:`compare_partitions`: kernel counts, and every group not formed by all targets.
* :func:`missed_fusions`: producer -> consumer pairs (compute nodes joined by a tensor,
  views in between looked through) that one target computes in one kernel and another
  target in two; the intermediate tensor's bytes are what the fused target does not
  write to memory (and read back).
* :func:`by_node`: each source node's share of each target's kernel time: a kernel's
  median time split over its nodes in proportion to their FLOPs
  (:func:`compstack.analysis.nodecost.node_cost_flops`), or evenly when a node's FLOPs are
  unknown or all are zero (the method is recorded per kernel).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from compstack.analysis.kernels import GraphIndex, KernelMap, KernelProfile
from compstack.analysis.nodecost import node_cost_flops, value_bytes

__all__ = ["Group", "PartitionDiff", "MissedPair", "NodeTime", "fusion_groups", "compare_partitions",
           "missed_fusions", "node_kernels", "by_node"]


@dataclass
class Group:
    """A set of source nodes some targets compute in one kernel.

    Attributes:
        nodes: compute nodes, graph order.
        kernels: target -> the kernel ids forming exactly this group (several when a
            target runs the same group more than once, e.g. split into two launches).
    """

    nodes: list[str]
    kernels: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PartitionDiff:
    """Groups formed by some targets and not by all.

    Attributes:
        targets: the targets compared (those with a kernel map).
        groups: every group not formed by all of them, in graph order of its first node;
            for each target missing it, ``split`` says how that target covers those nodes
            (target -> kernel ids covering any of the nodes).
        common: number of groups formed by every target.
    """

    targets: list[str]
    groups: list[dict[str, Any]]
    common: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MissedPair:
    """A producer -> consumer edge fused by some targets and not by others.

    Attributes:
        producer, consumer: node names; ``tensor``: the producer's output on that edge.
        bytes: size of that tensor (bytes), None when its shape is not static.
        fused_by: target -> the kernel computing both.
        split_by: target -> ``[producer's kernels, consumer's kernels]``.
    """

    producer: str
    consumer: str
    tensor: str
    bytes: int | None
    fused_by: dict[str, str]
    split_by: dict[str, list[list[str]]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NodeTime:
    """One source node's time on each target (ms per run), and how it was split."""

    node: str
    op: str
    ms: dict[str, float | None]
    kernels: dict[str, list[str]]
    method: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def node_kernels(kmap: KernelMap, include_copies: bool = False) -> dict[str, list[str]]:
    """Node -> ids of the kernels covering it (execution order)."""
    out: dict[str, list[str]] = {}
    for k in kmap.kernels:
        if k.kind == "copy" and not include_copies:
            continue
        for n in k.nodes:
            out.setdefault(n, []).append(k.id)
    return out


def fusion_groups(kmap: KernelMap) -> dict[frozenset[str], list[str]]:
    """Group (frozenset of compute nodes) -> ids of the kernels forming it."""
    compute = set(kmap.compute_nodes)
    out: dict[frozenset[str], list[str]] = {}
    for k in kmap.kernels:
        if k.kind == "copy":
            continue
        nodes = frozenset(n for n in k.nodes if n in compute)
        if nodes:
            out.setdefault(nodes, []).append(k.id)
    return out


def compare_partitions(maps: Mapping[str, KernelMap], index: GraphIndex) -> PartitionDiff:
    """Every fusion group not formed by all targets in ``maps`` (see :class:`PartitionDiff`).

    A target forms a group when exactly one of its kernels computes exactly those nodes
    and no other kernel computes any of them; nodes that several of its kernels compute
    (XLA: a Gemm's dot in one kernel, its bias add in another; a Conv's convolution in one,
    its bias add fused with the BatchNorm after it) are split on that target, and
    ``split`` names the kernels.
    """
    per = {t: fusion_groups(m) for t, m in maps.items()}
    covering = {t: node_kernels(m) for t, m in maps.items()}
    union: dict[frozenset[str], dict[str, list[str]]] = {}
    for t, groups in per.items():
        for nodes, ids in groups.items():
            union.setdefault(nodes, {})
            # a node whose work several kernels share (split over launches) is in no group
            if all(covering[t].get(n) == ids for n in nodes) and len(ids) == 1:
                union[nodes][t] = ids
    common = sum(1 for by in union.values() if len(by) == len(maps))
    rows: list[dict[str, Any]] = []
    for nodes, by in union.items():
        if len(by) == len(maps) or not by:
            continue
        ordered = index.sort(nodes)
        split = {t: sorted({kid for n in ordered for kid in covering[t].get(n, [])}) for t in maps if t not in by}
        rows.append({"nodes": ordered, "formed_by": by, "split": split})
    rows.sort(key=lambda r: index.order.get(r["nodes"][0], 0) if r["nodes"] else 0)
    return PartitionDiff(list(maps), rows, common)


def _edges(index: GraphIndex) -> list[tuple[str, str, str]]:
    """(producer, consumer, tensor) between compute nodes, looking through non-compute nodes."""
    compute = index.compute_set
    out = []
    for node in index.nodes:
        if node.name not in compute:
            continue
        seen: set[str] = set()
        todo = [v for v in node.inputs if v is not None and v.name]
        while todo:
            v = todo.pop()
            prod = index.producer.get(v.name or "")
            pname = prod.name or "" if prod is not None else ""
            if prod is None or pname in seen:
                continue
            seen.add(pname)
            if pname in compute:
                out.append((pname, node.name or "", v.name or ""))
            elif prod.name not in index.constants:
                todo.extend(u for u in prod.inputs if u is not None and u.name)
    return out


def missed_fusions(maps: Mapping[str, KernelMap], index: GraphIndex) -> list[MissedPair]:
    """Edges fused by at least one target and split by at least one other, largest
    intermediate tensor first (see :class:`MissedPair`).

    A target fuses producer -> consumer only when one kernel computes the whole producer
    and also the consumer: the producer's result then never leaves that kernel. A producer
    whose work the stack's records spread over several kernels (XLA runs a Conv's
    convolution as its own instruction and its bias add in the next fusion, which reads the
    convolution's output back) is split there, even when its last part shares a kernel
    with the consumer.
    """
    covering = {t: node_kernels(m) for t, m in maps.items()}
    out = []
    for prod, cons, tensor in _edges(index):
        fused: dict[str, str] = {}
        split: dict[str, list[list[str]]] = {}
        for t, cov in covering.items():
            a, b = cov.get(prod), cov.get(cons)
            if not a or not b:
                continue
            if len(a) == 1 and a[0] in b:
                fused[t] = a[0]
            else:
                split[t] = [a, b]
        if fused and split:
            value = next((v for v in index.by_name[prod].outputs if v is not None and v.name == tensor), None)
            out.append(MissedPair(prod, cons, tensor, value_bytes(value), fused, split))
    out.sort(key=lambda p: (-(p.bytes or 0), index.order.get(p.producer, 0)))
    return out


def _split(kernel_nodes: list[str], index: GraphIndex) -> tuple[dict[str, float], str]:
    """Shares of a kernel's time per node, and the method (``flops`` or ``even``)."""
    if not kernel_nodes:
        return {}, "even"
    flops = [node_cost_flops(index.by_name[n]) if n in index.by_name else None for n in kernel_nodes]
    if all(f is not None for f in flops) and sum(flops) > 0:  # type: ignore[arg-type]
        total = float(sum(flops))  # type: ignore[arg-type]
        return {n: f / total for n, f in zip(kernel_nodes, flops)}, "flops"  # type: ignore[operator]
    return {n: 1.0 / len(kernel_nodes) for n in kernel_nodes}, "even"


def by_node(maps: Mapping[str, KernelMap], profiles: Mapping[str, KernelProfile],
            index: GraphIndex) -> list[NodeTime]:
    """Each compute node's time per target (ms per run; see the module docstring).

    A target without a profile gets None for every node; a node no kernel of a
    profiled target covers gets None on that target.
    """
    rows = {n: NodeTime(n, index.op(n), {}, {}, {}) for n in index.compute}
    for t, kmap in maps.items():
        prof = profiles.get(t)
        for row in rows.values():
            row.ms[t] = None
        if prof is None:
            continue
        compute = index.compute_set
        for k in kmap.kernels:
            kt = prof.time_of(k.id)
            nodes = [n for n in k.nodes if n in compute]
            if kt is None or not nodes:
                continue
            shares, method = _split(nodes, index)
            for n, share in shares.items():
                row = rows[n]
                row.ms[t] = (row.ms[t] or 0.0) + kt.median * share
                row.kernels.setdefault(t, []).append(k.id)
                prev = row.method.get(t)
                row.method[t] = method if prev in (None, method) else "mixed"
    return [rows[n] for n in index.compute]
