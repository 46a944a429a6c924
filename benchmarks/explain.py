"""Explain on a large model with one planted divergence: compiles, wall time, memory, size.

A chain of ``--nodes`` elementwise ops (every 10th joins an early tensor, so the graph
is not a plain line and many cuts keep that tensor live) with one ``Sin`` in the middle, explained on the test-only
target ``faulty-sin`` (ort-cpu computing Cos for Sin, ``tests/faulty.py``). Goal
(issue #14): at most ⌈log₂ n⌉ + 5 compiles to localise, reduced to at most 5 % of
the nodes, within 10 minutes on the 2-core machine.

    python benchmarks/explain.py [--nodes 1000] [--target faulty-sin]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

TESTS = Path(__file__).resolve().parents[1] / "tests"


def build(n: int, planted: int, seed: int = 0) -> object:
    rng = np.random.default_rng(seed)
    # Add/Sub of small constants, Neg, and Mul by +-1: values stay bounded (a random walk)
    # and no op squashes a difference, so the planted divergence reaches the output.
    ops = ["Add", "Neg", "Mul", "Sub"]
    nodes, inits, cur = [], [], "x"
    for i in range(n):
        out = f"t{i}"
        if i == planted:
            nodes.append(helper.make_node("Sin", [cur], [out], name=f"n{i}_Sin"))
        elif i % 10 == 5 and i > 10:  # joins with an early tensor: many nodes read t3
            nodes.append(helper.make_node("Add", [cur, "t3"], [out], name=f"n{i}_join"))
        else:
            op = ops[i % len(ops)]
            if op in ("Add", "Mul", "Sub"):
                w = rng.choice([-1.0, 1.0], (8, 16)) if op == "Mul" else rng.standard_normal((8, 16)) * 0.3
                inits.append(numpy_helper.from_array(w.astype(np.float32), f"w{i}"))
                nodes.append(helper.make_node(op, [cur, f"w{i}"], [out], name=f"n{i}_{op}"))
            else:
                nodes.append(helper.make_node(op, [cur], [out], name=f"n{i}_{op}"))
        cur = out
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [8, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--target", default="faulty-sin")
    args = ap.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), *(p for p in os.environ.get("PYTHONPATH", "").split(":")
                                                             if p)])
    sys.path.insert(0, str(TESTS))
    from compstack import targets as registry
    from compstack.explain import explain

    if args.target == "faulty-sin" and "faulty-sin" not in registry.names():
        registry.register("faulty-sin", "faulty:WrongSinTarget")
    n = args.nodes
    model = build(n, n // 2 + 7)
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    t0 = time.perf_counter()
    rep = explain(model, {"x": x}, [args.target], steps="all")
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    b, r = rep["bisect"], rep["reduce"]
    bound = math.ceil(math.log2(n)) + 5
    print(f"model: {n} nodes, planted Sin at node {n // 2 + 7}; target {args.target}")
    print(f"localised: {b['node']['name']} ({b['kind']}) in {b['compiles']} compiles "
          f"(goal <= ceil(log2 n) + 5 = {bound}: {'met' if b['compiles'] <= bound else 'MISSED'}), {b['seconds']:.1f} s")
    print(f"reduced: {r['nodes_before']} -> {r['nodes_after']} nodes ({100 * r['nodes_after'] / n:.2f} % of the model; "
          f"goal <= 5 %: {'met' if r['nodes_after'] <= 0.05 * n else 'MISSED'}) in {r['compiles']} compiles, "
          f"{r['seconds']:.1f} s")
    print(f"attribution: {rep['attribution']['culprit']}")
    print(f"total: {rep['compiles']} compiles, {wall:.1f} s wall (goal <= 600 s: {'met' if wall <= 600 else 'MISSED'}), "
          f"parent peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
