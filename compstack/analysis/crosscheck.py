"""Do two float64 oracles agree, and if not, on which op?

compare trusts ``onnx.reference`` (in float64, with the corrected ops of
:mod:`compstack.analysis.refdefects`) only after a second, independent float64
evaluation agrees with it, and only where a stack disagrees (so agreeing rows cost
nothing). These are the pure parts: the agreement rule, and the first ops whose outputs
differ while their inputs agree (the op to blame, as a delta debugger would name it).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import onnx

__all__ = ["ORACLE_RTOL", "ORACLE_ATOL", "oracles_agree", "suspect_ops"]

#: Two float64 evaluations of one graph agree within this: float64 rounding of float32-sized
#: data in any evaluation order is ~1e-13 relative; a defect is orders of magnitude above.
ORACLE_RTOL = 1e-6
#: Absolute part of the float64 agreement rule.
ORACLE_ATOL = 1e-9


def oracles_agree(a: np.ndarray, b: np.ndarray) -> bool:
    """True when two float64 evaluations of one tensor agree.

    Args:
        a, b: the tensor from each oracle (any shape; NaN equal to NaN; integers exact).

    Returns:
        True when shapes match and ``|a - b| <= ORACLE_ATOL + ORACLE_RTOL * |b|``
        elementwise (same NaN and Inf placement).
    """
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return False
    if x.dtype.kind not in "fc" or y.dtype.kind not in "fc":
        return bool(np.array_equal(x, y))
    return bool(np.allclose(x.astype(np.float64), y.astype(np.float64), rtol=ORACLE_RTOL, atol=ORACLE_ATOL,
                            equal_nan=True))


def suspect_ops(proto: onnx.ModelProto, first: Mapping[str, np.ndarray],
                second: Mapping[str, np.ndarray]) -> list[str]:
    """The nodes whose outputs differ between two oracles while their inputs agree.

    Args:
        proto: the model (main graph, nodes in topological order).
        first, second: tensor name -> value from each oracle (intermediates included;
            a tensor missing from either is skipped).

    Returns:
        ``"name (OpType)"`` per such node, in graph order (empty: none found, e.g. the
        oracles share no intermediate values).
    """
    out = []
    for node in proto.graph.node:
        common = [o for o in node.output if o and o in first and o in second]
        if not common or all(oracles_agree(first[o], second[o]) for o in common):
            continue
        ins = [i for i in node.input if i and i in first and i in second]
        if all(oracles_agree(first[i], second[i]) for i in ins):
            out.append(f"{node.name or node.output[0]} ({node.op_type})")
    return out
