"""Op statistics of a model in the common IR (a read-only analysis).

FLOPs count a multiply-accumulate as 2 FLOPs, the convention of XLA's
``cost_analysis()`` and of most papers' "FLOPs" tables:

* ``MatMul`` (ONNX spec, numpy.matmul semantics): ``2 * batch * M * K * N``.
* ``Gemm``: ``2 * M * K * N`` plus ``M * N`` when ``C`` is given.
* ``Conv``: ``2 * N * C_out * prod(out_spatial) * (C_in / group) * prod(kernel)``,
  plus ``N * C_out * prod(out_spatial)`` with a bias.

Other ops count 0 FLOPs here; the count is a lower bound, and ``unknown`` lists the
MatMul/Gemm/Conv nodes whose shapes were not static.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

__all__ = ["OpStats", "op_stats", "node_flops"]


@dataclass(frozen=True)
class OpStats:
    """Statistics of the main graph.

    Attributes:
        nodes: number of nodes.
        op_counts: nodes per ``domain::OpType`` (plain ``OpType`` for ai.onnx).
        params: elements of floating-point initializers (the parameters; integer
            initializers such as shapes and indices are not counted).
        param_bytes: bytes of all initializers.
        flops: FLOPs of MatMul/Gemm/Conv nodes (see the module docstring).
        unknown: names of MatMul/Gemm/Conv nodes without static shapes.
    """

    nodes: int
    op_counts: dict[str, int]
    params: int
    param_bytes: int
    flops: int
    unknown: list[str] = field(default_factory=list)


def _shape(v: ir.Value | None) -> list[int] | None:
    if v is None or v.shape is None or not v.shape.is_static():
        return None
    return list(v.shape.numpy())


def node_flops(node: ir.Node) -> int | None:
    """FLOPs of one node (0 for ops not counted); None when shapes are unknown."""
    op = node.op_type if node.domain in ("", "ai.onnx") else ""
    if op == "MatMul":
        a, b = _shape(node.inputs[0]), _shape(node.inputs[1])
        out = _shape(node.outputs[0])
        if a is None or b is None or out is None:
            return None
        k = a[-1]
        return 2 * int(np.prod(out, dtype=np.int64)) * k
    if op == "Gemm":
        a, out = _shape(node.inputs[0]), _shape(node.outputs[0])
        if a is None or out is None:
            return None
        trans_a = node.attributes.get("transA")
        k = a[0] if trans_a is not None and trans_a.value else a[1]
        m, n = out
        bias = m * n if len(node.inputs) > 2 and node.inputs[2] is not None else 0
        return 2 * m * n * k + bias
    if op == "Conv":
        w, out = _shape(node.inputs[1]), _shape(node.outputs[0])
        if w is None or out is None:
            return None
        # w: [C_out, C_in/group, k...]; out: [N, C_out, spatial...]
        per_out = int(np.prod(w[1:], dtype=np.int64))
        n_out = int(np.prod(out, dtype=np.int64))
        bias = n_out if len(node.inputs) > 2 and node.inputs[2] is not None else 0
        return 2 * n_out * per_out + bias
    return 0


def op_stats(model: ir.Model) -> OpStats:
    """Compute :class:`OpStats` for the main graph of ``model``."""
    counts: Counter[str] = Counter()
    flops = 0
    unknown: list[str] = []
    for node in model.graph:
        key = f"{node.domain}::{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
        counts[key] += 1
        f = node_flops(node)
        if f is None:
            unknown.append(node.name or "")  # canonical models name every node
        else:
            flops += f
    params = 0
    pbytes = 0
    for v in model.graph.initializers.values():
        t = v.const_value
        if t is None:
            continue
        pbytes += t.nbytes
        if t.dtype.is_floating_point():
            params += t.size
    return OpStats(len(model.graph), dict(sorted(counts.items())), params, pbytes, flops, unknown)
