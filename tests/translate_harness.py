"""Helpers for converter tests: one-node ONNX models, run through JAX / FX / onnx.reference.

``check(op, inputs, attrs, framework="jax")`` builds a one-node model of ``op`` with the
given numpy inputs (graph inputs; pass ``const=`` for inputs that must be initializers,
such as Reshape's shape), canonicalises it with :func:`compstack.core.ir.from_proto`, runs the
translated program and :mod:`onnx.reference` on the same inputs, and asserts they agree
(NaN positions included, bitwise for integers and bools).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compstack.core import ir as cir

__all__ = ["assert_close", "check", "node_model", "run_fx", "run_jax", "run_reference"]


def node_model(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None, *,
               const: Mapping[str, np.ndarray] | None = None, n_outputs: int = 1, opset: int = 20,
               domain: str = "", input_order: Sequence[str] | None = None,
               output_names: Sequence[str] | None = None) -> onnx.ModelProto:
    """A one-node model ``op(inputs..., const...)``.

    Args:
        inputs: graph inputs by name (their dtypes/shapes define the value infos).
        const: initializers by name (``""`` keys are not allowed; use ``input_order``
            with ``""`` to omit an optional input).
        input_order: the node's input names in order (default: inputs then consts).
        output_names: the node's output names (default ``y0``, ``y1``...).
    """
    const = dict(const or {})
    order = list(input_order) if input_order is not None else [*inputs, *const]
    outs = list(output_names) if output_names is not None else [f"y{k}" for k in range(n_outputs)]
    node = helper.make_node(op, order, outs, name=f"{op.lower()}_node", domain=domain, **(attrs or {}))
    g_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                for n, a in inputs.items()]
    g_outputs = [helper.make_empty_tensor_value_info(o) for o in outs]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in const.items()]
    graph = helper.make_graph([node], f"{op}_test", g_inputs, g_outputs, inits)
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    return model


def run_reference(proto: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The oracle: :class:`onnx.reference.ReferenceEvaluator`."""
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(o) for o in ReferenceEvaluator(proto).run(None, dict(inputs))]


def run_jax(proto: onnx.ModelProto, inputs: Mapping[str, np.ndarray], jit: bool = True) -> list[np.ndarray]:
    """Translate with :func:`compstack.translate.jax.to_jax` and run (jitted by default)."""
    import jax

    from compstack.translate.jax import to_jax

    model = cir.from_proto(proto, opset=max(20, _opset(proto)))
    with jax.enable_x64(True):  # a context: JAX code elsewhere in the test process keeps its dtypes
        prog = to_jax(model)
        fn = jax.jit(prog.fn) if jit else prog.fn
        outs = fn(prog.params, *[inputs[n] for n in prog.input_names])
        return [np.asarray(o) for o in outs]


def run_fx(proto: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Translate with :func:`compstack.translate.fx.to_fx` and run the GraphModule eagerly."""
    import torch

    from compstack.translate.fx import to_fx

    model = cir.from_proto(proto, opset=max(20, _opset(proto)))
    gm = to_fx(model)
    names = [v.name for v in model.graph.inputs if not v.is_initializer()]
    with torch.no_grad():
        outs = gm(*[torch.from_numpy(np.array(inputs[n])) for n in names])
    return [o.numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outs]


def _opset(proto: onnx.ModelProto) -> int:
    return max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=20)


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6, what: str = "",
                 signed_zero: bool = True) -> None:
    """Same shape and dtype; NaN where the oracle has NaN; exact for ints/bools;
    ``rtol``/``atol`` for floats; with ``signed_zero``, the sign of zero is checked where
    both are zero (turn it off only where the ONNX spec leaves the sign open)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    if want.dtype.kind == "f":
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64), err_msg=f"{what}: NaN positions")
        np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        if not signed_zero:
            return
        zeros = (w64 == 0) & (g64 == 0)
        np.testing.assert_array_equal(np.signbit(g64[zeros]), np.signbit(w64[zeros]), err_msg=f"{what}: sign of zero")
        return
    np.testing.assert_array_equal(got, want, err_msg=what)


def check(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None, *,
          framework: str, const: Mapping[str, np.ndarray] | None = None, n_outputs: int = 1,
          rtol: float = 1e-5, atol: float = 1e-6, opset: int = 20,
          input_order: Sequence[str] | None = None, signed_zero: bool = True) -> list[np.ndarray]:
    """Build ``op``'s one-node model, run it on ``framework`` (``jax``/``fx``) and on the
    oracle, and assert every output agrees. Returns the framework's outputs."""
    proto = node_model(op, inputs, attrs, const=const, n_outputs=n_outputs, opset=opset,
                       input_order=input_order)
    want = run_reference(proto, inputs)
    got = run_jax(proto, inputs) if framework == "jax" else run_fx(proto, inputs)
    assert len(got) == len(want), f"{op}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol, atol, what=f"{op} ({framework}) output {k}", signed_zero=signed_zero)
    return got
