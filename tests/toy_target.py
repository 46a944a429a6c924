"""A toy stack for the "Adding a stack" recipe (docs/adding-a-stack.md): a NumPy interpreter of four ONNX ops.

It is what a new stack's ``targets/<stack>/target.py`` holds, at its smallest: a
:class:`Target` subclass that declares its capabilities as class attributes, a
:class:`Lowered` (the stack's IR: here the op list as text) and a :class:`Compiled`
(runs the graph with NumPy, saves and reloads its artifact without pickle).
``tests/test_add_stack.py`` registers it through the ``compstack.targets`` entry-point
group and runs ``compstack compare`` on it in a subprocess; workers import it by
module name (``toy_target``, ``tests/`` on ``PYTHONPATH``), as they import ``faulty``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnx_ir as ir
from onnx import numpy_helper

from compstack.core import ir as cir
from compstack.targets.base import Availability, Compiled, Lowered, Target

#: The ops the toy runs: ONNX op type -> NumPy function of its inputs.
OPS: dict[str, Callable[..., np.ndarray]] = {
    "MatMul": np.matmul,
    "Add": np.add,
    "Relu": lambda x: np.maximum(x, 0).astype(x.dtype),
    "Sin": np.sin,
}


class ToyNumpyTarget(Target):
    """``toy-numpy``: evaluates MatMul/Add/Relu/Sin graphs node by node with NumPy."""

    name = "toy-numpy"
    stack = "toy"
    device = "cpu"
    description = "a NumPy interpreter of four ops (test-only: the Adding a stack recipe)"
    stage_names = ("ops",)
    supported_dtypes = frozenset({"float32", "float64"})
    custom_op_support = {"": "no: the toy stack takes no custom ops"}
    ops_note = "the toy's own table (tests/toy_target.py OPS)"

    @classmethod
    def availability(cls) -> Availability:
        return Availability(True, versions={"numpy": np.__version__})

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        return sorted(OPS)

    def unsupported_ops(self, model: ir.Model) -> list[str]:
        return sorted({n.op_type for n in model.graph if n.domain not in ("", "ai.onnx") or n.op_type not in OPS})

    def lower_impl(self, model: ir.Model) -> Lowered:
        proto = cir.to_proto(model)
        text = "\n".join(f"{n.name or n.op_type}: {', '.join(n.output)} = {n.op_type}({', '.join(n.input)})"
                         for n in proto.graph.node)
        lowered = _ToyLowered(self, model, {"ops": text})
        lowered.proto = proto
        return lowered

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        return _ToyCompiled(self, model, onnx.load(str(folder / "model.onnx")))


class _ToyLowered(Lowered):
    proto: onnx.ModelProto

    def compile_impl(self) -> Compiled:
        return _ToyCompiled(self.target, self.model, self.proto)


class _ToyCompiled(Compiled):
    artifact_files = ("model.onnx",)

    def __init__(self, target: Target, model: ir.Model, proto: onnx.ModelProto) -> None:
        super().__init__(target, model)
        self.proto = proto
        self.weights = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        values = dict(self.weights)
        values.update(zip(self.input_names, inputs))
        for node in self.proto.graph.node:
            out = OPS[node.op_type](*(values[i] for i in node.input))
            values[node.output[0]] = np.asarray(out)
        return [values[o.name] for o in self.proto.graph.output]

    def save_impl(self, folder: Path) -> None:
        onnx.save(self.proto, str(folder / "model.onnx"))
