"""Matching an OpenVINO compiled model's ports to the model's inputs and outputs, and
handing OpenVINO C-ordered arrays (``openvino-cpu``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir


def c_order(a: np.ndarray) -> np.ndarray:
    """``a`` in C order, keeping its rank (``np.ascontiguousarray`` makes 0-d arrays 1-d,
    which OpenVINO then rejects for a scalar input)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")

def _fits(port: Any, value: ir.Value) -> bool:
    """Whether a compiled model's port can carry the graph value (same element type,
    same rank, equal static dims); True when the graph does not say."""
    if value.dtype is None or value.shape is None:
        return True
    try:
        if np.dtype(port.get_element_type().to_dtype()) != np.dtype(value.dtype.numpy()):
            return False
    except (TypeError, ValueError, AttributeError):
        return True  # a type one side cannot name: leave it to the name match
    shape = port.get_partial_shape()
    if shape.rank.is_dynamic:
        return True
    if len(shape) != len(value.shape):
        return False
    return all(not d.is_static or not isinstance(v, int) or d.get_length() == v for d, v in zip(shape, value.shape))

def port_order(ports: Any, values: list[ir.Value], allow_missing: bool = False) -> list[int | None]:
    """Index among the compiled model's ``ports`` (its inputs or outputs) of each graph
    value, matched by tensor name, then by element type and shape among the ports left.

    OpenVINO may rename a tensor (an ``Identity``/``Dropout`` input takes its output's
    name) and drops a graph input no output depends on (Dropout's ``ratio`` at inference).

    Args:
        ports: ``CompiledModel.inputs`` or ``.outputs``.
        values: the graph's inputs or outputs, in graph order.
        allow_missing: a value with no port gets None (a dropped input).

    Raises:
        RuntimeError: a value has no port and ``allow_missing`` is False.
    """
    tensors = [set(p.get_names()) for p in ports]
    order: list[int | None] = [next((i for i, t in enumerate(tensors) if v.name in t), None) for v in values]
    for pos, v in enumerate(values):
        if order[pos] is None:
            left = [i for i in range(len(tensors)) if i not in order]
            order[pos] = next((i for i in left if _fits(ports[i], v)), None)
    if None in order and not allow_missing:
        missing = ", ".join(v.name or "?" for v, i in zip(values, order) if i is None)
        raise RuntimeError(f"openvino-cpu: the compiled model has no port for {missing}")
    return order
