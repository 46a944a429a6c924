"""The ``reference`` target: ONNX's own reference evaluator, the oracle.

``onnx.reference.ReferenceEvaluator`` implements the ONNX spec in NumPy. With
``precision="float64"`` the model is first rewritten to compute in float64 (every
float32 initializer, constant, Cast target, graph input and output becomes float64),
so the reference is more precise than any float32 stack it judges; outputs are
returned in the dtype the original model declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx_ir as ir

from compstack.core import ir as cir
from compstack.targets.base import PLAIN_DTYPES, Availability, Compiled, Lowered, Target, TargetOptions
from compstack.targets.common.precision import to_float64

__all__ = ["ReferenceTarget", "ReferenceOptions", "to_float64"]

@dataclass(frozen=True)
class ReferenceOptions(TargetOptions):
    """Options of the reference evaluator.

    Attributes:
        precision: ``"float64"`` (compute float32 models in float64) or ``"native"``.
        outputs: ``"declared"`` returns outputs in the dtypes the model declares;
            ``"float64"`` keeps float64 results (how the oracle of a comparison runs).
    """

    precision: str = "float64"
    outputs: str = "declared"

    def validate(self) -> str:
        if self.precision not in ("float64", "native"):
            return f"precision={self.precision}: expected float64 or native"
        if self.outputs not in ("declared", "float64"):
            return f"outputs={self.outputs}: expected declared or float64"
        return ""


class ReferenceTarget(Target):
    """``onnx.reference.ReferenceEvaluator``; runs everywhere, slow, exact to the spec."""

    untuned_reason: ClassVar[str] = "the float64 reference evaluator is the oracle, not a stack"

    name = "reference"
    custom_op_support = {"": "yes: the NumPy reference through onnx.reference"}
    stack = "onnx-reference"
    device = "cpu"
    description = "ONNX reference evaluator (NumPy), float64 by default: the oracle"
    Options = ReferenceOptions
    options: ReferenceOptions
    stage_names = ("onnx",)
    supported_dtypes = PLAIN_DTYPES | {"object", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                       "float8_e5m2fnuz", "int4", "uint4", "float4_e2m1fn"}

    ops_note = "onnx.reference's op implementations (onnx.reference.ops)"

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        from onnx.reference.op_run import OpRun
        from onnx.reference.ops import _op_list

        return sorted(n for n, obj in vars(_op_list).items()
                      if isinstance(obj, type) and issubclass(obj, OpRun) and not n.startswith("_")
                      and obj.__module__.startswith("onnx.reference.ops.op_"))

    @classmethod
    def availability(cls) -> Availability:
        return Availability(True, versions={"onnx": onnx.__version__, "numpy": np.__version__})

    def lower_impl(self, model: ir.Model) -> Lowered:
        proto = cir.to_proto(model)
        if self.options.precision == "float64":
            proto = to_float64(proto)
        lowered = _RefLowered(self, model, {"onnx": lambda: cir.to_text(model)})
        lowered.proto = proto
        return lowered

    def load_compiled(self, folder: Path, model: ir.Model) -> Compiled:
        proto = onnx.load(str(folder / "model.onnx"))
        return _RefCompiled(self, model, proto)


class _RefLowered(Lowered):
    proto: onnx.ModelProto

    def compile_impl(self) -> Compiled:
        return _RefCompiled(self.target, self.model, self.proto)


class _RefCompiled(Compiled):
    artifact_files = ("model.onnx",)
    target: ReferenceTarget

    def __init__(self, target: Target, model: ir.Model, proto: onnx.ModelProto) -> None:
        super().__init__(target, model)
        from onnx.reference import ReferenceEvaluator

        from compstack.analysis.refdefects import corrected_ops
        from compstack.ops._onnx import reference_ops

        self.proto = proto
        # Registered custom ops (compstack.ops) run their NumPy references; ops with a known
        # onnx.reference defect run the corrected oracle (compstack.analysis.refdefects).
        self.session = ReferenceEvaluator(proto, new_ops=reference_ops(proto) + corrected_ops(proto) or None)
        self.out_dtypes = [v.dtype.numpy() if v.dtype is not None else None for v in model.graph.outputs]
        self.in_dtypes = {
            v.name: onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
            for v in proto.graph.input
            if v.type.HasField("tensor_type")
        }

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        feeds: dict[str, Any] = {}
        for name, arr in zip(self.input_names, inputs):
            want = self.in_dtypes.get(name)
            feeds[name] = arr.astype(want) if want is not None and arr.dtype != want else arr
        outs = [np.asarray(o) for o in self.session.run(None, feeds)]
        keep64 = self.target.options.outputs == "float64"
        return [
            o if dt is None or o.dtype == dt or (keep64 and o.dtype == np.float64) else o.astype(dt)
            for o, dt in zip(outs, self.out_dtypes)
        ]

    def save_impl(self, folder: Path) -> None:
        onnx.save(self.proto, str(folder / "model.onnx"))
